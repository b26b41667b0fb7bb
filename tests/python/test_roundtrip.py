"""Round trip at -O0: every model written back is the model that was read."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import fusionopt_testlib as lib


def optimize_o0(fusionopt, model_path, out_path):
    before = lib.FileSnapshot(model_path)
    rc, stdout, stderr = fusionopt(model_path, "-o", out_path, "-O0")
    assert rc == lib.EXIT_OK, stderr
    assert stdout == ""
    before.assert_unchanged()
    return out_path


@pytest.mark.parametrize("model_path", lib.all_model_params())
def test_round_trip_o0_reproduces_every_model(fusionopt, tmp_path, model_path):
    out = optimize_o0(fusionopt, model_path, tmp_path / "out.onnx")

    assert lib.folder_listing(tmp_path) == ["out.onnx"]
    onnx.checker.check_model(str(out), full_check=True)
    original, written = onnx.load(str(model_path)), onnx.load(str(out))
    lib.assert_round_trip_equal(written, original)
    # Both files are protobuf's canonical serialization, so equal models are equal bytes.
    lib.assert_same_bytes(out.read_bytes(), model_path.read_bytes(), f"{model_path.name} at -O0")


def test_round_trip_is_deterministic(fusionopt, tmp_path, project_model):
    first = optimize_o0(fusionopt, project_model, tmp_path / "first.onnx")
    second = optimize_o0(fusionopt, project_model, tmp_path / "second.onnx")
    lib.assert_same_bytes(second.read_bytes(), first.read_bytes(), "the second run")


def test_round_trip_overwrites_an_existing_output(fusionopt, tmp_path, project_model):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"stale content")
    optimize_o0(fusionopt, project_model, out)
    assert onnx.load(str(out)) == onnx.load(str(project_model))
    assert lib.folder_listing(tmp_path) == ["out.onnx"]


# The comparisons above must be able to fail: each change below is caught, and the
# canonical encoding allowed for tensors hides none of them.

def _copy(model):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _flip_a_bit(model):
    weights = numpy_helper.to_array(model.graph.initializer[0]).copy()
    weights.view(np.uint32).flat[0] ^= 1
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(weights, "b"))


def _drop_attribute_tensor_name(model):
    value = numpy_helper.from_array(np.zeros(1, np.float32), "fill")
    model.graph.node.append(helper.make_node("ConstantOfShape", ["shape"], ["c"], value=value))
    return lambda changed: changed.graph.node[-1].attribute[0].t.ClearField("name")


PERTURBATIONS = {
    "flipped-bit": _flip_a_bit,
    "node-name": lambda model: setattr(model.graph.node[1], "name", "relu_renamed"),
    "doc-string": lambda model: setattr(model.graph.node[0], "doc_string", "changed"),
    "opset": lambda model: setattr(model.opset_import[0], "version", 16),
    "metadata": lambda model: helper.set_model_props(model, {"key": "value"}),
}


@pytest.mark.parametrize("perturb", PERTURBATIONS.values(), ids=PERTURBATIONS.keys())
def test_model_comparison_detects_a_change(perturb):
    model = lib.tiny_model()
    lib.assert_round_trip_equal(_copy(model), model)
    changed = _copy(model)
    perturb(changed)
    with pytest.raises(AssertionError):
        lib.assert_round_trip_equal(changed, model, exact=False)


def test_model_comparison_detects_a_lost_attribute_tensor_name():
    model = lib.tiny_model()
    drop_name = _drop_attribute_tensor_name(model)
    changed = _copy(model)
    drop_name(changed)
    lib.assert_round_trip_equal(_copy(model), model)
    with pytest.raises(AssertionError):
        lib.assert_round_trip_equal(changed, model, exact=False)


def test_model_comparison_tells_a_zero_dim_from_an_unknown_dim():
    model = lib.tiny_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 0
    changed = _copy(model)
    changed.graph.input[0].type.tensor_type.shape.dim[0].ClearField("dim_value")
    with pytest.raises(AssertionError):
        lib.assert_round_trip_equal(changed, model, exact=False)


def test_canonical_comparison_excuses_only_encoding():
    """With exact=False (tensors moved to external data on purpose), float_data coming back
    as raw_data and `producer_version: ""` coming back unset pass; the exact default does not."""
    model = lib.tiny_model()
    model.graph.initializer[0].CopyFrom(onnx.TensorProto(
        name="b", data_type=onnx.TensorProto.FLOAT, dims=[4], float_data=[0.0, 1.0, 2.0, 3.0]))
    model.producer_version = ""
    re_encoded = lib.tiny_model()
    assert re_encoded != model
    lib.assert_round_trip_equal(re_encoded, model, exact=False)
    with pytest.raises(AssertionError):
        lib.assert_round_trip_equal(re_encoded, model)


def test_typed_fields_and_explicit_defaults_survive_exactly(fusionopt, tmp_path):
    model = lib.tiny_model()
    model.graph.initializer[0].CopyFrom(onnx.TensorProto(
        name="b", data_type=onnx.TensorProto.FLOAT, dims=[4], float_data=[0.0, 1.0, 2.0, 3.0]))
    model.producer_version = ""
    path = lib.save(model, tmp_path / "typed.onnx")
    out = optimize_o0(fusionopt, path, tmp_path / "out.onnx")
    lib.assert_round_trip_equal(onnx.load(str(out)), model)
    lib.assert_same_bytes(out.read_bytes(), path.read_bytes(), "typed.onnx at -O0")