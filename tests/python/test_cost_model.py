"""The cost model end to end: `inspect --cost` on the BERT-style model before and after -O2,
`--target`, `--dim`, the predictions in `--report`, and the cpu profile's probe and cache.

Numbers are checked on the published GPU profiles only; the measured cpu profile is only
checked to be positive and cached."""
import json
import os
import subprocess

import pytest

import fusionopt_testlib as lib

BERT = lib.PROJECT_MODELS / "bert_style.onnx"
H100_PEAK, H100_BANDWIDTH, H100_LAUNCH = 67e12, 3350e9, 5e-6
UNKNOWN_TARGET = "unknown target 'v100' (targets: t4, a100, h100, h200, cpu)"


def cost_json(fusionopt, path, *flags):
    rc, stdout, stderr = fusionopt("inspect", path, "--cost", "--json", *flags)
    assert rc == lib.EXIT_OK, stderr
    return json.loads(stdout)


def optimized(fusionopt, tmp_path, level, *flags):
    out = tmp_path / f"o{level}.onnx"
    rc, _, stderr = fusionopt(BERT, "-O%d" % level, "-o", out, "-q", *flags)
    assert rc == lib.EXIT_OK, stderr
    return out


def kernel_seconds(kernel):
    """What the roofline says for one listed kernel on h100."""
    bytes_moved = kernel["bytes_read"] + kernel["bytes_written"]
    roofline = max(kernel["flops"] / H100_PEAK, bytes_moved / H100_BANDWIDTH)
    return roofline * kernel["register_penalty"] + H100_LAUNCH


def test_original_model_totals_are_the_sum_of_its_kernels(fusionopt):
    cost = cost_json(fusionopt, BERT)
    assert cost["target"]["name"] == "h100"
    assert cost["target"]["peak_flops"] == H100_PEAK
    assert cost["target"]["bandwidth"] == H100_BANDWIDTH
    assert cost["target"]["measured"] is False
    assert cost["dims"] == {"batch": 1, "sequence": 1}
    kernels = cost["kernels"]
    totals = cost["totals"]
    assert totals["kernels"] == len(kernels) > 50
    assert totals["unknown_kernels"] == 0
    assert all(kernel["known"] and not kernel["fused"] for kernel in kernels)
    for kernel in kernels:
        assert kernel["seconds"] == pytest.approx(kernel_seconds(kernel)), kernel["node"]
        expected_bound = ("compute" if kernel["flops"] / H100_PEAK >
                          (kernel["bytes_read"] + kernel["bytes_written"]) / H100_BANDWIDTH else "memory")
        assert kernel["bound"] == expected_bound
    assert totals["seconds"] == pytest.approx(sum(k["seconds"] for k in kernels))
    assert totals["flops"] == pytest.approx(sum(k["flops"] for k in kernels))
    assert totals["bytes_read"] == pytest.approx(sum(k["bytes_read"] for k in kernels))
    # Nothing is fused: no original to compare with.
    assert cost["original"] is None
    assert cost["predicted_speedup"] is None
    # Tiny tensors at batch = sequence = 1: every kernel waits on its launch, memory-bound.
    assert {k["bound"] for k in kernels} == {"memory"}


def test_o2_model_predicts_the_unfused_o1_model_and_a_speedup(fusionopt, tmp_path):
    o1 = cost_json(fusionopt, optimized(fusionopt, tmp_path, 1))
    o2 = cost_json(fusionopt, optimized(fusionopt, tmp_path, 2))
    fused = [k for k in o2["kernels"] if k["fused"]]
    assert len(fused) == o2["original"]["fused_nodes"] > 10
    assert o2["totals"]["unknown_kernels"] == 0 and o2["original"]["unknown_kernels"] == 0
    # The fused nodes' bodies as separate kernels are exactly the O1 model's kernels.
    assert o2["original"]["kernels"] == o1["totals"]["kernels"]
    assert o2["original"]["seconds"] == pytest.approx(o1["totals"]["seconds"])
    assert o2["original"]["flops"] == pytest.approx(o1["totals"]["flops"])
    # Fusion keeps the FLOPs, moves fewer bytes and launches fewer kernels.
    assert o2["totals"]["flops"] == pytest.approx(o1["totals"]["flops"])
    assert o2["totals"]["bytes_read"] + o2["totals"]["bytes_written"] < \
        o1["totals"]["bytes_read"] + o1["totals"]["bytes_written"]
    assert o2["totals"]["kernels"] < o1["totals"]["kernels"]
    # The original column of each fused node sums with the unfused kernels to the original.
    unfused = [k for k in o2["kernels"] if not k["fused"]]
    original_sum = sum(k["original"]["seconds"] for k in fused) + sum(k["seconds"] for k in unfused)
    assert o2["original"]["seconds"] == pytest.approx(original_sum)
    for kernel in fused:
        assert kernel["original"]["seconds"] > kernel["seconds"], kernel["node"]
    speedup = o2["predicted_speedup"]
    assert speedup == pytest.approx(o2["original"]["seconds"] / o2["totals"]["seconds"])
    assert speedup > 1.5


