#!/usr/bin/env python3
"""fusionopt vs onnxruntime, per benchmark model, measured in one run on the same machine.

For each model, with the same --threads and the same seeded inputs on every side:
- onnxruntime with ORT_DISABLE_ALL and with ORT_ENABLE_ALL: median latency over --repeat runs
  after --warmup, and the node count of ORT's optimized graph (saved through
  SessionOptions.optimized_model_filepath);
- fusionopt -O0..-O3 run on our CPU runtime (`fusionopt run -v`): median latency and kernels
  launched per inference;
- the ratio fusionopt-O3 / ORT_ENABLE_ALL latency (issue 6's goal: <= 1.0 on the
  transformer-style models);
- O3's speed-up over the unoptimized model as `fusionopt bench -O3` measures it: the two
  interleaved inference by inference (--repeat × --rounds pairs), the p50 ratio — far less
  exposed to a busy machine's drift than the separate medians above;
- and the largest absolute difference between the outputs of
  fusionopt -O3 and ORT_ENABLE_ALL on those inputs, so a fast but wrong result shows.

Prints a Markdown table; with --plot DIR also writes DIR/compare.png and DIR/compare.svg
(kernels per model, and speed-ups over ORT_DISABLE_ALL).

    .venv/bin/python bench/compare.py --threads 2 --repeat 20 --rounds 2 --plot docs/img
"""
import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_common as common  # noqa: E402

LEVELS = (0, 1, 2, 3)
# Benchmark set of issue 6: light models from ../shared/models, benchmark-size project models.
SHARED_SET = {"resnet50": "light_resnet50.onnx", "inception_v1": "light_inception_v1.onnx",
              "densenet121": "light_densenet121.onnx", "squeezenet": "light_squeezenet.onnx"}
PROJECT_SET = ("bert_style", "gpt2_style", "mobilenet_style", "vit_style")
COLUMNS = (["model", "ORT nodes ENABLE_ALL"] + [f"fusionopt kernels O{n}" for n in LEVELS] +
           ["ORT DISABLE_ALL ms", "ORT ENABLE_ALL ms"] + [f"fusionopt O{n} ms" for n in LEVELS] +
           ["fusionopt O3 / ORT ENABLE_ALL", "O3 vs O0 interleaved", "O3 max abs diff vs ORT"])


def benchmark_models(args):
    """[(label, path)] for the selected models, with a note on stderr for each one absent."""
    if args.model_paths:
        missing = [p for p in args.model_paths if not pathlib.Path(p).is_file()]
        if missing:
            sys.exit(f"--model-paths: no such file: {', '.join(missing)}")
        return [(pathlib.Path(p).stem, pathlib.Path(p)) for p in args.model_paths]
    selected = args.models or [*SHARED_SET, *PROJECT_SET]
    common.ensure_bench_models([name for name in selected if name in PROJECT_SET])
    models = []
    for name in selected:
        if name in SHARED_SET:
            path = common.SHARED_MODELS / SHARED_SET[name]
            if not path.is_file():
                print(f"note: skipping {name}: {path} is absent", file=sys.stderr)
                continue
            models.append((name, path))
        else:
            models.append((f"{name} (bench)", common.BENCH_MODELS / f"{name}.onnx"))
    return models


def ort_sessions(path, args, folder):
    """The ORT_DISABLE_ALL and ORT_ENABLE_ALL sessions, and the node count of the graph ORT
    saves for ENABLE_ALL."""
    level = ort.GraphOptimizationLevel
    disabled = common.ort_session(path, level.ORT_DISABLE_ALL, args.threads)
    optimized_path = pathlib.Path(folder) / "ort_enable_all.onnx"
    enabled = common.ort_session(path, level.ORT_ENABLE_ALL, args.threads, optimized_path)
    nodes = len(onnx.load(str(optimized_path), load_external_data=False).graph.node)
    return disabled, enabled, nodes


def max_abs_diff(output_dir, reference):
    """Largest |fusionopt - ORT| over all outputs (fusionopt writes output_<i>.pb in graph order)."""
    worst = 0.0
    for index, expected in enumerate(reference):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((pathlib.Path(output_dir) / f"output_{index}.pb").read_bytes())
        actual = numpy_helper.to_array(tensor)
        if actual.shape != expected.shape:
            return float("inf")
        worst = max(worst, float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)),
                                        initial=0.0)))
    return worst


def interleaved_speedup(path, feeds, args, folder):
    """`fusionopt bench -O3`'s speed-up: original and O3 timed in alternation, p50 over p50."""
    report = pathlib.Path(folder) / "bench.json"
    shapes = [f"--shape={name}={'x'.join(map(str, value.shape))}" for name, value in feeds.items()]
    common.run_fusionopt(args.binary, "bench", path, "-O3", "--threads", args.threads, "--warmup", args.warmup,
                         "--iters", args.repeat * args.rounds, "--json", report, *shapes)
    return json.loads(report.read_text())["speedup"]


