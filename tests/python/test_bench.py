"""`fusionopt bench`: the JSON figures, the CI gate's exit codes, output verification, the
Chrome trace, and argument errors (docs/bench.md)."""
import json
import os
import pty
import re
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import fusionopt_testlib as lib

RESNET = lib.PROJECT_MODELS / "resnet_style.onnx"
BERT = lib.PROJECT_MODELS / "bert_style.onnx"
QUICK = ("--warmup", "1", "--iters", "5")  # a 2-core shared machine: keep runs short


def bench_json(fusionopt, tmp_path, model, *args):
    out = tmp_path / "bench.json"
    rc, stdout, stderr = fusionopt("bench", model, *QUICK, "--json", out, *args)
    assert rc == 0, stderr
    return json.loads(out.read_text()), stdout


def kernels_of_run(fusionopt, model):
    """The kernel count `fusionopt run -v` logs."""
    rc, _, stderr = fusionopt("run", "-v", model)
    assert rc == 0, stderr
    match = re.search(r"(\d+) kernels launched", stderr)
    assert match, stderr
    return int(match.group(1))


def numeric(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@pytest.mark.parametrize("model", [RESNET, BERT], ids=["resnet_style", "bert_style"])
def test_json_keys_types_and_order_of_percentiles(fusionopt, tmp_path, model):
    snapshot = lib.FileSnapshot(model)
    report, stdout = bench_json(fusionopt, tmp_path, model)
    snapshot.assert_unchanged()
    assert report["model"] == str(model)
    assert report["optimized_model"] is None and report["level"] == 3
    assert report["backend"] == "cpu" and report["target"] == "h100"
    assert report["verified"] is True
    assert report["iterations"] == 5 and report["warmup"] == 1
    for side in ("original", "optimized"):
        figures = report[side]
        assert isinstance(figures["kernels"], int) and figures["kernels"] > 0
        assert isinstance(figures["peak_intermediate_bytes"], int)
        assert isinstance(figures["intermediate_traffic_bytes"], int)
        latency = figures["latency_ms"]
        assert set(latency) == {"min", "p50", "p90", "p99", "mean"}
        assert all(numeric(latency[key]) and latency[key] > 0 for key in latency)
        assert latency["min"] <= latency["p50"] <= latency["p90"] <= latency["p99"]
        assert latency["min"] <= latency["mean"] <= latency["p99"]
        assert figures["throughput_per_s"] == pytest.approx(1000.0 / latency["mean"], rel=1e-9)
    # Fusion removes launches on both models.
    assert report["optimized"]["kernels"] < report["original"]["kernels"]
    assert report["speedup"] == pytest.approx(
        report["original"]["latency_ms"]["p50"] / report["optimized"]["latency_ms"]["p50"], rel=1e-9)
    assert numeric(report["predicted_speedup"]) and report["predicted_speedup"] > 1.0
    breakdown = report["fusion_breakdown"]
    assert breakdown and all(set(row) == {"kind", "nodes", "ms_per_inference", "share"} for row in breakdown)
    assert sum(row["share"] for row in breakdown) == pytest.approx(1.0, abs=1e-6)
    assert "contraction_epilogue" in {row["kind"] for row in breakdown}
    assert report["fail_if_slower"] is None and report["passed"] is None
    assert "speed-up:" in stdout and "predicted speed-up (h100):" in stdout
    # The host it measured on, as the runtime sees it.
    host = report["host"]
    assert host["isa"] in ("AVX2", "SSE4.2 or older") or host["isa"].startswith("AVX-512")
    assert host["vector_isa"] in ("baseline", "avx2", "avx512") and host["onednn_isa"]
    assert host["logical_cpus"] >= 1 and host["l1d_bytes"] >= 0
    assert f"host: {host['cpu']}" in stdout


def test_input_shapes_are_printed_and_defaulted_symbolic_dims_warned(fusionopt, tmp_path):
    out = tmp_path / "bench.json"
    rc, stdout, stderr = fusionopt("bench", BERT, *QUICK, "--json", out, "--no-fusion-timing")
    assert rc == 0, stderr
    report = json.loads(out.read_text())
    assert "inputs: input_ids 1x1 int64, attention_mask 1x1 int64" in stdout
    assert report["defaulted_dims"] == ["batch", "sequence"]
    assert "symbolic dim(s) batch, sequence defaulted to 1" in stderr
    # Sized by --dim: the shapes follow and nothing is warned.
    rc, stdout, stderr = fusionopt("bench", BERT, *QUICK, "--json", out, "--no-fusion-timing",
                                   "--dim", "batch=2", "--dim", "sequence=8")
    assert rc == 0, stderr
    assert "inputs: input_ids 2x8 int64, attention_mask 2x8 int64" in stdout
    assert json.loads(out.read_text())["defaulted_dims"] == []
    assert "defaulted" not in stderr


def test_version_names_the_host(fusionopt):
    rc, stdout, stderr = fusionopt("--version")
    assert rc == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].startswith("fusionopt ")
    assert lines[1].startswith("host: ") and "oneDNN" in lines[1] and "own kernels" in lines[1]