def test_text_table_lists_kernels_and_the_speedup(fusionopt, tmp_path):
    path = optimized(fusionopt, tmp_path, 2)
    rc, stdout, stderr = fusionopt("inspect", path, "--cost")
    assert rc == lib.EXIT_OK, stderr
    lines = stdout.splitlines()
    assert lines[0].startswith("target:  h100 - NVIDIA H100 SXM5")
    header = next(line for line in lines if line.startswith("node"))
    for column in ("op", "FLOPs", "bytes", "FLOP/B", "bound", "time (us)"):
        assert column in header
    expected = cost_json(fusionopt, path)
    rows = [line for line in lines if line.startswith("FusedMatMulAdd ")]
    assert len(rows) == 1 and "ai.fusionopt::FusedMatMulAdd" in rows[0] and "memory" in rows[0]
    assert f"kernels: {expected['totals']['kernels']} (0 of unknown cost" in stdout
    assert f"predicted {expected['totals']['seconds'] * 1e6:.2f} us" in stdout
    assert f"predicted speed-up: {expected['predicted_speedup']:.2f}x" in stdout


def test_dim_changes_the_numbers(fusionopt):
    small = cost_json(fusionopt, BERT)
    large = cost_json(fusionopt, BERT, "--dim", "sequence=64", "--dim", "batch=4")
    assert large["dims"] == {"batch": 4, "sequence": 64}
    assert large["totals"]["kernels"] == small["totals"]["kernels"]
    assert large["totals"]["unknown_kernels"] == 0
    # batch·sequence = 256 times the tokens; attention grows with sequence² on top.
    assert large["totals"]["flops"] > 256 * small["totals"]["flops"]
    assert large["totals"]["seconds"] > small["totals"]["seconds"]
    # The embedding lookup reads the rows it copies: 4·64 ids and as many 64-float rows.
    gather = next(k for k in large["kernels"] if k["node"] == "/embeddings/word_embeddings/Gather")
    assert gather["bytes_written"] == 4 * 64 * 64 * 4
    assert gather["bytes_read"] == 4 * 64 * 8 + 4 * 64 * 64 * 4


def test_sizes_the_model_cannot_run_leave_costs_unknown(fusionopt):
    # The model has 64 positions: at sequence 128 the position embeddings' Slice clamps to 64,
    # and the sums after it have no shape. Those kernels are unknown, not guessed.
    cost = cost_json(fusionopt, BERT, "--dim", "sequence=128")
    unknown = [k for k in cost["kernels"] if not k["known"]]
    assert len(unknown) == cost["totals"]["unknown_kernels"] > 50
    assert all("unknown dim" in k["unknown_reason"] for k in unknown)
    known = [k for k in cost["kernels"] if k["known"]]
    assert cost["totals"]["seconds"] == pytest.approx(sum(k["seconds"] for k in known))


def test_bad_dim_and_unknown_target_are_usage_errors(fusionopt, tmp_path):
    for flags, message in [(("--target", "v100"), UNKNOWN_TARGET),
                           (("--dim", "seqence=8", "--strict-dims"), "the model has no symbolic dim 'seqence'"),
                           (("--dim", "sequence=0"), "--dim 'sequence=0' is not SYMBOL=N with N >= 1")]:
        rc, stdout, stderr = fusionopt("inspect", BERT, "--cost", *flags)
        assert rc == lib.EXIT_USAGE, flags
        assert stdout == ""
        assert len(stderr.splitlines()) == 1 and stderr.startswith("error: ") and message in stderr
    out = tmp_path / "never.onnx"
    rc, _, stderr = fusionopt(BERT, "-O3", "--target", "v100", "-o", out)
    assert rc == lib.EXIT_USAGE
    assert len(stderr.splitlines()) == 1 and UNKNOWN_TARGET in stderr
    assert not out.exists()
    rc, _, stderr = fusionopt(BERT, "-O3", "--dim", "seqence=8", "--strict-dims", "-o", out)
    assert rc == lib.EXIT_USAGE
    assert len(stderr.splitlines()) == 1 and "the model has no symbolic dim 'seqence'" in stderr
    assert not out.exists()
    # --target belongs to --cost in inspect.
    rc, _, _ = fusionopt("inspect", BERT, "--target", "t4")
    assert rc == lib.EXIT_USAGE


def test_a_dim_the_model_lacks_is_warned_about_and_ignored(fusionopt, tmp_path):
    """A CI job passes one list of dims to every model: a symbol this model lacks is a warning
    naming the file and the model's symbols, and the others still apply (--strict-dims keeps the
    error, above)."""
    out = tmp_path / "out.onnx"
    rc, _, stderr = fusionopt(BERT, "-O3", "--dim", "pixels=4", "--dim", "sequence=64", "-o", out)
    assert rc == 0, stderr
    warning = [line for line in stderr.splitlines() if "--dim pixels" in line]
    assert len(warning) == 1 and str(BERT) in warning[0] and "its symbols: batch, sequence" in warning[0]
    assert out.exists()
    both = cost_json(fusionopt, BERT, "--dim", "sequence=64", "--dim", "pixels=4")
    assert both == cost_json(fusionopt, BERT, "--dim", "sequence=64")
    assert both["dims"]["sequence"] == 64 and "pixels" not in both["dims"]


