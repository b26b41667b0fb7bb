"""Issue 16: `fusionopt MODEL -O3 --runtime ort` writes the fused groups ONNX Runtime has kernels
for as those kernels (passes/conversion/ort/lower_for_ort.h, docs/ort.md), on every committed real fixture.

Per fixture:
- the output passes onnx.checker (full check, the com.microsoft domain imported) and ORT creates
  a session for it at every graph optimization level;
- ORT on it equals ORT on the original at each level (fp32: rtol 1e-3, atol 1e-4; fp16 as in
  test_real_exports);
- exactly the ORT kernels its form allows are written (EXPECTED_WRITTEN): attention as
  Attention with its QKV projection where that is one fused MatMul + bias on initializers (or
  GPT-2's Conv1D: a Gemm over the flattened rows), else
  MultiHeadAttention where Q, K and V are split into heads inside the group; GELU epilogues as
  BiasGelu / FastGelu, residual norms as Skip(Simplified)LayerNormalization, rotary attention with
  RotaryEmbedding before it; nothing for CNNs, and the report says why for each group it kept;
- ORT runs fewer nodes on it than on the original where anything was written.
"""
import collections
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import fusionopt_testlib as lib

sys.path.insert(0, str(lib.REPO_ROOT / "models" / "real"))
import corpus  # noqa: E402

ENTRIES = corpus.load()
ORT_LEVELS = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              ort.GraphOptimizationLevel.ORT_ENABLE_ALL]
FP32_TOLERANCE = (1e-3, 1e-4)
FP16_TOLERANCE = (2e-2, 4e-3)

# The com.microsoft ops each fixture's -O3 --runtime ort output holds (two layers each). A form
# missing here writes none: CNNs have no such groups. In fp16 the GELUs are written too (their
# constants as float16 rounds them match, within half an fp16 ulp), and GPT-2's standard
# LayerNormalization ops after the residual Add become SkipLayerNormalization (-O3 fuses no fp16
# LayerNorm); LLaMA's fp16 RMSNorms compute in float32 between Casts and stay. LLaMA-family attention becomes MultiHeadAttention after a
# RotaryEmbedding of Q and of K (K and V repeated for grouped-query attention); their residual
# RMSNorms become SkipSimplifiedLayerNormalization, and residual LayerNorms (a fused group, or the
# dynamo exports' standard LayerNormalization op) SkipLayerNormalization, each taking in the
# residual Add that -O3 had fused into the projection before it; the first norm of ViT, CLIP and
# GPT-2 takes in the Add of the [1,S,H] position embeddings (ORT's kernel broadcasts them).
EXPECTED_WRITTEN = {
    # BLOOM: the ALiBi score bias keeps the attention the portable fused node, as MPT's does;
    # its factored tanh GELU becomes FastGelu.
    "bloom_dynamo18_eager": {"FastGelu": 2, "SkipLayerNormalization": 4},
    "bloom_dynamo18_eager_fp16": {"FastGelu": 2, "SkipLayerNormalization": 4},
    "bloom_torchscript17_eager": {"FastGelu": 2, "SkipLayerNormalization": 4},
    "bert_dynamo18_eager": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 4},
    "bert_dynamo18_sdpa": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 4},
    "bert_dynamo18_sdpa_fp16": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 4},
    "bert_dynamo23_sdpa": {"BiasGelu": 2, "SkipLayerNormalization": 4},
    "bert_torchscript17_eager": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 4},
    "bert_torchscript17_sdpa": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 4},
    "clip_vision_dynamo18_sdpa": {"Attention": 2, "QuickGelu": 2, "SkipLayerNormalization": 4},
    "convnext_dynamo18": {"BiasGelu": 4},
    "distilbert_dynamo18_eager": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 4},
    "distilbert_dynamo18_sdpa": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 4},
    # Falcon: the rotary on the packed projection's views keeps the attention portable, as
    # GPT-NeoX's; the parallel MLP's GELU becomes Gelu.
    "falcon_dynamo18_eager": {"Gelu": 2},
    "falcon_dynamo18_sdpa": {"Gelu": 2},
    # GPT-J: the interleaved rotary keeps the attention portable; fc_in's tanh GELU is FastGelu.
    "gptj_dynamo18_eager": {"FastGelu": 2},
    "gpt2_dynamo18_eager": {"FastGelu": 2, "Attention": 2, "SkipLayerNormalization": 5},
    "gpt2_dynamo18_sdpa": {"FastGelu": 2, "Attention": 2, "SkipLayerNormalization": 5},
    "gpt2_dynamo18_sdpa_fp16": {"Attention": 2, "FastGelu": 2, "SkipLayerNormalization": 5},
    "gpt2_dynamo23_sdpa": {"FastGelu": 2, "SkipLayerNormalization": 5},
    "gpt2_torchscript17_eager": {"FastGelu": 2, "Attention": 2, "SkipLayerNormalization": 5},
    "gpt2_torchscript17_sdpa": {"FastGelu": 2, "Attention": 2, "SkipLayerNormalization": 5},
    # GPT-NeoX: a quarter rotary on Q and K read through the packed projection's views; the
    # attention stays the portable node, fc1's erf GELU becomes BiasGelu.
    "gpt_neox_dynamo18_eager": {"BiasGelu": 2},
    "gpt_neox_dynamo18_sdpa": {"BiasGelu": 2},
    "llama_dynamo18_eager": {"MultiHeadAttention": 2, "RotaryEmbedding": 4, "SkipSimplifiedLayerNormalization": 4},
    "llama_dynamo18_sdpa": {"MultiHeadAttention": 2, "RotaryEmbedding": 4, "SkipSimplifiedLayerNormalization": 4},
    "llama_dynamo18_sdpa_fp16": {"MultiHeadAttention": 2, "RotaryEmbedding": 4},
    "mistral_dynamo18_sdpa": {"MultiHeadAttention": 2, "RotaryEmbedding": 4, "SkipSimplifiedLayerNormalization": 4},
    # MPT: the ALiBi bias is added before a Where mask, which no one attention_bias sum equals;
    # the attention stays the portable fused node (test_alibi_attention_stays_portable).
    "mpt_dynamo18_eager": {"Gelu": 2, "SkipLayerNormalization": 4},
    "mpt_dynamo18_eager_fp16": {"Gelu": 2, "SkipLayerNormalization": 4},
    "mpt_torchscript17_eager": {"Gelu": 2, "SkipLayerNormalization": 4},
    # Phi: the rotary turns half of each head, which RotaryEmbedding's rotary_embedding_dim
    # expresses; fc1's tanh GELU becomes FastGelu.
    "phi_dynamo18_eager": {"FastGelu": 2, "MultiHeadAttention": 2, "RotaryEmbedding": 4},
    "phi_dynamo18_sdpa": {"FastGelu": 2, "MultiHeadAttention": 2, "RotaryEmbedding": 4},
    "phi_dynamo18_sdpa_fp16": {"FastGelu": 2, "MultiHeadAttention": 2, "RotaryEmbedding": 4},
    "qwen2_dynamo18_sdpa": {"MultiHeadAttention": 2, "RotaryEmbedding": 4, "SkipSimplifiedLayerNormalization": 4},
    "roberta_dynamo18_eager": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "roberta_dynamo18_sdpa": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    # SigLIP: the encoder's attention as Attention; the pooling head's (a constant query attending
    # over the sequence, read through layout views) stays the portable fused node.
    "siglip_vision_dynamo18_eager": {"Attention": 2, "FastGelu": 3, "SkipLayerNormalization": 5},
    "siglip_vision_dynamo18_sdpa": {"Attention": 2, "FastGelu": 3, "SkipLayerNormalization": 5},
    "siglip_vision_dynamo18_sdpa_fp16": {"Attention": 2, "FastGelu": 3, "SkipLayerNormalization": 5},
    "siglip_vision_torchscript17_sdpa": {"Attention": 2, "FastGelu": 3, "SkipLayerNormalization": 5},
    "swin_dynamo18_eager": {"Attention": 3, "BiasGelu": 3, "SkipLayerNormalization": 5},
    "t5_encoder_dynamo18_sdpa": {"MultiHeadAttention": 2, "SkipSimplifiedLayerNormalization": 4},
    # TorchScript T5: one layer's K is split into heads outside the group ([B,S,H,D], read by a
    # Shape node too); it is reshaped back to [B,S,H*D] for MultiHeadAttention.
    "t5_encoder_torchscript17_sdpa": {"MultiHeadAttention": 2, "SkipSimplifiedLayerNormalization": 4},
    "vit_dynamo18_eager": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "vit_dynamo18_sdpa": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "vit_torchscript17_sdpa": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    # torchvision's packed in-projection, reached through layout chains the lowering evaluates
    # (lower_for_ort_packed.cc); the TorchScript form's targets computed from the run's shapes too.
    # timm's packed qkv unbound by a Split: the same packed form as torchvision's.
    "vit_timm_dynamo18_eager": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "vit_timm_dynamo18_sdpa": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "vit_timm_dynamo18_sdpa_fp16": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "vit_timm_torchscript17_eager": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "vit_timm_torchscript17_sdpa": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "vit_torchvision_dynamo18": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "vit_torchvision_torchscript17": {"Attention": 2, "BiasGelu": 2, "SkipLayerNormalization": 5},
    "whisper_encoder_dynamo18_eager": {"Attention": 2, "BiasGelu": 2, "Gelu": 2, "SkipLayerNormalization": 4},
    "whisper_encoder_dynamo18_sdpa": {"Attention": 2, "BiasGelu": 2, "Gelu": 2, "SkipLayerNormalization": 4},
}


