#!/usr/bin/env python3
"""Issue 28's GPU corpus run: fusionopt's CUDA backend on full-size real exports, beside PyTorch
eager and torch.compile, in one prepared device run (docs/cuda.md, docs/benchmarks.md).

On a lent GPU machine (PyTorch, transformers, torchvision, onnx there; our binaries from the
bundle scripts/gpu_bundle.sh makes here):

    scripts/gpu_bundle.sh                                         # here, first
    python3 scripts/gpu_corpus.py --bundle .gpubundle.tar.xz --out "$OUT"

For each model — BERT-base, GPT-2 small, a 4-layer LLaMA-style decoder (grouped-query attention,
rotary), ViT-B/16, ResNet-50, MobileNetV3-Large in fp32, BERT-base and GPT-2 also in fp16 — it
builds the module from its config (models/real/export.py's families: random weights, nothing
downloaded), exports it with the dynamo exporter (opset 18), optimizes the export at -O0 and
-O3, and at each input size (batch 1 and a larger batch; text at sequence 128) times, in
alternated rounds: PyTorch eager, torch.compile (default and mode="reduce-overhead", compile
time reported apart), and fusionopt -O0 and -O3 on `--backend cuda`, plain and replaying a CUDA
Graph. Outputs of fusionopt -O0 and -O3 are compared with eager's (largest absolute error over
the largest reference magnitude: fp32 1e-3, fp16 2e-2). Kernels per inference: torch profiler's
count of GPU kernels for eager and compile, CUPTI's for fusionopt; and the cost model's
predicted -O3/-O0 speed-up for this GPU beside the measured one.

The compile-only plan of each file at each size (`fusionopt inspect --cuda`: launches per
inference, fused nodes run as their body's ops) needs no GPU and is reported too.

Everything goes under --out: results.json, one log per step in logs/, the exports in models/;
the table is printed last (and written to table.md). Without a GPU or torch every step that needs
them fails with its reason and the run still finishes (exit 1 when any step failed): that is the
dry run CI does (tests/python/test_gpu_corpus.py), with --onnx NAME=FILE standing in for the
exports.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOLERANCE = {"float32": 1e-3, "float16": 2e-2}


@dataclass
class Spec:
    name: str
    family: str           # models/real/export.py's family
    dtype: str = "float32"
    kind: str = "text"    # text: [batch, 128] ids and mask; image: [batch, 3, 224, 224]
    batches: tuple = (1, 8)


MODELS = [
    Spec("bert_base", "bert"), Spec("bert_base_fp16", "bert", "float16"),
    Spec("gpt2", "gpt2"), Spec("gpt2_fp16", "gpt2", "float16"),
    Spec("llama_4layer", "llama"),
    Spec("vit_b16", "vit", kind="image"), Spec("resnet50", "resnet", kind="image"),
    Spec("mobilenet_v3", "mobilenet_v3", kind="image"),
]
SEQUENCE = 128


@dataclass
class Step:
    """One thing the run tried: ok, or failed with its reason (the first line that says why)."""
    name: str
    ok: bool = False
    reason: str = ""
    figures: dict = field(default_factory=dict)


class Run:
    def __init__(self, args):
        self.args = args
        self.out = args.out.resolve()
        self.logs = self.out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.out / "models").mkdir(exist_ok=True)
        self.started = time.monotonic()
        self.steps = []
        self.rows = []
        self.env = dict(os.environ)
        self.fusionopt = args.fusionopt
        self.bundle_dir = None  # the unpacked bundle, removed at the end

    def over_budget(self):
        return time.monotonic() - self.started > self.args.budget_s

    def record(self, step):
        self.steps.append(step)
        state = "ok" if step.ok else f"FAILED: {step.reason}"
        print(f"[{time.monotonic() - self.started:6.1f} s] {step.name}: {state}", flush=True)
        return step

    def command(self, name, argv, timeout):
        """Runs a command, its output into logs/NAME.log; a Step with the last line of its errors."""
        log = self.logs / f"{name}.log"
        try:
            done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as error:
            log.write_text(f"$ {shlex.join(map(str, argv))}\n{error}\n")
            return Step(name, False, f"{type(error).__name__}: {error}".splitlines()[0])
        log.write_text(f"$ {shlex.join(map(str, argv))}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}")
        if done.returncode != 0:
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            return Step(name, False, (lines[-1] if lines else f"exit {done.returncode}")[:300])
        return Step(name, True, figures={"stdout": done.stdout})


# ---------------------------------------------------------------- the GPU and the binaries

def unpack_bundle(run):
    done = subprocess.run(["bash", str(REPO / "scripts" / "gpu_bundle_env.sh"), str(run.args.bundle)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return run.record(Step("bundle", False, done.stderr.strip() or "cannot unpack"))
    assignments = dict(line.removeprefix("export ").split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    for key in ("LD_LIBRARY_PATH", "FUSIONOPT_CUDA_LIBRARY"):
        run.env[key] = shlex.split(assignments[key])[0]
    run.fusionopt = Path(shlex.split(assignments["bin"])[0]) / "fusionopt"
    run.bundle_dir = Path(shlex.split(assignments["FUSIONOPT_BUNDLE_DIR"])[0])
    return run.record(Step("bundle", True))


def describe_gpu(run):
    step = run.command("nvidia_smi", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                      "--format=csv,noheader"], 30)
    step.figures = {"gpu": step.figures.get("stdout", "").strip()} if step.ok else {}
    return run.record(step)


def cost_target(gpu):
    name = gpu.lower()
    for target in ("h200", "h100", "a100", "t4"):
        if target in name:
            return target
    return "h100"


# ---------------------------------------------------------------- the PyTorch side

def load_torch(run):
    try:
        import torch
        sys.path.insert(0, str(REPO / "models" / "real"))
        import export as corpus_export  # models/real/export.py
    except Exception as error:  # noqa: BLE001 — the dry run has no torch: every torch step says so
        run.record(Step("torch", False, f"{type(error).__name__}: {error}"))
        return None, None
    if not torch.cuda.is_available():
        run.record(Step("torch", False, "torch.cuda.is_available() is False: no GPU for PyTorch"))
        return torch, corpus_export
    run.record(Step("torch", True, figures={"torch": torch.__version__, "device": torch.cuda.get_device_name()}))
    return torch, corpus_export


def feeds_for(corpus_export, built, spec, batch):
    """The model's inputs at this size, as export.py's Input.example makes them (ids under the
    vocabulary, a padded mask row, normal pixels)."""
    tensors = []
    for item in built.inputs:
        shape = [batch, SEQUENCE] if spec.kind == "text" else [batch] + list(item.shape[1:])
        sized = corpus_export.Input(item.name, shape, item.dtype, item.fill, item.dynamic)
        import torch
        tensors.append(sized.example(torch.float16 if spec.dtype == "float16" and item.dtype == "float32" else None))
    return tensors


def time_callable(torch, function, inputs, warmup, iters):
    """p50 of per-inference GPU times (CUDA events), milliseconds."""
    for _ in range(warmup):
        function(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def count_kernels(torch, function, inputs):
    from torch.profiler import ProfilerActivity, profile
    function(*inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        function(*inputs)
        torch.cuda.synchronize()
    kernels = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith(("Memcpy", "Memset", "[memory]"))]
    return len(kernels)


# ---------------------------------------------------------------- the fusionopt side

def shape_flags(built, spec, batch, onnx_path):
    """--shape flags for this size: the module's inputs at batch (text: sequence 128), or for a
    file given with --onnx, its own inputs with `batch` for the batch dim and 128 for a sequence."""
    flags = []
    if built is None:
        import onnx
        for value in onnx.load(str(onnx_path), load_external_data=False).graph.input:
            dims = [d.dim_value if d.HasField("dim_value") else (batch if d.dim_param == "batch" else SEQUENCE)
                    for d in value.type.tensor_type.shape.dim]
            flags += ["--shape", f"{value.name}={'x'.join(map(str, dims))}"]
        return flags
    for item in built.inputs:
        shape = [batch, SEQUENCE] if spec.kind == "text" else [batch] + list(item.shape[1:])
        flags += ["--shape", f"{item.name}={'x'.join(map(str, shape))}"]
    return flags


def fusionopt_bench(run, tag, o0, o3, flags, target, graph):
    json_path = run.logs / f"{tag}.json"
    argv = [run.fusionopt, "bench", o0, "--optimized", o3, "--backend", "cuda", "--warmup", run.args.warmup,
            "--iters", run.args.iters, "--target", target, "--json", json_path, *flags]
    if graph:
        argv.append("--cuda-graph")
    step = run.command(tag, argv, 240)
    if step.ok:
        result = json.loads(json_path.read_text())
        step.figures = {"o0_ms": result["original"]["latency_ms"]["p50"], "o3_ms": result["optimized"]["latency_ms"]["p50"],
                        "o0_kernels": result["original"].get("kernels_executed"),
                        "o3_kernels": result["optimized"].get("kernels_executed"),
                        "predicted": result.get("predicted_speedup"),
                        "first_inference": {"O0": result["original"].get("first_inference"),
                                            "O3": result["optimized"].get("first_inference")}}
    return step


def fusionopt_outputs(run, tag, model, feeds_dir, names):
    out = run.out / "outputs" / tag
    out.mkdir(parents=True, exist_ok=True)
    argv = [run.fusionopt, "run", model, "--backend", "cuda", "--output-dir", out]
    for name in names:
        argv += ["--input", f"{name}={feeds_dir / (name + '.npy')}"]
    step = run.command(f"{tag}_run", argv, 240)
    return step, out


def relative_error(actual, expected):
    import numpy as np
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if actual.shape != expected.shape:
        return float("inf")
    return float(np.max(np.abs(actual - expected)) / max(float(np.max(np.abs(expected))), 1e-6))


# ---------------------------------------------------------------- one model

def export_model(run, torch, corpus_export, spec):
    family = next(f for f in corpus_export.FAMILIES if f.name == spec.family)
    torch.manual_seed(corpus_export.SEED)
    built = family.build(True, "sdpa")
    corpus_export.make_non_degenerate(built.module, corpus_export.SEED)
    path = run.out / "models" / f"{spec.name}.onnx"
    started = time.monotonic()
    try:
        corpus_export.export(built, corpus_export.Variant("dynamo", 18, "sdpa", spec.dtype), path)
    except Exception as error:  # noqa: BLE001
        run.record(Step(f"{spec.name}_export", False, corpus_export.error_summary(error)))
        return built, None
    run.record(Step(f"{spec.name}_export", True, figures={"seconds": time.monotonic() - started}))
    return built, path


def torch_sides(run, tag, torch, module, inputs):
    """eager, compile, compile-ro: name -> (callable, compile seconds, the first call's)."""
    sides = {"eager": (module, 0.0)}
    for name, mode in (("compile", None), ("compile_ro", "reduce-overhead")):
        try:
            compiled = torch.compile(module, mode=mode) if mode else torch.compile(module)
            started = time.monotonic()
            compiled(*inputs)
            torch.cuda.synchronize()
            sides[name] = (compiled, time.monotonic() - started)
            run.record(Step(f"{tag}_{name}", True, figures={"compile_s": sides[name][1]}))
        except Exception as error:  # noqa: BLE001
            run.record(Step(f"{tag}_{name}", False, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"))
    return sides


def measure(run, spec, torch, corpus_export, target):
    built, path = None, run.args.onnx.get(spec.name)
    if path is None:
        if torch is None:
            run.record(Step(f"{spec.name}_export", False, "no PyTorch to export with (--onnx NAME=FILE gives a file)"))
            return
        built, path = export_model(run, torch, corpus_export, spec)
        if path is None:
            return
    files = {}
    for level in (0, 3):
        files[level] = run.out / "models" / f"{spec.name}.O{level}.onnx"
        step = run.record(run.command(f"{spec.name}_O{level}", [run.fusionopt, path, f"-O{level}", "-o", files[level],
                                                                 "--target", target], 600))
        if not step.ok:
            return
    module = None
    if built is not None and torch is not None and torch.cuda.is_available():
        module = built.module.eval().cuda()
        if spec.dtype == "float16":
            module = module.half()
    for batch in spec.batches:
        if run.over_budget():
            run.record(Step(f"{spec.name}_b{batch}", False, f"not run: past the {run.args.budget_s} s budget"))
            continue
        measure_size(run, spec, built, module, torch, corpus_export, files, batch, target, path)


def measure_size(run, spec, built, module, torch, corpus_export, files, batch, target, path):
    tag = f"{spec.name}_b{batch}"
    row = {"model": spec.name, "dtype": spec.dtype, "batch": batch, "sequence": SEQUENCE if spec.kind == "text" else None}
    flags = shape_flags(built, spec, batch, path)
    times = {name: [] for name in ("eager", "compile", "compile_ro", "o0", "o3", "o0_graph", "o3_graph")}
    sides, inputs = {}, None
    if module is not None:
        with torch.no_grad():
            inputs = [t.cuda() for t in feeds_for(corpus_export, built, spec, batch)]
            reference = [o.float().cpu().numpy() for o in module(*inputs)]
            sides = torch_sides(run, tag, torch, module, inputs)
            row["compile_s"] = {name: seconds for name, (_, seconds) in sides.items() if name != "eager"}
            feeds_dir = run.out / "feeds" / tag
            feeds_dir.mkdir(parents=True, exist_ok=True)
            import numpy as np
            for item, tensor in zip(built.inputs, inputs):
                np.save(feeds_dir / f"{item.name}.npy", tensor.cpu().numpy())
        for level in (0, 3):
            step, out = fusionopt_outputs(run, f"{tag}_O{level}", files[level], feeds_dir, [i.name for i in built.inputs])
            if step.ok:
                import onnx.numpy_helper
                import onnx
                actual = [onnx.numpy_helper.to_array(onnx.load_tensor(str(out / f"output_{i}.pb"))) for i in range(len(reference))]
                errors = [relative_error(a, e) for a, e in zip(actual, reference)]
                step.figures = {"relative_error": max(errors)}
                step.ok = max(errors) <= TOLERANCE[spec.dtype]
                step.reason = "" if step.ok else f"differs from eager: relative error {max(errors):.2e}"
            row[f"o{level}_correct"] = step.ok
            row[f"o{level}_error"] = step.figures.get("relative_error")
            run.record(step)
    for level in (0, 3):  # the compile-only plan: needs no GPU, so the dry run checks it too
        step = run.record(run.command(f"{tag}_plan_O{level}", [run.fusionopt, "inspect", files[level], "--cuda", "--json",
                                                               *flags], 600))
        if step.ok:
            plan = json.loads(step.figures["stdout"])
            row.setdefault("planned_launches", {})[f"O{level}"] = plan["launches_per_inference"]
            row.setdefault("run_as_ops", {})[f"O{level}"] = [item["node"] for item in plan["inlined"]]
    for round_index in range(run.args.rounds):
        with torch.no_grad() if torch is not None else _nothing():
            for name, (function, _) in sides.items():
                times[name].append(time_callable(torch, function, inputs, run.args.warmup, run.args.iters))
        for graph in (False, True):
            step = run.record(fusionopt_bench(run, f"{tag}_bench{'_graph' if graph else ''}_r{round_index}",
                                              files[0], files[3], flags, target, graph))
            if step.ok:
                suffix = "_graph" if graph else ""
                times["o0" + suffix].append(step.figures["o0_ms"])
                times["o3" + suffix].append(step.figures["o3_ms"])
                row.setdefault("fusionopt_kernels", [step.figures["o0_kernels"], step.figures["o3_kernels"]])
                row["predicted_o3_over_o0"] = step.figures["predicted"]
                row.setdefault("first_inference", step.figures["first_inference"])
    if module is not None:
        with torch.no_grad():
            row["torch_kernels"] = {name: count_kernels(torch, function, inputs) for name, (function, _) in sides.items()}
    row["p50_ms"] = {name: statistics.median(values) for name, values in times.items() if values}
    row["spread_ms"] = {name: [min(values), max(values)] for name, values in times.items() if values}
    run.rows.append(row)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *args):
        return False


# ---------------------------------------------------------------- the table

def ratio(row, a, b):
    p50 = row.get("p50_ms", {})
    return f"{p50[a] / p50[b]:.2f}" if a in p50 and b in p50 and p50[b] > 0 else "—"


def table(rows):
    head = ("| model | batch | eager ms | compile ms | compile-ro ms | fo O0 ms | fo O3 ms | fo O3 graph ms | "
            "O0/O3 | predicted O0/O3 | eager/O3 | best compile/best O3 | kernels eager · compile · O0 · O3 | "
            "planned launches O0 · O3 | correct O0 · O3 |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        p50 = row.get("p50_ms", {})
        cell = lambda name: f"{p50[name]:.3f}" if name in p50 else "—"  # noqa: E731
        best_compile = min([p50[n] for n in ("compile", "compile_ro") if n in p50], default=None)
        best_o3 = min([p50[n] for n in ("o3", "o3_graph") if n in p50], default=None)
        best = f"{best_compile / best_o3:.2f}" if best_compile and best_o3 else "—"
        kernels = row.get("torch_kernels", {})
        fo = row.get("fusionopt_kernels", [None, None])
        predicted = row.get("predicted_o3_over_o0")
        planned = row.get("planned_launches", {})
        lines.append(f"| {row['model']} | {row['batch']} | {cell('eager')} | {cell('compile')} | {cell('compile_ro')} | "
                     f"{cell('o0')} | {cell('o3')} | {cell('o3_graph')} | {ratio(row, 'o0', 'o3')} | "
                     f"{f'{predicted:.2f}' if predicted else '—'} | {ratio(row, 'eager', 'o3')} | {best} | "
                     f"{kernels.get('eager', '—')} · {kernels.get('compile', '—')} · {fo[0] or '—'} · {fo[1] or '—'} | "
                     f"{planned.get('O0', '—')} · {planned.get('O3', '—')} | "
                     f"{row.get('o0_correct', '—')} · {row.get('o3_correct', '—')} |")
    return "\n".join(lines)


def main():
    global SEQUENCE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("gpu_corpus"), help="results folder (default gpu_corpus/)")
    parser.add_argument("--bundle", type=Path, help="binaries from scripts/gpu_bundle.sh (else --fusionopt)")
    parser.add_argument("--fusionopt", type=Path, default=REPO / "build" / "fusionopt", help="the CLI (default build/fusionopt)")
    parser.add_argument("--only", nargs="*", help=f"models to run (default all: {', '.join(s.name for s in MODELS)})")
    parser.add_argument("--onnx", nargs="*", default=[], metavar="NAME=FILE",
                        help="use this file instead of exporting NAME (a dry run without torch)")
    parser.add_argument("--sequence", type=int, default=SEQUENCE, help=f"text models' sequence length (default {SEQUENCE})")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds per size (default 3)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=30, help="timed inferences per side per round (default 30)")
    parser.add_argument("--budget-s", type=float, default=450, help="sizes not started by then are skipped (default 450)")
    args = parser.parse_args()
    args.onnx = dict(item.split("=", 1) for item in args.onnx)
    SEQUENCE = args.sequence
    unknown = set(args.only or []) - {s.name for s in MODELS}
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}")
    run = Run(args)
    if args.bundle:
        unpack_bundle(run)
    gpu = describe_gpu(run).figures.get("gpu", "no GPU")
    target = cost_target(gpu)
    torch, corpus_export = load_torch(run)
    for spec in MODELS:
        if args.only and spec.name not in args.only:
            continue
        if run.over_budget():
            run.record(Step(spec.name, False, f"not run: past the {args.budget_s} s budget"))
            continue
        measure(run, spec, torch, corpus_export, target)
    if run.bundle_dir is not None:
        shutil.rmtree(run.bundle_dir, ignore_errors=True)
    failed = [s for s in run.steps if not s.ok]
    document = {"gpu": gpu, "cost_model_target": target, "date": time.strftime("%Y-%m-%d"),
                "command": shlex.join(sys.argv), "seconds": time.monotonic() - run.started, "rows": run.rows,
                "steps": [{"name": s.name, "ok": s.ok, "reason": s.reason,
                           "figures": {k: v for k, v in s.figures.items() if k != "stdout"}} for s in run.steps]}
    (run.out / "results.json").write_text(json.dumps(document, indent=1) + "\n")
    text = table(run.rows)
    (run.out / "table.md").write_text(f"GPU: {gpu}\n\n{text}\n")
    print(f"\nGPU: {gpu}; {len(run.steps)} steps, {len(failed)} failed; {document['seconds']:.0f} s; results in {run.out}")
    for step in failed:
        print(f"  failed: {step.name}: {step.reason}")
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