def test_kernel_counts_equal_those_of_run(fusionopt, tmp_path):
    optimized = tmp_path / "opt.onnx"
    rc, _, stderr = fusionopt("optimize", BERT, "-O", "3", "-o", optimized)
    assert rc == 0, stderr
    # Untimed, bench's in-memory -O3 is optimize's: the fusion timing it would do on the CPU
    # backend may undo a fusion the written file keeps (test_fusion_timing.py covers that).
    report, _ = bench_json(fusionopt, tmp_path, BERT, "--no-fusion-timing")
    assert report["original"]["kernels"] == kernels_of_run(fusionopt, BERT)
    assert report["optimized"]["kernels"] == kernels_of_run(fusionopt, optimized)
    # The same file given with --optimized benches the same kernels.
    given, _ = bench_json(fusionopt, tmp_path, BERT, "--optimized", optimized)
    assert given["optimized_model"] == str(optimized) and given["level"] is None
    assert given["optimized"]["kernels"] == report["optimized"]["kernels"]
    # Without a pass report, a fused node's kind is its function's name less a `_N` suffix.
    graph = onnx.load(str(optimized)).graph
    stems = {re.sub(r"_\d+$", "", node.op_type) for node in graph.node if node.domain == "ai.fusionopt"}
    rows = {row["kind"]: row for row in given["fusion_breakdown"]}
    assert set(rows) == stems | {"unfused", "outside nodes"}
    assert rows["outside nodes"]["nodes"] == 0
    assert sum(row["nodes"] for row in rows.values()) == len(graph.node)
    assert rows["unfused"]["nodes"] == sum(node.domain != "ai.fusionopt" for node in graph.node)


@pytest.mark.parametrize("model", [BERT, RESNET])
def test_the_breakdown_adds_up_to_the_measured_mean(fusionopt, tmp_path, model):
    """Issue 17: the rows had summed to the kernels' medians only (bert_style: 4.75 ms against a
    0.18 ms p50 once). Now they add up to an inference's mean wall time, the time outside the
    nodes included, within 10% of the timed runs' mean. The profiled and the timed inferences
    are different runs on a shared machine, and bert_style's inference is 0.1-0.2 ms, where one
    preempted run moves a mean by 10%: 200 timed runs, and up to three tries, each after a pause
    (threads an earlier test's onnxruntime session left spinning would slow the timed runs)."""
    misses = []
    for attempt in range(3):
        time.sleep(1.0)
        out = tmp_path / f"bench{attempt}.json"
        rc, stdout, stderr = fusionopt("bench", model, "--warmup", "5", "--iters", "200", "--json", out, "--no-fusion-timing")
        assert rc == 0, stderr
        report = json.loads(out.read_text())
        rows = report["fusion_breakdown"]
        assert rows[-1]["kind"] == "outside nodes" and rows[-1]["nodes"] == 0 and rows[-1]["ms_per_inference"] >= 0
        assert report["fusion_breakdown_runs"] == 20
        total = sum(row["ms_per_inference"] for row in rows)
        assert all(row["share"] == pytest.approx(row["ms_per_inference"] / total, rel=1e-6) for row in rows)
        assert re.search(rf"total\s+{total:.4f}\s+\(mean of 20 profiled inferences", stdout), stdout
        mean = report["optimized"]["latency_ms"]["mean"]
        if abs(total - mean) <= 0.10 * mean:
            return
        misses.append((total, mean))
    pytest.fail(f"breakdown total against the timed mean, three times more than 10% apart: {misses}")


