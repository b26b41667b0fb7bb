"""The benchmark scripts issue 14 and 15 rely on run end to end on a committed fixture: the
op-by-op profile comparison (bench/op_profile.py) reports each side's op types with times that
add up to no more than the run, bench/optimize_time.py reports a row per binary,
bench/cpu_corpus.py times every side quiet and beside its background load,
bench/contractions.py compares one contraction per shape with MLAS, and bench/ort_runtime.py
times ORT on a model and on its --runtime ort output (issue 16), and bench/ort_gemm_bound.py splits
ORT's kernel time into weight GEMMs and the rest; bench/runtime_ab.py alternates two builds of
the runtime on the same -O3 file (issue 29)."""
import json
import statistics
import subprocess
import sys

import pytest

import fusionopt_testlib as lib

FIXTURE = lib.REPO_ROOT / "models" / "real" / "fixtures" / "resnet_dynamo18.onnx"

pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason="models/real/fixtures is missing")


def run_script(name, *args, env_binary):
    env = {"FUSIONOPT_BIN": str(env_binary), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(lib.REPO_ROOT / "bench" / name), *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_op_profile_reports_both_runtimes_op_types(fusionopt_bin, tmp_path):
    out = tmp_path / "profile.json"
    run_script("op_profile.py", "--only", "resnet_dynamo18", "--warmup", "1", "--repeat", "2", "--rounds", "2",
               "--baseline-binary", fusionopt_bin, "--json", out, env_binary=fusionopt_bin)
    (result,) = json.loads(out.read_text())
    assert set(result["sides"]) == {"fusionopt -O0", "fusionopt -O3", "baseline -O0", "baseline -O3", "ORT ENABLE_ALL"}
    for side, data in result["sides"].items():
        assert data["ops"], f"{side}: no op types profiled"
        low, high = data["spread_ms"]
        assert 0 < low <= data["median_ms"] <= high, f"{side}: median outside its rounds' spread"
    # -O3 fuses the Relus into the convolutions; -O0 and ORT's profile show Conv itself.
    assert "Relu" in result["sides"]["fusionopt -O0"]["ops"]
    assert "Relu" not in result["sides"]["fusionopt -O3"]["ops"]
    assert "Conv" in result["sides"]["ORT ENABLE_ALL"]["ops"]


def test_optimize_time_reports_a_row_per_binary(fusionopt_bin):
    table = run_script("optimize_time.py", FIXTURE, "--binary", fusionopt_bin, "--rounds", "2",
                       env_binary=fusionopt_bin)
    rows = [line for line in table.splitlines() if line.startswith(f"| `{fusionopt_bin}`")]
    assert len(rows) == 1, table


def test_cpu_corpus_times_every_side_quiet_and_loaded(fusionopt_bin, tmp_path):
    out = tmp_path / "corpus.json"
    table = run_script("cpu_corpus.py", "--only", "resnet_dynamo18", "--warmup", "1", "--repeat", "2", "--rounds", "2",
                       "--load", "--load-limit", "120", "--json", out, env_binary=fusionopt_bin)
    (result,) = json.loads(out.read_text())
    for load in ("quiet", "loaded"):
        assert set(result[load]) == {"fusionopt -O0", "fusionopt -O3", "ORT"}
        for side, data in result[load].items():
            low, high = data["spread_ms"]
            assert 0 < low <= data["p50_ms"] <= high, f"{load} {side}: p50 outside its rounds' spread"
    ratios = result["ratios"]
    assert ratios["o3_over_ort"] == pytest.approx(result["quiet"]["fusionopt -O3"]["p50_ms"] /
                                                  result["quiet"]["ORT"]["p50_ms"])
    assert ratios["slowdown_ratio"] == pytest.approx(ratios["slowdown_fusionopt"] / ratios["slowdown_ort"])
    assert "geometric mean -O3 / ORT" in table and "| resnet_dynamo18 |" in table
    # The background load is gone when the script ends.
    assert "while time.monotonic()" not in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                                          text=True).stdout


