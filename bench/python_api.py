#!/usr/bin/env python3
"""fusionopt's Python API against the C++ runtime alone and against onnxruntime's
InferenceSession, both sides alternated in rounds in one process.

Two tables:
1. Call overhead: `fusionopt.InferenceSession.run` against `fusionopt run` (the C++ runtime
   timing its own Session::Run) on the same -O3 file and inputs; the difference per call in µs.
2. The real corpus through the Python API: fusionopt.optimize(level=3) then
   fusionopt.InferenceSession.run, against onnxruntime's InferenceSession (ENABLE_ALL) on the
   original; p50 of --repeat runs per round.

    FUSIONOPT_BIN=build/fusionopt .venv-export/bin/python bench/python_api.py --corpus full --rounds 3

The package is the source tree's (python/) over the build's libfusionopt.so.1.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from bench_common import (DEFAULT_BINARY, ORT_SETTLE_S, ROOT, add_corpus_arguments, corpus_models, fusionopt_latency,
                          median_latency_ms, ort_session, save_inputs, write_report)

BINARY = Path(os.environ.get("FUSIONOPT_BIN", DEFAULT_BINARY))
os.environ.setdefault("FUSIONOPT_LIBRARY", str(BINARY.parent / "libfusionopt.so.1"))
sys.path.insert(0, str(ROOT / "python"))
import fusionopt  # noqa: E402

SMALL_MODELS = [ROOT / "models" / "mobilenet_style.onnx", ROOT / "models" / "resnet_style.onnx"]


def spread(values):
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def overhead_table(args):
    lines = ["| model (batch 1, -O3) | fusionopt run p50 ms | InferenceSession.run p50 ms | Python / C++ | µs per call |",
             "|---|---:|---:|---:|---:|"]
    rows = []
    for model in SMALL_MODELS:
        with tempfile.TemporaryDirectory(prefix="fusionopt-python-api-") as name:
            work = Path(name)
            optimized = work / "O3.onnx"
            fusionopt.optimize(model, level=3, output_path=optimized)
            x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
            flags = save_inputs({"input": x}, work)
            options = fusionopt.SessionOptions()
            options.intra_op_num_threads = args.threads
            session = fusionopt.InferenceSession(str(optimized), options)
            sides = {"cpp": [], "python": []}
            for _ in range(args.rounds):
                sides["cpp"].append(fusionopt_latency(BINARY, optimized, args.threads, args.warmup, args.overhead_repeat,
                                                      flags)[0])
                sides["python"].append(median_latency_ms(session, {"input": x}, args.warmup, args.overhead_repeat))
        cpp, python = statistics.median(sides["cpp"]), statistics.median(sides["python"])
        rows.append({"model": model.name, "cpp_ms": sides["cpp"], "python_ms": sides["python"]})
        lines.append(f"| {model.name} | {spread(sides['cpp'])} | {spread(sides['python'])} | {python / cpp:.3f} | "
                     f"{(python - cpp) * 1e3:.1f} |")
        print(f"{model.name}: Python / C++ {python / cpp:.3f}, {(python - cpp) * 1e3:.1f} µs a call", flush=True)
    return lines, rows


def corpus_table(args):
    lines = ["| model | fusionopt (Python API, -O3) p50 ms | onnxruntime p50 ms | fusionopt / onnxruntime |",
             "|---|---:|---:|---:|"]
    rows = []
    for entry in corpus_models(args):
        feeds = entry.feeds()
        optimized, _ = fusionopt.optimize(str(entry.path), level=3)
        options = fusionopt.SessionOptions()
        options.intra_op_num_threads = args.threads
        ours = fusionopt.InferenceSession(optimized, options)
        theirs = ort_session(entry.path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, args.threads)
        sides = {"fusionopt": [], "ort": []}
        for _ in range(args.rounds):
            sides["fusionopt"].append(median_latency_ms(ours, feeds, args.warmup, args.repeat))
            sides["ort"].append(median_latency_ms(theirs, feeds, args.warmup, args.repeat))
        ratio = statistics.median(sides["fusionopt"]) / statistics.median(sides["ort"])
        rows.append({"model": entry.name, "fusionopt_ms": sides["fusionopt"], "ort_ms": sides["ort"], "ratio": ratio})
        lines.append(f"| {entry.name} | {spread(sides['fusionopt'])} | {spread(sides['ort'])} | {ratio:.2f} |")
        print(f"{entry.name}: fusionopt / onnxruntime {ratio:.2f}", flush=True)
        del ours, theirs
        time.sleep(ORT_SETTLE_S)
    ratios = [row["ratio"] for row in rows]
    if ratios:
        lines.append("")
        lines.append(f"- geometric mean fusionopt / onnxruntime: {float(np.exp(np.mean(np.log(ratios)))):.3f} over "
                     f"{len(ratios)} models (max {max(ratios):.2f})")
    return lines, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser, rounds=3)
    parser.add_argument("--overhead-repeat", type=int, default=200, help="timed calls per round for table 1")
    parser.add_argument("--skip-corpus", action="store_true", help="only the call-overhead table")
    args = parser.parse_args()
    fusionopt.set_log_level(0)
    overhead_lines, overhead_rows = overhead_table(args)
    lines = ["Call overhead:", ""] + overhead_lines
    rows = {"overhead": overhead_rows}
    if not args.skip_corpus:
        corpus_lines, corpus_rows = corpus_table(args)
        lines += ["", "The real corpus through the Python API:", ""] + corpus_lines
        rows["corpus"] = corpus_rows
    write_report("\n".join(lines) + "\n", [rows], args)


if __name__ == "__main__":
    main()