def ids(entries):
    return [entry.name for entry in entries]


def optimize_for_ort(fusionopt, entry, tmp_path, *flags):
    out, report = tmp_path / f"{entry.name}.ort.onnx", tmp_path / "report.json"
    rc, _, stderr = fusionopt(entry.path, "-O3", "--runtime", "ort", "-o", out, "--report", report, *flags, timeout=300)
    assert rc == 0, stderr
    document = json.loads(report.read_text())
    lowering = document["ort_lowering"]
    # The conversion pass's statistics say the same: a match and a count per written group, a
    # rejection per kept one.
    statistics = document["passes"][-1]
    assert statistics["pass"] == "lower-for-ort"
    assert statistics["matches"] == len(lowering["lowered"])
    assert statistics["counters"] == dict(collections.Counter(one["written"] for one in lowering["lowered"]))
    assert sum(one["count"] for one in statistics["rejections"].values()) == len(lowering["kept"])
    return out, lowering


def session(path, level, saved=None):
    """An ORT CPU session at `level`; with `saved`, ORT writes its optimized graph there."""
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = 2
    if saved is not None:
        options.optimized_model_filepath = str(saved)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def nodes_ort_runs(path, tmp_path):
    saved = tmp_path / f"{path.stem}.after_ort.onnx"
    session(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, saved)
    return len(onnx.load(str(saved)).graph.node)


@pytest.mark.skipif(not ENTRIES, reason="no committed real fixtures (models/real/fixtures)")
@pytest.mark.parametrize("entry", ENTRIES, ids=ids(ENTRIES))
def test_runtime_ort_output_loads_everywhere_and_equals_the_original(fusionopt, entry, tmp_path):
    out, lowering = optimize_for_ort(fusionopt, entry, tmp_path)
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    written = collections.Counter(node.op_type for node in model.graph.node if node.domain == "com.microsoft")
    assert dict(written) == EXPECTED_WRITTEN.get(entry.name, {})
    # One ORT node per lowered group, but for RMSNorms spelled as the standard ops ORT fuses and
    # the RotaryEmbeddings written before a MultiHeadAttention (two per rotary group).
    kernels = sum(count for op, count in written.items() if op != "RotaryEmbedding")
    assert kernels == sum(one["written"].startswith("com.microsoft::") for one in lowering["lowered"])
    assert all(one["reason"] for one in lowering["kept"])  # every group kept says why
    imports = {opset.domain: opset.version for opset in model.opset_import}
    assert ("com.microsoft" in imports) == bool(written)

    feeds = entry.feeds()
    expected = session(entry.path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, feeds)
    rtol, atol = FP16_TOLERANCE if entry.info["dtype"] == "float16" else FP32_TOLERANCE
    for level in ORT_LEVELS:
        actual = session(out, level).run(None, feeds)
        for want, got in zip(expected, actual):
            np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=atol,
                                       err_msg=f"{entry.name} at {level}")
    # Fewer ORT nodes where anything was written, and never more where nothing was (YOLOv8n's
    # merged convolutions had cost ORT's NCHWc layout 6 reorders and Splits) — counted on the
    # CPU EP, so for output written for it (--target cpu): the default target's CUDA EP output
    # may hold float16 Gelu and FastGelu, which the CPU EP expands between Casts.
    (tmp_path / "cpu").mkdir()
    for_cpu, _ = optimize_for_ort(fusionopt, entry, tmp_path / "cpu", "--target", "cpu")
    written_for_cpu = any(node.domain == "com.microsoft" for node in onnx.load(str(for_cpu)).graph.node)
    ours, original = nodes_ort_runs(for_cpu, tmp_path), nodes_ort_runs(entry.path, tmp_path)
    assert ours < original if written_for_cpu else ours <= original


