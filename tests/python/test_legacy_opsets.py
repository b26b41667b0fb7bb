"""Models of default-domain opsets 1-6 through the CLI: legacy op versions that compute what
fusionopt implements run with the right numbers and round-trip unchanged; legacy features it
does not implement make every command exit 4 (unsupported), naming the node and the feature."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionopt_testlib as lib

SELU1_ALPHA, SELU1_GAMMA = 1.6732, 1.0507  # Selu-1's defaults (Selu-6 has more digits)


def legacy_model():
    """Opset 3, IR 3: y = Concat(Selu(x + b), x) with Add-1's suffix broadcasting and its
    consumed_inputs hint, Selu-1's default coefficients and Concat-1's default axis (1)."""
    bias = numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "b")
    nodes = [helper.make_node("Add", ["x", "b"], ["s"], name="add", broadcast=1, consumed_inputs=[0, 0]),
             helper.make_node("Selu", ["s"], ["t"], name="selu"),
             helper.make_node("Concat", ["t", "x"], ["y"], name="concat")]
    return lib.make_model(nodes, [lib.float_input("x", [2, 3]), lib.float_input("b", [3])],
                          [lib.float_input("y", [2, 6])], [bias], opsets=(("", 3),), ir_version=3)


def expected_output(x):
    s = x + np.array([0.5, -1.0, 2.0], np.float32)
    t = SELU1_GAMMA * np.where(s > 0, s, SELU1_ALPHA * (np.exp(s) - 1))
    return np.concatenate([t, x], axis=1)


def refused_models():
    """id -> (model, fragments the error must contain)."""
    axis_add = helper.make_node("Add", ["x", "b"], ["y"], name="bias_add", broadcast=1, axis=0)
    axis_model = lib.make_model([axis_add], [lib.float_input("x", [2, 3])], [lib.float_input("y", [2, 3])],
                                [numpy_helper.from_array(np.ones(2, np.float32), "b")], opsets=(("", 6),))
    stats = [numpy_helper.from_array(np.ones(3, np.float32), name) for name in ("s", "bias", "m", "v")]
    bn = helper.make_node("BatchNormalization", ["x", "s", "bias", "m", "v"], ["y"], name="bn")
    bn_model = lib.make_model([bn], [lib.float_input("x", [1, 3, 2, 2])], [lib.float_input("y", [1, 3, 2, 2])],
                              stats, opsets=(("", 6),))
    return {
        "add-broadcast-axis": (axis_model, ["bias_add", "Add-6", "broadcast=1 with axis=0"]),
        "batchnorm-training": (bn_model, ["'bn'", "BatchNormalization-6", "is_test=0"]),
    }


def test_legacy_model_runs_with_legacy_semantics(fusionopt, tmp_path):
    model_path = lib.save(legacy_model(), tmp_path / "legacy.onnx")
    x = np.array([[-2.0, 0.0, 1.0], [3.0, -0.25, -4.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "out").mkdir()

    rc, stdout, stderr = fusionopt("run", model_path, "--input", f"x={tmp_path / 'x.npy'}",
                                   "--output-dir", tmp_path / "out")

    assert rc == lib.EXIT_OK, stderr
    assert "y" in stdout
    written = onnx.TensorProto()
    written.ParseFromString((tmp_path / "out" / "output_0.pb").read_bytes())
    got = numpy_helper.to_array(written)
    assert got.shape == (2, 6)
    np.testing.assert_allclose(got, expected_output(x), rtol=1e-6, atol=1e-6)
    # Selu-6's coefficients would differ in the fifth digit: the legacy defaults were used.
    modern = 1.0507009873554805 * 1.6732632423543772 * (np.exp(np.float32(-1.5)) - 1)
    assert abs(got[0, 0] - modern) > 1e-5


def test_legacy_model_round_trips_unchanged(fusionopt, tmp_path):
    model_path = lib.save(legacy_model(), tmp_path / "legacy.onnx")
    out = tmp_path / "out.onnx"

    rc, stdout, stderr = fusionopt(model_path, "-o", out, "-O0")

    assert rc == lib.EXIT_OK, stderr
    lib.assert_same_bytes(out.read_bytes(), model_path.read_bytes(), f"{model_path.name} at -O0")


@pytest.mark.parametrize("case", refused_models().keys())
def test_legacy_feature_is_refused_by_every_command(fusionopt, tmp_path, case):
    model, fragments = refused_models()[case]
    model_path = lib.save(model, tmp_path / "legacy.onnx")

    run_error = lib.assert_error(fusionopt("run", model_path), lib.EXIT_UNSUPPORTED, str(model_path), *fragments)
    inspect_error = lib.assert_error(fusionopt("inspect", model_path), lib.EXIT_UNSUPPORTED, str(model_path),
                                     *fragments)
    lib.assert_error(fusionopt(model_path, "-o", tmp_path / "out.onnx"), lib.EXIT_UNSUPPORTED, str(model_path),
                     *fragments)
    assert run_error == inspect_error
    assert not (tmp_path / "out.onnx").exists()


def test_same_attributes_at_opset_7_are_not_legacy(fusionopt, tmp_path):
    """Opset 7 dropped `broadcast`/`axis`: a model that still carries them runs with numpy
    broadcasting, so the refusal above is about the opset, not the attributes."""
    model, _ = refused_models()["add-broadcast-axis"]
    model.opset_import[0].version = 7
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones(3, np.float32), "b"))
    model_path = lib.save(model, tmp_path / "opset7.onnx")

    rc, _, stderr = fusionopt("run", model_path)

    assert rc == lib.EXIT_OK, stderr
