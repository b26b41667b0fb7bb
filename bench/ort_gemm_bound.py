#!/usr/bin/env python3
"""How far any rewrite of a model can speed ONNX Runtime up while it keeps the model's float
GEMMs: ORT ENABLE_ALL on the original and on `fusionopt -O3 --runtime ort`, each node's kernel
time from ORT's own profile, split into the GEMMs against weights (MatMul / Gemm / FusedMatMul
with an initializer as B, which ORT runs in MLAS on weights it prepacked, the same on both
sides) and the rest (issue 16: the 1.2x target over the transformers).

    .venv/bin/python bench/ort_gemm_bound.py --only bert gpt2            # committed fixtures
    .venv-export/bin/python bench/ort_gemm_bound.py --corpus full --rounds 3 --markdown bound.md

Per model, from the original's profile: its p50, the time in weight GEMMs, and the ceiling
p50 / GEMM time, the speed-up a rewrite reaches if everything but those GEMMs took no time at
all. Then `--runtime ort`'s p50 and speed-up, the time in its weight GEMMs and in its attention
kernels (com.microsoft Attention includes the QKV projection it takes in), the share of the
original's non-GEMM time it removed, and the ceiling once the attention core's own time (the
attention kernels less the projection time that moved into them) is counted as work too. The sides alternate in rounds; each round is a fresh
profiled session whose warmup runs are left out of the profile.
"""
import argparse
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (DEFAULT_BINARY, add_corpus_arguments, corpus_models, ort_session,  # noqa: E402
                          profiled_ort_kernels, run_fusionopt, write_report)

ALL = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
ort.set_default_logger_severity(3)
GEMM_OPS = {"MatMul", "Gemm", "FusedMatMul", "FusedGemm"}
ATTENTION_OPS = {"Attention", "MultiHeadAttention", "GroupQueryAttention"}


def weight_gemm_nodes(model, threads, work):
    """Names of the nodes ORT runs as a GEMM against an initializer, read from the graph ORT
    saves after its own optimizations (the names its profile uses)."""
    saved = work / "ort_optimized.onnx"
    ort_session(model, ALL, threads, optimized_model_path=saved)
    graph = onnx.load(str(saved), load_external_data=False).graph
    weights = {initializer.name for initializer in graph.initializer}
    return {node.name for node in graph.node
            if node.op_type in GEMM_OPS and len(node.input) > 1 and node.input[1] in weights}


def split_kernel_time(kernels, gemm_nodes, repeat):
    """Per-run ms of one profiled session's kernels by class: weight GEMMs, attention, the rest."""
    ms = defaultdict(float)
    for node, op, duration in kernels:
        kind = "gemm" if node in gemm_nodes else "attention" if op in ATTENTION_OPS else "rest"
        ms[kind] += duration / repeat
    return ms


def measure_model(entry, args, work):
    feeds = entry.feeds()
    lowered = work / "ort.onnx"
    run_fusionopt(args.binary, entry.path, "-O3", "--runtime", "ort", "--target", "cpu", "-o", lowered)
    sides = {"original": Path(entry.path), "runtime_ort": lowered}
    gemm_nodes = {}
    for name, path in sides.items():
        (work / name).mkdir(exist_ok=True)
        gemm_nodes[name] = weight_gemm_nodes(path, args.threads, work / name)
    p50s, splits = defaultdict(list), defaultdict(list)
    for round_index in range(args.rounds):
        order = list(sides) if round_index % 2 == 0 else list(reversed(sides))
        for name in order:
            p50, kernels = profiled_ort_kernels(sides[name], feeds, args.threads, args.warmup, args.repeat,
                                                work / name / "profile")
            p50s[name].append(p50)
            splits[name].append(split_kernel_time(kernels, gemm_nodes[name], args.repeat))
    result = {"model": entry.name}
    for name in sides:
        result[name] = {"p50_ms": statistics.median(p50s[name]),
                        "p50_spread_ms": [min(p50s[name]), max(p50s[name])],
                        **{f"{kind}_ms": statistics.median(split.get(kind, 0.0) for split in splits[name])
                           for kind in ("gemm", "attention", "rest")}}
    original, ours = result["original"], result["runtime_ort"]
    non_gemm = original["p50_ms"] - original["gemm_ms"]
    result["ceiling"] = original["p50_ms"] / original["gemm_ms"] if original["gemm_ms"] > 0 else None
    # The attention core's own time: --runtime ort's attention kernels less the projection GEMM
    # time that moved into them (Attention takes in the QKV projection the original ran apart).
    core = ours["attention_ms"] - max(0.0, original["gemm_ms"] - ours["gemm_ms"])
    floor = original["gemm_ms"] + max(0.0, core)
    result["ceiling_with_core"] = original["p50_ms"] / floor if floor > 0 else None
    result["speed_up"] = original["p50_ms"] / ours["p50_ms"]
    result["non_gemm_removed"] = (original["p50_ms"] - ours["p50_ms"]) / non_gemm if non_gemm > 0 else None
    return result


def geometric_mean(values):
    values = [v for v in values if v]
    return statistics.geometric_mean(values) if values else None


def fixed(value):
    return f"{value:.2f}" if value else "—"


def markdown(results):
    lines = ["| model | ORT on original p50 ms | its weight GEMMs ms | GEMM share | ceiling | "
             "ORT on --runtime ort p50 ms | speed-up | its weight GEMMs ms | its attention kernels ms | "
             "non-GEMM time removed | ceiling with the attention core |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        o, ours = r["original"], r["runtime_ort"]
        ceiling = fixed(r["ceiling"])
        removed = f"{r['non_gemm_removed']:.0%}" if r["non_gemm_removed"] is not None else "—"
        lines.append(f"| {r['model']} | {o['p50_ms']:.3g} | {o['gemm_ms']:.3g} | {o['gemm_ms'] / o['p50_ms']:.0%} | "
                     f"{ceiling} | {ours['p50_ms']:.3g} | {r['speed_up']:.2f} | {ours['gemm_ms']:.3g} | "
                     f"{ours['attention_ms']:.3g} | {removed} | {fixed(r.get('ceiling_with_core'))} |")
    ceiling = geometric_mean(r["ceiling"] for r in results)
    with_core = geometric_mean(r.get("ceiling_with_core") for r in results)
    reached = geometric_mean(r["speed_up"] for r in results)
    if ceiling:
        lines += ["", f"- geometric mean over {len(results)} models: ceiling {ceiling:.3f}, with the attention "
                      f"core {with_core:.3f}; --runtime ort {reached:.3f}"]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser, rounds=3)
    parser.add_argument("--binary", type=Path, default=DEFAULT_BINARY)
    args = parser.parse_args()
    results = []
    for entry in corpus_models(args):
        with tempfile.TemporaryDirectory() as folder:
            result = measure_model(entry, args, Path(folder))
        print(f"{entry.name}: ceiling {result['ceiling'] or 0:.2f}, speed-up {result['speed_up']:.2f}",
              file=sys.stderr)
        results.append(result)
    write_report(markdown(results), results, args)


if __name__ == "__main__":
    main()