def entry_named(name):
    matches = [entry for entry in ENTRIES if entry.name == name]
    if not matches:
        pytest.skip(f"fixture {name} not committed")
    return matches[0]


def test_attention_attributes_come_from_the_pattern(fusionopt, tmp_path):
    """BERT's fixture: the combined QKV projection taken into ORT's Attention (its [32, 96] weights
    and [96] bias initializers), 4 heads of 8, sdpa's scale 1/sqrt(8) split as sqrt over Q and K,
    and the extended mask as attention_bias."""
    out, lowering = optimize_for_ort(fusionopt, entry_named("bert_dynamo18_sdpa"), tmp_path)
    model = onnx.load(str(out))
    initializers = {tensor.name: list(tensor.dims) for tensor in model.graph.initializer}
    attention = [node for node in model.graph.node if node.op_type == "Attention"]
    assert len(attention) == 2
    for node in attention:
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attributes["num_heads"] == 4
        assert attributes["scale"] == pytest.approx(1 / np.sqrt(8), rel=1e-6)
        assert len(node.input) == 6 and node.input[5]  # attention_bias
        assert initializers[node.input[1]] == [32, 96] and initializers[node.input[2]] == [96]
    absorbed = [one["absorbed"] for one in lowering["lowered"] if one["written"] == "com.microsoft::Attention"]
    assert len(absorbed) == 2 and all(len(names) == 1 and names[0].startswith("FusedMatMulAdd") for names in absorbed)
    assert not [one for one in lowering["kept"] if one["node"] in {names[0] for names in absorbed}]


@pytest.mark.parametrize("flags, written, because", [
    ((), "Attention", "CUDA EP: Attention taking in the projection (one kernel); not measured on the CUDA EP"),
    (("--target", "cpu"), "Attention", "CPU EP: Attention taking in the projection; the key count is unknown"),
    (("--target", "cpu", "--dim", "sequence=128"), "Attention", "CPU EP: Attention taking in the projection; 128 keys"),
    (("--target", "cpu", "--dim", "sequence=2048"), "MultiHeadAttention", "CPU EP: MultiHeadAttention after the projection; 2048 keys"),
])
def test_attention_form_is_chosen_per_provider_and_key_count(fusionopt, tmp_path, flags, written, because):
    """BERT's fixture (symbolic `sequence`): on the CPU EP, ORT's Attention is faster up to 512
    keys and MultiHeadAttention from 1024 (bench/ort_attention_forms.py), so the key count --dim
    gives picks the form; unknown keys and the CUDA EP keep Attention. Each choice is reported
    with its reason, and ORT on either form equals ORT on the original."""
    entry = entry_named("bert_dynamo18_sdpa")
    out, lowering = optimize_for_ort(fusionopt, entry, tmp_path, *flags)
    attention = [one for one in lowering["lowered"] if one["function"].endswith("FusedAttention")]
    assert [one["written"] for one in attention] == [f"com.microsoft::{written}"] * 2
    assert all(one["because"].startswith(because) for one in attention), attention
    assert all(len(one["absorbed"]) == (written == "Attention") for one in attention)
    ops = collections.Counter(node.op_type for node in onnx.load(str(out)).graph.node)
    other = "MultiHeadAttention" if written == "Attention" else "Attention"
    assert ops[written] == 2 and ops[other] == 0
    feeds = entry.feeds()
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for want, got in zip(session(entry.path, level).run(None, feeds), session(out, level).run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])


@pytest.mark.parametrize("name", ["gpt2_dynamo18_sdpa", "gpt2_torchscript17_sdpa"])
def test_gpt2_conv1d_projection_is_taken_into_attention(fusionopt, tmp_path, name):
    """GPT-2's Conv1D flattens the rows, projects them with a Gemm and puts them back to
    [B,S,3*H*D] (dynamo: the target from the inputs' named dims; TorchScript: from Shape(x)'s
    first two dims, which shape inference loses in the second layer). ORT's Attention takes x,
    the Gemm's weights and bias in; the context is reshaped back to the rows the next Gemm
    reads, and ORT equals ORT on the original."""
    entry = entry_named(name)
    out, lowering = optimize_for_ort(fusionopt, entry, tmp_path)
    attention = [one for one in lowering["lowered"] if one["written"] == "com.microsoft::Attention"]
    assert len(attention) == 2 and all(len(one["absorbed"]) == 1 for one in attention)
    model = onnx.load(str(out))
    initializers = {tensor.name for tensor in model.graph.initializer}
    gemm_weights = {node.input[1] for node in model.graph.node if node.op_type == "Gemm"}
    assert not any("c_attn" in weight for weight in gemm_weights)  # the projection is inside Attention
    producers = {output: node for node in model.graph.node for output in node.output}
    for node in (node for node in model.graph.node if node.op_type == "Attention"):
        assert "c_attn.weight" in node.input[1] and node.input[1] in initializers
        assert producers[node.input[0]].op_type == "SkipLayerNormalization"  # x itself, not its rows
    feeds = entry.feeds()
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for want, got in zip(session(entry.path, level).run(None, feeds), session(out, level).run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])


