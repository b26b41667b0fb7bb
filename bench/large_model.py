#!/usr/bin/env python3
"""Optimizes a generated >2 GB transformer stack at -O3 and gates its peak RSS at 1.5x its size.

    .venv/bin/python bench/large_model.py [--scale 1.0] [--work /tmp/fusionopt-large] [--keep]

Issue 8's target: a model over 2 GB (external data) optimizes at -O3 with peak RSS at most
1.5x its size and writes valid external data. The generator writes the weights one tensor at
a time into `weights.bin` (each on a 4096-byte boundary), so it stays small itself. The graph
is a pre-LayerNorm transformer encoder stack whose parts give every -O3 pass real work:

- decomposed LayerNorm, Q/K/V MatMul + bias (horizontal contraction fusion concatenates the
  three weights), attention with a 1/sqrt(head_dim) scale computed by a Constant subgraph
  (folded at -O1), an output projection whose weight is stored transposed behind a
  Transpose node (folded at -O1 into a new initializer), residual Adds, an erf GELU MLP;
- every layer's LayerNorm gamma/beta (ones/zeros) and a final head weight that repeats
  layer 0's query weight byte for byte, so share-duplicate-initializers hashes and compares
  the big same-shaped weights.

Then it runs `fusionopt MODEL -O3 -o OUT --external-data --report R` and takes the child's
peak RSS from wait4 (ru_maxrss counts touched pages of the mapped weights as well as the
heap), checks the result (onnx.checker on the path, external data inside the output folder,
`fusionopt verify` original vs optimized), prints a Markdown table and exits 1 when peak RSS
exceeds --max-ratio times the model's size. --scale 1.0 is ~2.3 GB; 0.01 is ~23 MB.
"""
import argparse
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from gen_large_model import external_tensor, hashed_uniform  # noqa: E402  (a sibling script, not a package)

MODEL_FILE = "model.onnx"
WEIGHTS_FILE = "weights.bin"
ALIGNMENT = 4096
HEAD_DIM = 64
LAYERS = 12
FULL_SCALE_BYTES = 2.3e9
SEQUENCE = 8
# Weight floats per layer in units of hidden^2: Q, K, V, O (4) and the 4x MLP (8).
WEIGHT_SQUARES_PER_LAYER = 12


def hidden_for(scale):
    """The width (a multiple of HEAD_DIM) whose LAYERS-layer stack is closest to scale x 2.3 GB."""
    squares = WEIGHT_SQUARES_PER_LAYER * LAYERS + 1  # + the head
    hidden = math.sqrt(scale * FULL_SCALE_BYTES / (4 * squares))
    return max(HEAD_DIM, HEAD_DIM * round(hidden / HEAD_DIM))


