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
Sides are measured one after the other, not interleaved: this finds slow paths, it is not a
speed comparison (bench/cpu_vs_ort.py is).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "models" / "real"))
import corpus  # noqa: E402
from bench_common import save_inputs, median_latency_ms  # noqa: E402

FUSIONOPT = Path(os.environ.get("FUSIONOPT_BIN", ROOT / "build" / "fusionopt"))
OP_TYPE_ROW = re.compile(r"^\s*([0-9.]+)\s+[0-9.]+%\s+(\d+)\s+(\S+)\s*$")
LATENCY = re.compile(r"latency_ms runs=\d+ min=[0-9.]+ median=([0-9.]+)")


def fusionopt(*args):
    done = subprocess.run([str(FUSIONOPT), *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"`fusionopt {' '.join(map(str, args))}` failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout + done.stderr


def profile_fusionopt(model, feeds, level, args, work):
    optimized = work / f"O{level}.onnx"
    fusionopt(model, f"-O{level}", "-q", "-o", optimized)
    text = fusionopt("run", optimized, "--threads", args.threads, "--warmup", args.warmup,
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
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.enable_profiling = True
    options.profile_file_prefix = str(work / "ort_profile")
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    median = median_latency_ms(session, feeds, args.warmup, args.repeat)
    events = json.loads(Path(session.end_profiling()).read_text())
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    timed_from = runs[-args.repeat]["ts"] if len(runs) >= args.repeat else 0
    per_op = defaultdict(lambda: {"ms": 0.0, "nodes": set()})
    for event in events:
        if event.get("cat") != "Node" or not event.get("name", "").endswith("_kernel_time") or event["ts"] < timed_from:
            continue
        op = event.get("args", {}).get("op_name", "?")
        per_op[op]["ms"] += event["dur"] / 1e3 / args.repeat
        per_op[op]["nodes"].add(event["name"])
    return {"median_ms": median,
            "ops": {op: {"ms": round(v["ms"], 4), "nodes": len(v["nodes"])} for op, v in per_op.items()}}


def top(ops, count):
    ranked = sorted(ops.items(), key=lambda item: -item[1]["ms"])[:count]
    return [f"{op} {v['ms']:.2f} ({v['nodes']})" for op, v in ranked]


def markdown(results, count):
    lines = []
    for result in results:
        sides = result["sides"]
        lines.append(f"#### {result['model']}\n")
        lines.append("| | median ms | ms in kernels | slowest op types: ms/run (nodes) |")
        lines.append("|---|---:|---:|---|")
        for side, data in sides.items():
            total = sum(v["ms"] for v in data["ops"].values())
            median = f"{data['median_ms']:.2f}" if data["median_ms"] is not None else "–"
            lines.append(f"| {side} | {median} | {total:.2f} | {'; '.join(top(data['ops'], count))} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="fixtures", help="fixtures, full, or a folder with a manifest.json")
    parser.add_argument("--only", nargs="*", help="families or model names (prefix match)")
    parser.add_argument("--levels", nargs="*", type=int, default=[0, 3])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--top", type=int, default=6, help="op types listed per side")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    _, entries = corpus.select(args.corpus, args.only)
    entries = [e for e in entries if not e.name.endswith("_1layer")]
    results = []
    for entry in entries:
        feeds = entry.feeds()
        with tempfile.TemporaryDirectory(prefix="fusionopt-op-profile-") as name:
            work = Path(name)
            sides = {f"fusionopt -O{level}": profile_fusionopt(entry.path, feeds, level, args, work)
                     for level in args.levels}
            sides["ORT ENABLE_ALL"] = profile_ort(entry.path, feeds, args, work)
        results.append({"model": entry.name, "sides": sides})
        print(f"{entry.name}: " + ", ".join(f"{side} {data['median_ms']:.2f} ms" for side, data in sides.items()),
              flush=True)
    table = markdown(results, args.top)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
