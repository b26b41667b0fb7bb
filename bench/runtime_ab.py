#!/usr/bin/env python3
"""Two builds of fusionopt's CPU runtime on the same -O3 files of the real corpus, alternated in
rounds: what a runtime change buys, with the optimizer held fixed (the files are written once,
by --after).

    .venv-export/bin/python bench/runtime_ab.py --before /tmp/fusionopt_before --after build/fusionopt \\
        --corpus full --only bert_dynamo18_sdpa_fp16 gpt2_dynamo18_sdpa_fp16 --rounds 3

Each cell is the median over the rounds of `fusionopt run`'s p50 (--warmup untimed and --repeat
timed inferences per round), with the spread (min–max); the ratio is after / before.

One build under two settings of the runtime's environment knobs is an A/B too:

    .venv-export/bin/python bench/runtime_ab.py --before build/fusionopt --after build/fusionopt \
        --before-env FUSIONOPT_CPU_GEMM_WEIGHTS=column-major --after-env FUSIONOPT_CPU_GEMM_WEIGHTS=packed \
        --corpus full --only bert --rounds 3
"""
import argparse
import re
import statistics
import tempfile
from pathlib import Path

from bench_common import add_corpus_arguments, corpus_models, run_fusionopt, save_inputs, write_report

LATENCY = re.compile(r"latency_ms runs=\d+ min=[0-9.]+ median=([0-9.]+)")


def p50(binary, model, flags, args, env):
    text = run_fusionopt(binary, "run", model, "--threads", args.threads, "--warmup", args.warmup,
                         "--repeat", args.repeat, *flags, env=env).stdout
    return float(LATENCY.search(text).group(1))


def environment(text):
    """NAME=VALUE, as --before-env/--after-env take it."""
    name, equals, value = text.partition("=")
    if not name or not equals:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser, rounds=3)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--before-env", type=environment, nargs="*", default=[], metavar="NAME=VALUE",
                        help="environment for the before side's runs")
    parser.add_argument("--after-env", type=environment, nargs="*", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    envs = {"before": dict(args.before_env), "after": dict(args.after_env)}
    lines = ["| model | before p50 ms | after p50 ms | after / before |", "|---|---:|---:|---:|"]
    results = []
    for entry in corpus_models(args):
        with tempfile.TemporaryDirectory(prefix="fusionopt-runtime-ab-") as name:
            work = Path(name)
            flags = save_inputs(entry.feeds(), work)
            optimized = work / "O3.onnx"
            run_fusionopt(args.after, entry.path, "-O3", "-q", "-o", optimized)
            times = {"before": [], "after": []}
            for _ in range(args.rounds):
                for side in ("before", "after"):
                    times[side].append(p50(getattr(args, side), optimized, flags, args, envs[side]))
        cells = {side: (statistics.median(values), min(values), max(values)) for side, values in times.items()}
        ratio = cells["after"][0] / cells["before"][0]
        results.append({"model": entry.name, "before_ms": times["before"], "after_ms": times["after"], "ratio": ratio,
                        "before_env": envs["before"], "after_env": envs["after"]})
        lines.append(f"| {entry.name} | " + " | ".join(f"{m:.1f} ({lo:.1f}–{hi:.1f})" for m, lo, hi in cells.values())
                     + f" | {ratio:.2f} |")
        print(f"{entry.name}: after / before {ratio:.2f}", flush=True)
    write_report("\n".join(lines) + "\n", results, args)


if __name__ == "__main__":
    main()