def gpt2_with_first_projection(tmp_path, change):
    """GPT-2's dynamo fixture with its first c_attn Gemm (or what reads it) changed by `change`
    (the model, the Gemm node), as a corpus-like entry."""
    entry = entry_named("gpt2_dynamo18_sdpa")
    model = onnx.load(str(entry.path))
    gemm = next(node for node in model.graph.node if node.op_type == "Gemm" and "h.0.attn.c_attn" in node.input[1])
    change(model, gemm)
    path = tmp_path / "gpt2_changed.onnx"
    onnx.save(model, str(path))
    return type("Entry", (), {"name": "gpt2_changed", "path": path, "feeds": entry.feeds, "info": entry.info})()


def transposed_weights(model, gemm):
    weights = next(tensor for tensor in model.graph.initializer if tensor.name == gemm.input[1])
    weights.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(weights).T.copy(), weights.name))
    kept = [attribute for attribute in gemm.attribute if attribute.name != "transB"]
    del gemm.attribute[:]
    gemm.attribute.extend([*kept, onnx.helper.make_attribute("transB", 1)])


def projection_also_an_output(model, gemm):
    model.graph.output.append(onnx.helper.make_tensor_value_info(gemm.output[0], onnx.TensorProto.FLOAT, None))


@pytest.mark.parametrize("change", [transposed_weights, projection_also_an_output])
def test_gpt2_projection_attention_cannot_take_keeps_multi_head_attention(fusionopt, tmp_path, change):
    """Negative cases beside the one above: the first layer's Gemm with transB (W stored [N, K],
    which Attention's [K, N] weights are not), or its rows also a graph output (the Gemm must stay
    and would run twice). That layer keeps MultiHeadAttention after the Gemm, the second layer is
    still taken in, and ORT equals ORT on the original."""
    entry = gpt2_with_first_projection(tmp_path, change)
    out, _ = optimize_for_ort(fusionopt, entry, tmp_path)
    ops = collections.Counter(node.op_type for node in onnx.load(str(out)).graph.node)
    assert ops["MultiHeadAttention"] == 1 and ops["Attention"] == 1
    feeds = entry.feeds()
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for want, got in zip(session(entry.path, level).run(None, feeds), session(out, level).run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])


def test_rotary_grouped_query_attention_becomes_rotary_embedding_and_multi_head_attention(fusionopt, tmp_path):
    """LLaMA's fixture (grouped-query: half as many key/value heads): Q and K rotated by ORT's
    RotaryEmbedding with their own head counts, from caches shared by both layers (the first halves
    of the model's cos and sin tables); K and V repeated to Q's heads; MultiHeadAttention."""
    out, lowering = optimize_for_ort(fusionopt, entry_named("llama_dynamo18_sdpa"), tmp_path)
    assert not [one for one in lowering["kept"] if one["function"].endswith("FusedAttention")]
    model = onnx.load(str(out))
    attributes = lambda node: {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}  # noqa: E731
    rotary = [node for node in model.graph.node if node.op_type == "RotaryEmbedding"]
    attention = [node for node in model.graph.node if node.op_type == "MultiHeadAttention"]
    assert len(rotary) == 4 and len(attention) == 2
    heads = attributes(attention[0])["num_heads"]
    assert sorted({attributes(node)["num_heads"] for node in rotary}) == sorted({heads, heads // 2})
    assert all(attributes(node)["interleaved"] == 0 for node in rotary)
    assert len({node.input[2] for node in rotary}) == 1 and len({node.input[3] for node in rotary}) == 1
    assert sum(node.op_type == "Expand" for node in model.graph.node) >= 4  # K and V per layer


def test_kept_groups_say_why(fusionopt, tmp_path):
    """The opset-23 exports write attention's core as the standard Attention op, which ORT runs
    as one kernel itself: those groups stay functions (ORT inlines them back to that op), and the
    report says why for each."""
    _, lowering = optimize_for_ort(fusionopt, entry_named("bert_dynamo23_sdpa"), tmp_path)
    kept = [one["reason"] for one in lowering["kept"] if "FusedAttention" in one["function"]]
    assert kept == ["the core is a standard Attention node"] * 2
    assert not [one for one in lowering["lowered"] if "Attention" in one["written"]]


def test_heads_split_outside_the_group_are_merged_back_for_multi_head_attention(fusionopt, tmp_path):
    """TorchScript's T5: the first layer's K arrives split into heads ([B,S,H,D]; a Shape node
    outside reads that split), so the lowering reshapes it back to [B,S,H*D] before
    MultiHeadAttention; both layers are lowered and ORT equals ORT on the original."""
    entry = entry_named("t5_encoder_torchscript17_sdpa")
    out, lowering = optimize_for_ort(fusionopt, entry, tmp_path)
    assert [one["written"] for one in lowering["lowered"] if "FusedAttention" in one["function"]] == [
        "com.microsoft::MultiHeadAttention"] * 2
    model = onnx.load(str(out))
    merges = [node for node in model.graph.node if node.op_type == "Reshape" and node.name.endswith("/merge_heads")]
    initializers = {tensor.name: onnx.numpy_helper.to_array(tensor).tolist() for tensor in model.graph.initializer}
    assert len(merges) == 1 and initializers[merges[0].input[1]] == [0, 0, -1]
    attention = next(node for node in model.graph.node if node.op_type == "MultiHeadAttention" and merges[0].output[0] in node.input)
    assert list(attention.input).index(merges[0].output[0]) == 1  # K
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    feeds = entry.feeds()
    for want, got in zip(session(entry.path, level).run(None, feeds), session(out, level).run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])


def test_alibi_attention_stays_portable(fusionopt, tmp_path):
    """ORT's attention ops add one attention_bias; MPT's ALiBi comes before its Where mask, so
    each attention group is kept as the ai.fusionopt node (ORT inlines it), saying why."""
    out, lowering = optimize_for_ort(fusionopt, entry_named("mpt_dynamo18_eager"), tmp_path)
    kept = [one for one in lowering["kept"] if one["function"].endswith("FusedAttention")]
    assert len(kept) == 2 and all("score bias before the mask" in one["reason"] for one in kept), kept
    model = onnx.load(str(out))
    assert sum(node.op_type == "FusedAttention" for node in model.graph.node) == 2


@pytest.mark.parametrize("name", ["vit_torchvision_dynamo18", "vit_torchvision_torchscript17",
                                  "vit_timm_dynamo18_sdpa", "vit_timm_torchscript17_eager"])
def test_packed_in_projection_becomes_attention(fusionopt, tmp_path, name):
    """torchvision's ViT: Q, K and V are Gathers of slots 0, 1, 2 of the in-projection reshaped to
    [S,B,3,E], each split into heads through [S,B·H,D] (TorchScript computes those targets from
    Shape(x) with B·H as a Mul; they are evaluated at each trial size); timm's: slots of a Split
    of the projection reshaped to [B,N,3,H,D] and permuted to [3,B,H,N,D]. At two batch sizes,
    the chains read the projection's thirds split into 4 heads of 8, so the projection (-O3's
    FusedMatMulAdd) and the attention become one Attention; ORT on it equals ORT on the original
    at batch sizes 1 to 3."""
    entry = entry_named(name)
    out, lowering = optimize_for_ort(fusionopt, entry, tmp_path)
    attention = [one for one in lowering["lowered"] if one["function"].endswith("FusedAttention")]
    assert [one["written"] for one in attention] == ["com.microsoft::Attention"] * 2
    assert all(len(one["absorbed"]) == 1 and one["absorbed"][0].startswith("FusedMatMulAdd") for one in attention)
    model = onnx.load(str(out))
    initializers = {tensor.name: list(tensor.dims) for tensor in model.graph.initializer}
    for node in (node for node in model.graph.node if node.op_type == "Attention"):
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attributes["num_heads"] == 4 and attributes["scale"] == pytest.approx(1 / np.sqrt(8), rel=1e-6)
        assert initializers[node.input[1]] == [32, 96] and initializers[node.input[2]] == [96]
    ops = collections.Counter(node.op_type for node in model.graph.node)
    original_ops = collections.Counter(node.op_type for node in onnx.load(str(entry.path)).graph.node)
    assert ops["Squeeze"] == 0
    if name.startswith("vit_timm"):  # the unbind of both layers: a Split, or Slices per slot
        assert ops["Split"] == 0 and ops["Slice"] + 2 <= original_ops["Slice"] + original_ops["Split"]
    else:  # the Q, K, V Gathers of both layers
        assert ops["Gather"] <= original_ops["Gather"] - 6
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    original, optimized = session(entry.path, level), session(out, level)
    for batch in (1, 2, 3):
        pixels = np.random.default_rng(batch).standard_normal((batch, 3, 32, 32)).astype(np.float32)
        feeds = {original.get_inputs()[0].name: pixels}
        for want, got in zip(original.run(None, feeds), optimized.run(None, feeds)):
            np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])


