#!/usr/bin/env python3
"""Where the time goes, op type by op type: fusionopt's runtime on its -O0 and -O3 files
(`fusionopt run --profile`) against ONNX Runtime ENABLE_ALL on the original
(`SessionOptions.enable_profiling`), per model of the real-export corpus, same feeds and
threads (issue 15: find every slow path).

    .venv/bin/python bench/op_profile.py --only gpt2 bert          # the committed fixtures
    .venv-export/bin/python bench/op_profile.py --corpus full --only gpt2 --markdown gpt2.md

Per model: the median latency of each side, the time inside kernels per run, and the op types
that take it (fusionopt's fused kinds against ORT's kernels, which may be its own fusions),
slowest first. Both sides run warmup runs first; ORT's profile counts only the timed runs.
With --rounds N every side runs once per round, in turn, and the table gives the median of
the round medians with their spread; --baseline-binary adds a second fusionopt build's sides
(before/after a kernel change, measured in the same run). With one round the sides run one
after the other: enough to find slow paths, not a speed comparison.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
from bench_common import (write_report, add_corpus_arguments, corpus_models, profiled_ort_kernels,  # noqa: E402
                          save_inputs)

FUSIONOPT = Path(os.environ.get("FUSIONOPT_BIN", ROOT / "build" / "fusionopt"))
OP_TYPE_ROW = re.compile(r"^\s*([0-9.]+)\s+[0-9.]+%\s+(\d+)\s+(\S+)\s*$")
LATENCY = re.compile(r"latency_ms runs=\d+ min=[0-9.]+ median=([0-9.]+)")


def fusionopt(binary, *args):
    done = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"`fusionopt {' '.join(map(str, args))}` failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout + done.stderr


def profile_fusionopt(binary, optimized, feeds, args, work):
    text = fusionopt(binary, "run", optimized, "--threads", args.threads, "--warmup", args.warmup,
                     "--repeat", args.repeat, "--profile", *save_inputs(feeds, work))
    per_op, in_table = {}, False
    for line in text.splitlines():
        if "op type" in line and "nodes" in line:
            in_table = True
            continue
        match = OP_TYPE_ROW.match(line) if in_table else None
        if match:
            per_op[match.group(3)] = {"ms": float(match.group(1)), "nodes": int(match.group(2))}
    latency = LATENCY.search(text)
    return {"median_ms": float(latency.group(1)) if latency else None, "ops": per_op}


def profile_ort(model, feeds, args, work):
    median, kernels = profiled_ort_kernels(model, feeds, args.threads, args.warmup, args.repeat, work / "ort_profile")
    per_op = defaultdict(lambda: {"ms": 0.0, "nodes": set()})
    for node, op, ms in kernels:
        per_op[op]["ms"] += ms / args.repeat
        per_op[op]["nodes"].add(node)
    return {"median_ms": median,
            "ops": {op: {"ms": round(v["ms"], 4), "nodes": len(v["nodes"])} for op, v in per_op.items()}}


def aggregate(rounds):
    """One side over its rounds: the median of the round medians with their spread, and each
    op type's mean time."""
    medians = [r["median_ms"] for r in rounds if r["median_ms"] is not None]
    ops = defaultdict(lambda: {"ms": 0.0, "nodes": 0})
    for r in rounds:
        for op, v in r["ops"].items():
            ops[op]["ms"] += v["ms"] / len(rounds)
            ops[op]["nodes"] = v["nodes"]
    return {"median_ms": statistics.median(medians) if medians else None,
            "spread_ms": [min(medians), max(medians)] if medians else None,
            "ops": {op: {"ms": round(v["ms"], 4), "nodes": v["nodes"]} for op, v in ops.items()}}


def profile_model(entry, args, work):
    """Every side, alternated over --rounds rounds."""
    feeds = entry.feeds()
    binaries = {"fusionopt": FUSIONOPT}
    if args.baseline_binary:
        binaries["baseline"] = args.baseline_binary
    runners = {}
    for tag, binary in binaries.items():
        for level in args.levels:
            optimized = work / f"{tag}_O{level}.onnx"
            fusionopt(binary, entry.path, f"-O{level}", "-q", "-o", optimized)
            runners[f"{tag} -O{level}"] = (lambda b=binary, o=optimized: profile_fusionopt(b, o, feeds, args, work))
    runners["ORT ENABLE_ALL"] = lambda: profile_ort(entry.path, feeds, args, work)
    rounds = defaultdict(list)
    for _ in range(args.rounds):
        for side, runner in runners.items():
            rounds[side].append(runner())
    return {side: aggregate(rounds[side]) for side in runners}


def top(ops, count):
    ranked = sorted(ops.items(), key=lambda item: -item[1]["ms"])[:count]
    return [f"{op} {v['ms']:.2f} ({v['nodes']})" for op, v in ranked]


def markdown(results, count):
    lines = []
    for result in results:
        sides = result["sides"]
        lines.append(f"#### {result['model']}\n")
        lines.append("| | median ms (spread over rounds) | ms in kernels | slowest op types: ms/run (nodes) |")
        lines.append("|---|---:|---:|---|")
        for side, data in sides.items():
            total = sum(v["ms"] for v in data["ops"].values())
            median = "–"
            if data["median_ms"] is not None:
                low, high = data["spread_ms"]
                median = f"{data['median_ms']:.2f} ({low:.2f}–{high:.2f})"
            lines.append(f"| {side} | {median} | {total:.2f} | {'; '.join(top(data['ops'], count))} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser, rounds=1)
    parser.add_argument("--baseline-binary", type=Path,
                        help="a second fusionopt build profiled beside FUSIONOPT_BIN (sides 'baseline -ON')")
    parser.add_argument("--top", type=int, default=6, help="op types listed per side")
    args = parser.parse_args()
    entries = corpus_models(args)
    results = []
    for entry in entries:
        with tempfile.TemporaryDirectory(prefix="fusionopt-op-profile-") as name:
            sides = profile_model(entry, args, Path(name))
        results.append({"model": entry.name, "sides": sides})
        print(f"{entry.name}: " + ", ".join(f"{side} {data['median_ms']:.2f} ms" for side, data in sides.items()),
              flush=True)
    table = markdown(results, args.top)
    write_report(table, results, args)


if __name__ == "__main__":
    main()
