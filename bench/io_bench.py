#!/usr/bin/env python3
"""Load/save benchmark for a large model with external data (issue 2's target:
under 5 s and peak RSS under 1.3x the model's size, because weights are mapped, not copied).

Generates a model of --size-gb with bench/gen_large_model.py (once), then runs
`fusionopt MODEL -O0 -o OUT --external-data` and `fusionopt inspect MODEL` under
/usr/bin/time-style accounting (wall time and the child's peak RSS from wait4) and prints
a Markdown table row per command.

    .venv/bin/python bench/io_bench.py --size-gb 1.0 --work /tmp/fusionopt-io-bench
"""
import argparse
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_measured(command):
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    stderr = process.stderr.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(map(str, command))} failed ({code}): {stderr}")
    return elapsed, usage.ru_maxrss * 1024  # ru_maxrss is KiB on Linux


def folder_bytes(folder, names):
    return sum((folder / name).stat().st_size for name in names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--work", default="/tmp/fusionopt-io-bench")
    parser.add_argument("--binary", default=str(ROOT / "build" / "fusionopt"))
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--embedded", action="store_true",
                        help="also save with the weights embedded (above 2 GiB this switches "
                             "to external data on its own)")
    args = parser.parse_args()

    work = pathlib.Path(args.work)
    source = work / "source"
    model = source / "model.onnx"
    if not model.exists():
        source.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_large_model.py"),
                        "--out", str(source), "--size-gb", str(args.size_gb)], check=True)
    model_bytes = sum(p.stat().st_size for p in source.iterdir())
    out_dir = work / "out"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)

    rows = []
    commands = {
        "inspect": [args.binary, "inspect", str(model)],
        "load + save (-O0, external data)": [args.binary, str(model), "-O0", "-o",
                                             str(out_dir / "model.onnx"), "--external-data"],
    }
    if args.embedded:
        commands["load + save (-O0, embedded in the .onnx)"] = [
            args.binary, str(model), "-O0", "-o", str(out_dir / "embedded.onnx")]
    for label, command in commands.items():
        seconds, rss = run_measured(command)
        rows.append((label, seconds, rss))

    print(f"model: {model} ({model_bytes / 1e9:.3f} GB incl. external data)")
    print(f"outputs: " + ", ".join(f"{p.name} {p.stat().st_size / 1e9:.3f} GB"
                                   for p in sorted(out_dir.iterdir())))
    print("| command | wall time (s) | peak RSS (MB) | RSS / model size |")
    print("|---|---:|---:|---:|")
    for label, seconds, rss in rows:
        print(f"| {label} | {seconds:.2f} | {rss / 1e6:.1f} | {rss / model_bytes:.3f} |")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
