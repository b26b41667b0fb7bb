#!/usr/bin/env python3
"""Issue 15's speed comparison: fusionopt's CPU runtime on its -O0 and -O3 files against ONNX
Runtime ENABLE_ALL on the original, per model of the real-export corpus, on a quiet machine and
beside a fixed background load, in one run.

    .venv/bin/python bench/cpu_corpus.py --only gpt2 resnet                 # committed fixtures
    .venv-export/bin/python bench/cpu_corpus.py --corpus full --rounds 3 --load \\
        --json cpu_corpus.json --markdown cpu_corpus.md

Every side (fusionopt -O0, fusionopt -O3, ORT) runs the same feeds with the same --threads,
--warmup untimed runs and then --repeat timed ones; its figure is the median (p50). Sides
alternate within each of --rounds rounds, and each table cell is the median of the round
figures with their spread (min–max). With --load each round also runs every side beside the
background load: one process that spins on one core for as long as the loaded half of the
round lasts (started before, stopped after, bounded by --load-limit seconds), the way a
neighbour's job takes a core on a shared server. The slowdown of a side is its loaded p50
over its quiet p50; the figure of merit is fusionopt -O3's slowdown over ORT's. With
--row-major-side the top level also runs with FUSIONOPT_CPU_LAYOUTS=row-major, alternated with
the others: what handing activations on in convolution layouts buys, with the same binary; with
--winograd-off-side it also runs with FUSIONOPT_CPU_WINOGRAD=off: what Winograd's F(4x4, 3x3)
buys on the 3x3 convolutions its rule picks; with --avx2-side it also runs with
FUSIONOPT_CPU_ELEMENTWISE=avx2: what the AVX-512 build of the runtime's own kernels buys on an
AVX-512 host. With --float-side, a quantized corpus (models/bench/real/quantized, made by
models/real/quantize.py --full) also times fusionopt -O3 on the float export each model was
quantized from (its manifest's `quantized_from`, in the folder above), alternated with the
others: what quantization buys on this host ("float -O3 / -O3"). The table is headed by the
host (`fusionopt --version`'s host line).

    .venv/bin/python bench/cpu_corpus.py --corpus models/bench/real/quantized --levels 3 \
        --float-side --rounds 3 --markdown quantized.md      # issue 43's table
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import onnxruntime as ort

from bench_common import (DEFAULT_BINARY, write_report, add_corpus_arguments, corpus_models, median_latency_ms, ort_session,
                          run_fusionopt, save_inputs)

FUSIONOPT = Path(os.environ.get("FUSIONOPT_BIN", DEFAULT_BINARY))
LATENCY = re.compile(r"latency_ms runs=\d+ min=[0-9.]+ median=([0-9.]+)")
# The top level with a runtime feature off, same binary: (option, side, environment, ratio key,
# ratio label). The ratio is the top level over that side: what the feature buys.
VARIANTS = [
    ("row_major_side", "fusionopt -O3 row-major", {"FUSIONOPT_CPU_LAYOUTS": "row-major"}, "layouts_gain",
     "-O3 / -O3 row-major"),
    ("winograd_off_side", "fusionopt -O3 no Winograd", {"FUSIONOPT_CPU_WINOGRAD": "off"}, "winograd_gain",
     "-O3 / -O3 no Winograd"),
    ("avx2_side", "fusionopt -O3 AVX2 kernels", {"FUSIONOPT_CPU_ELEMENTWISE": "avx2"}, "vector_isa_gain",
     "-O3 / -O3 AVX2 kernels"),
]
FLOAT_SIDE = "fusionopt -O3 float source"
SPIN = "import time, sys\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def fusionopt(binary, *args, env=None):
    return run_fusionopt(binary, *args, env=env).stdout


@contextmanager
def background_load(seconds):
    """One busy core for the duration of the block (and never longer than `seconds`)."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(seconds)])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def fusionopt_side(optimized, input_flags, args, env=None):
    def measure():
        text = fusionopt(FUSIONOPT, "run", optimized, "--threads", args.threads, "--warmup", args.warmup,
                         "--repeat", args.repeat, *input_flags, *args.run_flags.split(), env=env)
        return float(LATENCY.search(text).group(1))
    return measure


def ort_side(model, feeds, args):
    session = ort_session(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, args.threads)
    return lambda: median_latency_ms(session, feeds, args.warmup, args.repeat)


def summary(values):
    return {"p50_ms": statistics.median(values), "spread_ms": [min(values), max(values)]}


def measure_model(entry, args, work):
    feeds = entry.feeds()
    input_flags = save_inputs(feeds, work)
    sides = {}
    for level in args.levels:
        optimized = work / f"O{level}.onnx"
        fusionopt(FUSIONOPT, entry.path, f"-O{level}", "-q", "-o", optimized)
        sides[f"fusionopt -O{level}"] = fusionopt_side(optimized, input_flags, args)
    for option, side, env, _, _ in VARIANTS:
        if getattr(args, option):
            sides[side] = fusionopt_side(work / f"O{max(args.levels)}.onnx", input_flags, args, env=env)
    if args.float_side:
        source = entry.path.parent.parent / entry.info["quantized_from"]
        optimized = work / "float.O3.onnx"
        fusionopt(FUSIONOPT, source, "-O3", "-q", "-o", optimized)
        sides[FLOAT_SIDE] = fusionopt_side(optimized, input_flags, args)
    sides["ORT"] = ort_side(entry.path, feeds, args)
    loads = ["quiet", "loaded"] if args.load else ["quiet"]
    rounds = {(side, load): [] for side in sides for load in loads}
    for _ in range(args.rounds):
        for side, measure in sides.items():
            rounds[(side, "quiet")].append(measure())
        if args.load:
            with background_load(args.load_limit):
                for side, measure in sides.items():
                    rounds[(side, "loaded")].append(measure())
    return {load: {side: summary(rounds[(side, load)]) for side in sides} for load in loads}