def test_cpu_corpus_variant_sides_time_the_top_level_without_a_feature(fusionopt_bin, tmp_path):
    out = tmp_path / "corpus.json"
    table = run_script("cpu_corpus.py", "--only", "resnet_dynamo18", "--levels", "3", "--warmup", "1", "--repeat", "2",
                       "--rounds", "2", "--row-major-side", "--winograd-off-side", "--json", out,
                       env_binary=fusionopt_bin)
    (result,) = json.loads(out.read_text())
    assert set(result["quiet"]) == {"fusionopt -O3", "fusionopt -O3 row-major", "fusionopt -O3 no Winograd", "ORT"}
    quiet = result["quiet"]
    assert result["ratios"]["layouts_gain"] == pytest.approx(quiet["fusionopt -O3"]["p50_ms"] /
                                                             quiet["fusionopt -O3 row-major"]["p50_ms"])
    assert result["ratios"]["winograd_gain"] == pytest.approx(quiet["fusionopt -O3"]["p50_ms"] /
                                                              quiet["fusionopt -O3 no Winograd"]["p50_ms"])
    for label in ("-O3 / -O3 row-major", "-O3 / -O3 no Winograd"):
        assert f"| {label} |" in table and f"geometric mean {label}" in table


def test_roofline_corpus_lists_the_kernels_below_the_threshold(fusionopt_bin, tmp_path):
    out = tmp_path / "roof.json"
    table = run_script("roofline_corpus.py", "--only", "resnet_dynamo18", "--warmup", "1", "--repeat", "2",
                       "--threshold", "2", "--json", out, env_binary=fusionopt_bin)
    (result,) = json.loads(out.read_text())
    # Every placed kernel is below twice its roof, so all of them are listed.
    assert sum(row["kernels"] for row in result["below"].values()) == result["placed"] > 0
    assert result["below_ms"] == pytest.approx(result["placed_ms"])
    assert "| resnet_dynamo18 |" in table and "below 200% of its roof" in table


def test_winograd_script_compares_both_kernels_per_shape(fusionopt_bin, tmp_path):
    out = tmp_path / "winograd.json"
    run_script("winograd.py", "--only", "resnet_dynamo18", "--warmup", "1", "--repeat", "2", "--rounds", "1",
               "--json", out, env_binary=fusionopt_bin)
    (result,) = json.loads(out.read_text())
    assert result["shapes"], "the ResNet fixture has 3x3 stride-1 convolutions"
    for row in result["shapes"]:
        assert row["count"] > 0 and row["direct_ms"] > 0 and row["winograd_ms"] > 0
        assert row["ratio"] == pytest.approx(row["winograd_ms"] / row["direct_ms"])
    assert set(result["latency"]) == {"off", "auto", "always"}


def test_contractions_compares_both_runtimes_per_shape(fusionopt_bin, tmp_path):
    out = tmp_path / "contractions.json"
    run_script("contractions.py", "--binary", fusionopt_bin, "--only", "bert qkv", "depthwise 3x3", "--warmup", "1",
               "--repeat", "2", "--rounds", "2", "--json", out, env_binary=fusionopt_bin)
    rows = json.loads(out.read_text())
    assert [row["kind"] for row in rows] == ["gemm", "conv"]
    assert rows[0]["gflop"] == pytest.approx(2 * 128 * 768 * 768 / 1e9)
    for row in rows:
        for side in ("fusionopt", "ort"):
            low, high = row[side]["spread_ms"]
            assert 0 < low <= row[side]["ms"] <= high
            assert row[side]["gflops"] == pytest.approx(row["gflop"] * 1e3 / row[side]["ms"])
        assert row["fusionopt_over_ort"] == pytest.approx(row["fusionopt"]["ms"] / row["ort"]["ms"])


