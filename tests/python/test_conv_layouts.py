"""Convolution layouts on real exports (src/cpu_runtime/engine/rt_tensor.h): at -O3 the CPU runtime
hands activations from convolution to convolution (and pool) in the layout oneDNN runs on,
and the outputs are those of a run that keeps every value row-major
(FUSIONOPT_CPU_LAYOUTS=row-major). `run -v` counts the hand-offs."""
import os
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import fusionopt_testlib as lib

FIXTURES = lib.REPO_ROOT / "models" / "real" / "fixtures"
# Every CNN fixture: convolutions feeding convolutions, pools, elementwise ops, reductions
# and Concats (ConvNeXt: only where a depthwise Conv feeds the next block's residual add).
HANDING_ON = ["resnet_dynamo18", "resnet_torchscript17", "mobilenet_v2_dynamo18", "mobilenet_v3_dynamo18",
              "mobilenet_v3_torchscript17", "efficientnet_dynamo18", "regnet_dynamo18", "densenet_dynamo18",
              "yolov8n_dynamo18", "yolov8n_torchscript17", "convnext_dynamo18"]
# No convolution: nothing to hand on.
ROW_MAJOR_ONLY = ["bert_dynamo18_sdpa"]


def run_outputs(fusionopt_bin, model, out_dir, layouts):
    env = {key: value for key, value in os.environ.items() if key != "FUSIONOPT_CPU_LAYOUTS"}
    if layouts == "row-major":
        env["FUSIONOPT_CPU_LAYOUTS"] = "row-major"
    out_dir.mkdir()
    done = subprocess.run([str(fusionopt_bin), "run", str(model), "--threads", "2", "-v", "--output-dir", str(out_dir)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    match = re.search(r"(\d+) activations handed on in convolution layouts", done.stderr)
    assert match, done.stderr
    outputs = [numpy_helper.to_array(onnx.load_tensor(str(path))) for path in sorted(out_dir.glob("output_*.pb"))]
    assert outputs
    return int(match.group(1)), outputs


@pytest.mark.parametrize("name", HANDING_ON + ROW_MAJOR_ONLY)
def test_handed_on_layouts_give_the_row_major_outputs(fusionopt, fusionopt_bin, tmp_path, name):
    optimized = tmp_path / f"{name}.O3.onnx"
    rc, _, stderr = fusionopt(FIXTURES / f"{name}.onnx", "-O3", "-o", optimized, timeout=300)
    assert rc == 0, stderr
    handed_on, outputs = run_outputs(fusionopt_bin, optimized, tmp_path / "handed_on", "auto")
    row_major_count, row_major = run_outputs(fusionopt_bin, optimized, tmp_path / "row_major", "row-major")
    assert row_major_count == 0
    if name in HANDING_ON:
        assert handed_on > 0
    else:
        assert handed_on == 0
    for actual, expected in zip(outputs, row_major):
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