def test_level_zero_changes_nothing_that_launches(fusionopt, tmp_path):
    report, _ = bench_json(fusionopt, tmp_path, RESNET, "-O", "0")
    assert report["level"] == 0
    assert report["optimized"]["kernels"] == report["original"]["kernels"]
    assert report["predicted_speedup"] is None  # no fused nodes: nothing to predict


def test_fail_if_slower_gate(fusionopt, tmp_path):
    out = tmp_path / "gate.json"
    rc, stdout, stderr = fusionopt("bench", RESNET, *QUICK, "--dim", "N=1", "--fail-if-slower", "1000", "--json", out)
    assert rc == 6, stderr
    assert "speed-up:" in stdout  # everything is printed before the gate fails
    assert stderr.count("\n") == 1 and "below --fail-if-slower 1000" in stderr
    report = json.loads(out.read_text())
    assert report["fail_if_slower"] == 1000 and report["passed"] is False

    rc, stdout, stderr = fusionopt("bench", RESNET, *QUICK, "--fail-if-slower", "0.001", "--json", out)
    assert rc == 0, stderr
    report = json.loads(out.read_text())
    assert report["passed"] is True and "gate: speed-up" in stdout


@pytest.fixture
def wrong_optimized(fusionopt, tmp_path):
    """resnet_style optimized, then its largest weight doubled: outputs no longer match."""
    optimized = tmp_path / "opt.onnx"
    rc, _, stderr = fusionopt("optimize", RESNET, "-O", "3", "-o", optimized)
    assert rc == 0, stderr
    model = onnx.load(str(optimized))
    largest = max(model.graph.initializer, key=lambda tensor: int(np.prod(tensor.dims)))
    doubled = numpy_helper.from_array(numpy_helper.to_array(largest) * 2.0, largest.name)
    largest.CopyFrom(doubled)
    wrong = tmp_path / "wrong.onnx"
    onnx.save(model, str(wrong))
    return wrong


def test_different_outputs_refuse_a_speedup(fusionopt, tmp_path, wrong_optimized):
    out = tmp_path / "bench.json"
    result = fusionopt("bench", RESNET, *QUICK, "--optimized", wrong_optimized, "--json", out)
    problem = lib.assert_error(result, 5, str(wrong_optimized), "output '", "differs", "no speed-up")
    assert "speed-up:" not in result[1]
    assert not out.exists(), problem

    report, stdout = bench_json(fusionopt, tmp_path, RESNET, "--optimized", wrong_optimized, "--no-verify")
    assert report["verified"] is False
    assert "verified: no (--no-verify)" in stdout and "speed-up:" in stdout


def test_trace_has_one_event_per_kernel(fusionopt, tmp_path):
    trace = tmp_path / "trace.json"
    report, _ = bench_json(fusionopt, tmp_path, BERT, "--trace", trace)
    events = json.loads(trace.read_text())["traceEvents"]
    complete = [event for event in events if event["ph"] == "X"]
    original = [event for event in complete if event["pid"] == 1]
    optimized = [event for event in complete if event["pid"] == 2]
    assert len(original) == report["original"]["kernels"]
    assert len(optimized) == report["optimized"]["kernels"]
    for event in complete:
        assert numeric(event["ts"]) and event["ts"] >= 0 and numeric(event["dur"]) and event["dur"] >= 0
        assert event["name"] and event["cat"] and event["args"]["op"].endswith(event["cat"])
    # Each side's events come in launch order.
    for side in (original, optimized):
        assert [event["ts"] for event in side] == sorted(event["ts"] for event in side)
    fused = [event for event in optimized if event["args"]["op"].startswith("ai.fusionopt::")]
    assert fused and all(event["args"]["fused_nodes"] for event in fused)
    # fused_nodes name the nodes each fused node replaced: original nodes (some launch-free,
    # e.g. a Reshape), or nodes an earlier pass made (a horizontal fusion's "..._horizontal");
    # test_trace_fused_nodes_are_the_models_attribute checks them exactly.
    original_names = {node.name for node in onnx.load(str(BERT)).graph.node}
    assert {event["name"] for event in original} <= original_names
    assert all("fused_nodes" not in event["args"] for event in original)