def ratios(result, levels):
    top = f"fusionopt -O{max(levels)}"
    quiet = result["quiet"]
    figures = {"o3_over_ort": quiet[top]["p50_ms"] / quiet["ORT"]["p50_ms"]}
    if 0 in levels:
        figures["o3_over_o0"] = quiet[top]["p50_ms"] / quiet["fusionopt -O0"]["p50_ms"]
    for _, side, _, key, _ in VARIANTS:
        if side in quiet:
            figures[key] = quiet[top]["p50_ms"] / quiet[side]["p50_ms"]
    if FLOAT_SIDE in quiet:
        figures["quantization_gain"] = quiet[FLOAT_SIDE]["p50_ms"] / quiet[top]["p50_ms"]
    if "loaded" in result:
        ours = result["loaded"][top]["p50_ms"] / quiet[top]["p50_ms"]
        theirs = result["loaded"]["ORT"]["p50_ms"] / quiet["ORT"]["p50_ms"]
        figures.update(slowdown_fusionopt=ours, slowdown_ort=theirs, slowdown_ratio=ours / theirs)
    return figures


def cell(summary_):
    low, high = summary_["spread_ms"]
    return f"{summary_['p50_ms']:.1f} ({low:.1f}–{high:.1f})"


def markdown(results, args):
    variants = [variant for variant in VARIANTS if getattr(args, variant[0])]
    sides = [f"fusionopt -O{level}" for level in args.levels] + [variant[1] for variant in variants]
    sides += [FLOAT_SIDE] if args.float_side else []
    sides.append("ORT")
    header = ["model"] + [f"{side} p50 ms" for side in sides] + ["-O3 / ORT"]
    if 0 in args.levels:
        header.append("-O3 / -O0")
    header += [variant[4] for variant in variants]
    header += ["float -O3 / -O3"] if args.float_side else []
    if args.load:
        header += [f"loaded {side} p50 ms" for side in ("fusionopt -O3", "ORT")]
        header += ["slowdown -O3", "slowdown ORT", "ratio"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for result in results:
        row = [result["model"]] + [cell(result["quiet"][side]) for side in sides]
        figures = result["ratios"]
        row.append(f"{figures['o3_over_ort']:.2f}")
        if 0 in args.levels:
            row.append(f"{figures['o3_over_o0']:.2f}")
        row += [f"{figures[variant[3]]:.2f}" for variant in variants]
        row += [f"{figures['quantization_gain']:.2f}"] if args.float_side else []
        if args.load:
            row += [cell(result["loaded"][side]) for side in ("fusionopt -O3", "ORT")]
            row += [f"{figures[key]:.2f}" for key in ("slowdown_fusionopt", "slowdown_ort", "slowdown_ratio")]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    labels = [("o3_over_ort", "-O3 / ORT"), ("o3_over_o0", "-O3 / -O0")]
    labels += [(variant[3], variant[4]) for variant in VARIANTS] + [("slowdown_ratio", "slowdown ratio")]
    labels += [("quantization_gain", "float -O3 / -O3")]
    for key, label in labels:
        values = [r["ratios"][key] for r in results if key in r["ratios"]]
        if values:
            mean = math.exp(sum(map(math.log, values)) / len(values))
            lines.append(f"- geometric mean {label}: {mean:.3f} over {len(values)} models (max {max(values):.2f})")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser, rounds=3)
    parser.add_argument("--load", action="store_true", help="also measure beside one busy core")
    parser.add_argument("--run-flags", default="", help="extra flags for `fusionopt run`, e.g. '--thread-wait spin'")
    parser.add_argument("--row-major-side", action="store_true",
                        help="also time the top level with FUSIONOPT_CPU_LAYOUTS=row-major (no convolution layouts)")
    parser.add_argument("--winograd-off-side", action="store_true",
                        help="also time the top level with FUSIONOPT_CPU_WINOGRAD=off (3x3 convolutions direct)")
    parser.add_argument("--avx2-side", action="store_true",
                        help="also time the top level with FUSIONOPT_CPU_ELEMENTWISE=avx2 (the runtime's own kernels "
                             "at 8 lanes on an AVX-512 host)")
    parser.add_argument("--load-limit", type=float, default=900, help="the busy loop's upper bound, seconds")
    parser.add_argument("--float-side", action="store_true",
                        help="a quantized corpus: also time fusionopt -O3 on each model's float source")
    args = parser.parse_args()
    entries = corpus_models(args)
    results = []
    for entry in entries:
        with tempfile.TemporaryDirectory(prefix="fusionopt-cpu-corpus-") as name:
            result = measure_model(entry, args, Path(name))
        result = {"model": entry.name, **result}
        result["ratios"] = ratios(result, args.levels)
        results.append(result)
        print(f"{entry.name}: " + ", ".join(f"{k} {v:.2f}" for k, v in result["ratios"].items()), flush=True)
    table = markdown(results, args)
    write_report(table, results, args)


if __name__ == "__main__":
    main()
