#!/usr/bin/env python3
"""Winograd F(4x4, 3x3) against oneDNN's direct kernel, convolution by convolution, on the real
corpus (src/cpu_runtime/contraction/winograd.h): the measurement behind the rule that picks it.

    .venv-export/bin/python bench/winograd.py --corpus full --only resnet densenet yolov8n --rounds 3

Per model, the -O3 file runs under `fusionopt run --profile --profile-top 0` with every
eligible 3x3 convolution forced onto Winograd (FUSIONOPT_CPU_WINOGRAD=always) and with none
(off), alternated over --rounds rounds, same feeds and threads. Each eligible convolution's time
(its node: a plain Conv or a fused Conv with its epilogue) is the median over the rounds;
convolutions of one shape are summed. `rule` says what the default (auto) does with the shape,
read from `run -v` on a one-node model of it. The model's own latency under off / auto /
always is in the last table: what the rule buys end to end.
"""
import argparse
import os
import re
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bench_common import DEFAULT_BINARY, add_corpus_arguments, corpus_models, run_fusionopt, save_inputs, write_report

FUSIONOPT = Path(os.environ.get("FUSIONOPT_BIN", DEFAULT_BINARY))
NODE_ROW = re.compile(r"^\s*([0-9.]+)\s+[0-9.]+%\s+\d+\s+\S+\s+(\S+)\s*$")
LATENCY = re.compile(r"latency_ms runs=\d+ min=[0-9.]+ median=([0-9.]+)")
WINOGRAD_RUNS = re.compile(r"(\d+) convolutions by Winograd")
MODES = ("off", "auto", "always")


def conv_of(node, functions):
    """The Conv a main-graph node runs: itself, or the one in its fused function's body."""
    if node.op_type == "Conv" and node.domain in ("", "ai.onnx"):
        return node, list(node.input)
    body = functions.get((node.domain, node.op_type))
    if body is None:
        return None, None
    convs = [n for n in body.node if n.op_type == "Conv"]
    if len(convs) != 1:
        return None, None
    # Body inputs stand for the call's inputs, position by position.
    formal = {name: actual for name, actual in zip(body.input, node.input)}
    return convs[0], [formal.get(name, name) for name in convs[0].input]


def eligible_convolutions(model_path, batch):
    """{node name: (C, M, H, W)} for the 3x3 stride-1 ungrouped convolutions with channels in
    eights (where F(4x4, 3x3) applies), read from the -O3 file."""
    model = onnx.load(str(model_path), load_external_data=False)
    graph = model.graph
    shapes = {v.name: [d.dim_value or batch for d in v.type.tensor_type.shape.dim]
              for v in list(graph.value_info) + list(graph.input)}
    weights = {i.name: list(i.dims) for i in graph.initializer}
    functions = {(f.domain, f.name): f for f in model.functions}
    found = {}
    for node in graph.node:
        conv, inputs = conv_of(node, functions)
        if conv is None or len(inputs) < 2 or inputs[1] not in weights or inputs[0] not in shapes:
            continue
        attributes = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
        w = weights[inputs[1]]
        x = shapes[inputs[0]]
        if (len(w) != 4 or w[2:] != [3, 3] or attributes.get("group", 1) != 1
                or any(s != 1 for s in attributes.get("strides", [1, 1]))
                or any(d != 1 for d in attributes.get("dilations", [1, 1]))
                or w[0] % 8 or w[1] % 8 or len(x) != 4):
            continue
        found[node.name] = (w[1], w[0], x[2], x[3])
    return found


def rule_picks(shape, batch, work):
    """Whether the default mode runs a convolution of `shape` by Winograd: `run -v` on a
    one-node model of it (same-padded, as the corpus's are)."""
    c, m, h, w = shape
    weight = numpy_helper.from_array(np.zeros((m, c, 3, 3), np.float32), "W")
    node = helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, m, h, w])], [weight])
    path = work / "rule.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    done = run_fusionopt(FUSIONOPT, "run", path, "-v", env={"FUSIONOPT_CPU_WINOGRAD": "auto"})
    return int(WINOGRAD_RUNS.search(done.stderr).group(1)) > 0


