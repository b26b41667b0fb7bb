"""Issue 30: the wheel `make wheel` builds (build/dist/fusionopt-*.whl), installed into a fresh
venv and used there: `import fusionopt` optimizes and runs a model, the `fusionopt` command is on
the venv's PATH, and the library and CLI load the shared libraries bundled beside them, not the
host's (RUNPATH $ORIGIN), apart from glibc, libstdc++ and libgcc.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fusionopt_testlib as lib

_BUILD = Path(os.environ.get("FUSIONOPT_BIN", lib.REPO_ROOT / "build" / "fusionopt")).parent
HOST_LIBRARIES = ("linux-vdso", "libc.so", "libm.so", "libdl.so", "librt.so", "libpthread.so", "libstdc++.so",
                  "libgcc_s.so", "ld-linux")


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    wheels = sorted((_BUILD / "dist").glob("fusionopt-*.whl"))
    if not wheels:
        pytest.skip(f"no wheel in {_BUILD / 'dist'}: `make wheel` builds it (`make test` does first)")
    root = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    # The wheel's dependencies (numpy, onnx) come from PyPI or pip's cache, as for any user.
    done = subprocess.run([str(root / "bin" / "pip"), "install", "-q", str(wheels[-1])], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def _site_package(venv):
    return next((venv / "lib").glob("python3*/site-packages/fusionopt"))


def test_the_wheel_is_one_for_every_python_3(venv):
    wheel = sorted((_BUILD / "dist").glob("fusionopt-*.whl"))[-1]
    assert "-py3-none-linux_x86_64.whl" in wheel.name


def test_the_installed_package_optimizes_and_runs_a_model(venv, tmp_path):
    script = f"""
import numpy as np, fusionopt
optimized, report = fusionopt.optimize({str(lib.PROJECT_MODELS / 'resnet_style.onnx')!r}, level=3, verify=True)
assert report["verification"]["matches"]
x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
fused = fusionopt.InferenceSession(optimized).run(None, {{"input": x}})[0]
options = fusionopt.SessionOptions(); options.fused_kernels = False
reference = fusionopt.InferenceSession({str(lib.PROJECT_MODELS / 'resnet_style.onnx')!r}, options).run(None, {{"input": x}})[0]
np.testing.assert_allclose(fused, reference, rtol=1e-4, atol=1e-5)
print(fusionopt.__file__, len(report["fusions"]))
"""
    # Run from an empty folder so the source tree's python/ cannot be what is imported.
    done = subprocess.run([str(venv / "bin" / "python"), "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k not in ("FUSIONOPT_LIBRARY", "PYTHONPATH")})
    assert done.returncode == 0, done.stderr[-3000:]
    path, fusions = done.stdout.strip().splitlines()[-1].split()
    assert str(venv) in path and int(fusions) > 0


def test_the_fusionopt_command_is_on_the_venvs_path(venv, tmp_path):
    out = tmp_path / "out.onnx"
    done = subprocess.run([str(venv / "bin" / "fusionopt"), str(lib.PROJECT_MODELS / "mobilenet_style.onnx"), "-O3",
                           "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.exists()
    bad = subprocess.run([str(venv / "bin" / "fusionopt"), str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "x.onnx")],
                         capture_output=True, text=True)
    assert bad.returncode == 3 and "missing.onnx" in bad.stderr


@pytest.mark.parametrize("binary", ["lib/libfusionopt.so.1", "bin/fusionopt"])
def test_everything_but_the_c_and_cpp_runtimes_loads_from_the_wheel(venv, binary):
    package = _site_package(venv)
    done = subprocess.run(["ldd", str(package / binary)], capture_output=True, text=True, check=True)
    for line in done.stdout.splitlines():
        name = os.path.basename(line.split()[0])
        if any(name.startswith(host) for host in HOST_LIBRARIES):
            continue
        assert "=>" in line, f"{binary}: {line.strip()}"
        loaded = Path(os.path.normpath(line.split("=>")[1].split("(")[0].strip()))
        assert loaded.parent == package / "lib", f"{binary} loads {name} from {loaded}"
    assert "libdnnl.so" in done.stdout
