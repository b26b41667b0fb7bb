"""The fail-safe optimizer (`fusionopt MODEL -o OUT --verify`, and every `fusionopt bench`):
original and optimized run on the CPU runtime with seeded inputs, large values and -1e4/-inf
masks; a fusion whose kernel makes an output differ is undone and reported, and a model that
still differs is not written (exit 5).

The wrong kernel is planted through the test hook FUSIONOPT_TEST_PLANT_WRONG_FUSED_KERNEL
(src/cli/fail_safe.h): +1 on the first output of the named fused call's CPU kernel, in the
check's own runs only.
"""
import json
import os
import subprocess

import onnx
import pytest

import fusionopt_testlib as lib

HOOK = "FUSIONOPT_TEST_PLANT_WRONG_FUSED_KERNEL"
BERT = lib.PROJECT_MODELS / "bert_style.onnx"
# Fusion kinds whose calls the CPU runtime runs as one fused kernel (the hook perturbs those).
KERNEL_KINDS = ("contraction_epilogue", "elementwise")


def run(fusionopt_bin, *args, planted=None):
    env = dict(os.environ)
    env.pop(HOOK, None)
    if planted:
        env[HOOK] = planted
    completed = subprocess.run([str(fusionopt_bin), *map(str, args)], capture_output=True, text=True,
                               timeout=300, env=env)
    return completed.returncode, completed.stdout, completed.stderr


def optimize(fusionopt_bin, tmp_path, model, *extra, planted=None, name="out.onnx"):
    out, report = tmp_path / name, tmp_path / (name + ".json")
    result = run(fusionopt_bin, model, "-O", "3", "-o", out, "--report", report, *extra, planted=planted)
    return result, out, report


def node_names(path):
    return {node.name for node in onnx.load(str(path)).graph.node}


def a_fused_kernel(fusionopt_bin, tmp_path):
    """(node, members) of a fusion in bert_style at O3 that runs as one CPU kernel."""
    (rc, _, stderr), out, report = optimize(fusionopt_bin, tmp_path, BERT, name="plain.onnx")
    assert rc == 0, stderr
    fusions = json.loads(report.read_text())["fusions"]
    written = node_names(out)  # a later fusion may have absorbed an earlier one's node
    for fusion in fusions:
        if fusion["kind"] in KERNEL_KINDS and fusion["node"] in written:
            return fusion["node"], fusion["replaced"]
    pytest.fail(f"no {KERNEL_KINDS} fusion in bert_style at O3: {[f['kind'] for f in fusions]}")


@pytest.mark.parametrize("model", lib.project_models(), ids=lambda path: path.stem)
def test_verify_accepts_every_project_model(fusionopt_bin, tmp_path, model):
    (rc, _, stderr), out, report = optimize(fusionopt_bin, tmp_path, model, "--verify")
    assert rc == 0, stderr
    assert "verify: the optimized model matches the original" in stderr
    assert "undid" not in stderr
    verification = json.loads(report.read_text())["verification"]
    assert verification["matches"] is True and verification["undone"] == []
    assert verification["input_sets"] == 5 and verification["checks"] == 1
    onnx.checker.check_model(str(out))


def test_planted_wrong_kernel_is_undone_and_the_output_matches(fusionopt_bin, tmp_path):
    node, members = a_fused_kernel(fusionopt_bin, tmp_path)
    (rc, _, stderr), out, report = optimize(fusionopt_bin, tmp_path, BERT, "--verify", planted=node)
    assert rc == 0, stderr
    assert f"undid fused node '{node}'" in stderr
    assert "with 1 fusion(s) undone the model matches the original" in stderr
    verification = json.loads(report.read_text())["verification"]
    assert verification["matches"] is True
    assert [entry["node"] for entry in verification["undone"]] == [node]
    assert sorted(verification["undone"][0]["members"]) == sorted(members)
    assert "differs on seeded inputs 1" in verification["initial_difference"]

    written = node_names(out)
    assert node not in written
    assert set(members) <= written
    # The model written computes what the original computes (no hook in this run).
    rc, stdout, stderr = run(fusionopt_bin, "verify", BERT, out)
    assert rc == 0, stdout + stderr


def test_the_hook_without_verify_changes_nothing(fusionopt_bin, tmp_path):
    node, _ = a_fused_kernel(fusionopt_bin, tmp_path)
    (rc, _, stderr), out, report = optimize(fusionopt_bin, tmp_path, BERT, planted=node, name="unverified.onnx")
    assert rc == 0, stderr
    assert node in node_names(out)
    assert "verification" not in json.loads(report.read_text())


def test_bench_times_the_repaired_model(fusionopt_bin, tmp_path):
    node, _ = a_fused_kernel(fusionopt_bin, tmp_path)
    out = tmp_path / "bench.json"
    rc, stdout, stderr = run(fusionopt_bin, "bench", BERT, "-O", "3", "--warmup", "1", "--iters", "3",
                             "--json", out, planted=node)
    assert rc == 0, stderr
    assert "undone: 1 fusion(s)" in stdout and node in stdout
    document = json.loads(out.read_text())
    assert document["verified"] is True
    assert len(document["undone_fusions"]) == 1 and document["undone_fusions"][0].startswith(node + " (")

    rc, stdout, stderr = run(fusionopt_bin, "bench", BERT, "-O", "3", "--warmup", "1", "--iters", "3",
                             "--json", out)
    assert rc == 0, stderr
    # The fail-safe's own line; fusion timing's "timed: ... slower ..., undone:" line may appear
    # on a noisy CPU and is another feature's report.
    assert "whose kernels made outputs differ" not in stdout and json.loads(out.read_text())["undone_fusions"] == []


def test_verify_options_are_checked(fusionopt_bin, tmp_path):
    for bad in (("--verify-runs", "0"), ("--rtol", "-1"), ("--atol", "x")):
        (rc, stdout, stderr), out, _ = optimize(fusionopt_bin, tmp_path, BERT, "--verify", *bad)
        assert rc == lib.EXIT_USAGE, stderr
        assert not out.exists()
