#!/usr/bin/env python3
"""Writes the project's small representative ONNX models (and, with --bench, benchmark-size ones).

    python models/generate.py            # regenerates the committed models in models/
    python models/generate.py --bench    # benchmark sizes into models/bench/ (git-ignored)
    python models/generate.py --check    # also validates every written file (checker + onnxruntime)

Weights come from numpy's default_rng with a fixed seed per model, and serialisation is
deterministic, so the same onnx/numpy versions always produce byte-identical files.
"""

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from builders import (FLOAT, FLOAT32_MIN, INT64, GraphBuilder, batch_norm, conv, dim_of, gelu_erf,
                      gelu_tanh, layer_norm, layer_norm_decomposed, linear, linear_2d, merge_heads,
                      self_attention, split_heads, unsqueeze0)

MODELS_DIR = Path(__file__).resolve().parent


# ---- resnet_style: torchvision ResNet naming, BasicBlocks ----

def resnet_basic_block(b, x, in_channels, out_channels, stride):
    out = conv(b, x, in_channels, out_channels, 3, stride, module="conv1")
    out = batch_norm(b, out, out_channels, "bn1")
    with b.scope("relu"):
        out = b.op("Relu", out)
    out = conv(b, out, out_channels, out_channels, 3, 1, module="conv2")
    out = batch_norm(b, out, out_channels, "bn2")
    shortcut = x
    if stride != 1 or in_channels != out_channels:
        with b.scope("downsample"):
            shortcut = conv(b, x, in_channels, out_channels, 1, stride, module="downsample.0")
            shortcut = batch_norm(b, shortcut, out_channels, "downsample.1")
    out = b.op("Add", out, shortcut)
    # torchvision reuses one ReLU module, so the exporter names its second call "relu_1".
    with b.scope("relu_1"):
        return b.op("Relu", out)


