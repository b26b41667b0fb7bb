"""Issue 30: the Python package (python/fusionopt) over libfusionopt.so's C API.

- fusionopt.optimize on every committed real fixture at -O3, and fusionopt.InferenceSession
  running the result, equal onnxruntime on the original (the manifest's feeds; the tolerances
  of test_real_exports.py);
- InferenceSession describes inputs and outputs as onnxruntime does;
- every bad input raises the exception of its category, naming the problem, and nothing is
  written or modified.

The library is the build tree's (FUSIONOPT_LIBRARY, set here from FUSIONOPT_BIN's folder).
"""
import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import fusionopt_testlib as lib

sys.path.insert(0, str(lib.REPO_ROOT / "models" / "real"))
import corpus  # noqa: E402

fusionopt = lib.import_fusionopt()

ENTRIES = corpus.load()
FP32_TOLERANCE = (1e-3, 1e-4)
FP16_TOLERANCE = (2e-2, 4e-3)  # test_real_exports.py says why
SMALL_CNN = lib.PROJECT_MODELS / "mobilenet_style.onnx"


def _ort_outputs(path, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_optimized_at_o3_runs_as_onnxruntime_runs_the_original(entry):
    before = _digest(entry.path)
    optimized, report = fusionopt.optimize(str(entry.path), level=3)
    assert _digest(entry.path) == before, "the input model was modified"
    assert isinstance(optimized, onnx.ModelProto)
    assert report["passes"], "the report lists the passes that ran"
    fused = [n for n in optimized.graph.node if n.domain == "ai.fusionopt"]
    assert fused, "-O3 fused nothing"
    feeds = entry.feeds()
    session = fusionopt.InferenceSession(optimized)
    actual = session.run(None, feeds)
    expected = _ort_outputs(entry.path, feeds)
    assert len(actual) == len(expected)
    rtol, atol = FP16_TOLERANCE if "fp16" in entry.name else FP32_TOLERANCE
    for got, want, info in zip(actual, expected, session.get_outputs()):
        assert got.dtype == want.dtype and got.shape == want.shape, info.name
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"{entry.name}: output {info.name}")


@pytest.mark.parametrize("entry", ENTRIES[:6], ids=[e.name for e in ENTRIES[:6]])
def test_inputs_and_outputs_are_described_as_onnxruntime_describes_them(entry):
    ours = fusionopt.InferenceSession(str(entry.path))
    theirs = ort.InferenceSession(str(entry.path), providers=["CPUExecutionProvider"])
    for mine, reference in [(ours.get_inputs(), theirs.get_inputs()), (ours.get_outputs(), theirs.get_outputs())]:
        assert [(a.name, a.type, a.shape) for a in mine] == [(b.name, b.type, b.shape) for b in reference]
    assert ours.get_providers() == ["CPUExecutionProvider"]


def test_a_session_from_bytes_from_a_proto_and_from_a_path_agree():
    x = np.random.default_rng(3).standard_normal((2, 3, 32, 32)).astype(np.float32)
    model = onnx.load(SMALL_CNN)
    results = [fusionopt.InferenceSession(source).run(["logits"], {"input": x})[0]
               for source in (str(SMALL_CNN), SMALL_CNN, SMALL_CNN.read_bytes(), model)]
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
    options = fusionopt.SessionOptions()
    options.intra_op_num_threads = 1
    options.fused_kernels = False
    op_by_op = fusionopt.InferenceSession(str(SMALL_CNN), options).run(None, {"input": x})[0]
    np.testing.assert_allclose(op_by_op, results[0], rtol=1e-4, atol=1e-5)
    assert results[0].flags.writeable, "outputs are the caller's arrays, as onnxruntime's are"


def test_output_path_writes_the_model_and_the_report_names_the_fusions(tmp_path):
    out = tmp_path / "out.onnx"
    model, report = fusionopt.optimize(SMALL_CNN, level=3, output_path=out, verify=True)
    assert model is None and out.exists()
    onnx.checker.check_model(str(out), full_check=True)
    assert report["verification"]["matches"] is True
    model_in_memory, _ = fusionopt.optimize(onnx.load(SMALL_CNN), level=3)
    assert [n.op_type for n in onnx.load(out).graph.node] == [n.op_type for n in model_in_memory.graph.node]


def test_level_0_changes_nothing_that_runs_differently():
    x = np.ones((1, 3, 32, 32), np.float32)
    optimized, report = fusionopt.optimize(SMALL_CNN.read_bytes(), level=0)
    assert not [n for n in optimized.graph.node if n.domain == "ai.fusionopt"]
    np.testing.assert_allclose(fusionopt.InferenceSession(optimized).run(None, {"input": x})[0],
                               _ort_outputs(SMALL_CNN, {"input": x})[0], rtol=1e-4, atol=1e-5)


# ---- bad input: an exception of the category, naming the problem; nothing written

@pytest.fixture(scope="module")
def session():
    return fusionopt.InferenceSession(str(SMALL_CNN))


