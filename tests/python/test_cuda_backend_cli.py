"""The CUDA backend from the command line, on a machine without a GPU: `inspect --cuda` plans
every model in a compile-only plugin context (kernels generated and compiled, no device), and
`run / verify / bench --backend cuda` fail cleanly (exit 4, the reason named) instead of
crashing. docs/cuda.md."""
import json
import os
import subprocess

import pytest

import fusionopt_testlib as lib

LIBRARY = lib.REPO_ROOT / "build" / "libfusionopt_cuda.so"
RESNET = lib.PROJECT_MODELS / "resnet_style.onnx"


def require_library():
    if not LIBRARY.is_file():
        pytest.skip(f"{LIBRARY} was not built (no CUDA toolkit): the CUDA backend is not available")


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def plan(fusionopt, model, *args):
    rc, stdout, stderr = fusionopt("inspect", model, "--cuda", "--json", *args, timeout=600)
    assert rc in (0, 4), stderr
    document = json.loads(stdout)
    return rc, document, stderr


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("model", lib.project_models(), ids=lambda path: path.stem)
def test_every_node_of_every_model_has_a_cuda_kernel_view_or_constant(fusionopt, tmp_path, model, level):
    require_library()
    optimized = tmp_path / f"{model.stem}.O{level}.onnx"
    rc, _, stderr = fusionopt("optimize", model, f"-O{level}", "-o", optimized)
    assert rc == 0, stderr
    rc, document, stderr = plan(fusionopt, optimized)
    unsupported = [(node["op"], node["node"], node["unsupported"]) for node in document["nodes"] if node["unsupported"]]
    assert not unsupported, unsupported
    assert rc == 0 and document["unsupported"] == 0
    assert document["arch"] == 90
    nodes = document["nodes"]
    launch_free = [node for node in nodes if node["implementation"] == "constant" or node["implementation"].startswith("view")]
    kernels = [node for node in nodes if node not in launch_free]
    assert document["kernels"] == len(kernels) > 0
    assert document["launches_per_inference"] == sum(node["launches"] for node in nodes)
    assert all(node["launches"] >= 1 for node in kernels)
    assert all(node["launches"] == 0 for node in launch_free)
    if level == 3:
        # Fused nodes run as one kernel each (attention may take more launches, never zero).
        fused = [node for node in nodes if node["op"].startswith("ai.fusionopt::")]
        assert fused and all(node["launches"] >= 1 for node in fused)


def test_fusion_reduces_cuda_launches(fusionopt, tmp_path):
    require_library()
    model = lib.PROJECT_MODELS / "bert_style.onnx"
    launches = {}
    for level in (0, 3):
        out = tmp_path / f"bert.O{level}.onnx"
        assert fusionopt("optimize", model, f"-O{level}", "-o", out)[0] == 0
        _, document, _ = plan(fusionopt, out)
        launches[level] = document["launches_per_inference"]
    assert launches[3] < launches[0] / 2, launches


def test_plan_for_another_arch_and_shape(fusionopt):
    require_library()
    rc, document, _ = plan(fusionopt, lib.PROJECT_MODELS / "bert_style.onnx", "--cuda-arch", "80",
                           "--shape", "input_ids=2x16", "--shape", "attention_mask=2x16")
    assert document["arch"] == 80
    assert any("sm_80" in (node["implementation"] or "") for node in document["nodes"])


def test_text_plan_lists_nodes_and_a_summary_line(fusionopt):
    require_library()
    rc, stdout, stderr = fusionopt("inspect", RESNET, "--cuda", timeout=600)
    assert rc in (0, 4), stderr
    assert stdout.splitlines()[0].split()[:3] == ["node", "op", "launches"]
    summary, first = stdout.splitlines()[-2:]
    assert "sm_90:" in summary and "launches per inference" in summary
    assert first.startswith("first inference at these sizes: planned in")


def test_inspect_cuda_options_are_checked(fusionopt):
    lib.assert_error(fusionopt("inspect", RESNET, "--cuda", "--cost"), 2)
    lib.assert_error(fusionopt("inspect", RESNET, "--cuda-arch", "80"), 2)
    lib.assert_error(fusionopt("inspect", RESNET, "--cuda", "--cuda-arch", "7"), 2)
    lib.assert_error(fusionopt("inspect", RESNET, "--cuda", "--shape", "nope=1x2"), 2, str(RESNET), "nope")