def profile(optimized, input_flags, args, mode):
    done = run_fusionopt(FUSIONOPT, "run", optimized, "--threads", args.threads, "--warmup", args.warmup, "--repeat",
                         args.repeat, "--profile", "--profile-top", 0, *input_flags,
                         env={"FUSIONOPT_CPU_WINOGRAD": mode})
    nodes = {}
    for line in done.stdout.splitlines():
        match = NODE_ROW.match(line)
        if match:
            nodes[match.group(2)] = float(match.group(1))
    return float(LATENCY.search(done.stdout).group(1)), nodes


def measure_model(entry, args, work):
    feeds = entry.feeds()
    batch = next(iter(feeds.values())).shape[0]
    input_flags = save_inputs(feeds, work)
    optimized = work / "O3.onnx"
    run_fusionopt(FUSIONOPT, entry.path, "-O3", "-q", "-o", optimized)
    convs = eligible_convolutions(optimized, batch)
    latency = {mode: [] for mode in MODES}
    node_times = {mode: defaultdict(list) for mode in ("off", "always")}
    for _ in range(args.rounds):
        for mode in MODES:
            ms, nodes = profile(optimized, input_flags, args, mode)
            latency[mode].append(ms)
            if mode in node_times:
                for name in convs:
                    node_times[mode][name].append(nodes.get(name, float("nan")))
    per_shape = defaultdict(lambda: {"count": 0, "direct_ms": 0.0, "winograd_ms": 0.0})
    for name, shape in convs.items():
        row = per_shape[shape]
        row["count"] += 1
        row["direct_ms"] += statistics.median(node_times["off"][name])
        row["winograd_ms"] += statistics.median(node_times["always"][name])
    shapes = []
    for shape, row in sorted(per_shape.items(), key=lambda item: -item[1]["direct_ms"]):
        c, m, h, w = shape
        tiles = batch * ((h + 3) // 4) * ((w + 3) // 4)
        shapes.append({"shape": list(shape), "tiles": tiles, **row, "ratio": row["winograd_ms"] / row["direct_ms"],
                       "rule_picks": rule_picks(shape, batch, work)})
    return {"model": entry.name, "shapes": shapes,
            "latency": {mode: {"p50_ms": statistics.median(v), "spread_ms": [min(v), max(v)]}
                        for mode, v in latency.items()}}


def markdown(results):
    lines = ["| model | C -> M | H x W | tiles | convs | direct ms | Winograd ms | Winograd / direct | rule picks it |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for result in results:
        for row in result["shapes"]:
            c, m, h, w = row["shape"]
            lines.append(f"| {result['model']} | {c} -> {m} | {h}x{w} | {row['tiles']} | {row['count']} | "
                         f"{row['direct_ms']:.3f} | {row['winograd_ms']:.3f} | {row['ratio']:.2f} | "
                         f"{'yes' if row['rule_picks'] else 'no'} |")
    lines += ["", "| model | off p50 ms | auto p50 ms | always p50 ms | auto / off |", "|---|---:|---:|---:|---:|"]
    for result in results:
        cells = [result["latency"][mode] for mode in MODES]
        text = [f"{c['p50_ms']:.1f} ({c['spread_ms'][0]:.1f}–{c['spread_ms'][1]:.1f})" for c in cells]
        lines.append(f"| {result['model']} | " + " | ".join(text) +
                     f" | {cells[1]['p50_ms'] / cells[0]['p50_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_arguments(parser, rounds=3)
    args = parser.parse_args()
    results = []
    for entry in corpus_models(args):
        with tempfile.TemporaryDirectory(prefix="fusionopt-winograd-") as name:
            results.append(measure_model(entry, args, Path(name)))
        print(f"{entry.name}: {len(results[-1]['shapes'])} convolution shapes", file=sys.stderr, flush=True)
    write_report(markdown(results), results, args)


if __name__ == "__main__":
    main()
