#!/usr/bin/env python3
"""Kernels far below their roof, across the real corpus (issue 15: no kernel below 30% of its
roof without a written reason).

    .venv-export/bin/python bench/roofline_corpus.py --corpus full --threshold 0.3 --markdown roof.md

Per model, `fusionopt bench MODEL -O3 --roofline` times every node of the -O3 model on the CPU
runtime and places each kernel on this machine's roofline (the `cpu` profile: a probed sgemm
peak and STREAM bandwidth; docs/bench.md). A kernel's fraction is its attained FLOP/s over the
roof at its arithmetic intensity: bandwidth x intensity when memory-bound, peak FLOP/s when
compute-bound. FLOPs are the cost model's (a Winograd convolution is credited the direct
convolution's, so it may sit above the roof). Kernels without FLOPs (data movement) are not
placed; the table counts them. The first table lists each op below --threshold: the kernels,
their time per inference, and the lowest fraction. The second gives every model's totals.
"""
import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from bench_common import DEFAULT_BINARY, add_corpus_arguments, corpus_models, run_fusionopt, write_report

FUSIONOPT = Path(os.environ.get("FUSIONOPT_BIN", DEFAULT_BINARY))


def shape_flags(entry):
    """--shape NAME=D1xD2... for every input, from the manifest (the model's symbolic dims)."""
    flags = []
    for spec in entry.info["inputs"]:
        flags += ["--shape", f"{spec['name']}={'x'.join(str(d) for d in spec['shape'])}"]
    return flags


def roofline_of(entry, args, work):
    out = work / "bench.json"
    run_fusionopt(FUSIONOPT, "bench", entry.path, "-O3", "--threads", args.threads, "--warmup", args.warmup, "--iters",
                  args.repeat, "--roofline", work / "roofline.svg", "--json", out, "--no-verify",
                  *shape_flags(entry))
    return json.loads(out.read_text())["roofline"]


def summarize(entry, roofline, threshold):
    optimized = roofline["sides"]["optimized"]
    kernels = optimized["kernels"]
    below = [k for k in kernels if k["fraction_of_roof"] < threshold]
    by_op = defaultdict(lambda: {"kernels": 0, "ms": 0.0, "lowest": 1e9, "bound": set()})
    for kernel in below:
        row = by_op[kernel["op"]]
        row["kernels"] += 1
        row["ms"] += kernel["ms_per_inference"]
        row["lowest"] = min(row["lowest"], kernel["fraction_of_roof"])
        row["bound"].add(kernel["bound"])
    return {
        "model": entry.name,
        "peak_gflops": roofline["peak_flops"] / 1e9,
        "bandwidth_gbs": roofline["bandwidth"] / 1e9,
        "placed": len(kernels),
        "not_placed": optimized["not_placed"],
        "placed_ms": sum(k["ms_per_inference"] for k in kernels),
        "below_ms": sum(k["ms_per_inference"] for k in below),
        "below": {op: {**row, "bound": sorted(row["bound"])} for op, row in by_op.items()},
    }


def markdown(results, threshold):
    lines = [f"| model | op below {threshold:.0%} of its roof | kernels | ms/inference | lowest fraction | bound |",
             "|---|---|---:|---:|---:|---|"]
    for result in results:
        for op, row in sorted(result["below"].items(), key=lambda item: -item[1]["ms"]):
            lines.append(f"| {result['model']} | {op} | {row['kernels']} | {row['ms']:.3f} | {row['lowest']:.2f} | "
                         f"{', '.join(row['bound'])} |")
    lines += ["", "| model | kernels placed | not placed (no FLOPs) | ms placed | ms below the threshold | share |",
              "|---|---:|---:|---:|---:|---:|"]
    for result in results:
        share = result["below_ms"] / result["placed_ms"] if result["placed_ms"] else 0
        lines.append(f"| {result['model']} | {result['placed']} | {result['not_placed']} | {result['placed_ms']:.2f} | "
                     f"{result['below_ms']:.2f} | {share:.1%} |")
    if results:
        lines.append(f"\nroof: {results[0]['peak_gflops']:.0f} GFLOP/s, {results[0]['bandwidth_gbs']:.1f} GB/s "
                     "(the cached `cpu` profile)")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser, rounds=1)
    parser.add_argument("--threshold", type=float, default=0.3, help="fraction of the roof (default 0.3)")
    args = parser.parse_args()
    results = []
    for entry in corpus_models(args):
        with tempfile.TemporaryDirectory(prefix="fusionopt-roofline-") as name:
            results.append(summarize(entry, roofline_of(entry, args, Path(name)), args.threshold))
        print(f"{entry.name}: {len(results[-1]['below'])} op types below {args.threshold:.0%}", file=sys.stderr,
              flush=True)
    write_report(markdown(results, args.threshold), results, args)


if __name__ == "__main__":
    main()
