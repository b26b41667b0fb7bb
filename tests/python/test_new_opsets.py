"""Issue 14, item 4: what current tools write loads. onnx 1.23 writes IR version 14 and
opsets up to 28; torch's newest exporter opset is 23 (Attention, RotaryEmbedding,
RMSNormalization). Models built here with onnx.helper load, optimize and run, and the ops new
at opsets 23-28 compute what ONNX's reference evaluator computes; what the runtime lacks is
refused per op with its name (exit 4), not for the whole opset.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import fusionopt_testlib as lib


def model_of(nodes, inputs, outputs, opset=28, ir_version=None, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def run_fusionopt(fusionopt, path, feeds, folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "out").mkdir(exist_ok=True)
    arguments = []
    for name, value in feeds.items():
        np.save(folder / f"{name}.npy", value)
        arguments += ["--input", f"{name}={folder / f'{name}.npy'}"]
    rc, _, stderr = fusionopt("run", path, *arguments, "--output-dir", folder / "out")
    assert rc == lib.EXIT_OK, stderr
    outputs = []
    for index in range(len(list((folder / "out").glob("output_*.pb")))):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((folder / "out" / f"output_{index}.pb").read_bytes())
        outputs.append(numpy_helper.to_array(tensor))
    return outputs


def assert_matches_reference(fusionopt, model, feeds, tmp_path, rtol=1e-5, atol=1e-6):
    path = lib.save(model, tmp_path / "model.onnx")
    expected = ReferenceEvaluator(model).run(None, feeds)
    actual = run_fusionopt(fusionopt, path, feeds, tmp_path / "run")
    assert len(actual) >= 1
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
    return path


def test_a_model_written_by_onnx_1_23_loads_optimizes_and_runs(fusionopt, tmp_path):
    """helper.make_model writes IR 14 and the newest opset (28): no longer refused up front."""
    model = model_of([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])],
                     [lib.float_input("x", [2, 3])], [lib.float_input("y", [2, 3])])
    assert model.ir_version == 14 and model.opset_import[0].version == 28
    path = assert_matches_reference(fusionopt, model, {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)},
                                    tmp_path)
    rc, _, stderr = fusionopt(path, "-O3", "-o", tmp_path / "o3.onnx")
    assert rc == lib.EXIT_OK, stderr
    onnx.checker.check_model(str(tmp_path / "o3.onnx"), full_check=True)


def test_signatures_are_checked_at_the_newest_opsets(fusionopt, tmp_path):
    """A ReduceMean-18 with three inputs is refused with its name: the schemas go to opset 28."""
    model = model_of([helper.make_node("ReduceMean", ["x", "axes", "axes"], ["y"], name="mean")],
                     [lib.float_input("x", [2, 3])], [lib.float_input("y", [2, 1])],
                     initializers=[numpy_helper.from_array(np.array([1], np.int64), "axes")])
    path = lib.save(model, tmp_path / "bad.onnx")
    lib.assert_error(fusionopt("inspect", path), lib.EXIT_INVALID, None, "mean", "ReduceMean-18 takes 1 to 2")


@pytest.mark.parametrize("layout", ["4d", "3d"])
@pytest.mark.parametrize("mask", ["none", "bool", "float"])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_23_matches_the_reference(fusionopt, tmp_path, layout, mask, causal):
    """Attention-23 with grouped-query heads (4 query heads, 2 key/value heads), a scale, a softcap,
    boolean or additive masks and causal masking, 4-D or 3-D operands."""
    rng = np.random.default_rng(3)
    b, s, hq, hkv, d = 2, 6, 4, 2, 8
    attributes = {"scale": 0.4, "is_causal": causal, "softcap": 5.0}
    if layout == "4d":
        shapes = {"q": [b, hq, s, d], "k": [b, hkv, s, d], "v": [b, hkv, s, d]}
        out = [b, hq, s, d]
    else:
        shapes = {"q": [b, s, hq * d], "k": [b, s, hkv * d], "v": [b, s, hkv * d]}
        out = [b, s, hq * d]
        attributes.update(q_num_heads=hq, kv_num_heads=hkv)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    inputs = [lib.float_input(name, shape) for name, shape in shapes.items()]
    names = ["q", "k", "v"]
    if mask != "none":
        if mask == "bool":
            value = rng.random((b, 1, s, s)) > 0.3
            value[0, 0, 2, :] = False  # a row with no key to attend: 0
            inputs.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, [b, 1, s, s]))
        else:
            value = rng.standard_normal((b, 1, s, s)).astype(np.float32)
            inputs.append(lib.float_input("mask", [b, 1, s, s]))
        feeds["mask"] = value
        names.append("mask")
    node = helper.make_node("Attention", names, ["y"], **attributes)
    model = model_of([node], inputs, [lib.float_input("y", out)], opset=23)
    assert_matches_reference(fusionopt, model, feeds, tmp_path)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_23_matches_the_reference(fusionopt, tmp_path, interleaved):
    rng = np.random.default_rng(5)
    b, h, s, d = 2, 3, 5, 8
    feeds = {"x": rng.standard_normal((b, h, s, d)).astype(np.float32),
             "cos": rng.standard_normal((b, s, d // 2)).astype(np.float32),
             "sin": rng.standard_normal((b, s, d // 2)).astype(np.float32)}
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], interleaved=interleaved)
    model = model_of([node], [lib.float_input(n, list(v.shape)) for n, v in feeds.items()],
                     [lib.float_input("y", [b, h, s, d])], opset=23)
    assert_matches_reference(fusionopt, model, feeds, tmp_path)


def test_space_to_depth_28_crd_matches_the_reference(fusionopt, tmp_path):
    feeds = {"x": np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)}
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode="CRD")
    model = model_of([node], [lib.float_input("x", [2, 3, 4, 6])], [lib.float_input("y", [2, 12, 2, 3])])
    assert_matches_reference(fusionopt, model, feeds, tmp_path, rtol=0, atol=0)


def test_what_the_runtime_lacks_is_refused_per_op(fusionopt, tmp_path):
    """Attention-24's nonpad_kv_seqlen: the node is named, exit 4; the model still optimizes."""
    b, h, s, d = 1, 2, 4, 8
    inputs = [lib.float_input(n, [b, h, s, d]) for n in ("q", "k", "v")]
    inputs.append(helper.make_tensor_value_info("lengths", TensorProto.INT64, [b]))
    node = helper.make_node("Attention", ["q", "k", "v", "", "", "", "lengths"], ["y"], name="attend")
    model = model_of([node], inputs, [lib.float_input("y", [b, h, s, d])], opset=24)
    path = lib.save(model, tmp_path / "a24.onnx")
    rc, _, stderr = fusionopt(path, "-O3", "-o", tmp_path / "o3.onnx")
    assert rc == lib.EXIT_OK, stderr
    result = fusionopt("run", path)
    lib.assert_error(result, lib.EXIT_UNSUPPORTED, None, "attend", "nonpad_kv_seqlen")
