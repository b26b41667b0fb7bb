"""Helpers the benchmark scripts share: where the models live, seeded inputs for a model's graph
inputs, onnxruntime sessions and timing, and running the `fusionopt` binary.

Every side of a comparison is fed the same arrays: `make_inputs` draws them once from a seed,
`save_inputs` writes them as .npy files for `fusionopt run --input NAME=FILE.npy`, and the
onnxruntime side gets the arrays themselves.
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_MODELS = ROOT.parent / "shared" / "models"
BENCH_MODELS = ROOT / "models" / "bench"
DEFAULT_BINARY = ROOT / "build" / "fusionopt"


def ensure_bench_models(names):
    """Writes the benchmark-size project models among `names` that models/bench/ lacks."""
    missing = [n for n in names if not (BENCH_MODELS / f"{n}.onnx").exists()]
    if missing:
        subprocess.run([sys.executable, str(ROOT / "models" / "generate.py"), "--bench", "--only", *missing],
                       check=True)


def make_inputs(model_path, seed, sequence):
    """Seeded arrays for every graph input that is not an initializer. Symbolic dims named like a
    sequence get `sequence`, other symbolic dims 1 (the runtime's default); int64 token inputs
    draw ids below the vocabulary size, masks are all ones."""
    graph = onnx.load(str(model_path), load_external_data=False).graph
    rng = np.random.default_rng(seed)
    initializers = {i.name for i in graph.initializer}
    vocab = 1
    for init in graph.initializer:
        if "word_embeddings" in init.name:
            vocab = init.dims[0]
    feeds = {}
    for value in graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (sequence if "seq" in d.dim_param else 1)
                for d in tensor_type.shape.dim]
        if tensor_type.elem_type == TensorProto.INT64:
            if "mask" in value.name:
                feeds[value.name] = np.ones(dims, np.int64)
            else:
                feeds[value.name] = rng.integers(0, max(vocab, 2), dims, dtype=np.int64)
        else:
            feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def save_inputs(feeds, folder):
    """Writes each array as .npy under `folder`; returns the `--input NAME=FILE` flags. File
    names are numbered because input names may hold '/' (e.g. `gpu_0/data_0`)."""
    flags = []
    for index, (name, array) in enumerate(feeds.items()):
        file = pathlib.Path(folder) / f"input_{index}.npy"
        np.save(file, array)
        flags += ["--input", f"{name}={file}"]
    return flags


def ort_session(path, level, threads, optimized_model_path=None):
    """A CPU onnxruntime session at graph optimization `level` (a GraphOptimizationLevel) with
    `threads` intra-op threads; with `optimized_model_path`, ORT saves its optimized graph there."""
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if optimized_model_path is not None:
        options.optimized_model_filepath = str(optimized_model_path)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def profiled_ort_kernels(model, feeds, threads, warmup, repeat, prefix):
    """One profiled ENABLE_ALL CPU session (`SessionOptions.enable_profiling`; ORT's profile
    covers a session's whole life, so every call makes its own): its median latency over
    `repeat` runs after `warmup` ones, and the kernel events of the timed runs only, as
    (node name, op type, ms) with ms summed over those runs."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.enable_profiling = True
    options.profile_file_prefix = str(prefix)
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    median = median_latency_ms(session, feeds, warmup, repeat)
    events = json.loads(pathlib.Path(session.end_profiling()).read_text())
    runs = sorted(event["ts"] for event in events if event.get("name") == "model_run")
    timed_from = runs[-repeat] if len(runs) >= repeat else 0
    suffix = "_kernel_time"
    kernels = [(event["name"][: -len(suffix)], event.get("args", {}).get("op_name", "?"), event["dur"] / 1e3)
               for event in events
               if event.get("cat") == "Node" and event.get("name", "").endswith(suffix) and event["ts"] >= timed_from]
    return median, kernels


# How long ORT's intra-op threads go on spinning after a run: a side timed within it shares the
# cores with them (EfficientNet-B0 at -O3: 24.7 ms right after ORT, 13.6 ms 50 ms later, and
# `--thread-wait auto` reads the spinners as other work and sleeps).
ORT_SETTLE_S = 0.5


def median_latency_ms(session, feeds, warmup, repeat):
    """Median wall time of `repeat` session runs after `warmup` untimed ones. Returns once ORT's
    threads have stopped spinning, so the side timed next has the cores to itself."""
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    time.sleep(ORT_SETTLE_S)
    return float(np.median(times))


def run_fusionopt(binary, *args, env=None):
    """Runs the binary (with `env` added to the environment); exits the script with its stderr
    when it fails."""
    return run_fusionopt_allowing(binary, (0,), *args, env=env)


def run_fusionopt_allowing(binary, codes, *args, env=None):
    """Runs the binary; exits the script with its stderr unless its exit code is in `codes`."""
    done = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **env} if env else None)
    if done.returncode not in codes:
        sys.exit(f"`fusionopt {' '.join(map(str, args))}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


def fusionopt_latency(binary, model, threads, warmup, repeat, extra_flags=()):
    """(median latency ms, kernels launched per inference) of `fusionopt run -v` on the CPU runtime."""
    done = run_fusionopt(binary, "run", model, "--threads", threads, "--warmup", warmup, "--repeat", repeat,
                         "--seed", 1, "-v", *extra_flags)
    median = re.search(r"latency_ms runs=\d+ min=[\d.]+ median=([\d.]+)", done.stdout)
    kernels = re.search(r"(\d+) kernels launched", done.stderr)
    if not median or not kernels:
        sys.exit(f"unexpected `fusionopt run` output for {model}:\n{done.stdout}\n{done.stderr}")
    return float(median.group(1)), int(kernels.group(1))


def add_corpus_arguments(parser, rounds):
    """The options every real-corpus script takes: which models, which fusionopt levels, and how
    each side is timed (`rounds` is the script's default number of alternations)."""
    parser.add_argument("--corpus", default="fixtures", help="fixtures, full, or a folder with a manifest.json")
    parser.add_argument("--only", nargs="*", help="families or model names (prefix match)")
    parser.add_argument("--levels", nargs="*", type=int, default=[0, 3])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=rounds, help="alternations of every side")
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--markdown", type=pathlib.Path)


def corpus_models(args):
    """The corpus entries `args` (add_corpus_arguments) select, without the one-layer twins that
    exist for per-layer kernel counts."""
    sys.path.insert(0, str(ROOT / "models" / "real"))
    import corpus  # noqa: E402  (numpy only; next to the corpus it reads)
    _, entries = corpus.select(args.corpus, args.only)
    return [entry for entry in entries if not entry.name.endswith("_1layer")]


def host_description(binary=None):
    """The host as fusionopt's runtime sees it (`fusionopt --version`'s host line: CPU model, ISA
    level, oneDNN's ISA, the runtime's own kernels' ISA, caches, CPUs); every table carries it."""
    binary = binary or os.environ.get("FUSIONOPT_BIN", DEFAULT_BINARY)
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("host: "):
            return line[len("host: "):]
    return "unknown (fusionopt --version printed no host line)"


def write_report(table, results, args):
    """Prints the markdown table, headed by the host it was measured on, and writes it and the
    JSON results (with the host) where --markdown / --json say."""
    host = host_description()
    table = f"Host: {host}\n\n{table}"
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        # Each row names its host, so rows from several hosts can be pooled and told apart.
        rows = [dict(row, host=host) if isinstance(row, dict) else row for row in results]
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
