#!/usr/bin/env python3
"""How ONNX Runtime runs one self-attention block in each form `--runtime ort` can write it,
across the shapes of the real corpus: what the per-node choice of `--runtime ort`
(src/passes/conversion/ort/kernel_choice.h) is decided from.

The block is x[B,S,Dm] → QKV projection (W[Dm,3Dm], b) → softmax(Q·Kᵀ·scale)·V over H heads →
[B,S,Dm], written three ways:
  attention  com.microsoft::Attention(x, W, b): projection and attention in one kernel
  mha        MatMul + Add + Split, then com.microsoft::MultiHeadAttention(q, k, v)
  ops        MatMul + Add + Split, the head split, MatMul, Mul, Softmax, MatMul, the merge
             (what ORT runs when it inlines an ai.fusionopt function)
Each form runs under ORT ENABLE_ALL on the CPU EP with the same threads and feeds; the forms
alternate in rounds and each round's median is kept; outputs are checked against `ops`.

    .venv/bin/python bench/ort_attention_forms.py --rounds 5 [--shapes 2x50x768x12 1x128x768x12 ...]
"""
import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import median_latency_ms, ort_session  # noqa: E402

import onnxruntime as ort  # noqa: E402

FORMS = ("attention", "mha", "ops")
# The corpus's attention shapes (B x S x Dm x H): CLIP-B/32 (50 tokens), Swin's 49-token windows
# (B counts windows), ViT-B/16 and T5 / BERT at 128 tokens, CLIP at 257, Whisper's 1500 frames.
DEFAULT_SHAPES = ("2x50x768x12", "128x49x96x3", "2x128x768x12", "2x197x768x12", "2x257x768x12",
                  "1x512x768x12", "1x1500x384x6")


def parse_shape(text):
    batch, sequence, width, heads = (int(part) for part in text.split("x"))
    if width % heads:
        raise argparse.ArgumentTypeError(f"{text}: the width is not a multiple of the heads")
    return batch, sequence, width, heads


def block(form, batch, sequence, width, heads):
    head = width // heads
    scale = 1.0 / np.sqrt(head)
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal((width, 3 * width)) * 0.05).astype(np.float32), "W"),
               numpy_helper.from_array((rng.standard_normal(3 * width) * 0.05).astype(np.float32), "b")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, sequence, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, sequence, width])
    if form == "attention":
        nodes = [helper.make_node("Attention", ["x", "W", "b"], ["y"], domain="com.microsoft",
                                  num_heads=heads, scale=scale)]
    else:
        weights.append(numpy_helper.from_array(np.array([width] * 3, np.int64), "sizes"))
        nodes = [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "b"], ["qkv"]),
                 helper.make_node("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=-1)]
        if form == "mha":
            nodes.append(helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft",
                                          num_heads=heads, scale=scale))
        else:
            weights += [numpy_helper.from_array(np.array([batch, sequence, heads, head], np.int64), "heads"),
                        numpy_helper.from_array(np.array([batch, sequence, width], np.int64), "merged"),
                        numpy_helper.from_array(np.array(scale, np.float32), "scale")]
            for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
                nodes += [helper.make_node("Reshape", [name, "heads"], [f"{name}4"]),
                          helper.make_node("Transpose", [f"{name}4"], [f"{name}h"], perm=perm)]
            nodes += [helper.make_node("MatMul", ["qh", "kh"], ["s"]), helper.make_node("Mul", ["s", "scale"], ["ss"]),
                      helper.make_node("Softmax", ["ss"], ["a"], axis=-1), helper.make_node("MatMul", ["a", "vh"], ["c"]),
                      helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]),
                      helper.make_node("Reshape", ["ct", "merged"], ["y"])]
    graph = helper.make_graph(nodes, form, [x], [y], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    return model


def measure(shape, args, work):
    batch, sequence, width, heads = shape
    sessions = {}
    for form in FORMS:
        path = work / f"{form}.onnx"
        onnx.save(block(form, batch, sequence, width, heads), str(path))
        sessions[form] = ort_session(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, args.threads)
    feeds = {"x": np.random.default_rng(1).standard_normal((batch, sequence, width)).astype(np.float32)}
    reference = sessions["ops"].run(None, feeds)[0]
    for form in FORMS:
        np.testing.assert_allclose(sessions[form].run(None, feeds)[0], reference, rtol=1e-3, atol=1e-4,
                                   err_msg=f"{form} at {shape}")
    rounds = {form: [] for form in FORMS}
    for round_index in range(args.rounds):
        order = FORMS if round_index % 2 == 0 else tuple(reversed(FORMS))
        for form in order:
            rounds[form].append(median_latency_ms(sessions[form], feeds, args.warmup, args.repeat))
    return {form: (statistics.median(times), min(times), max(times)) for form, times in rounds.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", type=parse_shape, default=[parse_shape(s) for s in DEFAULT_SHAPES],
                        help="B x S x Dm x H per block (default: the corpus's)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, CPU EP, {args.threads} threads, {args.rounds} alternated rounds")
    print("| B×S×Dm×H | " + " | ".join(f"{form} ms" for form in FORMS) + " | attention / mha | mha / ops |")
    print("|---|" + "---:|" * (len(FORMS) + 2))
    with tempfile.TemporaryDirectory() as folder:
        for shape in args.shapes:
            result = measure(shape, args, Path(folder))
            cells = [f"{m:.3g} ({lo:.3g}–{hi:.3g})" for m, lo, hi in (result[form] for form in FORMS)]
            ratio = result["attention"][0] / result["mha"][0]
            mha_over_ops = result["mha"][0] / result["ops"][0]
            print(f"| {'×'.join(map(str, shape))} | " + " | ".join(cells) + f" | {ratio:.2f} | {mha_over_ops:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
