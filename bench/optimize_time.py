#!/usr/bin/env python3
"""Wall time of `fusionopt MODEL -O3 -o OUT` (load, passes, save, fsync), one or more
binaries side by side: rounds alternate the binaries, each run writes a fresh output file,
and the table gives median, min and max wall time, user and system CPU, and peak RSS.
Issue 14's target: a full-size BERT-base under 2 s.

    .venv/bin/python bench/optimize_time.py models/bench/real/bert_dynamo18_sdpa.onnx \\
        --binary build/fusionopt --binary /tmp/old/fusionopt --rounds 5
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(binary, model, level, output):
    output.unlink(missing_ok=True)
    started = time.perf_counter()
    process = subprocess.Popen([str(binary), str(model), f"-O{level}", "-q", "-o", str(output)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    stderr = process.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{binary} failed on {model}: {stderr.strip()}")
    return wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss / 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("--binary", type=Path, action="append", help="repeatable; default build/fusionopt")
    parser.add_argument("--level", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    binaries = args.binary or [ROOT / "build" / "fusionopt"]
    samples = {binary: [] for binary in binaries}
    with tempfile.TemporaryDirectory(prefix="fusionopt-optimize-time-") as work:
        output = Path(work) / "out.onnx"
        for _ in range(args.rounds):
            for binary in binaries:
                samples[binary].append(run_once(binary, args.model, args.level, output))
    size_mb = args.model.stat().st_size / 1e6
    print(f"{args.model.name} ({size_mb:.0f} MB), -O{args.level}, {args.rounds} alternated rounds\n")
    print("| binary | wall median (s) | min – max (s) | user (s) | sys (s) | peak RSS (MB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for binary, runs in samples.items():
        walls = [run[0] for run in runs]
        print(f"| `{binary}` | {statistics.median(walls):.2f} | {min(walls):.2f} – {max(walls):.2f} | "
              f"{statistics.median(r[1] for r in runs):.2f} | {statistics.median(r[2] for r in runs):.2f} | "
              f"{max(r[3] for r in runs):.0f} |")


if __name__ == "__main__":
    main()
