"""The external-data opener on a system without openat2(2) (issue 8): kernels before 5.6
answer ENOSYS, and the seccomp filters of older container runtimes answer EPERM.

The loader then falls back to resolving every link with realpath, requiring the result inside
the model folder and opening that link-free path with O_NOFOLLOW (src/onnx_io/external_data.cc).
Here fusionopt runs under a seccomp filter that makes openat2 fail with either error, and
every escape of test_hostile_inputs.py must still be refused without opening the outside
file, while links that stay inside the folder are still followed. A positive control shows
that the filter really takes openat2 away. x86-64 only (the filter names its syscall number).
"""
import ctypes
import errno
import os
import platform
import struct
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import fusionopt_testlib as lib
from test_hostile_inputs import (ESCAPES, TIMEOUT_S, assert_escape_refused, external_model, plant_absolute_link_inside,
                                 plant_chain_inside, plant_link_to_inside_folder, watch_outside)  # noqa: F401

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the seccomp filter uses x86-64 system call numbers")

SYS_OPENAT2 = 437  # x86-64
AUDIT_ARCH_X86_64 = 0xC000003E
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x00050000, 0x7FFF0000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
OFFSET_NR, OFFSET_ARCH = 0, 4  # struct seccomp_data


def _filter_program(error):
    """BPF: openat2 on x86-64 returns -error; every other call is allowed."""
    instructions = [
        (BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
        (BPF_JEQ_K, 0, 3, AUDIT_ARCH_X86_64),  # another ABI: allow
        (BPF_LD_W_ABS, 0, 0, OFFSET_NR),
        (BPF_JEQ_K, 0, 1, SYS_OPENAT2),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | error),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in instructions)


def _without_openat2(error):
    """A preexec_fn: installs the filter in the child between fork and exec (it survives exec)."""

    def install():
        libc = ctypes.CDLL(None, use_errno=True)
        program = ctypes.create_string_buffer(_filter_program(error))

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        fprog = SockFprog(len(program.raw) // 8, ctypes.addressof(program))
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
                libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")

    return install


def run_without_openat2(error, *command):
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True,
                          timeout=TIMEOUT_S, preexec_fn=_without_openat2(error))
    return done.returncode, done.stdout, done.stderr


ERRORS = pytest.mark.parametrize("error", [errno.ENOSYS, errno.EPERM], ids=["ENOSYS", "EPERM"])

# The child reports what openat2 answers it: "ok" or the errno's name.
PROBE = """
import ctypes, errno, os, struct
libc = ctypes.CDLL(None, use_errno=True)
how = ctypes.create_string_buffer(struct.pack("QQQ", os.O_RDONLY, 0, 0))
fd = libc.syscall(437, -100, b"/", how, 24)
print("ok" if fd >= 0 else errno.errorcode[ctypes.get_errno()])
"""


@ERRORS
def test_the_filter_takes_openat2_away(error):
    plain = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert plain.stdout.strip() == "ok", plain.stderr
    rc, stdout, stderr = run_without_openat2(error, sys.executable, "-c", PROBE)
    assert rc == 0, stderr
    assert stdout.strip() == errno.errorcode[error]


@ERRORS
@pytest.mark.parametrize("case", ESCAPES.keys())
def test_escapes_are_refused_by_the_fallback(fusionopt_bin, tmp_path, watch_outside, error, case):
    plant, fragments, may_open = ESCAPES[case]
    model, outside = plant(tmp_path / "model")
    watch = watch_outside(outside)

    result = run_without_openat2(error, fusionopt_bin, model, "-o", tmp_path / "out.onnx", "-O3")

    assert_escape_refused(result, model, fragments, watch, may_open, tmp_path / "out.onnx")


def plant_plain_file(folder):
    (folder / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    return external_model(folder, "w.bin")


@ERRORS
@pytest.mark.parametrize("plant", [plant_plain_file, plant_chain_inside, plant_absolute_link_inside,
                                   plant_link_to_inside_folder],
                         ids=["plain-file", "symlink-chain-inside", "absolute-symlink-inside",
                              "symlinked-subfolder-inside"])
def test_data_inside_the_folder_loads_through_the_fallback(fusionopt_bin, tmp_path, error, plant):
    folder = tmp_path / "model"
    folder.mkdir()
    model = plant(folder)
    out = tmp_path / "out.onnx"

    rc, _, stderr = run_without_openat2(error, fusionopt_bin, model, "-o", out, "-O0")

    assert rc == lib.EXIT_OK, stderr
    values = numpy_helper.to_array(onnx.load(str(out)).graph.initializer[0])
    assert values.tolist() == [0.0, 1.0, 2.0, 3.0]
