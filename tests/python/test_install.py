"""Installing fusionopt (docs/install.md): `cmake --install` into a staging prefix, whose binary
optimizes a shipped model and finds the installed plugin; and the Debian package CPack makes,
whose Depends are the Debian packages the binary links and whose binary runs once unpacked."""
import os
import shutil
import subprocess

import pytest

import fusionopt_testlib as lib

MODEL = lib.REPO_ROOT / "models" / "bert_style.onnx"


@pytest.fixture(scope="module")
def build_dir(fusionopt_bin):
    folder = fusionopt_bin.resolve().parent
    if not (folder / "CMakeCache.txt").exists():
        pytest.skip(f"{fusionopt_bin} is not in a CMake build folder")
    return folder


def optimize_with(binary, tmp_path):
    out = tmp_path / "out.onnx"
    done = subprocess.run([str(binary), str(MODEL), "-O3", "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
    return done


def test_install_into_a_staging_prefix_runs(build_dir, tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", str(build_dir), "--prefix", str(prefix), "--strip"], check=True,
                   capture_output=True, timeout=600)
    binary = prefix / "bin" / "fusionopt"
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    assert version.strip()
    optimize_with(binary, tmp_path)
    assert (prefix / "include" / "fusionopt" / "plugin.h").exists()
    job = prefix / "share" / "doc" / "fusionopt" / "ci" / "fusionopt-job.sh"
    assert os.access(job, os.X_OK)
    assert (prefix / "share" / "doc" / "fusionopt" / "ort.md").exists()
    plugins = list(prefix.glob("lib*/**/libfusionopt_cuda.so"))
    if (build_dir / "libfusionopt_cuda.so").exists():
        assert len(plugins) == 1
        # Without a GPU the installed binary still finds and loads the installed plugin: it gets as
        # far as asking it for a device, instead of reporting no plugin library.
        env = {k: v for k, v in os.environ.items() if k != "FUSIONOPT_CUDA_LIBRARY"}
        done = subprocess.run([str(binary), "bench", str(MODEL), "--backend", "cuda", "--iters", "1"],
                              capture_output=True, text=True, env=env, timeout=300)
        assert "no CUDA plugin library" not in done.stderr, done.stderr


@pytest.mark.skipif(shutil.which("cpack") is None or shutil.which("dpkg-deb") is None,
                    reason="cpack or dpkg-deb missing")
def test_the_debian_package_depends_on_what_the_binary_links(build_dir, tmp_path):
    packages = tmp_path / "packages"
    done = subprocess.run(["cpack", "-G", "DEB", "-B", str(packages)], cwd=build_dir, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    (deb,) = packages.glob("fusionopt_*_amd64.deb")
    assert deb.name == f"fusionopt_{lib.project_version()}_amd64.deb"
    depends = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True, text=True,
                             check=True).stdout
    for package in ("libprotobuf32", "libspdlog1.10", "libdnnl2", "libonnx1", "libc6"):
        assert package in depends, depends
    files = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert "./usr/bin/fusionopt" in files and "./usr/include/fusionopt/plugin.h" in files
    unpacked = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
    optimize_with(unpacked / "usr" / "bin" / "fusionopt", tmp_path)