def test_trace_fused_nodes_are_the_models_attribute(fusionopt, tmp_path):
    optimized = tmp_path / "opt.onnx"
    rc, _, stderr = fusionopt("optimize", BERT, "-O", "3", "-o", optimized)
    assert rc == 0, stderr
    recorded = {node.name: [name.decode() for name in attribute.strings]
                for node in onnx.load(str(optimized)).graph.node
                for attribute in node.attribute if attribute.name == "fused_nodes"}
    trace = tmp_path / "trace.json"
    bench_json(fusionopt, tmp_path, BERT, "--optimized", optimized, "--trace", trace)
    fused = [event for event in json.loads(trace.read_text())["traceEvents"]
             if event["ph"] == "X" and event["pid"] == 2 and "fused_nodes" in event["args"]]
    assert {event["name"] for event in fused} == set(recorded)
    for event in fused:
        assert event["args"]["fused_nodes"] == recorded[event["name"]]


SVG = {"s": "http://www.w3.org/2000/svg"}
MARKER_TITLE = re.compile(r"^(\S+) \((\S+)\): ([0-9.e+-]+) FLOP/B, ([0-9.e+-]+) GFLOP/s$")


def cost_table(fusionopt, model):
    """Node name -> FLOP/B from `inspect --cost` (the same cost model, symbolic dims 1)."""
    rc, stdout, stderr = fusionopt("inspect", model, "--cost", "--target", "cpu")
    assert rc == 0, stderr
    table = {}
    for line in stdout.splitlines():
        fields = line.split()
        if len(fields) >= 7 and fields[-2] in ("memory", "compute"):
            table[fields[0]] = float(fields[-3])
    return table


def test_roofline_places_every_kernel_with_its_cost_model_intensity(fusionopt, tmp_path):
    optimized = tmp_path / "opt.onnx"
    rc, _, stderr = fusionopt("optimize", BERT, "-O", "3", "-o", optimized)
    assert rc == 0, stderr
    svg = tmp_path / "roof.svg"
    report, stdout = bench_json(fusionopt, tmp_path, BERT, "--optimized", optimized, "--roofline", svg)
    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.findall(".//s:polyline[@class='roof']", SVG), "the roof is drawn"
    legend = " ".join(text.text or "" for text in root.iter("{http://www.w3.org/2000/svg}text"))
    intensities = {}
    for side, model in (("original", BERT), ("optimized", optimized)):
        markers = [m for m in root.findall(".//s:circle[@class='kernel']", SVG) if m.get("data-side") == side]
        placed = int(re.search(side + r" \((\d+) kernels\)", legend).group(1))
        unplaced = re.search(side + r" \(\d+ kernels\)\s*(\d+) without FLOPs", legend)
        assert placed == len(markers) > 0
        # Every kernel the runtime launched is either on the plot or counted as not shown.
        assert placed + (int(unplaced.group(1)) if unplaced else 0) == report[side]["kernels"]
        costs = cost_table(fusionopt, model)
        intensities[side] = []
        for marker in markers:
            name, op, intensity, gflops = MARKER_TITLE.match(marker.find("s:title", SVG).text).groups()
            assert marker.get("data-op") == op
            assert float(intensity) == pytest.approx(costs[name], rel=0.01, abs=0.006)
            assert float(gflops) > 0
            intensities[side].append(float(intensity))
    # Fusion keeps intermediates on chip: fewer memory-bound kernels (under 1 FLOP/B) remain.
    low = {side: sum(1 for x in values if x < 1.0) for side, values in intensities.items()}
    assert low["optimized"] < low["original"]