def run_with_library(fusionopt_bin, library, *args):
    env = dict(os.environ, FUSIONOPT_CUDA_LIBRARY=str(library))
    done = subprocess.run([str(fusionopt_bin), *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_a_missing_plugin_library_is_reported_not_a_crash(fusionopt_bin, tmp_path):
    missing = tmp_path / "libnothing.so"
    for args in (("inspect", RESNET, "--cuda"), ("run", RESNET, "--backend", "cuda"),
                 ("verify", RESNET, RESNET, "--backend", "cuda"), ("bench", RESNET, "--backend", "cuda")):
        rc, stdout, stderr = run_with_library(fusionopt_bin, missing, *args)
        assert rc == 4, (args, stderr)
        assert "no CUDA plugin library" in stderr and "libnothing.so" in stderr
        assert len(stderr.strip().splitlines()) == 1, stderr


def test_a_library_that_is_not_the_plugin_is_refused(fusionopt_bin):
    # A real shared library without the fo_* symbols.
    rc, _, stderr = run_with_library(fusionopt_bin, "libm.so.6", "inspect", RESNET, "--cuda")
    assert rc == 4 and "lacks fo_abi_version" in stderr


def test_without_a_gpu_cuda_runs_fail_cleanly_and_auto_falls_back(fusionopt, tmp_path):
    require_library()
    if has_gpu():
        pytest.skip("a GPU is present: the no-GPU behaviour cannot be observed here")
    for args in (("run", RESNET, "--backend", "cuda"), ("verify", RESNET, RESNET, "--backend", "cuda"),
                 ("bench", RESNET, "--backend", "cuda", "--iters", "1")):
        rc, stdout, stderr = fusionopt(*args)
        assert rc == 4, (args, stderr)
        assert "no CUDA device" in stderr
    out = tmp_path / "bench.json"
    rc, stdout, stderr = fusionopt("bench", RESNET, "--iters", "2", "--warmup", "0", "--dim", "N=1", "--json", out)
    assert rc == 0, stderr
    assert json.loads(out.read_text())["backend"] == "cpu"
    assert "(cpu, " in stdout.splitlines()[0] and stderr == ""


def test_cuda_only_and_cpu_only_flags_are_usage_errors(fusionopt):
    lib.assert_error(fusionopt("run", RESNET, "--cuda-graph"), 2)
    lib.assert_error(fusionopt("bench", RESNET, "--backend", "cpu", "--cuda-graph"), 2, str(RESNET), "--cuda-graph")
    lib.assert_error(fusionopt("bench", RESNET, "--backend", "cuda", "--trace", "t.json"), 2, str(RESNET), "--trace")
    lib.assert_error(fusionopt("verify", RESNET, RESNET, "--backend", "tpu"), 2)


@pytest.mark.parametrize("opset,shape,axis,kernel", [
    (9, [1, 10, 1, 1], None, "row softmax"),   # SqueezeNet's final Softmax: legacy default axis 1, unit dims after it
    (13, [1, 10, 1, 1], -3, "row softmax"),    # the same bytes with a negative axis
    (9, [2, 3, 4], 1, "row softmax"),          # legacy coercion: the 12-element block from axis 1 is one row
    (13, [1, 10, 2, 1], 1, "lines: softmax"),  # a real non-last axis (opset 13: that axis alone), walked at its stride
    (13, [2, 3], None, "row softmax"),         # opset 13's default axis is the last
], ids=["legacy-unit-tail", "negative-axis", "legacy-block", "strided-axis", "default-axis"])
def test_softmax_runs_as_a_row_where_its_elements_are_contiguous(fusionopt, tmp_path, opset, shape, axis, kernel):
    require_library()
    from onnx import helper
    attributes = {} if axis is None else {"axis": axis}
    model = lib.make_model([helper.make_node("Softmax", ["x"], ["y"], name="softmax", **attributes)],
                           [lib.float_input("x", shape)], [lib.float_input("y", shape)], opsets=(("", opset),))
    path = tmp_path / "softmax.onnx"
    lib.save(model, path)
    rc, document, stderr = plan(fusionopt, path)
    node = document["nodes"][0]
    assert rc == 0 and node["unsupported"] is None, stderr
    assert node["implementation"].startswith(kernel), node["implementation"]


@pytest.mark.parametrize("batch,view", [(1, True), (2, False)], ids=["unit-outer-dims", "batch-2"])
def test_a_channel_split_with_unit_outer_dims_is_a_view(fusionopt, tmp_path, batch, view):
    """Each part of a Split with only unit dims before its axis is a contiguous slice: the
    backend aliases it at an offset (no launch); with a batch of 2 the parts interleave and a
    kernel copies them."""
    require_library()
    from onnx import helper
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Split", ["r"], ["a", "b", "c"], name="split", axis=1, num_outputs=3),
             helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Mul", ["s", "c"], ["y"], name="mul")]
    model = lib.make_model(nodes, [lib.float_input("x", [batch, 12, 4, 4])], [lib.float_input("y", [batch, 4, 4, 4])],
                           opsets=(("", 18),))
    path = tmp_path / "split.onnx"
    lib.save(model, path)
    rc, document, stderr = plan(fusionopt, path)
    assert rc == 0, stderr
    split = next(node for node in document["nodes"] if node["node"] == "split")
    if view:
        assert split["implementation"] == "view (contiguous slices)" and split["launches"] == 0
        assert document["launches_per_inference"] == 3
    else:
        assert split["implementation"].startswith("data movement") and split["launches"] == 1
        assert document["launches_per_inference"] == 4


def test_the_first_inference_cost_is_reported_and_the_disk_cache_answers_the_second(fusionopt_bin, tmp_path):
    """Issue 28: a plan reports what it cost (planning, kernels built, NVRTC compiles and cache
    reads); with an empty cache every distinct program is compiled, and a second process at the
    same sizes reads them all from the disk cache."""
    require_library()
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    model = lib.PROJECT_MODELS / "bert_style.onnx"
    costs = []
    for _ in range(2):
        done = subprocess.run([str(fusionopt_bin), "inspect", str(model), "--cuda", "--json"], capture_output=True,
                              text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        costs.append(json.loads(done.stdout)["first_inference"])
    cold, warm = costs
    assert cold["kernels_built"] == warm["kernels_built"] > 0
    assert cold["modules_compiled"] > 0 and cold["compile_seconds"] > 0
    assert warm["modules_compiled"] == 0
    assert warm["modules_from_cache"] == cold["modules_compiled"] + cold["modules_from_cache"]
    assert 0 < warm["plan_seconds"] < cold["plan_seconds"]
    done = subprocess.run([str(fusionopt_bin), "inspect", str(model), "--cuda"], capture_output=True, text=True, env=env,
                          timeout=600)
    assert "first inference at these sizes: planned in" in done.stdout.splitlines()[-1]
