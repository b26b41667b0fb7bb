#!/usr/bin/env python3
"""Contractions one by one: fusionopt's CPU runtime (oneDNN 2.6 underneath) against ONNX
Runtime's MLAS on the GEMM and convolution shapes the real-export corpus runs (issue 15, item 2).

    .venv/bin/python bench/contractions.py --threads 2 --rounds 3 --markdown contractions.md

Each case is a one-node model with constant weights (and bias), so both runtimes may pack the
weights once, as they do in the real models. Both sides get the same input, --warmup untimed
runs and --repeat timed ones; they alternate over --rounds rounds and each cell is the median
of the round medians with the spread. ORT runs at ENABLE_ALL, so a convolution gets the NCHWc
layout ORT would give it inside a model (with the reorders in and out that a lone node needs).
"""
import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from bench_common import write_report, DEFAULT_BINARY, median_latency_ms, ort_session, run_fusionopt, save_inputs

# (name, where the corpus has it, kind, shapes): gemm (m, k, n) with bias; conv (n, c, h, w,
# out channels, kernel, stride, group) with bias.
CASES = [
    ("bert qkv/out 128x768x768", "BERT, ViT, GPT-2 (attention)", "gemm", (128, 768, 768)),
    ("bert fc1 128x768x3072", "BERT, GPT-2, ViT fc1", "gemm", (128, 768, 3072)),
    ("bert fc2 128x3072x768", "BERT, GPT-2, ViT fc2", "gemm", (128, 3072, 768)),
    ("vit 197x768x3072", "ViT-B/16 fc1 (197 tokens)", "gemm", (197, 768, 3072)),
    ("llama 128x512x1376", "LLaMA-style gate/up", "gemm", (128, 512, 1376)),
    ("resnet 3x3 64ch 56x56", "ResNet-50 stage 1", "conv", (1, 64, 56, 56, 64, 3, 1, 1)),
    ("resnet 1x1 256->64 56x56", "ResNet-50 stage 1", "conv", (1, 256, 56, 56, 64, 1, 1, 1)),
    ("resnet 1x1 1024->256 14x14", "ResNet-50 stage 3", "conv", (1, 1024, 14, 14, 256, 1, 1, 1)),
    ("stem 7x7/2 3->64 224x224", "ResNet-50 stem", "conv", (1, 3, 224, 224, 64, 7, 2, 1)),
    ("depthwise 3x3 144ch 56x56", "MobileNetV2, EfficientNet", "conv", (1, 144, 56, 56, 144, 3, 1, 144)),
    ("depthwise 5x5/2 240ch 28x28", "EfficientNet, MobileNetV3", "conv", (1, 240, 28, 28, 240, 5, 2, 240)),
]


def gemm_model(m, k, n, rng):
    weight = numpy_helper.from_array((rng.standard_normal((k, n)) * 0.05).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "B")
    node = helper.make_node("Gemm", ["x", "W", "B"], ["y"])
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [weight, bias])
    return graph, {"x": rng.standard_normal((m, k)).astype(np.float32)}, 2.0 * m * k * n


def conv_model(n, c, h, w, out, kernel, stride, group, rng):
    weight = numpy_helper.from_array(
        (rng.standard_normal((out, c // group, kernel, kernel)) * 0.05).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(out).astype(np.float32), "B")
    pad = kernel // 2
    node = helper.make_node("Conv", ["x", "W", "B"], ["y"], kernel_shape=[kernel, kernel], strides=[stride, stride],
                            pads=[pad] * 4, group=group)
    oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, out, oh, ow])],
                              [weight, bias])
    flops = 2.0 * n * out * oh * ow * (c // group) * kernel * kernel
    return graph, {"x": rng.standard_normal((n, c, h, w)).astype(np.float32)}, flops


def build(kind, shape, folder):
    rng = np.random.default_rng(3)
    graph, feeds, flops = gemm_model(*shape, rng) if kind == "gemm" else conv_model(*shape, rng)
    path = folder / "case.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, feeds, flops


def fusionopt_ms(binary, path, flags, args):
    text = run_fusionopt(binary, "run", path, "--threads", args.threads, "--warmup", args.warmup, "--repeat",
                         args.repeat, *flags).stdout
    for token in text.split():
        if token.startswith("median="):
            return float(token.split("=", 1)[1])
    sys.exit(f"unexpected `fusionopt run` output:\n{text}")


def measure(case, args, folder):
    name, where, kind, shape = case
    path, feeds, flops = build(kind, shape, folder)
    flags = save_inputs(feeds, folder)
    session = ort_session(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, args.threads)
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(fusionopt_ms(args.binary, path, flags, args))
        theirs.append(median_latency_ms(session, feeds, args.warmup, args.repeat))
    row = {"case": name, "where": where, "kind": kind, "shape": list(shape), "gflop": flops / 1e9}
    for side, values in (("fusionopt", ours), ("ort", theirs)):
        median = statistics.median(values)
        row[side] = {"ms": median, "spread_ms": [min(values), max(values)], "gflops": flops / 1e6 / median}
    row["fusionopt_over_ort"] = row["fusionopt"]["ms"] / row["ort"]["ms"]
    return row


def markdown(rows):
    lines = ["| case | in the corpus | fusionopt ms (spread) | GF/s | ORT (MLAS) ms (spread) | GF/s | fusionopt / ORT |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        cells = []
        for side in ("fusionopt", "ort"):
            low, high = row[side]["spread_ms"]
            cells += [f"{row[side]['ms']:.3f} ({low:.3f}–{high:.3f})", f"{row[side]['gflops']:.0f}"]
        lines.append(f"| {row['case']} | {row['where']} | " + " | ".join(cells) + f" | {row['fusionopt_over_ort']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", type=Path, default=DEFAULT_BINARY)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="case-name prefixes")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or any(c[0].startswith(o) for o in args.only)]
    if not cases:
        sys.exit("error: no case matches --only")
    rows = []
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="fusionopt-contractions-") as name:
            rows.append(measure(case, args, Path(name)))
        print(f"{case[0]}: fusionopt/ORT {rows[-1]['fusionopt_over_ort']:.2f}", flush=True)
    table = markdown(rows)
    write_report(table, rows, args)


if __name__ == "__main__":
    main()
