"""Winograd F(4x4, 3x3) convolutions on real exports (src/cpu_runtime/contraction/winograd.h):
with every eligible 3x3 convolution forced onto it (FUSIONOPT_CPU_WINOGRAD=always), fusionopt's
runtime on the -O3 file still equals ORT on the original (rtol 1e-3, atol 1e-4, as every real
export is held to), and `run -v` counts the convolutions it ran that way: some where the model
has 3x3 stride-1 convolutions with channels in eights, none when it is turned off."""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import fusionopt_testlib as lib

sys.path.insert(0, str(lib.REPO_ROOT / "models" / "real"))
import corpus  # noqa: E402

ENTRIES = {entry.name: entry for entry in corpus.load()}
# CNN fixtures with 3x3 stride-1 convolutions whose channel counts are multiples of 8.
WITH_3X3 = ["resnet_dynamo18", "resnet_torchscript17", "densenet_dynamo18", "yolov8n_dynamo18",
            "yolov8n_torchscript17"]


def run_with(fusionopt_bin, model, feeds, folder, mode):
    (folder / "out").mkdir(parents=True)
    arguments = []
    for name, value in feeds.items():
        np.save(folder / f"{name}.npy", value)
        arguments += ["--input", f"{name}={folder / f'{name}.npy'}"]
    env = dict(os.environ, FUSIONOPT_CPU_WINOGRAD=mode)
    done = subprocess.run([str(fusionopt_bin), "run", str(model), *arguments, "--threads", "2", "-v",
                           "--output-dir", str(folder / "out")], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    match = re.search(r"(\d+) convolutions by Winograd F\(4x4,3x3\)", done.stderr)
    assert match, done.stderr
    outputs = [numpy_helper.to_array(onnx.load_tensor(str(path)))
               for path in sorted((folder / "out").glob("output_*.pb"))]
    return int(match.group(1)), outputs


@pytest.mark.parametrize("name", WITH_3X3)
def test_forced_winograd_equals_ort_on_the_original(fusionopt, fusionopt_bin, tmp_path, name):
    if name not in ENTRIES:
        pytest.skip(f"{name} is not among the committed fixtures (models/real/fixtures)")
    entry = ENTRIES[name]
    optimized = tmp_path / f"{name}.O3.onnx"
    rc, _, stderr = fusionopt(entry.path, "-O3", "-o", optimized, timeout=300)
    assert rc == 0, stderr
    feeds = entry.feeds()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = ort.InferenceSession(str(entry.path), options, providers=["CPUExecutionProvider"]).run(None, feeds)

    forced, outputs = run_with(fusionopt_bin, optimized, feeds, tmp_path / "always", "always")
    off, _ = run_with(fusionopt_bin, optimized, feeds, tmp_path / "off", "off")
    assert forced > 0, "no convolution ran by Winograd"
    assert off == 0
    assert len(outputs) == len(expected)
    for actual, reference in zip(outputs, expected):
        np.testing.assert_allclose(actual.astype(np.float64), reference.astype(np.float64), rtol=1e-3, atol=1e-4)
