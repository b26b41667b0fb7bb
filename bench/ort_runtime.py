#!/usr/bin/env python3
"""Issue 16's comparison: ONNX Runtime on the original model against ONNX Runtime on
`fusionopt MODEL -O3 --runtime ort`, per model of the real-export corpus, both with
ENABLE_ALL, the same feeds and threads, alternated in rounds.

    .venv/bin/python bench/ort_runtime.py --only bert gpt2                 # committed fixtures
    .venv-export/bin/python bench/ort_runtime.py --corpus full --rounds 3 --markdown ort.md

Per model: p50 of each side (median of the round medians, with their spread), the ratio
original / optimized (above 1: the optimized file runs faster), the nodes ORT runs after its
own optimizations (its saved optimized graph: the kernels it launches per inference), what
`--runtime ort` wrote (its report's lowered groups), and whether the outputs match ORT on the
original (rtol 1e-3, atol 1e-4; float16 models rtol 2e-2, atol 4e-3). With --portable-side it also times ORT on the plain -O3 file,
whose ai.fusionopt functions ORT inlines. With --baseline-binary it also times ORT on another
fusionopt build's --runtime ort output (a lowering change measured before/after in one run). With --onnxscript-side it also times ORT on what the
tool a user would pick instead writes, onnxscript's `ort_fusions.optimize_for_ort` (needs
onnxscript, in requirements-dev.txt), and reports where that output fails to load in ORT.
"""
import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (DEFAULT_BINARY, add_corpus_arguments, corpus_models, median_latency_ms,  # noqa: E402
                          ort_session, run_fusionopt, write_report)

ALL = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
ort.set_default_logger_severity(3)  # not ORT's note on every saved optimized graph
RTOL, ATOL = 1e-3, 1e-4
FP16_TOLERANCE = (2e-2, 4e-3)  # float16 models: what tests/python/test_runtime_ort.py allows them
OURS = ("original", "runtime_ort", "portable", "baseline")  # the sides whose outputs must match


def optimize(binary, model, work, name, *flags):
    out, report = work / f"{name}.onnx", work / f"{name}.json"
    run_fusionopt(binary, model, "-O3", "-o", out, "--report", report, *flags)
    return out, json.loads(report.read_text())


def nodes_after_ort(model, threads, work):
    """How many nodes ORT runs once its own graph optimizations are done."""
    saved = work / f"{Path(model).stem}.ort.onnx"
    ort_session(model, ALL, threads, optimized_model_path=saved)
    return len(onnx.load(str(saved), load_external_data=False).graph.node)


def onnxscript_fused(model, work):
    """onnxscript's ort_fusions output for `model` and None, or None and why it is missing: the
    rewriter failed, or ORT refuses to load what it wrote (its first line of error)."""
    import onnx_ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort
    out = work / "onnxscript.onnx"
    try:
        fused, _ = optimize_for_ort(onnx_ir.load(str(model)))
        onnx_ir.save(fused, str(out))
    except Exception as error:  # noqa: BLE001 -- any failure of the other tool is a result to report
        return None, f"rewriter failed: {str(error).splitlines()[0][:120]}"
    try:
        ort_session(out, ALL, 1)
    except Exception as error:  # noqa: BLE001
        return None, f"ORT does not load it: {str(error).splitlines()[0][:160]}"
    return out, None


def measure_model(entry, args, work):
    feeds = entry.feeds()
    lowered_file, report = optimize(args.binary, entry.path, work, "ort", "--runtime", "ort", "--target", args.target)
    sides = {"original": entry.path, "runtime_ort": lowered_file}
    if args.portable_side:
        sides["portable"], _ = optimize(args.binary, entry.path, work, "portable", "--target", args.target)
    if args.baseline_binary:
        sides["baseline"], _ = optimize(args.baseline_binary, entry.path, work, "baseline", "--runtime", "ort",
                                        "--target", args.target)
    onnxscript_failure = None
    if args.onnxscript_side:
        fused, onnxscript_failure = onnxscript_fused(entry.path, work)
        if fused is not None:
            sides["onnxscript"] = fused
    sessions = {name: ort_session(path, ALL, args.threads) for name, path in sides.items()}
    reference = sessions["original"].run(None, feeds)
    rtol, atol = FP16_TOLERANCE if entry.info.get("dtype") == "float16" else (RTOL, ATOL)
    matches = {}
    for name, session in sessions.items():
        outputs = session.run(None, feeds)
        matches[name] = all(np.allclose(a.astype(np.float32), b.astype(np.float32), rtol=rtol, atol=atol)
                            for a, b in zip(reference, outputs))
    rounds = collections.defaultdict(list)
    for round_index in range(args.rounds):
        order = list(sessions) if round_index % 2 == 0 else list(reversed(sessions))
        for name in order:
            rounds[name].append(median_latency_ms(sessions[name], feeds, args.warmup, args.repeat))
    written = collections.Counter(one["written"] for one in report["ort_lowering"]["lowered"])
    return {
        "model": entry.name,
        "p50_ms": {name: {"median": statistics.median(values), "min": min(values), "max": max(values)}
                   for name, values in rounds.items()},
        "ort_nodes": {name: nodes_after_ort(path, args.threads, work / name) for name, path in sides.items()},
        "lowered": dict(written),
        "kept": len(report["ort_lowering"]["kept"]),
        "matches": matches,
        "onnxscript_failure": onnxscript_failure,
    }