class WeightWriter:
    """Appends tensors to the external-data file and returns their external TensorProtos."""

    def __init__(self, path):
        self.file = open(path, "wb")
        self.tensors = []
        self.salt = 0

    def close(self):
        self.file.close()

    def add(self, name, array):
        offset = -(-self.file.tell() // ALIGNMENT) * ALIGNMENT
        self.file.write(b"\0" * (offset - self.file.tell()))
        self.file.write(np.ascontiguousarray(array, dtype="<f4").tobytes())
        self.tensors.append(external_tensor(name, array, offset))
        return name

    def random(self, name, shape, std):
        self.salt += 1
        return self.add(name, hashed_uniform(shape, salt=self.salt, std=std))


class GraphBuilder:
    def __init__(self, weights):
        self.weights = weights
        self.nodes = []

    def op(self, op_type, inputs, scope, **attributes):
        output = f"{scope}/{op_type}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attributes))
        return output

    def constant(self, scope, values, dtype=np.float32):
        array = np.asarray(values, dtype=dtype)
        return self.op("Constant", [], scope, value=onnx.numpy_helper.from_array(array))

    def layer_norm(self, x, scope, hidden):
        gamma = self.weights.add(f"{scope}.gamma", np.ones(hidden, np.float32))
        beta = self.weights.add(f"{scope}.beta", np.zeros(hidden, np.float32))
        mean = self.op("ReduceMean", [x], scope, axes=[-1])
        centered = self.op("Sub", [x, mean], scope)
        square = self.op("Pow", [centered, self.constant(scope, 2.0)], scope)
        variance = self.op("ReduceMean", [square], scope, axes=[-1])
        std = self.op("Sqrt", [self.op("Add", [variance, self.constant(scope, 1e-5)], scope)],
                      scope)
        normalized = self.op("Div", [centered, std], scope)
        return self.op("Add", [self.op("Mul", [normalized, gamma], scope), beta], scope)

    def linear(self, x, scope, rows, cols, transposed_weight=False):
        std = rows ** -0.5
        if transposed_weight:  # stored [cols, rows] as some exporters do; -O1 folds the Transpose
            stored = self.weights.random(f"{scope}.weight_t", (cols, rows), std)
            weight = self.op("Transpose", [stored], scope, perm=[1, 0])
        else:
            weight = self.weights.random(f"{scope}.weight", (rows, cols), std)
        bias = self.weights.random(f"{scope}.bias", (cols,), 0.01)
        return self.op("Add", [self.op("MatMul", [x, weight], scope), bias], scope)

    def attention(self, x, scope, hidden):
        heads = hidden // HEAD_DIM
        split_shape = self.constant(scope, [1, SEQUENCE, heads, HEAD_DIM], np.int64)
        q, k, v = (self.op("Reshape", [self.linear(x, f"{scope}.{name}", hidden, hidden),
                                       split_shape], scope) for name in "qkv")
        q = self.op("Transpose", [q], scope, perm=[0, 2, 1, 3])
        k = self.op("Transpose", [k], scope, perm=[0, 2, 3, 1])
        v = self.op("Transpose", [v], scope, perm=[0, 2, 1, 3])
        # 1/sqrt(head_dim) as a Constant subgraph, the way tracing exporters emit it.
        scale = self.op("Div", [self.constant(scope, 1.0),
                                self.op("Sqrt", [self.constant(scope, float(HEAD_DIM))], scope)],
                        scope)
        scores = self.op("Mul", [self.op("MatMul", [q, k], scope), scale], scope)
        context = self.op("MatMul", [self.op("Softmax", [scores], scope, axis=-1), v], scope)
        context = self.op("Transpose", [context], scope, perm=[0, 2, 1, 3])
        merged = self.op("Reshape", [context, self.constant(scope, [1, SEQUENCE, hidden],
                                                            np.int64)], scope)
        return self.linear(merged, f"{scope}.o", hidden, hidden, transposed_weight=True)

    def mlp(self, x, scope, hidden):
        h = self.linear(x, f"{scope}.fc1", hidden, 4 * hidden)
        erf = self.op("Erf", [self.op("Div", [h, self.constant(scope, math.sqrt(2.0))], scope)],
                      scope)
        one_plus = self.op("Add", [erf, self.constant(scope, 1.0)], scope)
        gelu = self.op("Mul", [self.op("Mul", [h, one_plus], scope), self.constant(scope, 0.5)],
                       scope)
        return self.linear(gelu, f"{scope}.fc2", 4 * hidden, hidden)


def generate(folder, scale):
    """Writes folder/model.onnx and folder/weights.bin; returns the hidden width."""
    hidden = hidden_for(scale)
    folder.mkdir(parents=True, exist_ok=True)
    weights = WeightWriter(folder / WEIGHTS_FILE)
    builder = GraphBuilder(weights)
    x = "input"
    for layer in range(LAYERS):
        scope = f"layers.{layer}"
        attended = builder.attention(builder.layer_norm(x, f"{scope}.ln1", hidden),
                                     f"{scope}.attn", hidden)
        x = builder.op("Add", [x, attended], scope)
        x = builder.op("Add", [x, builder.mlp(builder.layer_norm(x, f"{scope}.ln2", hidden),
                                              f"{scope}.mlp", hidden)], scope)
    final = builder.layer_norm(x, "final_ln", hidden)
    # A tied head stored twice: the same bytes as layer 0's query weight.
    head = weights.add("head.weight", hashed_uniform((hidden, hidden), salt=1, std=hidden ** -0.5))
    builder.nodes.append(helper.make_node("MatMul", [final, head], ["output"], name="head"))
    weights.close()
    graph = helper.make_graph(
        builder.nodes, "large_transformer",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, SEQUENCE, hidden])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, SEQUENCE, hidden])],
        initializer=weights.tensors)
    model = helper.make_model(graph, producer_name="fusionopt-bench", ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17)])
    (folder / MODEL_FILE).write_bytes(model.SerializeToString(deterministic=True))
    return hidden


