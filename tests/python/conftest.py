"""Shared fixtures for the end-to-end tests of the `fusionopt` binary.

The binary is build/fusionopt (FUSIONOPT_BIN overrides). Tests call it through the
`fusionopt` fixture, which returns (returncode, stdout, stderr).
"""
import os
import subprocess
from pathlib import Path

import pytest

import fusionopt_testlib as lib


def _binary_path() -> Path:
    override = os.environ.get("FUSIONOPT_BIN")
    return Path(override) if override else lib.REPO_ROOT / "build" / "fusionopt"


@pytest.fixture(scope="session")
def fusionopt_bin() -> Path:
    path = _binary_path()
    if not path.is_file() or not os.access(path, os.X_OK):
        # A missing binary is a broken setup, not a reason to pass: fail loudly.
        pytest.fail(f"fusionopt binary not found at {path}; build it with "
                    "`cmake -S . -B build && make -C build fusionopt` or set FUSIONOPT_BIN")
    return path


@pytest.fixture(scope="session")
def fusionopt(fusionopt_bin):
    """Runs the binary: fusionopt("inspect", path, "--json") -> (rc, stdout, stderr)."""

    def run(*args, cwd=None, timeout=120, env=None):
        """`env` adds to (and overrides) this process's environment."""
        completed = subprocess.run([str(fusionopt_bin), *map(str, args)], cwd=cwd,
                                   capture_output=True, text=True, timeout=timeout,
                                   env=None if env is None else {**os.environ, **env})
        return completed.returncode, completed.stdout, completed.stderr

    return run


@pytest.fixture(scope="session")
def shared_models_dir() -> Path:
    if not lib.SHARED_MODELS.is_dir():
        pytest.skip(lib.SHARED_MODELS_MISSING)
    return lib.SHARED_MODELS


@pytest.fixture(scope="session")
def project_model():
    """A small real model from models/, for tests that need any valid model file."""
    models = lib.project_models()
    if not models:
        pytest.skip("no models/*.onnx; generate them with models/generate.py")
    return min(models, key=lambda path: path.stat().st_size)