def test_feeds_that_contradict_the_model_are_named(session):
    x = np.zeros((1, 3, 32, 32), np.float32)
    cases = [({"pixels": x}, "'pixels'"), ({}, "'input' was not given"),
             ({"input": x.astype(np.float64)}, "dtype"), ({"input": np.zeros((1, 4, 32, 32), np.float32)}, "shape")]
    for feed, words in cases:
        with pytest.raises(fusionopt.InvalidModelError, match=words) as raised:
            session.run(None, feed)
        assert raised.value.code == 1 and isinstance(raised.value, ValueError)
    with pytest.raises(fusionopt.InvalidArgumentError, match="probabilities"):
        session.run(["probabilities"], {"input": x})
    with pytest.raises(fusionopt.InvalidArgumentError, match="complex"):
        session.run(None, {"input": np.zeros((1, 3, 32, 32), np.complex64)})
    with pytest.raises(fusionopt.InvalidArgumentError, match="dict"):
        session.run(None, [x])
    with pytest.raises(fusionopt.InvalidArgumentError, match="run_options"):
        session.run(None, {"input": x}, run_options=object())
    # Still usable after the errors, and still right.
    np.testing.assert_allclose(session.run(None, {"input": x})[0], _ort_outputs(SMALL_CNN, {"input": x})[0],
                               rtol=1e-4, atol=1e-5)


def test_bad_models_and_options_raise_their_category(tmp_path):
    with pytest.raises(fusionopt.FileError, match="nonexistent") as raised:
        fusionopt.InferenceSession(str(tmp_path / "nonexistent.onnx"))
    assert raised.value.code == 3 and isinstance(raised.value, OSError)
    with pytest.raises(fusionopt.InvalidModelError):
        fusionopt.InferenceSession(b"not a model")
    with pytest.raises(fusionopt.InvalidArgumentError, match="TensorrtExecutionProvider"):
        fusionopt.InferenceSession(str(SMALL_CNN), providers=["TensorrtExecutionProvider"])
    with pytest.raises(fusionopt.InvalidArgumentError, match="arena_extend_strategy"):
        fusionopt.InferenceSession(str(SMALL_CNN), providers=["CUDAExecutionProvider"],
                                   provider_options=[{"device_id": 0, "arena_extend_strategy": "kSameAsRequested"}])
    with pytest.raises(fusionopt.InvalidArgumentError, match="level"):
        fusionopt.optimize(SMALL_CNN, level=7)
    with pytest.raises(fusionopt.InvalidArgumentError, match="no-such-pass"):
        fusionopt.optimize(SMALL_CNN, level=3, disable=["no-such-pass"])
    with pytest.raises(fusionopt.InvalidArgumentError, match="runtime"):
        fusionopt.optimize(SMALL_CNN, runtime="tvm")
    with pytest.raises(fusionopt.InvalidModelError):
        fusionopt.optimize(b"\x08\x01garbage")
    with pytest.raises(fusionopt.FileError):
        fusionopt.optimize(tmp_path / "missing.onnx")
    out = tmp_path / "never.onnx"
    with pytest.raises(fusionopt.InvalidArgumentError):
        fusionopt.optimize(SMALL_CNN, level=3, output_path=out, disable=["no-such-pass"])
    assert not out.exists(), "a failed optimize wrote its output"
    with pytest.raises(fusionopt.InvalidArgumentError, match="overwrite"):
        fusionopt.optimize(SMALL_CNN, output_path=SMALL_CNN)


# ---- the README's "From Python" snippet, as written (it exports with torch: it runs where the
# export venv of `make real-models` exists, and says so where it does not)

def _readme_snippet():
    text = (lib.REPO_ROOT / "README.md").read_text()
    section = text[text.index("## From Python"):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("\n```", start)]


def test_the_readme_snippet_runs_and_agrees_with_onnxruntime(tmp_path):
    snippet = _readme_snippet()
    assert len(snippet.splitlines()) <= 15, "the README promises at most 15 lines"
    python = lib.REPO_ROOT / ".venv-export" / "bin" / "python"
    if not python.exists():
        pytest.skip("needs torch: the export venv of `make real-models` (.venv-export) is absent")
    import subprocess
    environment = dict(os.environ, PYTHONPATH=str(lib.REPO_ROOT / "python"))
    done = subprocess.run([str(python), "-c", snippet], cwd=tmp_path, env=environment, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # The exporter prints its progress first; the snippet's own line is the last.
    fusions, difference = done.stdout.strip().splitlines()[-1].split(" fusions, max difference ")
    assert int(fusions) > 0
    assert float(difference) < 1e-3, done.stdout


def _has_gpu():
    return Path("/dev/nvidia0").exists()


def test_the_cuda_provider_runs_the_cuda_backend_or_says_why_not():
    x = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    if not _has_gpu():
        # Without a GPU the CUDA provider is refused with an exception naming CUDA, never a crash.
        with pytest.raises(fusionopt.FusionoptError, match="(?i)cuda") as raised:
            fusionopt.InferenceSession(str(SMALL_CNN), providers=["CUDAExecutionProvider"])
        pytest.skip(f"no GPU on this machine (the CUDA provider said: {raised.value})")
    session = fusionopt.InferenceSession(str(SMALL_CNN), providers=[("CUDAExecutionProvider", {"device_id": 0})])
    assert session.get_providers() == ["CUDAExecutionProvider"]
    np.testing.assert_allclose(session.run(None, {"input": x})[0], _ort_outputs(SMALL_CNN, {"input": x})[0],
                               rtol=1e-3, atol=1e-4)