def measure_model(path, args, folder):
    feeds = common.make_inputs(path, args.seed, args.sequence)
    input_flags = common.save_inputs(feeds, folder)
    disabled, enabled, ort_nodes = ort_sessions(path, args, folder)
    reference = enabled.run(None, feeds)
    optimized = {n: pathlib.Path(folder) / f"model.O{n}.onnx" for n in LEVELS}
    for n in LEVELS:
        common.run_fusionopt(args.binary, path, f"-O{n}", "-o", optimized[n])
    output_dir = pathlib.Path(folder) / "fusionopt_outputs"
    output_dir.mkdir(exist_ok=True)
    # The sides alternate --rounds times so drift on a busy machine hits each alike; each
    # side's figure is its best median.
    medians = {side: [] for side in ["ORT DISABLE_ALL ms", "ORT ENABLE_ALL ms", *(f"fusionopt O{n} ms" for n in LEVELS)]}
    kernels = {}
    for _ in range(args.rounds):
        medians["ORT DISABLE_ALL ms"].append(common.median_latency_ms(disabled, feeds, args.warmup, args.repeat))
        medians["ORT ENABLE_ALL ms"].append(common.median_latency_ms(enabled, feeds, args.warmup, args.repeat))
        for n in LEVELS:
            extra = [*input_flags, *(["--output-dir", output_dir] if n == 3 else [])]
            ms, kernels[n] = common.fusionopt_latency(args.binary, optimized[n], args.threads, args.warmup,
                                                      args.repeat, extra)
            medians[f"fusionopt O{n} ms"].append(ms)
    row = {"ORT nodes ENABLE_ALL": ort_nodes, **{f"fusionopt kernels O{n}": kernels[n] for n in LEVELS},
           **{side: min(values) for side, values in medians.items()}}
    row["fusionopt O3 / ORT ENABLE_ALL"] = row["fusionopt O3 ms"] / row["ORT ENABLE_ALL ms"]
    row["O3 vs O0 interleaved"] = interleaved_speedup(path, feeds, args, folder)
    row["O3 max abs diff vs ORT"] = max_abs_diff(output_dir, reference)
    return row


def format_cell(column, value):
    if isinstance(value, int) or column == "model":
        return str(value)
    if column == "O3 max abs diff vs ORT":
        return f"{value:.1e}"
    return f"{value:.2f}"


def plot(rows, folder):
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    labels = [row["model"].split(" (")[0] for row in rows]
    x = np.arange(len(rows))
    figure, (kernels_axes, speed_axes) = plt.subplots(2, 1, figsize=(max(8, 1.4 * len(rows)), 9))
    kernel_series = [("ORT ENABLE_ALL nodes", "ORT nodes ENABLE_ALL"),
                     *((f"fusionopt O{n} kernels", f"fusionopt kernels O{n}") for n in LEVELS)]
    width = 0.8 / len(kernel_series)
    for i, (name, key) in enumerate(kernel_series):
        kernels_axes.bar(x + (i - (len(kernel_series) - 1) / 2) * width, [r[key] for r in rows], width, label=name)
    kernels_axes.set_ylabel("kernels per inference")
    kernels_axes.set_yscale("log")  # DenseNet's ~1000 kernels next to a transformer's ~20
    kernels_axes.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    kernels_axes.set_xticks(x, labels)
    kernels_axes.legend(fontsize="small")
    kernels_axes.set_title("Kernels launched (ORT: nodes of its optimized graph)")
    speed_series = [("ORT ENABLE_ALL", "ORT ENABLE_ALL ms"),
                    *((f"fusionopt O{n}", f"fusionopt O{n} ms") for n in LEVELS)]
    width = 0.8 / len(speed_series)
    for i, (name, key) in enumerate(speed_series):
        speed_axes.bar(x + (i - (len(speed_series) - 1) / 2) * width,
                       [r["ORT DISABLE_ALL ms"] / r[key] for r in rows], width, label=name)
    speed_axes.axhline(1.0, color="black", linewidth=0.8)
    speed_axes.set_yscale("log")  # slower and faster than the baseline read symmetrically
    speed_axes.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    speed_axes.set_ylabel("speed-up over ORT DISABLE_ALL")
    speed_axes.set_xticks(x, labels)
    speed_axes.legend(fontsize="small")
    speed_axes.set_title("CPU median latency, speed-up over onnxruntime ORT_DISABLE_ALL")
    figure.tight_layout()
    paths = [folder / "compare.png", folder / "compare.svg"]
    for path in paths:
        figure.savefig(path)
    plt.close(figure)
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1, help="alternations of all sides; best median counts")
    parser.add_argument("--sequence", type=int, default=128, help="length for symbolic sequence dims")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs every side gets")
    parser.add_argument("--models", nargs="*", choices=[*SHARED_SET, *PROJECT_SET],
                        help="subset of the benchmark set (default: all)")
    parser.add_argument("--model-paths", nargs="*", help="explicit model files instead of the benchmark set")
    parser.add_argument("--plot", metavar="DIR", help="write DIR/compare.png and DIR/compare.svg")
    parser.add_argument("--binary", default=str(common.DEFAULT_BINARY))
    args = parser.parse_args()
    # ORT warns on every ENABLE_ALL graph it saves that NCHWc layouts are machine-specific; the
    # saved graph is only counted here, on the machine that made it.
    ort.set_default_logger_severity(3)
    if args.repeat < 1 or args.rounds < 1:
        parser.error("--repeat and --rounds must be at least 1")

    models = benchmark_models(args)
    print(f"threads={args.threads} warmup={args.warmup} repeat={args.repeat} rounds={args.rounds} seed={args.seed} "
          f"sequence={args.sequence} "
          f"onnxruntime={ort.__version__} (median latency)")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * (len(COLUMNS) - 1))
    rows = []
    for label, path in models:
        with tempfile.TemporaryDirectory() as folder:
            row = {"model": label, **measure_model(path, args, folder)}
        rows.append(row)
        print("| " + " | ".join(format_cell(c, row[c]) for c in COLUMNS) + " |", flush=True)
    if args.plot and rows:
        for path in plot(rows, args.plot):
            print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