def run_measured(command):
    """Runs command; returns (seconds, peak RSS bytes of that process, its output)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log = process.stdout.read().decode()  # before wait4, so a full pipe cannot block it
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    if process.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))} failed ({process.returncode}): {log}")
    return elapsed, usage.ru_maxrss * 1024, log  # ru_maxrss is KiB on Linux


def folder_bytes(folder):
    return sum(path.stat().st_size for path in folder.iterdir() if path.is_file())


def check_external_data_inside(model_path):
    """Every external location of the saved model resolves to an existing file in its folder."""
    model = onnx.load(str(model_path), load_external_data=False)
    folder = model_path.parent.resolve()
    locations = {entry.value for tensor in model.graph.initializer
                 for entry in tensor.external_data if entry.key == "location"}
    if not locations:
        sys.exit(f"{model_path}: no external data written")
    for location in locations:
        path = (folder / location).resolve()
        if path.parent != folder or not path.is_file():
            sys.exit(f"{model_path}: external data '{location}' is not a file in {folder}")
    return sorted(locations)


def fusion_counts(report_path):
    report = json.loads(report_path.read_text())
    kinds = {}
    for fusion in report["fusions"]:
        kinds[fusion["kind"]] = kinds.get(fusion["kind"], 0) + 1
    folded = {entry["pass"]: entry["matches"] for entry in report["passes"]
              if entry["pass"] in ("fold-constants", "share-duplicate-initializers")}
    return kinds, folded


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="model size as a fraction of ~2.3 GB (default 1.0)")
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path("/tmp/fusionopt-large"))
    parser.add_argument("--binary", default=str(ROOT / "build" / "fusionopt"))
    parser.add_argument("--max-ratio", type=float, default=1.5,
                        help="fail when peak RSS / model size exceeds this (default 1.5)")
    parser.add_argument("--skip-verify", action="store_true",
                        help="skip `fusionopt verify` of original vs optimized")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be positive")

    source, out = args.work / "source", args.work / "out"
    shutil.rmtree(args.work, ignore_errors=True)
    out.mkdir(parents=True)
    try:
        start = time.perf_counter()
        hidden = generate(source, args.scale)
        generate_seconds = time.perf_counter() - start
        model_bytes = folder_bytes(source)
        onnx.checker.check_model(str(source / MODEL_FILE))
        print(f"generated {source / MODEL_FILE}: {LAYERS} layers, hidden {hidden}, "
              f"{model_bytes / 1e9:.3f} GB in {generate_seconds:.1f} s")

        optimized, report = out / MODEL_FILE, out / "report.json"
        seconds, rss, _ = run_measured([args.binary, str(source / MODEL_FILE), "-O3", "-o",
                                        str(optimized), "--external-data",
                                        "--report", str(report)])
        onnx.checker.check_model(str(optimized))
        locations = check_external_data_inside(optimized)
        output_bytes = folder_bytes(out) - report.stat().st_size
        kinds, folded = fusion_counts(report)
        verify_note = "skipped"
        if not args.skip_verify:
            verify_seconds, verify_rss, verify_log = run_measured(
                [args.binary, "verify", str(source / MODEL_FILE), str(optimized)])
            verify_note = f"match ({verify_seconds:.1f} s, RSS {verify_rss / 1e9:.2f} GB)"
            print(verify_log.strip())
        ratio = rss / model_bytes
        print(f"output: {optimized} + {', '.join(locations)}; checker ok; verify {verify_note}")
        print("| model size (GB) | output size (GB) | -O3 wall time (s) | peak RSS (GB) | "
              "RSS / size | fusions | folded / shared |")
        print("|---:|---:|---:|---:|---:|---|---|")
        print(f"| {model_bytes / 1e9:.3f} | {output_bytes / 1e9:.3f} | {seconds:.1f} | "
              f"{rss / 1e9:.3f} | {ratio:.3f} | "
              f"{', '.join(f'{kind} {count}' for kind, count in sorted(kinds.items()))} | "
              f"{', '.join(f'{name} {count}' for name, count in folded.items())} |", flush=True)
        if ratio > args.max_ratio:
            print(f"FAIL: peak RSS is {ratio:.3f}x the model's size (limit {args.max_ratio})",
                  file=sys.stderr, flush=True)
            return 1
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
