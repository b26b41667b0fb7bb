"""The shape of libfusionopt_cuda.so as a shared library: it exports exactly the C ABI that
include/fusionopt/plugin.h declares (nothing of the C++ inside leaks: IR, protobuf, CUDA
helpers), and it loads on machines without an NVIDIA driver (CI), so libcuda.so.1 must not be
a load-time dependency.

The library is build/libfusionopt_cuda.so (FUSIONOPT_CUDA_LIBRARY overrides); when it was not
built (no CUDA toolkit) the tests skip with a message.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import fusionopt_testlib as lib

PLUGIN_HEADER = lib.REPO_ROOT / "include" / "fusionopt" / "plugin.h"


@pytest.fixture(scope="module")
def plugin_library() -> Path:
    override = os.environ.get("FUSIONOPT_CUDA_LIBRARY")
    path = Path(override) if override else lib.REPO_ROOT / "build" / "libfusionopt_cuda.so"
    if not path.is_file():
        pytest.skip(f"{path} was not built (no CUDA toolkit?): nothing to check")
    return path


def _tool(name):
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} (binutils) is not installed")
    return found


def declared_functions():
    """Every function plugin.h declares with FO_API."""
    text = PLUGIN_HEADER.read_text()
    return set(re.findall(r"FO_API\s+[^;(]*?\b(fo_\w+)\s*\(", text))


def exported_symbols(library):
    listing = subprocess.run([_tool("nm"), "-D", "--defined-only", str(library)],
                             capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in listing.splitlines() if line.strip()}


def needed_libraries(library):
    listing = subprocess.run([_tool("readelf"), "-d", str(library)],
                             capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", listing)


def test_header_declares_the_abi():
    declared = declared_functions()
    # A parse that found nothing would make the export test vacuous.
    assert {"fo_abi_version", "fo_context_create", "fo_kernel_build", "fo_kernel_enqueue",
            "fo_graph_replay", "fo_graph_end_capture_new", "fo_graph_launch", "fo_graph_destroy"} <= declared


def test_only_the_c_abi_is_exported(plugin_library):
    exported = exported_symbols(plugin_library)
    assert exported, "nm listed no dynamic symbols"
    strays = sorted(name for name in exported if not name.startswith("fo_"))
    assert not strays, f"symbols exported beside the C ABI: {strays[:20]}"
    assert exported == declared_functions(), (
        f"missing: {sorted(declared_functions() - exported)}, "
        f"undeclared: {sorted(exported - declared_functions())}")


def test_dependencies(plugin_library):
    needed = needed_libraries(plugin_library)
    print("DT_NEEDED of", plugin_library.name + ":", ", ".join(needed))
    assert needed, "readelf found no DT_NEEDED entries"
    # The driver library only exists where an NVIDIA driver is installed; the library reaches
    # the driver API through the CUDA runtime instead (plugin/driver_api.h).
    assert not any(name.startswith("libcuda.so") for name in needed), needed
    # The C++ runtime it needs is the system's; a second, bundled one would be a surprise.
    assert sum(name.startswith("libstdc++") for name in needed) <= 1, needed