def test_ort_runtime_times_ort_on_both_files_and_checks_outputs(fusionopt_bin, tmp_path):
    out = tmp_path / "ort.json"
    table = run_script("ort_runtime.py", "--only", "bert_dynamo18_sdpa", "--warmup", "1", "--repeat", "2", "--rounds", "2",
                       "--portable-side", "--json", out, env_binary=fusionopt_bin)
    results = json.loads(out.read_text())
    (result,) = [one for one in results if one["model"] == "bert_dynamo18_sdpa"]
    assert set(result["p50_ms"]) == {"original", "runtime_ort", "portable"}
    for side in result["p50_ms"].values():
        assert 0 < side["min"] <= side["median"] <= side["max"]
    assert result["matches"] == {"original": True, "runtime_ort": True, "portable": True}
    assert result["lowered"] == {"com.microsoft::Attention": 2, "com.microsoft::BiasGelu": 2,
                                "com.microsoft::SkipLayerNormalization": 4}
    assert result["ort_nodes"]["runtime_ort"] < result["ort_nodes"]["original"]
    assert "| bert_dynamo18_sdpa |" in table and "geometric mean speed-up" in table


def test_ort_runtime_times_a_baseline_builds_output_beside_ours(fusionopt_bin, tmp_path):
    """--baseline-binary: ORT on another fusionopt build's --runtime ort output is a side of the
    same run, its outputs checked like ours. Given the same build, it writes the same graph: the
    same ORT nodes, and a ratio column over it."""
    out = tmp_path / "ort.json"
    table = run_script("ort_runtime.py", "--only", "gpt2_dynamo18_sdpa_fp16", "--warmup", "1", "--repeat", "2",
                       "--rounds", "2", "--baseline-binary", fusionopt_bin, "--json", out, env_binary=fusionopt_bin)
    (result,) = json.loads(out.read_text())
    assert set(result["p50_ms"]) == {"original", "runtime_ort", "baseline"}
    assert result["matches"] == {"original": True, "runtime_ort": True, "baseline": True}
    assert result["ort_nodes"]["baseline"] == result["ort_nodes"]["runtime_ort"]
    assert "over the baseline's" in table


def test_ort_runtime_compares_with_onnxscripts_ort_fusions(fusionopt_bin, tmp_path):
    """--onnxscript-side: ORT on onnxscript's ort_fusions output is timed beside ours where it
    loads, and where it does not (GPT-2's Gemm on rank-3 input) the table says why."""
    pytest.importorskip("onnxscript.rewriter.ort_fusions")
    out = tmp_path / "ort.json"
    table = run_script("ort_runtime.py", "--only", "bert_dynamo18_sdpa", "gpt2_dynamo18_sdpa", "--warmup", "1",
                       "--repeat", "2", "--rounds", "2", "--onnxscript-side", "--json", out, env_binary=fusionopt_bin)
    results = {one["model"]: one for one in json.loads(out.read_text())}
    bert, gpt2 = results["bert_dynamo18_sdpa"], results["gpt2_dynamo18_sdpa"]
    assert set(bert["p50_ms"]) == {"original", "runtime_ort", "onnxscript"}
    assert bert["onnxscript_failure"] is None and bert["matches"]["onnxscript"]
    assert 0 < bert["ort_nodes"]["onnxscript"] < bert["ort_nodes"]["original"]
    assert "onnxscript" not in gpt2["p50_ms"]
    assert gpt2["onnxscript_failure"].startswith("ORT does not load it")
    assert gpt2["matches"]["runtime_ort"]
    assert "--runtime ort over onnxscript" in table and "ORT does not load it" in table


def test_ort_attention_forms_times_each_form_and_checks_them_against_the_ops(fusionopt_bin):
    """bench/ort_attention_forms.py on two small blocks: one row per shape with the three forms'
    times and the two ratios; a form whose output differs from the inlined ops' fails the run."""
    stdout = run_script("ort_attention_forms.py", "--shapes", "1x16x32x4", "2x40x64x2", "--rounds", "1",
                        "--warmup", "1", "--repeat", "3", env_binary=fusionopt_bin)
    rows = [line for line in stdout.splitlines() if line.startswith("| 1×16") or line.startswith("| 2×40")]
    assert len(rows) == 2
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert len(cells) == 6 and all(float(cells[i].split()[0]) > 0 for i in range(1, 4))
        assert float(cells[4]) > 0 and float(cells[5]) > 0