def batch_heads_through_slice(path, steps=None, plus_input_values=False):
    """The TorchScript torchvision ViT with its first layer's B·H target entry computed as
    Mul(Slice(Shape(x)[perm], [1], [2][, [0], [steps]]), H) instead of Unsqueeze(Mul(Gather(...), H)):
    the same values, through a Slice; with `plus_input_values`, plus Cast(ReduceMin(pixels) · 0),
    still the same values but read from the input's data, not its shape."""
    model = onnx.load(str(entry_named("vit_torchvision_torchscript17").path))
    prefix = "/encoder/layers/encoder_layer_0/self_attention/"
    nodes = list(model.graph.node)
    product = next(node for node in nodes if node.name == prefix + "Mul")
    target = next(node for node in nodes if node.name == prefix + "Concat_2")
    bounds = {"slice_start": [1], "slice_end": [2]} if steps is None else {
        "slice_start": [1], "slice_end": [2], "slice_axes": [0], "slice_steps": [steps]}
    model.graph.initializer.extend(onnx.numpy_helper.from_array(np.array(v, np.int64), k) for k, v in bounds.items())
    added = [onnx.helper.make_node("Slice", [prefix + "Shape_1_output_0", *bounds], ["batch_as_vector"]),
             onnx.helper.make_node("Mul", ["batch_as_vector", product.input[1]], ["heads_by_batch"])]
    if plus_input_values:
        model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(0, np.float32), "zero"))
        added[-1].output[0] = "heads_by_batch_from_shape"
        added += [onnx.helper.make_node("ReduceMin", ["pixel_values"], ["least"], keepdims=0),
                  onnx.helper.make_node("Mul", ["least", "zero"], ["nothing"]),
                  onnx.helper.make_node("Cast", ["nothing"], ["nothing_int"], to=onnx.TensorProto.INT64),
                  onnx.helper.make_node("Add", ["heads_by_batch_from_shape", "nothing_int"], ["heads_by_batch"])]
    at = nodes.index(product)
    for offset, node in enumerate(added):
        model.graph.node.insert(at + offset, node)
    target.input[1] = "heads_by_batch"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("steps, plus_input_values, kept", [
    (None, False, []),
    (2, False, []),
    (None, True, ["a packed projection's layout chain reshapes to a target that cannot be evaluated ahead of time"]),
])
def test_packed_chain_targets_computed_outside(fusionopt, tmp_path, steps, plus_input_values, kept):
    """A Reshape target computed from the run's shapes through a Slice (plain or stepped) is
    read in the model folded at each trial size, and both layers are lowered; one that also reads
    the input's values cannot fold, so that layer stays a function with the reason. ORT's outputs
    equal the altered original's at batch sizes 1 to 3 each time."""
    altered = batch_heads_through_slice(tmp_path / "sliced.onnx", steps, plus_input_values)
    out, report = tmp_path / "sliced.ort.onnx", tmp_path / "report.json"
    rc, _, stderr = fusionopt(altered, "-O3", "--runtime", "ort", "-o", out, "--report", report, timeout=300)
    assert rc == 0, stderr
    lowering = json.loads(report.read_text())["ort_lowering"]
    assert [one["reason"] for one in lowering["kept"] if "FusedAttention" in one["function"]] == kept
    assert len([one for one in lowering["lowered"] if "FusedAttention" in one["function"]]) == 2 - len(kept)
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    original, optimized = session(altered, level), session(out, level)
    for batch in (1, 2, 3):
        pixels = {"pixel_values": np.random.default_rng(batch).standard_normal((batch, 3, 32, 32)).astype(np.float32)}
        for want, got in zip(original.run(None, pixels), optimized.run(None, pixels)):
            np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])