def test_roofline_kernels_are_in_the_json_with_their_fraction_of_the_roof(fusionopt, tmp_path):
    svg = tmp_path / "roof.svg"
    report, _ = bench_json(fusionopt, tmp_path, BERT, "-O", "3", "--roofline", svg)
    roofline = report["roofline"]
    assert roofline["peak_flops"] > 0 and roofline["bandwidth"] > 0
    ridge = roofline["peak_flops"] / roofline["bandwidth"]
    root = ET.parse(svg).getroot()
    for side in ("original", "optimized"):
        kernels = roofline["sides"][side]["kernels"]
        markers = [m for m in root.findall(".//s:circle[@class='kernel']", SVG) if m.get("data-side") == side]
        # The JSON lists exactly the kernels the SVG places, and the rest as not placed.
        assert len(kernels) == len(markers) > 0
        assert len(kernels) + roofline["sides"][side]["not_placed"] == report[side]["kernels"]
        for kernel in kernels:
            ceiling = min(roofline["peak_flops"], kernel["intensity"] * roofline["bandwidth"])
            assert kernel["fraction_of_roof"] == pytest.approx(kernel["attained_flops"] / ceiling)
            assert kernel["bound"] == ("memory" if kernel["intensity"] < ridge else "compute")
            assert kernel["ms_per_inference"] > 0
    # Without --roofline there is nothing to report.
    plain, _ = bench_json(fusionopt, tmp_path, BERT, "-O", "3")
    assert plain["roofline"] is None


def test_roofline_to_a_missing_folder_is_an_io_error_and_writes_nothing(fusionopt, tmp_path):
    target = tmp_path / "no_such_dir" / "roof.svg"
    lib.assert_error(fusionopt("bench", RESNET, *QUICK, "--dim", "N=1", "--roofline", target), 3, str(target))
    assert not target.parent.exists()


def test_time_budget_runs_at_least_one_pair(fusionopt, tmp_path):
    out = tmp_path / "bench.json"
    rc, _, stderr = fusionopt("bench", RESNET, "--warmup", "0", "--time", "0.05", "--json", out)
    assert rc == 0, stderr
    report = json.loads(out.read_text())
    assert report["iterations"] >= 1 and report["warmup"] == 0


def test_cuda_backend_without_a_device_is_unsupported(fusionopt):
    # test_cuda_backend_cli.py covers the CUDA backend; here only bench's exit code and message.
    if subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode == 0:
        pytest.skip("a GPU is present")
    lib.assert_error(fusionopt("bench", RESNET, "--backend", "cuda"), 4, str(RESNET), "CUDA")


@pytest.mark.parametrize("args", [
    ("--iters", "0"),
    ("--iters", "5", "--time", "1"),
    ("-O", "3", "--optimized", "x.onnx"),
    ("-O", "7"),
    ("--backend", "tpu"),
    ("--fail-if-slower", "-1"),
    ("--bogus",),
    ("--compare-levels", "-O", "2"),
    ("--compare-levels", "--trace", "t.json"),
    ("--compare-levels", "--roofline", "r.svg"),
], ids=["zero-iters", "iters-and-time", "level-and-optimized", "bad-level", "bad-backend", "negative-gate",
        "unknown-flag", "levels-and-level", "levels-and-trace", "levels-and-roofline"])
def test_bad_arguments_are_usage_errors(fusionopt, args):
    lib.assert_error(fusionopt("bench", RESNET, *args), 2)


def test_unknown_target_and_shape_are_usage_errors(fusionopt):
    lib.assert_error(fusionopt("bench", RESNET, "--target", "abacus"), 2, str(RESNET))
    lib.assert_error(fusionopt("bench", RESNET, *QUICK, "--shape", "nope=1x2"), 2, str(RESNET), "nope")


