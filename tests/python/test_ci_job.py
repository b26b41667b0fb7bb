"""docs/ci/fusionopt-job.sh, the ready CI step (docs/ci.md), run on a shipped model: it passes
and keeps the report, the bench JSON and the roofline; a speed-up floor it cannot reach fails the
job with bench's exit 6 and still keeps them; a list of dims that names a symbol the model lacks
is warned about, not fatal; a missing model is a usage error."""
import json
import os
import subprocess

import pytest

import fusionopt_testlib as lib

SCRIPT = lib.REPO_ROOT / "docs" / "ci" / "fusionopt-job.sh"
MODEL = lib.REPO_ROOT / "models" / "bert_style.onnx"

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="models/bert_style.onnx is missing")


def run_job(fusionopt_bin, artifacts, *, model=MODEL, **settings):
    env = {**os.environ, "FUSIONOPT": str(fusionopt_bin), "FUSIONOPT_BENCH_ITERS": "5",
           "FUSIONOPT_TARGET": "h100", **settings}
    return subprocess.run([str(SCRIPT), str(model), str(artifacts)], capture_output=True, text=True, env=env,
                          timeout=600)


def test_the_job_passes_and_keeps_its_artifacts(fusionopt_bin, tmp_path):
    artifacts = tmp_path / "new" / "artifacts"  # a folder the job creates
    done = run_job(fusionopt_bin, artifacts, FUSIONOPT_MIN_SPEEDUP="0.01")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED" in done.stdout
    report = json.loads((artifacts / "report.json").read_text())
    assert report["fusions"], "the report lists the fusions"
    bench = json.loads((artifacts / "bench.json").read_text())
    assert bench["speedup"] > 0 and bench["verified"] is True
    assert (artifacts / "roofline.svg").read_text().startswith("<svg")
    assert (artifacts / "bert_style.O3.onnx").stat().st_size > 0
    for log in ("optimize.log", "bench.log"):
        assert (artifacts / log).stat().st_size > 0


def test_a_speed_up_floor_it_misses_fails_the_job_with_the_evidence(fusionopt_bin, tmp_path):
    done = run_job(fusionopt_bin, tmp_path, FUSIONOPT_MIN_SPEEDUP="1000")
    assert done.returncode == 6, done.stdout + done.stderr
    assert "below 1000x" in done.stderr
    assert json.loads((tmp_path / "bench.json").read_text())["speedup"] < 1000
    assert (tmp_path / "report.json").exists() and (tmp_path / "roofline.svg").exists()


def test_one_dims_list_serves_models_without_some_symbols(fusionopt_bin, tmp_path):
    done = run_job(fusionopt_bin, tmp_path, FUSIONOPT_MIN_SPEEDUP="0.01",
                   FUSIONOPT_DIMS="no_such_symbol=4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no_such_symbol" in (tmp_path / "optimize.log").read_text()


def test_a_missing_model_is_a_usage_error(fusionopt_bin, tmp_path):
    done = run_job(fusionopt_bin, tmp_path / "artifacts", model=tmp_path / "absent.onnx")
    assert done.returncode == 2
    assert "absent.onnx" in done.stderr
    assert not (tmp_path / "artifacts").exists()
