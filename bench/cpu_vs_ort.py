#!/usr/bin/env python3
"""CPU runtime vs onnxruntime (graph optimizations disabled), measured in one run.

For each benchmark model: the same inputs, the same thread count, warm-up runs, then the
median of --repeat timed runs on each side; the ratio ours/ORT is the figure of merit
(issue 3's target: <= 1.5). Also an elementwise bandwidth check: y = x + z over 64 MB
float32 tensors against a plain 64 MB copy timed in the same script (target: >= 50% of the
copy's bandwidth). Then broadcast Adds (row, column, channel) against onnxruntime.

    .venv/bin/python bench/cpu_vs_ort.py --threads 2 --repeat 20
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from bench_common import BENCH_MODELS, ROOT, ensure_bench_models, make_inputs, median_latency_ms, ort_session


BROADCAST_CASES = [
    ((128, 768), (128, 768)),        # same shape
    ((128, 768), (768,)),            # row broadcast (bias, LayerNorm gamma)
    ((1, 128, 768), (1, 128, 1)),    # column broadcast (LayerNorm mean)
    ((1, 64, 56, 56), (1, 64, 1, 1)),  # channel broadcast (BatchNorm, SE scale)
    ((1, 512, 7, 7), (1, 512, 1, 1)),  # channel broadcast, short rows
]


def time_ort(path, feeds, threads, warmup, repeat):
    """onnxruntime with graph optimizations disabled: the plain-runtime baseline of issue 3."""
    session = ort_session(path, ort.GraphOptimizationLevel.ORT_DISABLE_ALL, threads)
    return median_latency_ms(session, feeds, warmup, repeat)


def time_fusionopt(binary, path, feeds, threads, warmup, repeat, folder):
    args = [binary, "run", str(path), "--threads", str(threads), "--warmup", str(warmup),
            "--repeat", str(repeat), "-q"]
    for name, array in feeds.items():
        file = pathlib.Path(folder) / f"{abs(hash(name))}.pb"
        file.write_bytes(numpy_helper.from_array(array, name).SerializeToString())
        args += ["--input", f"{name}={file}"]
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"fusionopt run failed on {path}: {result.stderr}")
    match = re.search(r"latency_ms runs=\d+ min=([\d.]+) median=([\d.]+)", result.stdout)
    return float(match.group(2))


def elementwise_model(path, x_shape, z_shape=None):
    z_shape = z_shape or x_shape
    y_shape = list(np.broadcast_shapes(tuple(x_shape), tuple(z_shape)))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, list(z_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)
    graph = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"])], "add", [x, z], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # the newest onnx writes IR versions fusionopt does not load yet
    onnx.save(model, str(path))


def copy_bandwidth(elements, repeat):
    source = np.ones(elements, np.float32)
    target = np.empty_like(source)
    np.copyto(target, source)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        np.copyto(target, source)
        times.append(time.perf_counter() - start)
    return 2 * source.nbytes / float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--sequence", type=int, default=128)
    parser.add_argument("--models", nargs="*", default=["resnet_style", "bert_style"])
    parser.add_argument("--binary", default=str(ROOT / "build" / "fusionopt"))
    args = parser.parse_args()

    ensure_bench_models(args.models)
    print(f"threads={args.threads} warmup={args.warmup} repeat={args.repeat} (median latency)")
    print("| model | onnxruntime ORT_DISABLE_ALL (ms) | fusionopt CPU runtime (ms) | ours / ORT |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            path = BENCH_MODELS / f"{name}.onnx"
            feeds = make_inputs(path, 0, args.sequence)
            ort_ms = time_ort(path, feeds, args.threads, args.warmup, args.repeat)
            our_ms = time_fusionopt(args.binary, path, feeds, args.threads, args.warmup, args.repeat, folder)
            print(f"| {name} | {ort_ms:.2f} | {our_ms:.2f} | {our_ms / ort_ms:.2f} |")

        elements = 16 * 1024 * 1024  # 64 MB of float32 per tensor
        path = pathlib.Path(folder) / "add.onnx"
        elementwise_model(path, [elements])
        feeds = {"x": np.ones(elements, np.float32), "z": np.ones(elements, np.float32)}
        copy = copy_bandwidth(elements, args.repeat)
        our_ms = time_fusionopt(args.binary, path, feeds, args.threads, args.warmup, args.repeat, folder)
        ort_ms = time_ort(path, feeds, args.threads, args.warmup, args.repeat)
        ours = 3 * elements * 4 / (our_ms / 1e3)
        theirs = 3 * elements * 4 / (ort_ms / 1e3)
        print()
        print("| 64 MB elementwise Add | GB/s | share of plain-copy bandwidth |")
        print("|---|---:|---:|")
        print(f"| plain copy (numpy copyto, 2 x 64 MB moved) | {copy / 1e9:.2f} | 1.00 |")
        print(f"| fusionopt Add (3 x 64 MB moved) | {ours / 1e9:.2f} | {ours / copy:.2f} |")
        print(f"| onnxruntime Add | {theirs / 1e9:.2f} | {theirs / copy:.2f} |")

        # Broadcast adds, the shapes fused transformer and CNN bodies meet: row, column and
        # channel broadcasts against the same-shape case, both runtimes on the same inputs.
        print()
        print("| Add x + z | fusionopt (ms) | onnxruntime (ms) | ours / ORT |")
        print("|---|---:|---:|---:|")
        rng = np.random.default_rng(0)
        for x_shape, z_shape in BROADCAST_CASES:
            path = pathlib.Path(folder) / "broadcast.onnx"
            elementwise_model(path, x_shape, z_shape)
            feeds = {"x": rng.standard_normal(x_shape).astype(np.float32),
                     "z": rng.standard_normal(z_shape).astype(np.float32)}
            ours_ms = time_fusionopt(args.binary, path, feeds, args.threads, args.warmup, args.repeat * 10, folder)
            ort_ms = time_ort(path, feeds, args.threads, args.warmup, args.repeat * 10)
            label = f"{list(x_shape)} + {list(z_shape)}"
            print(f"| {label} | {ours_ms:.4f} | {ort_ms:.4f} | {ours_ms / ort_ms:.2f} |")


if __name__ == "__main__":
    main()