def test_report_carries_predictions_and_o2_does_not_depend_on_the_target(fusionopt, tmp_path):
    reports = {}
    models = {}
    for target in ("h100", "t4"):
        report = tmp_path / f"{target}.json"
        out = optimized(fusionopt, tmp_path, 2, "--target", target, "--report", report,
                        "--dim", "sequence=16")
        models[target] = out.read_bytes()
        reports[target] = json.loads(report.read_text())
        out.rename(tmp_path / f"{target}.onnx")
    # O2 fuses whatever the target; the predictions differ.
    assert models["h100"] == models["t4"]
    h100, t4 = reports["h100"], reports["t4"]
    assert h100["target"] == "h100" and t4["target"] == "t4"
    assert [f["node"] for f in h100["fusions"]] == [f["node"] for f in t4["fusions"]]
    for fusion_h100, fusion_t4 in zip(h100["fusions"], t4["fusions"]):
        assert fusion_h100["predicted_fused_us"] < fusion_h100["predicted_separate_us"], fusion_h100["node"]
        assert fusion_t4["predicted_fused_us"] > fusion_h100["predicted_fused_us"]
    for entry in h100["passes"]:
        assert entry["cost_rejections"] == []


def test_report_prediction_matches_inspect_of_the_fused_node(fusionopt, tmp_path):
    report_path = tmp_path / "report.json"
    out = optimized(fusionopt, tmp_path, 2, "--report", report_path, "--dim", "sequence=32")
    report = json.loads(report_path.read_text())
    cost = cost_json(fusionopt, out, "--dim", "sequence=32")
    by_node = {k["node"]: k for k in cost["kernels"]}
    checked = 0
    for fusion in report["fusions"]:
        # Later passes do not rewrite fused nodes, so each is costed as the pass predicted.
        kernel = by_node[fusion["node"]]
        assert kernel["seconds"] * 1e6 == pytest.approx(fusion["predicted_fused_us"]), fusion["node"]
        checked += 1
    assert checked == len(report["fusions"]) > 10


def run_with_cache(fusionopt_bin, cache_home, *args):
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home))
    completed = subprocess.run([str(fusionopt_bin), *map(str, args)], capture_output=True, text=True,
                               env=env, timeout=120)
    return completed.returncode, completed.stdout, completed.stderr


def test_cpu_profile_is_measured_once_and_cached(fusionopt_bin, tmp_path):
    cache_home = tmp_path / "cache"
    cache = cache_home / "fusionopt" / "cpu_profile.json"
    rc, stdout, stderr = run_with_cache(fusionopt_bin, cache_home, "inspect", BERT, "--cost", "--json",
                                        "--target", "cpu")
    assert rc == lib.EXIT_OK, stderr
    target = json.loads(stdout)["target"]
    assert target["name"] == "cpu" and target["measured"] is True
    for key in ("peak_flops", "bandwidth", "launch_overhead_s", "register_budget_per_thread"):
        assert target[key] > 0, key
    cached = json.loads(cache.read_text())
    assert cached["peak_flops"] == target["peak_flops"]
    assert cached["bandwidth"] == target["bandwidth"]
    assert cached["threads"] >= 1

    # A second run reads the cache rather than measuring: an edited figure shows through.
    cached["peak_flops"] = 1234.5e9
    cache.write_text(json.dumps(cached))
    rc, stdout, stderr = run_with_cache(fusionopt_bin, cache_home, "inspect", BERT, "--cost", "--json",
                                        "--target", "cpu")
    assert rc == lib.EXIT_OK, stderr
    assert json.loads(stdout)["target"]["peak_flops"] == 1234.5e9

    # A probe older than a week is measured again: a reading taken on a busy machine does not
    # steer -O3 forever.
    cached["probed_at"] = cached["probed_at"] - 8 * 24 * 3600
    cache.write_text(json.dumps(cached))
    rc, stdout, stderr = run_with_cache(fusionopt_bin, cache_home, "inspect", BERT, "--cost", "--json",
                                        "--target", "cpu")
    assert rc == lib.EXIT_OK, stderr
    assert json.loads(stdout)["target"]["peak_flops"] != 1234.5e9
    rewritten = json.loads(cache.read_text())
    assert rewritten["probed_at"] > cached["probed_at"] + 7 * 24 * 3600
    cached = rewritten
    cached["peak_flops"] = 1234.5e9
    cache.write_text(json.dumps(cached))

    # An unreadable cache is measured again and rewritten.
    cache.write_text("{not json")
    rc, stdout, stderr = run_with_cache(fusionopt_bin, cache_home, "inspect", BERT, "--cost", "--json",
                                        "--target", "cpu")
    assert rc == lib.EXIT_OK, stderr
    remeasured = json.loads(stdout)["target"]
    assert remeasured["peak_flops"] > 0 and remeasured["peak_flops"] != 1234.5e9
    assert json.loads(cache.read_text())["peak_flops"] == remeasured["peak_flops"]
