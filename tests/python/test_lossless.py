"""Round trip keeps what the IR does not model: doc strings, metadata, functions,
subgraphs, custom ops, training info, typed-field initializers, unknown protobuf fields."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import fusionopt_testlib as lib
from lossless_models import (local_function_model, lossless_params,
                             typed_field_initializers, typed_fields_model)



def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def unknown_field(number, payload):
    """A length-delimited protobuf field no ONNX message defines."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def round_trip(fusionopt, folder, model_bytes, name="in.onnx"):
    source = folder / name
    source.write_bytes(model_bytes)
    snapshot = lib.FileSnapshot(source)
    out = folder / "out.onnx"
    rc, stdout, stderr = fusionopt(source, "-o", out, "-O0")
    assert rc == lib.EXIT_OK, stderr
    snapshot.assert_unchanged()
    return out


@pytest.mark.parametrize("build", lossless_params())
def test_round_trip_keeps_every_field(fusionopt, tmp_path, build):
    model = build()
    onnx.checker.check_model(model, full_check=True)  # the fixture itself is valid ONNX

    out = round_trip(fusionopt, tmp_path, model.SerializeToString())

    onnx.checker.check_model(str(out), full_check=True)
    written = onnx.load(str(out))
    lib.assert_same_model_parts(written, model)
    assert list(written.training_info) == list(model.training_info)
    assert written == model


def model_with_metadata_and_function():
    model = local_function_model()
    model.doc_string = "model doc"
    helper.set_model_props(model, {"author": "tests"})
    return model


def test_round_trip_keeps_unknown_model_fields(fusionopt, tmp_path):
    extra = unknown_field(1000, b"fusionopt-unknown-field") + _varint(1001 << 3) + _varint(123456)
    model = model_with_metadata_and_function()
    original_bytes = model.SerializeToString() + extra
    original = onnx.load_from_string(original_bytes)
    assert original != model  # message equality sees unknown fields, so the check below can fail

    out = round_trip(fusionopt, tmp_path, original_bytes)

    written_bytes = out.read_bytes()
    assert extra in written_bytes
    assert written_bytes.count(b"fusionopt-unknown-field") == 1
    assert onnx.load_from_string(written_bytes) == original


def test_round_trip_keeps_unknown_fields_of_nested_messages(fusionopt, tmp_path):
    model = model_with_metadata_and_function()
    node = model.graph.node[0]
    node.ParseFromString(node.SerializeToString() + unknown_field(1000, b"node-extra"))
    value = model.graph.input[0]
    value.ParseFromString(value.SerializeToString() + unknown_field(1001, b"value-extra"))
    original_bytes = model.SerializeToString()

    out = round_trip(fusionopt, tmp_path, original_bytes)

    written_bytes = out.read_bytes()
    assert unknown_field(1000, b"node-extra") in written_bytes
    assert unknown_field(1001, b"value-extra") in written_bytes
    assert onnx.load_from_string(written_bytes) == onnx.load_from_string(original_bytes)


def test_without_unknown_fields_none_appear(fusionopt, tmp_path):
    out = round_trip(fusionopt, tmp_path, model_with_metadata_and_function().SerializeToString())
    assert b"fusionopt-unknown-field" not in out.read_bytes()


def test_typed_field_initializers_keep_their_values(fusionopt, tmp_path):
    model = typed_fields_model()
    out = round_trip(fusionopt, tmp_path, model.SerializeToString())

    onnx.checker.check_model(str(out), full_check=True)
    written = onnx.load(str(out))
    expected = typed_field_initializers()
    assert [t.name for t in written.graph.initializer] == [t.name for t in expected]
    for actual, original in zip(written.graph.initializer, expected):
        lib.assert_same_tensor_values(actual, original)
    # Spot checks against literal values, independent of onnx's own decoding.
    by_name = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
    assert by_name["f16"].dtype == np.float16
    assert by_name["f16"].tolist() == [1.0, -0.5, 65504.0, 0.0]
    assert by_name["i64"].tolist() == [[1, -2], [2**40, -(2**62)]]
    assert by_name["u64"].tolist() == [0, 2**64 - 1]
    assert by_name["words"].tolist() == ["hello", "", "héllo"]  # numpy_helper decodes UTF-8
    assert by_name["f32_scalar"].shape == ()
    assert by_name["flags"].dtype == np.bool_
    assert written.graph.node == model.graph.node


@pytest.mark.parametrize("field, values, dims", [
    ("float_data", [1.0, 2.0, 3.0], [4]),
    ("int64_data", [1, 2, 3, 4, 5], [2, 2]),
])
def test_typed_field_with_wrong_count_is_invalid(fusionopt, tmp_path, field, values, dims):
    data_type = onnx.TensorProto.FLOAT if field == "float_data" else onnx.TensorProto.INT64
    tensor = onnx.TensorProto(name="bad_tensor", data_type=data_type, dims=dims)
    getattr(tensor, field).extend(values)
    model = lib.make_model([helper.make_node("Identity", ["bad_tensor"], ["y"])], [],
                           [helper.make_tensor_value_info("y", data_type, dims)], [tensor])
    source = lib.save(model, tmp_path / "bad.onnx")
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    result = fusionopt(source, "-o", out_dir / "out.onnx")

    lib.assert_error(result, lib.EXIT_INVALID, str(source), "bad_tensor")
    assert lib.folder_listing(out_dir) == []
