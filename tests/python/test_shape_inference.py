"""fusionopt's dtype/shape inference against onnx.shape_inference (with data propagation) as
an independent oracle, on every model: each intermediate value's dtype and rank must match,
every dim onnx knows (a number, or a symbol it took from the model) must match, and dims
onnx invents (`unk__N`) may be anything. `--write-shapes` exposes our inference."""
import onnx
import pytest

import fusionopt_testlib as lib


def _type_of(value_info):
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return tensor.elem_type, None
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim]
    return tensor.elem_type, dims


def _mismatch(reference, ours):
    """Why `ours` says less than or something else than `reference`, or None."""
    if ours is None:
        return "not inferred"
    if reference[0] != ours[0]:
        return f"dtype {ours[0]} != {reference[0]}"
    if reference[1] is None:
        return None
    if ours[1] is None or len(ours[1]) != len(reference[1]):
        return f"shape {ours[1]} != {reference[1]}"
    for ref_dim, our_dim in zip(reference[1], ours[1]):
        invented = isinstance(ref_dim, str) and ref_dim.startswith("unk__")
        if ref_dim is not None and not invented and ref_dim != our_dim:
            return f"shape {ours[1]} != {reference[1]}"
    return None


def inferred_types(fusionopt, model_path, out_path):
    rc, _, stderr = fusionopt(model_path, "-O0", "-o", out_path, "--write-shapes")
    assert rc == lib.EXIT_OK, stderr
    return {v.name: _type_of(v) for v in onnx.load(str(out_path)).graph.value_info}


@pytest.mark.parametrize("model_path", lib.all_model_params())
def test_inference_knows_at_least_what_onnx_knows(fusionopt, tmp_path, model_path):
    ours = inferred_types(fusionopt, model_path, tmp_path / "shapes.onnx")
    reference = onnx.shape_inference.infer_shapes(onnx.load(str(model_path)), data_prop=True)
    assert len(reference.graph.value_info) > 0
    problems = {}
    for value in reference.graph.value_info:
        why = _mismatch(_type_of(value), ours.get(value.name))
        if why:
            problems[value.name] = why
    assert problems == {}


def test_symbolic_dims_flow_through_reshapes(fusionopt, tmp_path):
    """GPT-2's Shape→Gather→Unsqueeze→Concat→Reshape head split keeps batch and sequence,
    and the Transposes after it move them."""
    ours = inferred_types(fusionopt, lib.REPO_ROOT / "models" / "gpt2_style.onnx", tmp_path / "g.onnx")
    float_ = onnx.TensorProto.FLOAT
    assert ours["/h.0/attn/Reshape_output_0"] == (float_, ["batch", "sequence", 4, 32])
    assert ours["/h.0/attn/Transpose_output_0"] == (float_, ["batch", 4, "sequence", 32])
    assert ours["/h.0/attn/Transpose_1_output_0"] == (float_, ["batch", 4, 32, "sequence"])


def test_without_the_flag_no_value_info_is_added(fusionopt, tmp_path):
    out = tmp_path / "plain.onnx"
    rc, _, stderr = fusionopt(lib.REPO_ROOT / "models" / "bert_style.onnx", "-O0", "-o", out)
    assert rc == lib.EXIT_OK, stderr
    assert len(onnx.load(str(out)).graph.value_info) == 0


def test_mismatch_rules_can_fail():
    float_ = onnx.TensorProto.FLOAT
    assert _mismatch((float_, [2, "batch"]), (float_, [2, "batch"])) is None
    assert _mismatch((float_, ["unk__3"]), (float_, [None])) is None
    assert _mismatch((float_, [2]), (float_, [3])) is not None
    assert _mismatch((float_, ["batch"]), (float_, [None])) is not None
    assert _mismatch((float_, [2]), (onnx.TensorProto.INT64, [2])) is not None
    assert _mismatch((float_, [2]), None) == "not inferred"