def test_packed_chains_reading_the_same_third_stay(fusionopt, tmp_path):
    """The same export with the first layer's K gathered from slot 0 (K = Q): the chains no longer
    read three different thirds, so that layer's attention stays a function with the reason; the
    second layer is still lowered, and the outputs equal ORT on the altered original."""
    model = onnx.load(str(entry_named("vit_torchvision_dynamo18").path))
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(0, np.int64), "k_reads_slot_0"))
    select = next(node for node in model.graph.node if node.name == "node_select_1")
    select.input[1] = "k_reads_slot_0"
    altered = tmp_path / "k_is_q.onnx"
    onnx.save(model, str(altered))
    out, report = tmp_path / "k_is_q.ort.onnx", tmp_path / "report.json"
    rc, _, stderr = fusionopt(altered, "-O3", "--runtime", "ort", "-o", out, "--report", report, timeout=300)
    assert rc == 0, stderr
    lowering = json.loads(report.read_text())["ort_lowering"]
    kept = [one["reason"] for one in lowering["kept"] if "FusedAttention" in one["function"]]
    assert kept == ["Q, K and V read the same third of the packed projection"]
    assert [one["written"] for one in lowering["lowered"] if "FusedAttention" in one["function"]] == [
        "com.microsoft::Attention"]
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    pixels = {"pixel_values": np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    for want, got in zip(session(altered, level).run(None, pixels), session(out, level).run(None, pixels)):
        np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])


def test_llama_norms_run_as_ort_norm_kernels(fusionopt, tmp_path):
    """LLaMA's RMSNorms: -O3 fuses each residual Add into the projection before it, so the
    lowering takes it back out into SkipSimplifiedLayerNormalization (the projection's MatMul
    stays, the sum goes on as the kernel's fourth output); the first norm, with no residual, is
    spelled as ORT's SimplifiedLayerNormFusion matches. ORT then runs every norm as one kernel,
    where on the original (transformers' Reciprocal form) it runs each as seven."""
    entry = entry_named("llama_dynamo18_sdpa")
    out, lowering = optimize_for_ort(fusionopt, entry, tmp_path)
    skip = [one for one in lowering["lowered"] if one["written"].endswith("SkipSimplifiedLayerNormalization")]
    assert len(skip) == 4 and all(len(one["absorbed"]) == 1 for one in skip)
    absorbed = {name for one in skip for name in one["absorbed"]}
    assert not absorbed & {one["node"] for one in lowering["kept"]}
    assert [one["written"] for one in lowering["lowered"] if "Normalization" in one["written"] and one not in skip] == [
        "SimplifiedLayerNormalization (standard ops ORT fuses)"]

    def ops_ort_runs(path):
        saved = tmp_path / f"{path.stem}.after_ort.onnx"
        session(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, saved)
        return collections.Counter(node.op_type for node in onnx.load(str(saved)).graph.node)
    after, original = ops_ort_runs(out), ops_ort_runs(entry.path)
    assert after["SkipSimplifiedLayerNormalization"] == 4 and after["SimplifiedLayerNormalization"] == 1
    assert after["Reciprocal"] == 0 and after["ReduceMean"] == 0
    assert original["Reciprocal"] == 5 and original["SimplifiedLayerNormalization"] == 0


def test_fp16_attention_is_written_in_fp16(fusionopt, tmp_path):
    """ORT's Attention takes float16 (the CUDA EP natively; the CPU EP between Casts it inserts,
    still faster than the inlined ops): BERT's fp16 attention and its projection become one
    float16 Attention whose weights are the fp16 initializers; its erf GELU (x / 1.4140625, sqrt(2)
    in float16) becomes BiasGelu."""
    out, lowering = optimize_for_ort(fusionopt, entry_named("bert_dynamo18_sdpa_fp16"), tmp_path)
    written = collections.Counter(one["written"] for one in lowering["lowered"])
    assert written == {"com.microsoft::Attention": 2, "com.microsoft::BiasGelu": 2,
                       "com.microsoft::SkipLayerNormalization": 4}
    model = onnx.load(str(out))
    weights = {tensor.name: tensor.data_type for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Attention":
            assert weights[node.input[1]] == onnx.TensorProto.FLOAT16 and weights[node.input[2]] == onnx.TensorProto.FLOAT16


@pytest.mark.parametrize("name", ["bert_dynamo18_sdpa_fp16", "gpt2_dynamo18_sdpa_fp16"])
def test_fp16_residual_norms_stay_ops_for_the_cpu_ep(fusionopt, tmp_path, name):
    """--target cpu: ORT's CPU EP runs a float16 SkipLayerNormalization several times slower than
    LayerNormalization + Add (docs/ort.md), so no residual norm is written as one; the report
    says why, attention and the GELUs are still written, and ORT equals ORT on the original."""
    entry = entry_named(name)
    out, lowering = optimize_for_ort(fusionopt, entry, tmp_path, "--target", "cpu")
    written = collections.Counter(one["written"] for one in lowering["lowered"])
    assert not any("SkipLayerNormalization" in op for op in written)
    assert written["com.microsoft::Attention"] == 2
    assert any(one["reason"].startswith("CPU EP: float16 Skip") for one in lowering["kept"])
    ops = collections.Counter(node.op_type for node in onnx.load(str(out)).graph.node)
    assert ops["SkipLayerNormalization"] == 0
    feeds = entry.feeds()
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for want, got in zip(session(entry.path, level).run(None, feeds), session(out, level).run(None, feeds)):
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=FP16_TOLERANCE[0],
                                   atol=FP16_TOLERANCE[1])


def test_runtime_must_be_known_and_excludes_emit_cuda(fusionopt, tmp_path):
    model = entry_named("bert_dynamo18_sdpa").path
    rc, _, stderr = fusionopt(model, "-O3", "--runtime", "tensorrt", "-o", tmp_path / "out.onnx")
    assert rc == 2 and "--runtime" in stderr
    rc, _, stderr = fusionopt(model, "-O3", "--runtime", "ort", "--emit-cuda", tmp_path / "cuda", "-o",
                              tmp_path / "out.onnx")
    assert rc == 2 and "--emit-cuda" in stderr
    assert not (tmp_path / "out.onnx").exists()


