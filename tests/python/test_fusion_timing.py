"""Measured fusion decisions (src/verify/fusion_timing.h) end to end on real exports:
`optimize --target cpu` times every fused call here and reports it under "fusion_timing", and
the model it writes computes what the export does; `--no-fusion-timing`, the GPU targets and
`--runtime ort` (which ORT runs, not fusionopt's runtime) leave the cost model's choice untimed; `bench` on the CPU backend reports what it undid."""
import json

import onnx
import pytest

import fusionopt_testlib as lib

FIXTURES = lib.REPO_ROOT / "models" / "real" / "fixtures"
MODELS = ["resnet_dynamo18", "mobilenet_v3_dynamo18", "bert_dynamo18_sdpa"]


def fused_calls(path):
    return sum(node.domain == "ai.fusionopt" for node in onnx.load(str(path)).graph.node)


@pytest.mark.parametrize("name", MODELS)
def test_target_cpu_times_every_fused_call_and_keeps_the_outputs(fusionopt, tmp_path, name):
    source = FIXTURES / f"{name}.onnx"
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    rc, _, stderr = fusionopt(source, "-O3", "--target", "cpu", "-o", out, "--report", report, timeout=300)
    assert rc == 0, stderr
    timing = json.loads(report.read_text())["fusion_timing"]
    assert timing["timed_calls"] > 0
    # Every call timed is either still fused or was inlined back (and named so).
    assert fused_calls(out) == timing["timed_calls"] - len(timing["undone"])
    for undone in timing["undone"]:
        assert undone["function"].startswith("ai.fusionopt::")
        assert undone["fused_ms"] > undone["members_ms"] > 0
    # One summary line, not a line per fusion, and only when it changed the model.
    summary = f"fusion timing: {len(timing['undone'])} of {timing['timed_calls']} fused calls slower fused"
    assert stderr.count("fusion timing:") == (1 if timing["undone"] else 0)
    assert (summary in stderr) == bool(timing["undone"])
    assert "undid" not in stderr
    rc, _, stderr = fusionopt("verify", source, out, timeout=300)
    assert rc == 0, stderr


def test_the_same_model_on_the_same_host_is_written_the_same_way(fusionopt, tmp_path):
    """The decisions are measured once and cached (per model structure, shapes, host and
    threads), so a second run writes the same model, and says where the decisions came from."""
    source = FIXTURES / "mobilenet_v3_dynamo18.onnx"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    outputs, reports = [], []
    for run in range(2):
        out, report = tmp_path / f"out{run}.onnx", tmp_path / f"report{run}.json"
        rc, _, stderr = fusionopt(source, "-O3", "--target", "cpu", "-o", out, "--report", report, "-v", env=env,
                                  timeout=300)
        assert rc == 0, stderr
        outputs.append(out.read_bytes())
        reports.append(json.loads(report.read_text())["fusion_timing"])
        assert ("decisions cached in" in stderr) == (run == 1), stderr
    assert outputs[0] == outputs[1]
    assert not reports[0]["from_cache"] and reports[1]["from_cache"]
    assert reports[0]["cache"] == reports[1]["cache"]
    assert reports[0]["cache"].startswith(str(tmp_path / "cache" / "fusionopt" / "fusion_timing"))
    assert reports[0]["undone"] == reports[1]["undone"]


@pytest.mark.parametrize("flags", [("--target", "cpu", "--no-fusion-timing"), ("--target", "h100"),
                                   ("--target", "cpu", "--runtime", "ort")])
def test_without_timing_the_report_has_no_timing(fusionopt, tmp_path, flags):
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    rc, _, stderr = fusionopt(FIXTURES / "resnet_dynamo18.onnx", "-O3", *flags, "-o", out, "--report", report)
    assert rc == 0, stderr
    assert "fusion_timing" not in json.loads(report.read_text())
    assert fused_calls(out) > 0
    # Timing fusionopt's runtime says nothing of ONNX Runtime's, so --runtime ort skips it and says so.
    assert ("skipped with --runtime ort" in stderr) == ("ort" in flags)


@pytest.mark.parametrize("flags", [(), ("--no-fusion-timing",)])
def test_bench_on_the_cpu_reports_the_fusions_timing_undid(fusionopt, tmp_path, flags):
    out = tmp_path / "bench.json"
    rc, stdout, stderr = fusionopt("bench", FIXTURES / "resnet_dynamo18.onnx", "--backend", "cpu", "--warmup", "1",
                                   "--iters", "3", "--json", out, *flags, timeout=300)
    assert rc == 0, stderr
    result = json.loads(out.read_text())
    assert isinstance(result["slower_fusions"], list)
    if flags:
        assert result["slower_fusions"] == []
    for fusion in result["slower_fusions"]:
        assert "ms fused vs" in fusion and "ms op by op" in fusion
    assert ("timed:" in stdout) == bool(result["slower_fusions"])
