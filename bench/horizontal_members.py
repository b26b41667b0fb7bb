#!/usr/bin/env python3
"""How many contractions one horizontal merge should take: measured on our CPU runtime.

A model holds K projections of one input x, each MatMul by its own constant weight then a bias
Add (Q/K/V-style, or K parallel 1x1 convolutions with the --conv flag). For each cap m
(`--pass-option fuse-horizontal-contractions.max_members=m`) the model is optimized at -O3 and
its median latency is measured, alternating with the unmerged -O2 model on the same inputs;
the figure of merit is the speed-up of each cap over no merge. The default cap is the smallest
one past which a larger cap stops paying.

    .venv/bin/python bench/horizontal_members.py --members 8 --threads 2 --repeat 20
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[1]


def projections(members, rows, width, conv):
    rng = np.random.default_rng(7)
    nodes, inits, outputs = [], [], []
    for i in range(members):
        weight = rng.standard_normal((width, width) if not conv else (width, width, 1, 1)).astype(np.float32) * 0.05
        bias = rng.standard_normal(width).astype(np.float32)
        inits.append(numpy_helper.from_array(weight, f"w{i}"))
        if conv:
            inits.append(numpy_helper.from_array(bias, f"b{i}"))
            nodes.append(helper.make_node("Conv", ["x", f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}"))
            nodes.append(helper.make_node("Relu", [f"c{i}"], [f"y{i}"], name=f"relu{i}"))
        else:
            inits.append(numpy_helper.from_array(bias.reshape(width), f"b{i}"))
            nodes.append(helper.make_node("MatMul", ["x", f"w{i}"], [f"m{i}"], name=f"matmul{i}"))
            nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"y{i}"], name=f"add{i}"))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
    x_shape = [1, width, rows, rows] if conv else [rows, width]
    graph = helper.make_graph(nodes, "projections", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run(*args):
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"`{' '.join(map(str, args))}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


def latency(binary, model, args):
    done = run(binary, "run", model, "--threads", args.threads, "--warmup", args.warmup, "--repeat", args.repeat,
               "--seed", 1, "-v")
    median = float(re.search(r"median=([\d.]+)", done.stdout).group(1))
    kernels = int(re.search(r"(\d+) kernels launched", done.stderr).group(1))
    return median, kernels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=8, help="projections of the shared input")
    parser.add_argument("--rows", type=int, default=128, help="rows of x (or the image side with --conv)")
    parser.add_argument("--width", type=int, default=256, help="input and output features per projection")
    parser.add_argument("--conv", action="store_true", help="parallel 1x1 Conv + Relu instead of MatMul + Add")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--binary", default=str(ROOT / "build" / "fusionopt"))
    args = parser.parse_args()

    kind = "1x1 Conv + Relu" if args.conv else "MatMul + bias Add"
    print(f"{args.members} x {kind}, x {'[1,%d,%d,%d]' % (args.width, args.rows, args.rows) if args.conv else [args.rows, args.width]}, "
          f"threads={args.threads} repeat={args.repeat} (median latency)")
    print("| max_members | kernels | CPU ms | CPU ms unmerged (same run) | speed-up |")
    print("|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        source = folder / "projections.onnx"
        onnx.save(projections(args.members, args.rows, args.width, args.conv), source)
        unmerged = folder / "O2.onnx"
        run(args.binary, source, "-O2", "-o", unmerged)
        for cap in range(2, args.members + 1):
            merged = folder / f"O3_{cap}.onnx"
            run(args.binary, source, "-O3", "-o", merged, "--pass-option",
                f"fuse-horizontal-contractions.max_members={cap}")
            run(args.binary, "verify", source, merged, "-q")
            base, ours = [], []
            for _ in range(2):  # alternate so drift on a busy machine hits both alike
                base.append(latency(args.binary, unmerged, args))
                ours.append(latency(args.binary, merged, args))
            base_ms = min(ms for ms, _ in base)
            ours_ms = min(ms for ms, _ in ours)
            print(f"| {cap} | {ours[0][1]} | {ours_ms:.3f} | {base_ms:.3f} | {base_ms / ours_ms:.2f} |", flush=True)


if __name__ == "__main__":
    main()