def resnet_style(b, image, widths, blocks_per_stage, stem_kernel, stem_stride, classes):
    x = b.add_input("input", FLOAT, ["N", 3, image, image])
    x = conv(b, x, 3, widths[0], stem_kernel, stem_stride, module="conv1")
    x = batch_norm(b, x, widths[0], "bn1")
    with b.scope("relu"):
        x = b.op("Relu", x)
    with b.scope("maxpool"):
        x = b.op("MaxPool", x, ceil_mode=0, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    channels = widths[0]
    for stage, (width, blocks) in enumerate(zip(widths, blocks_per_stage), start=1):
        for index in range(blocks):
            stride = 2 if stage > 1 and index == 0 else 1
            with b.scope(f"layer{stage}", f"layer{stage}.{index}"):
                x = resnet_basic_block(b, x, channels, width, stride)
            channels = width
    with b.scope("avgpool"):
        x = b.op("GlobalAveragePool", x)
    x = b.op("Flatten", x, axis=1)
    linear_2d(b, x, channels, classes, "fc", output_names=["logits"])
    b.add_output("logits", FLOAT, ["N", classes])


# ---- mobilenet_style: torchvision MobileNetV2 naming, V3 touches (HardSwish, squeeze-excite) ----

# (expand ratio, output channels, stride, activation, squeeze-excite); input channels follow.
MOBILENET_BLOCKS = (
    (1, 16, 1, "relu6", False),
    (4, 24, 2, "relu6", False),
    (4, 24, 1, "hardswish", True),
    (4, 40, 2, "hardswish", False),
    (4, 40, 1, "hardswish", True),
)


def activation(b, x, kind):
    if kind == "relu6":  # ReLU6 exports as Clip with min/max inputs since opset 11.
        return b.op("Clip", x, b.constant(0.0), b.constant(6.0))
    return b.op("HardSwish", x)


def conv_bn_act(b, x, in_channels, out_channels, kernel, stride, act, module, groups=1):
    """torchvision's Conv2dNormActivation: a Sequential of Conv (.0), BN (.1), activation (.2)."""
    with b.scope(module):
        x = conv(b, x, in_channels, out_channels, kernel, stride, groups, module=f"{module}.0")
        x = batch_norm(b, x, out_channels, f"{module}.1")
        if act:
            with b.scope(f"{module}.2"):
                x = activation(b, x, act)
    return x


def squeeze_excite(b, x, channels, module):
    squeezed = max(8, channels // 4)
    with b.scope(module):
        with b.scope("avgpool"):
            scale = b.op("GlobalAveragePool", x)
        scale = conv(b, scale, channels, squeezed, 1, bias=True, module="fc1")
        with b.scope("activation"):
            scale = b.op("Relu", scale)
        scale = conv(b, scale, squeezed, channels, 1, bias=True, module="fc2")
        with b.scope("scale_activation"):
            scale = b.op("HardSigmoid", scale, alpha=1.0 / 6.0)
        return b.op("Mul", scale, x)


def inverted_residual(b, x, in_channels, expand_ratio, out_channels, stride, act, se):
    hidden = in_channels * expand_ratio
    modules = (f"conv.{i}" for i in range(5))
    with b.scope("conv"):
        out = x
        if expand_ratio != 1:
            out = conv_bn_act(b, out, in_channels, hidden, 1, 1, act, next(modules))
        out = conv_bn_act(b, out, hidden, hidden, 3, stride, act, next(modules), groups=hidden)
        if se:
            out = squeeze_excite(b, out, hidden, next(modules))
        out = conv(b, out, hidden, out_channels, 1, module=next(modules))
        out = batch_norm(b, out, out_channels, next(modules))
    if stride == 1 and in_channels == out_channels:
        out = b.op("Add", x, out)
    return out


def mobilenet_style(b, image, width_multiplier, last_channels, classes):
    x = b.add_input("input", FLOAT, ["N", 3, image, image])
    channels = 16 * width_multiplier
    with b.scope("features"):
        x = conv_bn_act(b, x, 3, channels, 3, 2, "relu6", "features.0")
        for index, (expand, out, stride, act, se) in enumerate(MOBILENET_BLOCKS, start=1):
            with b.scope(f"features.{index}"):
                x = inverted_residual(b, x, channels, expand, out * width_multiplier, stride, act, se)
            channels = out * width_multiplier
        x = conv_bn_act(b, x, channels, last_channels, 1, 1, "hardswish",
                        f"features.{len(MOBILENET_BLOCKS) + 1}")
    x = b.op("GlobalAveragePool", x)
    x = b.op("Flatten", x, axis=1)
    linear_2d(b, x, last_channels, classes, "classifier", output_names=["logits"])
    b.add_output("logits", FLOAT, ["N", classes])


# ---- bert_style: HuggingFace BertModel, LayerNorm decomposed as before opset 17 ----

def extended_attention_mask(b, attention_mask):
    """(1 - mask[:, None, None, :].float()) * finfo.min: 0 where attended, very negative elsewhere."""
    mask = b.op("Unsqueeze", attention_mask, b.constant([1], np.int64))
    mask = b.op("Unsqueeze", mask, b.constant([2], np.int64))
    mask = b.op("Cast", mask, to=FLOAT)
    inverted = b.op("Sub", b.constant(1.0), mask)
    return b.op("Mul", inverted, b.constant(FLOAT32_MIN))


def slice_to_length(b, buffer, length):
    """buffer[:, :length], the exporter's Slice with starts/ends/axes/steps inputs."""
    return b.op("Slice", buffer, b.constant([0], np.int64), length, b.constant([1], np.int64),
                b.constant([1], np.int64))


def bert_embeddings(b, input_ids, vocab, max_positions, hidden):
    sequence = unsqueeze0(b, dim_of(b, input_ids, 1))
    token_type_buffer = b.parameter("token_type_ids", np.zeros((1, max_positions), np.int64))
    token_types = b.op("Expand", slice_to_length(b, token_type_buffer, sequence),
                       b.op("Shape", input_ids))
    with b.scope("word_embeddings"):
        words = b.op("Gather", b.parameter("weight", b.normal((vocab, hidden), 0.02)), input_ids)
    with b.scope("token_type_embeddings"):
        types = b.op("Gather", b.parameter("weight", b.normal((2, hidden), 0.02)), token_types)
    x = b.op("Add", words, types)
    position_buffer = b.parameter("position_ids", np.arange(max_positions, dtype=np.int64)[None])
    positions = slice_to_length(b, position_buffer, sequence)
    with b.scope("position_embeddings"):
        x = b.op("Add", x, b.op("Gather", b.parameter("weight", b.normal((max_positions, hidden), 0.02)),
                                 positions))
    return layer_norm_decomposed(b, x, hidden, "LayerNorm", 1e-12)


def bert_layer(b, x, mask, hidden, heads, ffn):
    with b.scope("attention", "self"):
        context = self_attention(b, x, hidden, heads, mask)
    with b.scope("attention", "output"):
        x = layer_norm_decomposed(b, b.op("Add", linear(b, context, hidden, hidden, "dense"), x),
                                  hidden, "LayerNorm", 1e-12)
    with b.scope("intermediate"):
        h = linear(b, x, hidden, ffn, "dense")
        with b.scope("intermediate_act_fn"):
            h = gelu_erf(b, h)
    with b.scope("output"):
        return layer_norm_decomposed(b, b.op("Add", linear(b, h, ffn, hidden, "dense"), x),
                                     hidden, "LayerNorm", 1e-12)


def bert_style(b, vocab, max_positions, hidden, heads, ffn, layers):
    input_ids = b.add_input("input_ids", INT64, ["batch", "sequence"])
    attention_mask = b.add_input("attention_mask", INT64, ["batch", "sequence"])
    mask = extended_attention_mask(b, attention_mask)
    with b.scope("embeddings"):
        x = bert_embeddings(b, input_ids, vocab, max_positions, hidden)
    for index in range(layers):
        with b.scope("encoder", f"layer.{index}"):
            x = bert_layer(b, x, mask, hidden, heads, ffn)
    x = b.rename_value(x, "last_hidden_state")
    b.add_output(x, FLOAT, ["batch", "sequence", hidden])
    with b.scope("pooler"):
        first_token = b.op("Gather", x, b.constant(0, np.int64), axis=1)
        pooled = linear_2d(b, first_token, hidden, hidden, "dense")
        with b.scope("activation"):
            b.op("Tanh", pooled, output_names=["pooler_output"])
    b.add_output("pooler_output", FLOAT, ["batch", hidden])


# ---- gpt2_style: HuggingFace GPT2Model with one block, Conv1D weights laid out [in, out] ----

def gpt2_conv1d(b, x, in_features, out_features, module):
    with b.scope(module):
        weight = b.parameter("weight", b.normal((in_features, out_features), in_features ** -0.5))
        bias = b.parameter("bias", b.normal((out_features,), 0.02))
        return b.op("Add", b.op("MatMul", x, weight), bias)


def gpt2_attention(b, x, hidden, heads, max_positions):
    head_dim = hidden // heads
    qkv = gpt2_conv1d(b, x, hidden, 3 * hidden, "c_attn")
    query, key, value = b.op("Split", qkv, b.constant([hidden] * 3, np.int64), axis=2, num_outputs=3)
    query = split_heads(b, query, heads, head_dim)
    key_t = split_heads(b, key, heads, head_dim, perm=(0, 2, 3, 1))
    value = split_heads(b, value, heads, head_dim)
    scores = b.op("Div", b.op("MatMul", query, key_t), b.constant(float(np.sqrt(head_dim))))
    # self.bias[:, :, key_length - query_length : key_length, :key_length]
    query_length = dim_of(b, query, 2)
    key_length = dim_of(b, key_t, 3)
    start = unsqueeze0(b, b.op("Sub", key_length, query_length))
    end = unsqueeze0(b, key_length)
    causal = b.parameter("bias", np.tril(np.ones((max_positions, max_positions), bool))[None, None])
    rows = b.op("Slice", causal, start, end, b.constant([2], np.int64), b.constant([1], np.int64))
    mask = b.op("Slice", rows, b.constant([0], np.int64), end, b.constant([3], np.int64),
                b.constant([1], np.int64))
    scores = b.op("Where", mask, scores, b.constant(FLOAT32_MIN))
    probs = b.op("Softmax", scores, axis=-1)
    context = merge_heads(b, b.op("MatMul", probs, value), hidden)
    return gpt2_conv1d(b, context, hidden, hidden, "c_proj")


def gpt2_style(b, hidden, heads, ffn, max_positions):
    x = b.add_input("inputs_embeds", FLOAT, ["batch", "sequence", hidden])
    with b.scope("h.0"):
        h = layer_norm(b, x, hidden, "ln_1", 1e-5)
        with b.scope("attn"):
            h = gpt2_attention(b, h, hidden, heads, max_positions)
        x = b.op("Add", h, x)
        h = layer_norm(b, x, hidden, "ln_2", 1e-5)
        with b.scope("mlp"):
            h = gpt2_conv1d(b, h, hidden, ffn, "c_fc")
            with b.scope("act"):
                h = gelu_tanh(b, h)
            h = gpt2_conv1d(b, h, ffn, hidden, "c_proj")
        x = b.op("Add", x, h)
    x = b.rename_value(layer_norm(b, x, hidden, "ln_f", 1e-5), "last_hidden_state")
    b.add_output(x, FLOAT, ["batch", "sequence", hidden])


# ---- vit_style: HuggingFace ViTForImageClassification with one encoder layer ----

def vit_embeddings(b, pixels, image, patch, hidden):
    with b.scope("patch_embeddings"):
        patches = conv(b, pixels, 3, hidden, patch, stride=patch, bias=True, module="projection",
                       padding=0)
        # .flatten(2).transpose(1, 2): [batch, hidden, h, w] -> [batch, h*w, hidden]
        leading = b.op("Slice", b.op("Shape", patches), b.constant([0], np.int64),
                       b.constant([2], np.int64), b.constant([0], np.int64))
        flat = b.op("Reshape", patches, b.op("Concat", leading, b.constant([-1], np.int64), axis=0))
        tokens = b.op("Transpose", flat, perm=[0, 2, 1])
    cls_token = b.parameter("cls_token", b.normal((1, 1, hidden), 0.02))
    batch = unsqueeze0(b, dim_of(b, pixels, 0))
    cls_shape = b.op("Concat", batch, b.constant([1], np.int64), b.constant([1], np.int64), axis=0)
    x = b.op("Concat", b.op("Expand", cls_token, cls_shape), tokens, axis=1)
    token_count = (image // patch) ** 2 + 1
    return b.op("Add", x, b.parameter("position_embeddings", b.normal((1, token_count, hidden), 0.02)))


def vit_layer(b, x, hidden, heads, mlp):
    h = layer_norm(b, x, hidden, "layernorm_before", 1e-12)
    with b.scope("attention", "attention"):
        h = self_attention(b, h, hidden, heads)
    with b.scope("attention", "output"):
        h = linear(b, h, hidden, hidden, "dense")
    x = b.op("Add", h, x)
    h = layer_norm(b, x, hidden, "layernorm_after", 1e-12)
    with b.scope("intermediate"):
        h = linear(b, h, hidden, mlp, "dense")
        with b.scope("intermediate_act_fn"):
            h = gelu_erf(b, h)
    with b.scope("output"):
        return b.op("Add", linear(b, h, mlp, hidden, "dense"), x)


def vit_style(b, image, patch, hidden, heads, mlp, classes):
    pixels = b.add_input("pixel_values", FLOAT, ["batch", 3, image, image])
    with b.scope("vit"):
        with b.scope("embeddings"):
            x = vit_embeddings(b, pixels, image, patch, hidden)
        with b.scope("encoder", "layer.0"):
            x = vit_layer(b, x, hidden, heads, mlp)
        x = layer_norm(b, x, hidden, "layernorm", 1e-12)
    class_token = b.op("Gather", x, b.constant(0, np.int64), axis=1)
    linear_2d(b, class_token, hidden, classes, "classifier", output_names=["logits"])
    b.add_output("logits", FLOAT, ["batch", classes])


# ---- registry ----

@dataclass(frozen=True)
class ModelSpec:
    build: Callable[..., None]
    seed: int
    small: dict
    bench: dict
    doc: str
    metadata: dict = field(default_factory=dict)


MODELS = {
    "resnet_style": ModelSpec(
        resnet_style, seed=101,
        small=dict(image=32, widths=(16, 32, 64), blocks_per_stage=(1, 1, 1), stem_kernel=3,
                   stem_stride=1, classes=10),
        bench=dict(image=224, widths=(64, 128, 256), blocks_per_stage=(2, 2, 2), stem_kernel=7,
                   stem_stride=2, classes=1000),
        doc="ResNet-style CNN: Conv/BatchNormalization/Relu stem, MaxPool, residual basic blocks "
            "with identity and projection shortcuts, GlobalAveragePool, Flatten, Gemm.",
        metadata={"model_family": "resnet", "generator": "models/generate.py"}),
    "mobilenet_style": ModelSpec(
        mobilenet_style, seed=102,
        small=dict(image=32, width_multiplier=1, last_channels=256, classes=100),
        bench=dict(image=224, width_multiplier=2, last_channels=1280, classes=1000),
        doc="MobileNetV2/V3-style CNN: inverted residual blocks (1x1 expand, depthwise 3x3, 1x1 "
            "project), Clip(0, 6) and HardSwish activations, squeeze-excite, GlobalAveragePool, Gemm."),
    "bert_style": ModelSpec(
        bert_style, seed=103,
        small=dict(vocab=1000, max_positions=64, hidden=64, heads=4, ffn=256, layers=2),
        bench=dict(vocab=30522, max_positions=512, hidden=768, heads=12, ffn=3072, layers=1),
        doc="BERT encoder as torch.onnx.export emits it without LayerNormalization: decomposed "
            "LayerNorm, erf GELU, runtime head-split shapes, additive attention mask."),
    "gpt2_style": ModelSpec(
        gpt2_style, seed=104,
        small=dict(hidden=128, heads=4, ffn=512, max_positions=64),
        bench=dict(hidden=768, heads=12, ffn=3072, max_positions=1024),
        doc="GPT-2 block: LayerNormalization, fused QKV MatMul+Add with Split, causal mask by Where "
            "on a sliced lower-triangular constant, tanh GELU, residual adds, final LayerNorm."),
    "vit_style": ModelSpec(
        vit_style, seed=105,
        small=dict(image=32, patch=8, hidden=96, heads=4, mlp=384, classes=10),
        bench=dict(image=224, patch=16, hidden=768, heads=12, mlp=3072, classes=1000),
        doc="ViT: patch-embedding Conv, tokens by Reshape/Transpose, class token, position "
            "embedding, one pre-norm encoder layer with erf GELU, class-token Gemm head."),
}


def build_model(name, bench):
    spec = MODELS[name]
    builder = GraphBuilder(spec.seed)
    spec.build(builder, **(spec.bench if bench else spec.small))
    return builder.build(name, spec.doc, spec.metadata)


def serialize(model):
    return model.SerializeToString(deterministic=True)


# ---- --check: validity, runnability, determinism ----

CHECK_DIMS = {"N": 2, "batch": 2, "sequence": 16}


def concrete_dims(value_info):
    return [dim.dim_value if dim.HasField("dim_value") else CHECK_DIMS[dim.dim_param]
            for dim in value_info.type.tensor_type.shape.dim]


def make_feed(value_info, rng):
    dims = concrete_dims(value_info)
    if value_info.name == "attention_mask":
        mask = np.ones(dims, np.int64)
        mask[1, -4:] = 0  # the second sequence is padded, so masking changes the result
        return mask
    if value_info.type.tensor_type.elem_type == INT64:
        return rng.integers(0, 100, size=dims, dtype=np.int64)
    return rng.standard_normal(dims).astype(np.float32)


def check_model_file(path, expected_bytes):
    """Returns a list of problems with the model at path (empty when it is fine)."""
    import onnxruntime as ort

    problems = []
    if path.read_bytes() != expected_bytes:
        problems.append("rebuilding the model in this process gave different bytes")
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    names = [node.name for node in model.graph.node]
    if "" in names or len(set(names)) != len(names):
        problems.append("node names are missing or not unique")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {info.name: make_feed(info, rng) for info in model.graph.input}
    for info, result in zip(model.graph.output, session.run(None, feeds)):
        if list(result.shape) != concrete_dims(info):
            problems.append(f"output {info.name} has shape {list(result.shape)}, "
                            f"expected {concrete_dims(info)}")
        if not np.all(np.isfinite(result)):
            problems.append(f"output {info.name} has non-finite values")
        if float(np.std(result)) == 0.0:
            problems.append(f"output {info.name} is constant")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", action="store_true", help="write benchmark-size models")
    parser.add_argument("--out", type=Path, help="output folder (default models/ or models/bench/)")
    parser.add_argument("--check", action="store_true",
                        help="validate each model: onnx checker (full), onnxruntime run, determinism")
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS), help="write only these models")
    args = parser.parse_args(argv)

    out_dir = args.out or (MODELS_DIR / "bench" if args.bench else MODELS_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = False
    for name in args.only or MODELS:
        path = out_dir / f"{name}.onnx"
        path.write_bytes(serialize(build_model(name, args.bench)))
        print(f"wrote {path} ({path.stat().st_size} bytes)")
        if args.check:
            problems = check_model_file(path, serialize(build_model(name, args.bench)))
            for problem in problems:
                print(f"  FAIL {name}: {problem}")
            failed = failed or bool(problems)
            if not problems:
                print("  ok: checker (full_check), onnxruntime CPU run, deterministic rebuild")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