def test_the_docs_example_optimizes_runs_and_compares(fusionopt_bin, tmp_path):
    """docs/examples/optimize_for_ort.py, as docs/ort.md shows it, on BERT's fixture."""
    import subprocess
    model = entry_named("bert_dynamo18_sdpa").path
    done = subprocess.run([sys.executable, str(lib.REPO_ROOT / "docs" / "examples" / "optimize_for_ort.py"), str(model),
                           str(tmp_path / "bert.ort.onnx"), "--fusionopt", str(fusionopt_bin)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "outputs match; onnxruntime p50: original" in done.stdout
    ops = {node.op_type for node in onnx.load(str(tmp_path / "bert.ort.onnx")).graph.node}
    assert {"Attention", "BiasGelu"} <= ops


def test_passes_that_cost_ort_time_are_left_out(fusionopt, tmp_path):
    """DenseNet's pre-activation batch norms: -O3 lowers them to Mul/Add for its own elementwise
    fusion, which ORT would run as two kernels each; with --runtime ort they stay
    BatchNormalization (ORT's own kernel)."""
    model = entry_named("densenet_dynamo18").path
    portable = tmp_path / "portable.onnx"
    rc, _, stderr = fusionopt(model, "-O3", "-o", portable)
    assert rc == 0, stderr
    out, _ = optimize_for_ort(fusionopt, entry_named("densenet_dynamo18"), tmp_path)

    def batch_norms(path):
        return sum(node.op_type == "BatchNormalization" for node in onnx.load(str(path)).graph.node)

    assert batch_norms(portable) == 0
    assert batch_norms(out) == batch_norms(model) > 0


QUANTIZED = corpus.load(corpus.FIXTURES / "quantized")


def quantized_entry_named(name):
    """A committed quantized fixture (models/real/fixtures/quantized) by its stem."""
    matches = [entry for entry in QUANTIZED if entry.name == name]
    assert matches, f"{name} is missing from models/real/fixtures/quantized"
    return matches[0]


def optimize_portable(fusionopt, entry, tmp_path):
    out, report = tmp_path / f"{entry.name}.portable.onnx", tmp_path / "portable.json"
    rc, _, stderr = fusionopt(entry.path, "-O3", "-o", out, "--report", report, timeout=300)
    assert rc == 0, stderr
    return out, {one["pass"]: one for one in json.loads(report.read_text())["passes"]}


def test_qoperator_ops_stay_ort_kernels(fusionopt, tmp_path):
    """MobileNetV3's QOperator export: -O3 rewrites every QLinearConv (and QGemm, QLinearAdd,
    QLinearMul) into the QDQ units its own quantized fusions take (qoperator-to-qdq); under
    --runtime ort that pass is left out, so each stays the QOperator node ORT runs as one kernel."""
    entry = quantized_entry_named("mobilenet_v3_dynamo18.qoperator")
    qoperator = {("", "QLinearConv"), ("com.microsoft", "QGemm"), ("com.microsoft", "QLinearAdd"),
                 ("com.microsoft", "QLinearMul")}

    def counts(path):
        ops = collections.Counter((node.domain, node.op_type) for node in onnx.load(str(path)).graph.node)
        return {op: ops[op] for op in qoperator}

    original = counts(entry.path)
    assert original[("", "QLinearConv")] > 0, original
    portable, passes = optimize_portable(fusionopt, entry, tmp_path)
    assert counts(portable) == dict.fromkeys(qoperator, 0)
    assert passes["qoperator-to-qdq"]["counters"]["expanded_Conv"] == original[("", "QLinearConv")]
    (tmp_path / "ort").mkdir()
    out, _ = optimize_for_ort(fusionopt, entry, tmp_path / "ort")
    assert counts(out) == original
    report = json.loads((tmp_path / "ort" / "report.json").read_text())
    assert "qoperator-to-qdq" not in [one["pass"] for one in report["passes"]]


def scalar_dequantizations(path):
    """The DequantizeLinear nodes of a scalar (one-element) constant: in the main graph (of an
    initializer) and in the fused functions' bodies (of a Constant)."""
    model = onnx.load(str(path))
    sizes = {tensor.name: int(np.prod(tensor.dims)) for tensor in model.graph.initializer}
    found = [node.output[0] for node in model.graph.node
             if node.op_type == "DequantizeLinear" and sizes.get(node.input[0]) == 1]
    for function in model.functions:
        constants = {node.output[0]: int(np.prod(node.attribute[0].t.dims)) for node in function.node
                     if node.op_type == "Constant" and node.attribute[0].name == "value"}
        found += [f"{function.name}/{node.output[0]}" for node in function.node
                  if node.op_type == "DequantizeLinear" and constants.get(node.input[0]) == 1]
    return found


def test_scalar_constants_stay_dequantized_for_ort(fusionopt, tmp_path):
    """GPT-2's QDQ export dequantizes scalar constants (GELU's 0.5, 0.044715, ...): plain -O3 folds
    them (fold-constants.max-dequantize-elements, default 1), so GELU's program reads only 8-bit
    values; --runtime ort sets it to 0 and keeps each DequantizeLinear of a one-element constant,
    the QDQ form ORT's own fusions match."""
    entry = quantized_entry_named("gpt2_dynamo18_sdpa.qdq")
    original = scalar_dequantizations(entry.path)
    assert len(original) > 0
    portable, _ = optimize_portable(fusionopt, entry, tmp_path)
    assert scalar_dequantizations(portable) == []
    out, _ = optimize_for_ort(fusionopt, entry, tmp_path)
    assert sorted(scalar_dequantizations(out)) == sorted(original)
    # Each keeps a one-element output: its scale and zero point are per tensor.
    graph = onnx.load(str(out)).graph
    sizes = {tensor.name: int(np.prod(tensor.dims)) for tensor in graph.initializer}
    for node in graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] in original:
            assert all(sizes.get(name, 1) == 1 for name in node.input[1:] if name), node.output[0]


def test_a_mask_of_unknown_dims_is_expanded_to_the_scores(fusionopt, tmp_path):
    """TorchScript BERT's extended mask has no known dims: it is expanded to [., ., Sq, Sk] per
    layer from Q's and K's run-time shapes (ORT's attention_bias needs exactly those)."""
    out, _ = optimize_for_ort(fusionopt, entry_named("bert_torchscript17_sdpa"), tmp_path)
    graph = onnx.load(str(out)).graph
    producers = {output: node for node in graph.node for output in node.output}
    attention = [node for node in graph.node if node.op_type == "Attention"]
    assert len(attention) == 2
    for node in attention:
        assert producers[node.input[5]].op_type == "Expand"


def test_convolutions_stay_unmerged_for_ort_unless_asked(fusionopt, tmp_path):
    """--runtime ort sets fuse-horizontal-contractions.convolutions=0 (a merged Conv + Split
    costs ORT's NCHWc layout reorders: YOLOv8n ran 225 ORT nodes against 219); a --pass-option
    given on the command line wins, and then ORT runs more nodes than on the original."""
    entry = entry_named("yolov8n_dynamo18")
    default, _ = optimize_for_ort(fusionopt, entry, tmp_path)
    merged = tmp_path / "merged.onnx"
    rc, _, stderr = fusionopt(entry.path, "-O3", "--runtime", "ort", "-o", merged,
                              "--pass-option", "fuse-horizontal-contractions.convolutions=1", timeout=300)
    assert rc == 0, stderr

    def splits(path):  # in the graph and in the fused functions' bodies
        model = onnx.load(str(path))
        return sum(node.op_type == "Split" for nodes in [model.graph.node, *(f.node for f in model.functions)]
                   for node in nodes)
    assert splits(default) < splits(merged)
    original = nodes_ort_runs(entry.path, tmp_path)
    assert nodes_ort_runs(default, tmp_path) == original < nodes_ort_runs(merged, tmp_path)


def attention_with_head_split_target(path, target_is_input):
    """Q, K and V projected from x and split into heads by Reshape(·, heads_shape), an
    initializer [0, 0, 4, 8]; with `target_is_input` it is also a graph input (IR 8), which
    a feed may replace: [0, 0, 2, 16] splits the same 32 features into 2 heads of 16."""
    rng = np.random.default_rng(0)
    helper, tensor = onnx.helper, onnx.TensorProto
    initializers = [onnx.numpy_helper.from_array((rng.standard_normal((32, 32)) * 0.2).astype(np.float32), "w" + n)
                    for n in "qkv"]
    initializers += [onnx.numpy_helper.from_array(np.array(v, dtype), name) for name, v, dtype in (
        ("heads_shape", [0, 0, 4, 8], np.int64), ("merged_shape", [0, 0, 32], np.int64),
        ("scale", 8 ** -0.5, np.float32))]
    nodes = []
    for n in "qkv":
        nodes += [helper.make_node("MatMul", ["x", "w" + n], [n + "_projected"]),
                  helper.make_node("Reshape", [n + "_projected", "heads_shape"], [n + "_heads"]),
                  helper.make_node("Transpose", [n + "_heads"], [n + "_t"], perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["q_t", "k_t"], ["scores"]),
              helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
              helper.make_node("Softmax", ["scaled"], ["weights"], axis=-1),
              helper.make_node("MatMul", ["weights", "v_t"], ["context"]),
              helper.make_node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["context_t", "merged_shape"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", tensor.FLOAT, ["batch", "sequence", 32])]
    if target_is_input:
        inputs.append(helper.make_tensor_value_info("heads_shape", tensor.INT64, [4]))
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", tensor.FLOAT, ["batch", "sequence", 32])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("target_is_input", [False, True])
def test_an_initializer_a_feed_may_replace_is_not_lowered_as_a_constant(fusionopt, tmp_path, target_is_input):
    """The lowering reads constants under the model's rule (ir/constant_value.h): from IR 4 an
    initializer that is also a graph input is a default a feed may replace. The head count of
    MultiHeadAttention is an attribute, so a head split by such a target stays the portable node,
    and ORT on the output equals ORT on the original for the default and for a fed [0, 0, 2, 16].
    A target that is no graph input is lowered as usual."""
    model = attention_with_head_split_target(tmp_path / "attention.onnx", target_is_input)
    out, report = tmp_path / "attention.ort.onnx", tmp_path / "report.json"
    rc, _, stderr = fusionopt(model, "-O3", "--runtime", "ort", "-o", out, "--report", report)
    assert rc == 0, stderr
    lowering = json.loads(report.read_text())["ort_lowering"]
    written = [one["written"] for one in lowering["lowered"]]
    kept = [one["reason"] for one in lowering["kept"] if "FusedAttention" in one["function"]]
    if target_is_input:
        assert written == [] and kept == ["a Reshape target the group reads is not known ahead of time"]
    else:
        assert written == ["com.microsoft::MultiHeadAttention"] and kept == []
    x = np.random.default_rng(1).standard_normal((2, 5, 32)).astype(np.float32)
    targets = [None, np.array([0, 0, 2, 16], np.int64)] if target_is_input else [None]
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    original, optimized = session(model, level), session(out, level)
    for target in targets:
        feeds = {"x": x} if target is None else {"x": x, "heads_shape": target}
        want, got = original.run(None, feeds)[0], optimized.run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])


@pytest.mark.parametrize("name", ["bert_torchscript17_sdpa", "gpt2_dynamo18_sdpa", "llama_dynamo18_sdpa"])
def test_exports_whose_input_dims_have_no_names_lower_alike(fusionopt, tmp_path, name):
    """The same real export with the names of its inputs' dynamic dims removed (dims with neither
    size nor name): the lowering reads the heads from the attention layout at trial sizes, which
    size unnamed input dims too, so it writes the kernels the named export gets, and ORT on the
    output equals ORT on the original."""
    entry = entry_named(name)
    model = onnx.load(str(entry.path))
    cleared = 0
    for value in model.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dim.ClearField("dim_param")
                cleared += 1
    assert cleared > 0
    unnamed = tmp_path / f"{name}_unnamed.onnx"
    onnx.save(model, str(unnamed))

    class Unnamed:
        path = unnamed
    Unnamed.name = f"{name}_unnamed"
    out, lowering = optimize_for_ort(fusionopt, Unnamed, tmp_path)
    assert not [one for one in lowering["kept"] if one["function"].endswith("FusedAttention")]
    written = collections.Counter(node.op_type for node in onnx.load(str(out)).graph.node
                                  if node.domain == "com.microsoft")
    assert dict(written) == EXPECTED_WRITTEN[name]
    feeds = entry.feeds()
    expected = session(unnamed, ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, feeds)
    actual = session(out, ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, feeds)
    for want, got in zip(expected, actual):
        np.testing.assert_allclose(got, want, rtol=FP32_TOLERANCE[0], atol=FP32_TOLERANCE[1])
