"""--thread-wait: how the CPU runtime's idle threads wait (src/cli/thread_wait.h). `run -v`
names the policy the process runs with; a sleeping one re-executes itself with
OMP_WAIT_POLICY=passive, and a policy from the environment is never overridden."""
import os
import re
import subprocess
import sys
import time

import pytest

import fusionopt_testlib as lib

MODEL = lib.REPO_ROOT / "models" / "bert_style.onnx"


def idle_policy(fusionopt_bin, *args, env=None):
    done = subprocess.run([str(fusionopt_bin), "run", MODEL, "--repeat", "1", "-v", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    match = re.search(r"idle threads (.*)$", done.stderr, re.MULTILINE)
    assert match, done.stderr
    return match.group(1)


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "FUSIONOPT_THREAD_WAIT_CHOICE"):
        monkeypatch.delenv(name, raising=False)


def test_explicit_policies_are_taken(fusionopt_bin, clean_env):
    assert idle_policy(fusionopt_bin, "--thread-wait", "spin").startswith("spin (spin)")
    assert idle_policy(fusionopt_bin, "--thread-wait=sleep").startswith("sleep (sleep)")


def test_the_environment_wins(fusionopt_bin, clean_env):
    for variable, value in (("OMP_WAIT_POLICY", "active"), ("GOMP_SPINCOUNT", "1000")):
        policy = idle_policy(fusionopt_bin, "--thread-wait", "sleep", env={variable: value})
        assert policy.startswith("set by the environment"), policy


def test_auto_sleeps_when_other_work_holds_the_cores(fusionopt_bin, clean_env):
    spin = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end:\n    pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.3)
        policy = idle_policy(fusionopt_bin)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert policy.startswith("sleep (auto:"), policy
    assert "other runnable task" in policy


def test_a_bad_policy_is_a_usage_error(fusionopt, clean_env):
    rc, _, stderr = fusionopt("run", MODEL, "--thread-wait", "sometimes")
    assert rc == 2
    assert "--thread-wait" in stderr and len(stderr.strip().splitlines()) == 1