def test_help_documents_bench_and_exit_code_6(fusionopt):
    rc, stdout, _ = fusionopt("--help")
    assert rc == 0
    assert "bench" in stdout and "6 bench: speed-up below --fail-if-slower" in stdout
    rc, stdout, _ = fusionopt("bench", "--help")
    assert rc == 0
    for flag in ("--optimized", "--warmup", "--iters", "--time", "--json", "--trace", "--fail-if-slower",
                 "--no-verify", "--backend"):
        assert flag in stdout


def test_compare_levels_has_one_verified_row_per_level(fusionopt, tmp_path):
    document, stdout = bench_json(fusionopt, tmp_path, BERT, "--compare-levels")
    assert document["verified"] is True and document["target"] == "h100"
    levels = document["levels"]
    assert [row["level"] for row in levels] == [0, 1, 2, 3]
    kernels = [row["kernels"] for row in levels]
    assert kernels == sorted(kernels, reverse=True) and kernels[3] < kernels[0]
    assert kernels[0] == kernels_of_run(fusionopt, BERT)  # O0 is the model as it is
    traffic = [row["intermediate_traffic_bytes"] for row in levels]
    assert traffic[3] < traffic[0]
    assert levels[0]["speedup_over_o0"] == 1.0 and levels[0]["predicted_speedup"] is None
    assert numeric(levels[3]["predicted_speedup"]) and levels[3]["predicted_speedup"] > 1
    for row in levels:
        latency = row["latency_ms"]
        assert 0 < latency["min"] <= latency["p50"] <= latency["p90"] <= latency["p99"]
    rows = [line for line in stdout.splitlines() if re.match(r"O[0-3] ", line)]
    assert len(rows) == 4


def test_progress_bar_only_on_a_terminal(fusionopt, fusionopt_bin):
    # Not a terminal (a pipe): no bar, even for a run longer than a second.
    rc, _, stderr = fusionopt("bench", BERT, "--warmup", "1", "--time", "1.5")
    assert rc == 0 and "bench [" not in stderr
    # A terminal on stderr: the bar is drawn, then erased before the summary on stdout.
    primary, secondary = pty.openpty()
    drawn = bytearray()

    def drain():  # keep the terminal's buffer from filling while the bench runs
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    done = subprocess.run([str(fusionopt_bin), "bench", str(BERT), "--warmup", "1", "--time", "1.5"],
                          stdout=subprocess.PIPE, stderr=secondary, text=True, timeout=120)
    os.close(secondary)
    reader.join(timeout=10)
    os.close(primary)
    assert done.returncode == 0
    assert b"bench [" in drawn and b"%" in drawn
    assert "speed-up" in done.stdout


def test_dim_sizes_the_feeds_and_a_missing_symbol_is_a_warning(fusionopt, tmp_path):
    """bench takes the same --dim list as optimize (a CI job passes one list to every model):
    the inputs' symbolic dims get those sizes, a symbol the model lacks is a warning, and
    --strict-dims makes it a usage error."""
    gpt2 = lib.REPO_ROOT / "models" / "real" / "fixtures" / "gpt2_dynamo18_sdpa.onnx"  # input_ids [batch, sequence]
    short, _ = bench_json(fusionopt, tmp_path, gpt2)
    long_out = tmp_path / "long.json"
    rc, _, stderr = fusionopt("bench", gpt2, *QUICK, "--json", long_out, "--dim", "sequence=32", "--dim", "channels=3")
    assert rc == 0, stderr
    assert "--dim channels: the model has no symbolic dim 'channels'" in stderr
    long = json.loads(long_out.read_text())
    # 32 positions move more bytes between kernels than 1 does.
    for side in ("original", "optimized"):
        assert long[side]["intermediate_traffic_bytes"] > 16 * short[side]["intermediate_traffic_bytes"]
    rc, _, stderr = fusionopt("bench", gpt2, *QUICK, "--dim", "channels=3", "--strict-dims")
    assert rc == 2 and "no symbolic dim 'channels'" in stderr