def cell(summary):
    return f"{summary['median']:.3g} ({summary['min']:.3g}–{summary['max']:.3g})"


def onnxscript_cells(result):
    """ORT on onnxscript's output: its p50, --runtime ort's speed over it, its ORT nodes."""
    if result["onnxscript_failure"]:
        return f" {result['onnxscript_failure']} | — | — |"
    p50 = result["p50_ms"]
    over = p50["onnxscript"]["median"] / p50["runtime_ort"]["median"]
    differs = "" if result["matches"]["onnxscript"] else " (outputs differ)"
    return f" {cell(p50['onnxscript'])}{differs} | {over:.2f} | {result['ort_nodes']['onnxscript']} |"


def markdown(results, portable, onnxscript, baseline=False):
    head = "| model | ORT on original p50 ms | ORT on --runtime ort p50 ms | speed-up |"
    rule = "|---|---:|---:|---:|"
    if portable:
        head += " ORT on portable -O3 p50 ms |"
        rule += "---:|"
    if baseline:
        head += " ORT on the baseline build's --runtime ort p50 ms | over the baseline's | baseline's ORT nodes |"
        rule += "---:|---:|---:|"
    if onnxscript:
        head += " ORT on onnxscript's ort_fusions p50 ms | --runtime ort over onnxscript | onnxscript's ORT nodes |"
        rule += "---:|---:|---:|"
    head += " ORT nodes original → --runtime ort | written for ORT | outputs match |"
    rule += "---:|---|---|"
    rows = [head, rule]
    speedups = []
    for result in results:
        p50 = result["p50_ms"]
        speedup = p50["original"]["median"] / p50["runtime_ort"]["median"]
        speedups.append(speedup)
        row = f"| {result['model']} | {cell(p50['original'])} | {cell(p50['runtime_ort'])} | {speedup:.2f} |"
        if portable:
            row += f" {cell(p50['portable'])} |"
        if baseline:
            row += (f" {cell(p50['baseline'])} | {p50['baseline']['median'] / p50['runtime_ort']['median']:.2f} |"
                    f" {result['ort_nodes']['baseline']} |")
        if onnxscript:
            row += onnxscript_cells(result)
        nodes = result["ort_nodes"]
        written = ", ".join(f"{op.split('::')[-1]} ×{count}" for op, count in sorted(result["lowered"].items())) or "—"
        ours = all(match for side, match in result["matches"].items() if side in OURS)
        row += f" {nodes['original']} → {nodes['runtime_ort']} | {written} | {'yes' if ours else 'NO'} |"
        rows.append(row)
    summary = f"- geometric mean speed-up: {geometric_mean(speedups):.3f} over {len(speedups)} models (min {min(speedups):.2f})\n"
    if onnxscript:
        loaded = [result["p50_ms"] for result in results if not result["onnxscript_failure"]]
        theirs = [p50["original"]["median"] / p50["onnxscript"]["median"] for p50 in loaded]
        over = [p50["onnxscript"]["median"] / p50["runtime_ort"]["median"] for p50 in loaded]
        if loaded:
            summary += (f"- onnxscript's output: geometric mean speed-up {geometric_mean(theirs):.3f} over the "
                        f"{len(loaded)} models whose output loads; --runtime ort over it {geometric_mean(over):.3f} "
                        f"(min {min(over):.2f})\n")
    return "\n".join(rows) + "\n\n" + summary


def geometric_mean(ratios):
    return float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser, rounds=3)
    parser.add_argument("--binary", type=Path, default=Path(os.environ.get("FUSIONOPT_BIN", DEFAULT_BINARY)))
    parser.add_argument("--portable-side", action="store_true", help="also time ORT on the plain -O3 file")
    parser.add_argument("--target", default="cpu",
                        help="fusionopt's --target, which decides -O3's fusions before the lowering: cpu (the "
                             "default) decides and times them on this CPU, where this script runs ORT")
    parser.add_argument("--baseline-binary", type=Path,
                        help="also time ORT on another fusionopt build's --runtime ort output (before/after a "
                             "lowering change, in the same run)")
    parser.add_argument("--onnxscript-side", action="store_true",
                        help="also time ORT on onnxscript's ort_fusions.optimize_for_ort output")
    args = parser.parse_args()
    if args.onnxscript_side:
        try:
            import onnxscript.rewriter.ort_fusions  # noqa: F401
        except ImportError:
            sys.exit("error: --onnxscript-side needs onnxscript (pip install -r requirements-dev.txt)")
    results = []
    for entry in corpus_models(args):
        with tempfile.TemporaryDirectory(prefix="fusionopt-ort-") as name:
            work = Path(name)
            for side in ("original", "runtime_ort", "portable", "baseline", "onnxscript"):
                (work / side).mkdir()
            result = measure_model(entry, args, work)
        results.append(result)
        p50 = result["p50_ms"]
        print(f"{entry.name}: {p50['original']['median'] / p50['runtime_ort']['median']:.2f}x, "
              f"matches {result['matches']}", file=sys.stderr)
    write_report(markdown(results, args.portable_side, args.onnxscript_side, bool(args.baseline_binary)), results, args)
    # onnxscript's mismatches are its own, reported in its cells; only ours fail the run.
    if not all(all(match for side, match in result["matches"].items() if side in OURS) for result in results):
        sys.exit("error: an optimized model's outputs differ from ORT on the original")


if __name__ == "__main__":
    main()