def test_ort_gemm_bound_splits_each_sides_kernel_time(fusionopt_bin, tmp_path):
    """bench/ort_gemm_bound.py on BERT's fixture: each side's kernel time split into weight GEMMs,
    attention kernels and the rest, none more than the run; the original has no attention kernel
    and --runtime ort has its two Attentions; the ceiling is the original's p50 over its GEMMs, and
    no higher than it once the attention core counts as work."""
    out = tmp_path / "bound.json"
    table = run_script("ort_gemm_bound.py", "--only", "bert_dynamo18_sdpa", "--warmup", "1", "--repeat", "5",
                       "--rounds", "2", "--json", out, env_binary=fusionopt_bin)
    (result,) = [one for one in json.loads(out.read_text()) if one["model"] == "bert_dynamo18_sdpa"]
    original, ours = result["original"], result["runtime_ort"]
    for side in (original, ours):
        assert side["gemm_ms"] > 0 and side["rest_ms"] > 0
        assert side["gemm_ms"] + side["attention_ms"] + side["rest_ms"] <= side["p50_spread_ms"][1] * 2.5  # a mean over 5 runs, one maybe slow
    assert original["attention_ms"] == 0 and ours["attention_ms"] > 0
    assert result["ceiling"] == pytest.approx(original["p50_ms"] / original["gemm_ms"])
    assert result["ceiling"] > 1
    assert 1 < result["ceiling_with_core"] <= result["ceiling"]  # the core's time is work too
    assert "| bert_dynamo18_sdpa |" in table and "ceiling" in table


def test_runtime_ab_alternates_two_builds_on_the_same_file(fusionopt_bin, tmp_path):
    out = tmp_path / "ab.json"
    table = run_script("runtime_ab.py", "--before", fusionopt_bin, "--after", fusionopt_bin, "--only", "resnet_dynamo18",
                       "--warmup", "1", "--repeat", "2", "--rounds", "2", "--json", out, env_binary=fusionopt_bin)
    (result,) = json.loads(out.read_text())
    assert result["model"] == "resnet_dynamo18" and result["host"]
    assert len(result["before_ms"]) == len(result["after_ms"]) == 2
    assert all(ms > 0 for ms in result["before_ms"] + result["after_ms"])
    assert result["ratio"] == pytest.approx(statistics.median(result["after_ms"]) / statistics.median(result["before_ms"]))
    assert "\nHost: " in table and "| resnet_dynamo18 |" in table


def test_runtime_ab_runs_one_build_under_two_environments(fusionopt_bin, tmp_path):
    out = tmp_path / "ab.json"
    run_script("runtime_ab.py", "--before", fusionopt_bin, "--after", fusionopt_bin, "--only", "resnet_dynamo18",
               "--before-env", "FUSIONOPT_CPU_GEMM_WEIGHTS=column-major", "--after-env",
               "FUSIONOPT_CPU_GEMM_WEIGHTS=packed", "--warmup", "0", "--repeat", "2", "--rounds", "1", "--json", out,
               env_binary=fusionopt_bin)
    (result,) = json.loads(out.read_text())
    assert result["before_env"] == {"FUSIONOPT_CPU_GEMM_WEIGHTS": "column-major"}
    assert result["after_env"] == {"FUSIONOPT_CPU_GEMM_WEIGHTS": "packed"}
    assert len(result["before_ms"]) == len(result["after_ms"]) == 1


def test_runtime_ab_refuses_an_environment_without_a_value(fusionopt_bin):
    script = lib.REPO_ROOT / "bench" / "runtime_ab.py"
    done = subprocess.run([sys.executable, str(script), "--before", fusionopt_bin, "--after", fusionopt_bin,
                           "--before-env", "FUSIONOPT_CPU_GEMM_WEIGHTS"], capture_output=True, text=True)
    assert done.returncode == 2 and "expected NAME=VALUE" in done.stderr
