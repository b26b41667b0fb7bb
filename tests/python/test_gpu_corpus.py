"""scripts/gpu_corpus.py (issue 28) dry-runs here: without a GPU (and without PyTorch) every step
that needs one fails with its reason, the compile-only plans still run, and the run finishes with
its JSON and the table printed last."""
import json
import subprocess
import sys

import pytest

import fusionopt_testlib as lib
from test_cuda_backend_cli import has_gpu, require_library

SCRIPT = lib.REPO_ROOT / "scripts" / "gpu_corpus.py"
FIXTURES = lib.REPO_ROOT / "models" / "real" / "fixtures"


def test_dry_run_reports_every_gpu_step_and_plans_each_file(fusionopt_bin, tmp_path):
    require_library()
    if has_gpu():
        pytest.skip("a GPU is present: the dry run's failures cannot be observed here")
    out = tmp_path / "corpus"
    done = subprocess.run([sys.executable, SCRIPT, "--out", out, "--fusionopt", fusionopt_bin,
                           "--only", "bert_base", "resnet50", "--rounds", "1", "--iters", "2", "--sequence", "16",
                           "--onnx", f"bert_base={FIXTURES / 'bert_dynamo18_sdpa.onnx'}",
                           f"resnet50={FIXTURES / 'resnet_dynamo18.onnx'}"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-6].startswith("| model | batch | eager ms")       # the table closes the output
    assert [line.split("|")[1].strip() for line in lines[-4:]] == ["bert_base", "bert_base", "resnet50", "resnet50"]
    document = json.loads((out / "results.json").read_text())
    steps = {step["name"]: step for step in document["steps"]}
    # Optimizing and the compile-only plans need no GPU: they pass, and the plan fills the table.
    for name in ("bert_base_O0", "bert_base_O3", "bert_base_b1_plan_O0", "bert_base_b8_plan_O3", "resnet50_b1_plan_O3"):
        assert steps[name]["ok"], steps[name]
    rows = {(row["model"], row["batch"]): row for row in document["rows"]}
    bert = rows[("bert_base", 1)]["planned_launches"]
    assert 0 < bert["O3"] < bert["O0"]
    # Every GPU step failed with the reason, not a crash.
    for name in ("nvidia_smi", "bert_base_b1_bench_r0", "bert_base_b1_bench_graph_r0", "resnet50_b8_bench_r0"):
        assert not steps[name]["ok"] and steps[name]["reason"], steps[name]
    assert "no CUDA device" in steps["bert_base_b1_bench_r0"]["reason"]
    assert all(not step["ok"] for name, step in steps.items() if "_bench" in name)
    assert (out / "logs" / "bert_base_b1_bench_r0.log").read_text().startswith("$ ")
    assert (out / "table.md").read_text().startswith("GPU: no GPU")


def test_unknown_model_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, SCRIPT, "--out", tmp_path, "--only", "alexnet"], capture_output=True, text=True)
    assert done.returncode == 2 and "alexnet" in done.stderr
