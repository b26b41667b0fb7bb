#!/usr/bin/env python3
"""What each optimization level does to each model, measured in one run on our CPU runtime.

Per model: nodes and estimated kernel launches after -O0 to -O3 (from `fusionopt optimize`),
kernels actually launched by one inference on the CPU runtime, the cost model's predicted
speed-up of the -O3 model over the original on --target (`fusionopt inspect --cost`, symbolic
dims at the sizes the runs use), and the median CPU latency of the -O0, -O2 and -O3 models run
alternately on the same inputs, with the speed-ups. Every -O2 and -O3 model is first checked
against the original with `fusionopt verify` (a mismatch aborts the benchmark).

Issue 4's targets: light ResNet-50 at O2 in <= 60 kernels; the BERT-style layer needs >= 3x
fewer kernels at O2 than at O0; CPU speed-up O2/O0 >= 1.3x on the BERT-style and
ResNet-style benchmark models. Issue 5's: at most 7 kernels per BERT-style encoder layer at O3,
and O3 never slower than O2 on the CPU runtime.

    .venv/bin/python bench/fusion_levels.py --threads 2 --repeat 20
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import onnx

from bench_common import BENCH_MODELS, ROOT, SHARED_MODELS as SHARED, ensure_bench_models, run_fusionopt
LEVELS = (0, 1, 2, 3)
SMALL_SEQUENCE = 16  # the project models hold 64 positions


def model_list(args):
    models = []
    for name in args.bench_models:
        models.append((f"{name} (bench size, sequence {args.sequence})", BENCH_MODELS / f"{name}.onnx",
                       args.sequence))
    if args.bench_only:
        return models
    for path in sorted((ROOT / "models").glob("*.onnx")):
        models.append((path.stem, path, SMALL_SEQUENCE))
    if SHARED.is_dir():
        for path in sorted(SHARED.glob("*.onnx")):
            models.append((path.stem, path, SMALL_SEQUENCE))
    return models


def optimize(binary, model, level, folder):
    out = pathlib.Path(folder) / f"{model.stem}.O{level}.onnx"
    report = pathlib.Path(folder) / f"{model.stem}.O{level}.json"
    done = run_fusionopt(binary, model, "-o", out, f"-O{level}", "--report", report)
    nodes = int(re.search(r"nodes\s+\d+\s+(\d+)", done.stderr).group(1))
    launches = int(re.search(r"estimated kernel launches\s+\d+\s+(\d+)", done.stderr).group(1))
    return out, nodes, launches


def shapes_for(model, sequence):
    """--shape flags giving every input's symbolic `sequence` dim the benchmark's length (other
    symbolic dims take the runtime's default of 1)."""
    flags = []
    graph = onnx.load(str(model), load_external_data=False).graph
    initializers = {tensor.name for tensor in graph.initializer}
    for value in graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        if not any("seq" in dim.dim_param for dim in dims):
            continue
        sizes = [str(dim.dim_value) if dim.HasField("dim_value") else
                 str(sequence) if "seq" in dim.dim_param else "1" for dim in dims]
        flags += ["--shape", f"{value.name}={'x'.join(sizes)}"]
    return flags


def dim_flags(model, sequence):
    """--dim flags for the cost model: every symbolic dim named like a sequence gets `sequence`,
    the others 1 — the sizes the latency runs use."""
    flags = []
    graph = onnx.load(str(model), load_external_data=False).graph
    symbols = {dim.dim_param for value in graph.input for dim in value.type.tensor_type.shape.dim if dim.dim_param}
    for symbol in sorted(symbols):
        flags += ["--dim", f"{symbol}={sequence if 'seq' in symbol else 1}"]
    return flags


def predicted_speedup(binary, optimized, sequence, target, original):
    """The cost model's predicted speed-up of `optimized` over the original it came from."""
    done = run_fusionopt(binary, "inspect", optimized, "--cost", "--json", "--target", target, *dim_flags(original, sequence))
    return json.loads(done.stdout)["predicted_speedup"]


def same_graph(first, second):
    """Whether two saved models hold the same graph and functions."""
    a, b = onnx.load(str(first), load_external_data=False), onnx.load(str(second), load_external_data=False)
    return (a.graph.SerializeToString() == b.graph.SerializeToString() and
            [f.SerializeToString() for f in a.functions] == [f.SerializeToString() for f in b.functions])


def latency(binary, model, sequence, args):
    done = run_fusionopt(binary, "run", model, "--threads", args.threads, "--warmup", args.warmup, "--repeat",
               args.repeat, "--seed", 1, "-v", *shapes_for(model, sequence))
    median = float(re.search(r"latency_ms runs=\d+ min=[\d.]+ median=([\d.]+)", done.stdout).group(1))
    kernels = int(re.search(r"(\d+) kernels launched", done.stderr).group(1))
    return median, kernels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--sequence", type=int, default=128, help="length for symbolic sequence dims")
    parser.add_argument("--bench-models", nargs="*", default=["resnet_style", "bert_style"])
    parser.add_argument("--bench-only", action="store_true",
                        help="only the benchmark-size models, not models/ and ../shared/models")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the timed levels")
    parser.add_argument("--target", default="h100", help="cost-model target for the predicted O3 speed-up")
    parser.add_argument("--binary", default=str(ROOT / "build" / "fusionopt"))
    args = parser.parse_args()
    ensure_bench_models(args.bench_models)

    header = ("| model | nodes O0 / O1 / O2 / O3 | est. launches O0 / O1 / O2 / O3 | kernels run O0 / O2 / O3 | "
              f"predicted O3 speed-up ({args.target}) | CPU ms O0 | CPU ms O2 | CPU ms O3 | O2/O0 | O3/O0 | O3 vs O2 |")
    print(f"threads={args.threads} warmup={args.warmup} repeat={args.repeat} (median latency)")
    print(header)
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for label, path, sequence in model_list(args):
            results = {level: optimize(args.binary, path, level, folder) for level in LEVELS}
            for level in (2, 3):
                run_fusionopt(args.binary, "verify", path, results[level][0], "-q", *shapes_for(path, sequence))
            predicted = predicted_speedup(args.binary, results[3][0], sequence, args.target, path)
            # An O3 graph equal to the O2 one is the same model: timing it again would only
            # measure noise, so its O3 figures are the O2 ones.
            same_as_o2 = same_graph(results[2][0], results[3][0])
            # Alternate the levels --rounds times so drift on a busy machine hits every side
            # alike; each level's figure is its best median.
            timed = {level: [] for level in ((0, 2) if same_as_o2 else (0, 2, 3))}
            for _ in range(args.rounds):
                for level in timed:
                    timed[level].append(latency(args.binary, results[level][0], sequence, args))
            if same_as_o2:
                timed[3] = timed[2]
            ms = {level: min(run_ms for run_ms, _ in runs) for level, runs in timed.items()}
            nodes = " / ".join(str(results[level][1]) for level in LEVELS)
            launches = " / ".join(str(results[level][2]) for level in LEVELS)
            kernels = " / ".join(str(timed[level][0][1]) for level in (0, 2, 3))
            o3_vs_o2 = "same graph" if same_as_o2 else f"{ms[2] / ms[3]:.2f}"
            print(f"| {label} | {nodes} | {launches} | {kernels} | {predicted:.2f} | {ms[0]:.2f} | {ms[2]:.2f} | "
                  f"{ms[3]:.2f} | {ms[0] / ms[2]:.2f} | {ms[0] / ms[3]:.2f} | {o3_vs_o2} |", flush=True)

if __name__ == "__main__":
    main()
