"""The real-export corpus side by side: fusionopt -O0..-O3 against ONNX Runtime's own graph
optimizer (ENABLE_ALL), ORT's transformers optimizer and onnxscript's `ort_fusions`
(`optimize_for_ort`, made for these exports), per model:

- kernels: estimated launches per inference, counted by one rule for every tool's output
  (`fusionopt inspect --json`: nodes that launch work, not views or shape arithmetic);
- attention nodes: fused attention kernels (fusionopt's FusedAttention calls, ORT's contrib
  Attention / MultiHeadAttention / GroupQueryAttention);
- per layer (full-size corpus): from the model and its one-layer twin, (K_L - K_1) / (L - 1);
- correctness: ORT on the optimized file, and fusionopt's runtime, against ORT on the original
  with the manifest's feeds (rtol 1e-3, atol 1e-4; fp16 models 2e-2 / 2e-3);
- optimize time of fusionopt -O3.

    .venv/bin/python bench/real_corpus.py                       # the committed fixtures
    .venv-export/bin/python bench/real_corpus.py --corpus full  # models/bench/real (make real-models)
    ... --only bert gpt2 --markdown docs-table.md --json out.json

The baselines that need onnxscript (ort_fusions) are skipped with a note where it is not
installed (.venv has no onnxscript; .venv-export has it).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "models" / "real"))
import corpus  # noqa: E402
from bench_common import ort_session as make_ort_session, save_inputs  # noqa: E402

FUSIONOPT = Path(os.environ.get("FUSIONOPT_BIN", ROOT / "build" / "fusionopt"))
TOLERANCE = {"float32": (1e-3, 1e-4), "float16": (2e-2, 2e-3)}
ORT_ATTENTION = {"Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
                 "PackedMultiHeadAttention", "SparseAttention"}
HF_MODEL_TYPES = {"bert": "bert", "roberta": "bert", "distilbert": "bert", "gpt2": "gpt2", "vit": "vit",
                  "clip_vision": "clip", "t5_encoder": "t5", "llama": "gpt2", "qwen2": "gpt2", "mistral": "gpt2",
                  "whisper_encoder": "bert", "vit_torchvision": "vit", "swin": "swin"}


def run(command, timeout=1800):
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stdout, result.stderr


def inspect(path):
    rc, stdout, stderr = run([FUSIONOPT, "inspect", path, "--json"])
    if rc != 0:
        return None, f"inspect failed: {stderr.strip()}"
    summary = json.loads(stdout)
    histogram = summary["op_histogram"]
    attention = sum(count for op, count in histogram.get("ai.fusionopt", {}).items() if "Attention" in op)
    attention += sum(count for op, count in histogram.get("com.microsoft", {}).items() if op in ORT_ATTENTION)
    attention += histogram.get("", {}).get("Attention", 0)
    return {"kernels": summary["estimated_kernel_launches"], "attention": attention}, ""


def ort_session(path, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL, optimized_to=None, threads=2):
    return make_ort_session(path, level, threads, optimized_to)


def ort_outputs(path, feeds):
    session = ort_session(path, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return session.run(None, feeds)


def compare(actual, expected, dtype):
    rtol, atol = TOLERANCE[dtype]
    worst = 0.0
    for a, e in zip(actual, expected):
        a, e = np.asarray(a, dtype=np.float64), np.asarray(e, dtype=np.float64)
        if a.shape != e.shape:
            return False, f"shape {a.shape} vs {e.shape}"
        excess = np.abs(a - e) - (atol + rtol * np.abs(e))
        worst = max(worst, float(np.nanmax(np.abs(a - e))) if a.size else 0.0)
        if np.any(excess > 0) or np.any(np.isnan(a) != np.isnan(e)):
            return False, f"max |diff| {worst:.3g}"
    return True, f"max |diff| {worst:.3g}"


def fusionopt_outputs(path, feeds, work):
    arguments = [FUSIONOPT, "run", path, "--output-dir", work, "--threads", "2", *save_inputs(feeds, work)]
    rc, _, stderr = run(arguments)
    if rc != 0:
        return None, stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {rc}"
    outputs = []
    for index in range(len(list(work.glob("output_*.pb")))):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((work / f"output_{index}.pb").read_bytes())
        outputs.append(onnx.numpy_helper.to_array(tensor))
    return outputs, ""


def baseline_ort(entry, work):
    optimized = work / "ort_all.onnx"
    ort_session(entry.path, optimized_to=optimized)
    return optimized


def baseline_transformers(entry, work):
    model_type = HF_MODEL_TYPES.get(entry.info["family"])
    if model_type is None:
        return None
    from onnxruntime.transformers.optimizer import optimize_model
    heads = entry.info.get("heads")
    heads = heads if isinstance(heads, int) else 0
    model = optimize_model(str(entry.path), model_type=model_type, num_heads=heads, hidden_size=0, opt_level=0)
    out = work / "ort_transformers.onnx"
    model.save_model_to_file(str(out))
    return out


def baseline_ort_fusions(entry, work):
    try:
        import onnx_ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort
    except ImportError:
        return None
    model = onnx_ir.load(str(entry.path))
    optimize_for_ort(model)
    out = work / "ort_fusions.onnx"
    onnx_ir.save(model, str(out))
    return out


BASELINES = {"ort": baseline_ort, "ort_transformers": baseline_transformers, "ort_fusions": baseline_ort_fusions}


def measure_file(path, entry, feeds, expected, work, check_fusionopt):
    counts, problem = inspect(path)
    row = counts or {"kernels": None, "attention": None, "problem": problem}
    dtype = entry.info["dtype"]
    try:
        ort_result = ort_session(path).run(None, feeds)
        row["ort_equal"], row["ort_note"] = compare(ort_result, expected, dtype)
    except Exception as error:  # noqa: BLE001 — a file ORT refuses is a result to report
        row["ort_equal"], row["ort_note"] = False, f"ORT: {str(error).splitlines()[0][:160]}"
    if check_fusionopt:
        outputs, problem = fusionopt_outputs(path, feeds, work / f"run_{path.stem}")
        if outputs is None:
            row["fusionopt_equal"], row["fusionopt_note"] = False, problem[:160]
        else:
            row["fusionopt_equal"], row["fusionopt_note"] = compare(outputs, expected, dtype)
    return row


def measure(entry, levels, baselines, work):
    feeds = entry.feeds()
    result = {"model": entry.name, "family": entry.info["family"], "layers": entry.layers, "tools": {}}
    try:
        expected = ort_outputs(entry.path, feeds)
    except Exception as error:  # noqa: BLE001 — reported; the model is not measured
        result["problem"] = f"ORT cannot run the original: {str(error).splitlines()[0][:200]}"
        return result
    for level in levels:
        out = work / f"O{level}.onnx"
        started = time.perf_counter()
        rc, _, stderr = run([FUSIONOPT, entry.path, f"-O{level}", "-o", out])
        seconds = time.perf_counter() - started
        if rc != 0:
            result["tools"][f"O{level}"] = {"problem": stderr.strip()[:200]}
            continue
        (work / f"run_O{level}").mkdir(exist_ok=True)
        row = measure_file(out, entry, feeds, expected, work, check_fusionopt=True)
        row["seconds"] = round(seconds, 3)
        result["tools"][f"O{level}"] = row
    for name in baselines:
        try:
            path = BASELINES[name](entry, work)
        except Exception as error:  # noqa: BLE001
            result["tools"][name] = {"problem": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"}
            continue
        if path is not None:
            result["tools"][name] = measure_file(path, entry, feeds, expected, work, check_fusionopt=False)
    return result


def per_layer(results):
    """(K_L - K_1) / (L - 1) for every model that has a one-layer twin (`<name>_1layer`)."""
    by_name = {r["model"]: r for r in results}
    for result in results:
        twin = by_name.get(result["model"] + "_1layer")
        layers = result["layers"]
        if twin is None or not isinstance(layers, int) or layers < 2:
            continue
        for tool, row in result["tools"].items():
            other = twin["tools"].get(tool, {})
            if row.get("kernels") is not None and other.get("kernels") is not None:
                row["per_layer"] = (row["kernels"] - other["kernels"]) / (layers - 1)


def markdown(results, tools):
    header = "| model | layers | " + " | ".join(tools) + " | attention O3 / ORT | O3 equal (ORT, fusionopt) | -O3 s |"
    lines = [header, "|" + "---|" * (len(tools) + 5)]
    for result in results:
        if result["model"].endswith("_1layer"):
            continue
        cells = []
        for tool in tools:
            row = result["tools"].get(tool)
            if row is None or row.get("kernels") is None:
                cells.append("–" if row is None else "fail")
                continue
            text = str(row["kernels"])
            if "per_layer" in row:
                text += f" ({row['per_layer']:.0f}/layer)"
            if row.get("ort_equal") is False:
                text += " ✗"
            cells.append(text)
        o3 = result["tools"].get("O3", {})
        ort_row = result["tools"].get("ort", {})
        attention = f"{o3.get('attention', '–')} / {ort_row.get('attention', '–')}"
        equal = f"{'✓' if o3.get('ort_equal') else '✗'} {'✓' if o3.get('fusionopt_equal') else '✗'}"
        lines.append(f"| {result['model']} | {result['layers'] or '–'} | " + " | ".join(cells) +
                     f" | {attention} | {equal} | {o3.get('seconds', '–')} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="fixtures", help="fixtures, full, or a folder with a manifest.json")
    parser.add_argument("--only", nargs="*", help="families or model names (prefix match)")
    parser.add_argument("--levels", nargs="*", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--baselines", nargs="*", default=list(BASELINES), choices=list(BASELINES))
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument("--markdown", type=Path, help="write the table here (it is printed too)")
    args = parser.parse_args()
    folder, entries = corpus.select(args.corpus, args.only)
    results = []
    for entry in entries:
        with tempfile.TemporaryDirectory() as folder_name:
            started = time.perf_counter()
            results.append(measure(entry, args.levels, args.baselines, Path(folder_name)))
            row = results[-1]["tools"].get("O3", {})
            print(f"{entry.name}: O3 {row.get('kernels')} kernels, {row.get('attention')} attention, "
                  f"ORT {results[-1]['tools'].get('ort', {}).get('kernels')} ({time.perf_counter() - started:.0f} s)",
                  flush=True)
    per_layer(results)
    tools = [f"O{level}" for level in args.levels] + args.baselines
    table = markdown(results, tools)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps({"corpus": str(folder), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
