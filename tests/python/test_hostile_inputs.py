"""Hostile models that target the loader on purpose (issue 8), one test per case; the
table in docs/robustness.md points here.

- External data that tries to reach outside the model's folder: absolute paths, `..`,
  symlinks to files and folders outside, hardlinks, the model file itself, ranges past the
  end. Each must fail with exit 1 and one error line naming the model file, and must not
  open (absolute, `..`, symlinks) or read (hardlinks) the outside file, which an inotify
  watch on it observes; as root, chmod 000 would prove nothing.
- Graph structure: cycles (also through a subgraph), names defined twice, reads of
  undefined values, recursive model-local functions.
- Deep If/Loop nesting under a 1 MiB stack, and a 1,000,000-node chain in linear time.
- Opset imports and IR versions far in the future.
"""
import ctypes
import json
import os
import struct
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionopt_testlib as lib

TIMEOUT_S = 60
SMALL_STACK_KIB = 1024


def run(binary, *args, stack_kib=None, timeout=TIMEOUT_S):
    """Runs fusionopt; with `stack_kib`, under `ulimit -s` so deep recursion would crash."""
    command = [str(binary), *map(str, args)]
    if stack_kib is not None:
        command = ["sh", "-c", f'ulimit -s {stack_kib} && exec "$@"', "sh", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


# ---------------------------------------------------------------- watching the outside file

IN_ACCESS, IN_OPEN = 0x001, 0x020


class FileWatch:
    """Records opens and reads of one file through any of its names (inotify watches the
    inode), so a test can show a refused model never touched the file outside."""

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        watch = self.libc.inotify_add_watch(self.fd, str(path).encode(), IN_ACCESS | IN_OPEN)
        assert watch >= 0, os.strerror(ctypes.get_errno())

    def events(self):
        """The event masks seen since the last call."""
        masks = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return masks
            offset = 0
            while offset < len(data):
                _, mask, _, name_length = struct.unpack_from("iIII", data, offset)
                masks.append(mask)
                offset += 16 + name_length

    def close(self):
        os.close(self.fd)


@pytest.fixture
def watch_outside(tmp_path):
    """tmp/outside.bin (16 bytes) and a watch on it; the model folder is tmp/model."""
    outside = tmp_path / "outside.bin"
    outside.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    (tmp_path / "outside_dir").mkdir()
    (tmp_path / "outside_dir" / "x.bin").write_bytes(bytes(16))
    (tmp_path / "model").mkdir()
    watches = []

    def watch(path=outside):
        watches.append(FileWatch(path))
        watches[-1].events()  # creating the files above is not the fusionopt run
        return watches[-1]

    yield watch
    for each in watches:
        each.close()


def external_model(folder, location, offset=0, length=16, name="model.onnx"):
    """`folder/name`: y = x + w, with w (4 floats) in external data at `location`."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4],
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        weight.external_data.append(onnx.StringStringEntryProto(key=key, value=str(value)))
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    model = lib.make_model(nodes, [lib.float_input("x", [4])], [lib.float_input("y", [4])], [weight])
    return lib.save(model, folder / name)


def plant_absolute(folder):
    return external_model(folder, "/etc/hostname"), Path("/etc/hostname")


def plant_parent(folder):
    return external_model(folder, "../outside.bin"), folder.parent / "outside.bin"


def plant_parent_after_subfolder(folder):
    (folder / "sub").mkdir()
    return external_model(folder, "sub/../../outside.bin"), folder.parent / "outside.bin"


def plant_symlink_to_file(folder, absolute):
    outside = folder.parent / "outside.bin"
    os.symlink(outside if absolute else Path("..") / "outside.bin", folder / "link.bin")
    return external_model(folder, "link.bin"), outside


def plant_symlink_to_folder(folder):
    os.symlink(folder.parent / "outside_dir", folder / "dir_link")
    return external_model(folder, "dir_link/x.bin"), folder.parent / "outside_dir" / "x.bin"


def plant_symlink_chain_out(folder):
    """first.bin -> second.bin -> ../outside.bin: the last link of the chain leaves."""
    os.symlink("second.bin", folder / "first.bin")
    os.symlink("../outside.bin", folder / "second.bin")
    return external_model(folder, "first.bin"), folder.parent / "outside.bin"


def plant_hardlink(folder):
    outside = folder.parent / "outside.bin"
    os.link(outside, folder / "w.bin")
    return external_model(folder, "w.bin"), outside


# id -> (planter, fragments of the error, whether the outside file may be opened). A
# hardlink is the outside file: telling it apart needs the fstat of an open fd.
ESCAPES = {
    "absolute-path-existing-file": (plant_absolute, ["/etc/hostname", "absolute"], False),
    "parent-reference": (plant_parent, ["../outside.bin", "escapes"], False),
    "parent-after-subfolder": (plant_parent_after_subfolder, ["sub/../../outside.bin", "escapes"], False),
    "symlink-to-outside-file": (lambda f: plant_symlink_to_file(f, False), ["link.bin", "outside"], False),
    "absolute-symlink-to-outside-file": (lambda f: plant_symlink_to_file(f, True), ["link.bin", "outside"],
                                         False),
    "symlink-to-outside-folder": (plant_symlink_to_folder, ["dir_link/x.bin", "outside"], False),
    "symlink-chain-leaving": (plant_symlink_chain_out, ["first.bin", "outside"], False),
    "hardlink-to-outside-file": (plant_hardlink, ["w.bin", "hard links", "cp "], True),
}


@pytest.mark.parametrize("case", ESCAPES.keys())
@pytest.mark.parametrize("command", ["inspect", "optimize"])
def test_external_data_escape_is_refused_without_reading_outside(fusionopt_bin, tmp_path, watch_outside,
                                                                 case, command):
    plant, fragments, may_open = ESCAPES[case]
    model, outside = plant(tmp_path / "model")
    watch = watch_outside(outside)
    args = ["inspect", model] if command == "inspect" else [model, "-o", tmp_path / "out.onnx", "-O3"]

    assert_escape_refused(run(fusionopt_bin, *args), model, fragments, watch, may_open, tmp_path / "out.onnx")


def assert_escape_refused(result, model, fragments, watch, may_open, out):
    """Exit 1 naming the model and the problem, the outside file never read (nor opened, unless
    `may_open`: a hardlink is told apart only by fstat of an open fd), and nothing written."""
    lib.assert_error(result, lib.EXIT_INVALID, str(model), *fragments)
    touched = watch.events()
    assert not [mask for mask in touched if mask & IN_ACCESS], f"the outside file was read: {touched}"
    if not may_open:
        assert not touched, f"the outside file was opened: {touched}"
    assert not out.exists()


def test_the_watch_sees_an_open_of_the_data_file(fusionopt_bin, tmp_path, watch_outside):
    """The positive control for the test above: a confined data file is seen opened."""
    folder = tmp_path / "model"
    (folder / "w.bin").write_bytes(bytes(16))
    model = external_model(folder, "w.bin")
    watch = watch_outside(folder / "w.bin")
    rc, _, stderr = run(fusionopt_bin, "inspect", model)
    assert rc == lib.EXIT_OK, stderr
    assert any(mask & IN_OPEN for mask in watch.events())


RENAME_EXCHANGE = 2
AT_FDCWD = -100


def many_external_weights(folder, count, subfolder):
    """y = w0 + ... + w<count-1>, each w<i> (4 floats) in its own file `subfolder/w<i>.bin`."""
    weights = []
    for i in range(count):
        weight = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[4],
                             data_location=TensorProto.EXTERNAL)
        location = onnx.StringStringEntryProto(key="location", value=f"{subfolder}/w{i}.bin")
        weight.external_data.append(location)
        weights.append(weight)
    nodes = [helper.make_node("Sum", [w.name for w in weights], ["y"])]
    return lib.save(lib.make_model(nodes, [], [lib.float_input("y", [4])], weights), folder / "model.onnx")


def test_a_folder_swapped_for_a_symlink_mid_load_never_leaks(fusionopt_bin, tmp_path, watch_outside):
    """The race a check-then-open resolver loses: while fusionopt loads `data/w<i>.bin`,
    another thread keeps exchanging the folder `data` with a symlink to a folder outside.
    Every run must load the inside values or refuse; nothing outside is ever opened."""
    folder, outside = tmp_path / "model", tmp_path / "outside_dir"
    (folder / "data").mkdir()
    for i in range(100):
        (folder / "data" / f"w{i}.bin").write_bytes(np.ones(4, np.float32).tobytes())
        (outside / f"w{i}.bin").write_bytes(np.full(4, 7, np.float32).tobytes())
    os.symlink(outside, folder / "data_alt")
    model = many_external_weights(folder, 100, "data")
    watch = watch_outside(outside)  # a folder watch reports opens of the files in it
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()

    def swap():
        while not stop.is_set():
            assert libc.renameat2(AT_FDCWD, str(folder / "data").encode(), AT_FDCWD,
                                  str(folder / "data_alt").encode(), RENAME_EXCHANGE) == 0
    swapper = threading.Thread(target=swap)
    swapper.start()
    outcomes = []
    try:
        for attempt in range(30):
            out = tmp_path / f"out{attempt}.onnx"
            rc, _, stderr = run(fusionopt_bin, model, "-o", out, "-O0")
            initializers = onnx.load(str(out)).graph.initializer if rc == 0 else []
            outcomes.append((rc, {float(v) for t in initializers for v in numpy_helper.to_array(t)}, stderr))
    finally:
        stop.set()
        swapper.join()
    for rc, values, stderr in outcomes:
        refused = rc == lib.EXIT_INVALID and "outside" in stderr
        assert (rc, values) == (lib.EXIT_OK, {1.0}) or refused, stderr
    assert not watch.events(), "a file outside was opened"


def plant_chain_inside(folder):
    """a.bin -> b.bin -> sub/w.bin, all inside: allowed."""
    (folder / "sub").mkdir()
    (folder / "sub" / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    os.symlink("b.bin", folder / "a.bin")
    os.symlink("sub/w.bin", folder / "b.bin")
    return external_model(folder, "a.bin")


def plant_absolute_link_inside(folder):
    """A link written with the folder's full path (as `ln -s "$PWD/w.bin"` makes it)."""
    (folder / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    os.symlink(folder.resolve() / "w.bin", folder / "link.bin")
    return external_model(folder, "link.bin")


def plant_link_to_inside_folder(folder):
    (folder / "weights").mkdir()
    (folder / "weights" / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    os.symlink("weights", folder / "alias")
    return external_model(folder, "alias/w.bin")


def plant_model_in_linked_folder(folder):
    """The model is reached through a symlinked folder; its data sits beside it."""
    (folder / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    external_model(folder, "w.bin")
    os.symlink(folder, folder.parent / "model_link")
    return folder.parent / "model_link" / "model.onnx"


@pytest.mark.parametrize("plant", [plant_chain_inside, plant_absolute_link_inside,
                                   plant_link_to_inside_folder, plant_model_in_linked_folder],
                         ids=["symlink-chain-inside", "absolute-symlink-inside", "symlinked-subfolder-inside",
                              "model-through-symlinked-folder"])
def test_links_that_stay_inside_are_followed(fusionopt_bin, tmp_path, plant):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    model = plant(folder)
    out = tmp_path / "out.onnx"
    rc, _, stderr = run(fusionopt_bin, model, "-o", out, "-O0")
    assert rc == lib.EXIT_OK, stderr
    values = numpy_helper.to_array(onnx.load(str(out)).graph.initializer[0])
    assert values.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_hardlink_inside_the_folder_is_refused_too(fusionopt_bin, tmp_path):
    """Policy: any data file with a second name is refused, wherever that name lives; the
    loader cannot see where the other names are, and copying the file fixes it."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(bytes(16))
    os.link(folder / "w.bin", folder / "same.bin")
    model = external_model(folder, "w.bin")
    lib.assert_error(run(fusionopt_bin, "inspect", model), lib.EXIT_INVALID, str(model), "2 hard links")
    os.unlink(folder / "same.bin")  # the fix the message suggests, in effect
    rc, _, stderr = run(fusionopt_bin, "inspect", model)
    assert rc == lib.EXIT_OK, stderr


def test_location_naming_the_model_file_itself_is_refused(fusionopt_bin, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    model = external_model(folder, "model.onnx")
    lib.assert_error(run(fusionopt_bin, "inspect", model), lib.EXIT_INVALID, str(model), "model file itself")
    # Another model's file in the same folder is an ordinary (if odd) data file.
    (folder / "other.onnx").write_bytes(bytes(16))
    neighbour = external_model(folder, "other.onnx", name="neighbour.onnx")
    rc, _, stderr = run(fusionopt_bin, "inspect", neighbour)
    assert rc == lib.EXIT_OK, stderr


@pytest.mark.parametrize("offset, length, fragments", [
    (8, 16, ["past the end", "w.bin"]),
    (17, 16, ["past the end"]),
    (2**63, 16, ["past the end"]),
    (2**64 - 8, 16, ["past the end"]),
    (2**64, 16, ["not a number"]),
    (-16, 16, ["not a number"]),
    (0, 2**64 - 1, ["length"]),
    (0, -1, ["not a number"]),
], ids=["offset-8-of-16", "offset-past-size", "offset-2^63", "offset-wraps", "offset-2^64",
        "offset-negative", "length-2^64-1", "length-negative"])
def test_external_range_outside_the_file_is_refused(fusionopt_bin, tmp_path, offset, length, fragments):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(bytes(16))
    model = external_model(folder, "w.bin", offset=offset, length=length)
    lib.assert_error(run(fusionopt_bin, "inspect", model), lib.EXIT_INVALID, str(model), *fragments)


def test_location_with_a_nul_byte_is_refused(fusionopt_bin, tmp_path):
    """The C API would see `w.bin` only; the location as written names no file."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(bytes(16))
    model = external_model(folder, "w.bin\x00../../etc/passwd")
    lib.assert_error(run(fusionopt_bin, "inspect", model), lib.EXIT_INVALID, str(model), "NUL")


# ---------------------------------------------------------------- graph structure

def structure_model(nodes, inputs=("x",), outputs=("y",), initializers=(), **graph_kwargs):
    return lib.make_model(nodes, [lib.float_input(name, [4]) for name in inputs],
                          [lib.float_input(name, [4]) for name in outputs], initializers, **graph_kwargs)


def branch_graph(name, nodes, output):
    return helper.make_graph(nodes, name, [], [lib.float_input(output, [4])])


def if_node(then_nodes, then_output, outputs, name="the_if"):
    else_graph = branch_graph("else", [helper.make_node("Identity", ["x"], ["else_out"])], "else_out")
    return helper.make_node("If", ["c"], outputs, name=name,
                            then_branch=branch_graph("then", then_nodes, then_output), else_branch=else_graph)


def with_condition(model):
    model.graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    return model


BIAS = numpy_helper.from_array(np.ones(4, np.float32), "b")

# id -> (model builder, fragments of the error)
BAD_STRUCTURES = {
    "cycle-node-reads-its-own-output": (lambda: structure_model(
        [helper.make_node("Add", ["x", "a"], ["a"], name="self_add"),
         helper.make_node("Identity", ["a"], ["y"])]), ["self_add", "its own output"]),
    "cycle-through-if-branch": (lambda: with_condition(structure_model(
        [if_node([helper.make_node("Identity", ["b"], ["then_out"])], "then_out", ["a"]),
         helper.make_node("Relu", ["a"], ["b"], name="relu"),
         helper.make_node("Identity", ["a"], ["y"])])), ["cycle"]),
    "two-nodes-write-one-name": (lambda: structure_model(
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["x"], ["t"]),
         helper.make_node("Identity", ["t"], ["y"])]), ["'t'", "more than once"]),
    "node-output-shadows-graph-input": (lambda: structure_model(
        [helper.make_node("Relu", ["x"], ["x"]), helper.make_node("Identity", ["x"], ["y"])]),
        ["'x'", "more than once"]),
    "node-output-shadows-initializer": (lambda: structure_model(
        [helper.make_node("Relu", ["x"], ["b"]), helper.make_node("Add", ["x", "b"], ["y"])],
        initializers=[BIAS]), ["'b'", "more than once"]),
    "duplicate-graph-inputs": (lambda: structure_model(
        [helper.make_node("Relu", ["x"], ["y"])], inputs=("x", "x")), ["'x'", "more than once"]),
    "subgraph-output-shadows-outer-value": (lambda: with_condition(structure_model(
        [if_node([helper.make_node("Relu", ["x"], ["x"])], "x", ["y"])])), ["'x'", "more than once"]),
    "node-reads-undefined-value": (lambda: structure_model(
        [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]), ["ghost"]),
    "subgraph-reads-undefined-value": (lambda: with_condition(structure_model(
        [if_node([helper.make_node("Identity", ["ghost"], ["then_out"])], "then_out", ["y"])])), ["ghost"]),
}


@pytest.mark.parametrize("case", BAD_STRUCTURES.keys())
def test_bad_graph_structure_is_refused(fusionopt_bin, tmp_path, case):
    build, fragments = BAD_STRUCTURES[case]
    model = lib.save(build(), tmp_path / "model.onnx")
    for args in (["inspect", model], [model, "-o", tmp_path / "out.onnx", "-O3"]):
        lib.assert_error(run(fusionopt_bin, *args), lib.EXIT_INVALID, str(model), *fragments)
    assert not (tmp_path / "out.onnx").exists()


def test_nodes_out_of_order_are_sorted_not_refused(fusionopt_bin, tmp_path):
    """The neighbour of the cycles: a consumer listed before its producer is fine."""
    model = structure_model([helper.make_node("Identity", ["t"], ["y"]),
                             helper.make_node("Relu", ["x"], ["t"])])
    path = lib.save(model, tmp_path / "model.onnx")
    rc, _, stderr = run(fusionopt_bin, path, "-o", tmp_path / "out.onnx", "-O3")
    assert rc == lib.EXIT_OK, stderr


# ---------------------------------------------------------------- model-local functions

LOCAL = "local.fns"


def local_function(name, body_nodes):
    return helper.make_function(LOCAL, name, ["a"], ["r"], body_nodes,
                                [helper.make_opsetid("", 17), helper.make_opsetid(LOCAL, 1)])


def call(function, inputs, outputs):
    return helper.make_node(function, inputs, outputs, domain=LOCAL)


def model_calling(functions, entry="F"):
    model = lib.make_model([call(entry, ["x"], ["y"])], [lib.float_input("x", [4])],
                           [lib.float_input("y", [4])], opsets=(("", 17), (LOCAL, 1)))
    model.functions.extend(functions)
    return model


def if_inside_function_calling(callee):
    then_graph = helper.make_graph([call(callee, ["a"], ["then_out"])], "then", [],
                                   [lib.float_input("then_out", [4])])
    else_graph = helper.make_graph([helper.make_node("Identity", ["a"], ["else_out"])], "else", [],
                                   [lib.float_input("else_out", [4])])
    return [helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"]),
            helper.make_node("If", ["c"], ["r"], then_branch=then_graph, else_branch=else_graph)]


def with_zero(nodes):
    zero = helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.float32(0), "z"))
    return [zero] + nodes


RECURSIVE_FUNCTIONS = {
    "function-calls-itself": lambda: model_calling([local_function("F", [call("F", ["a"], ["r"])])]),
    "mutual-recursion-A-B-A": lambda: model_calling(
        [local_function("F", [call("G", ["a"], ["r"])]), local_function("G", [call("F", ["a"], ["r"])])]),
    "three-cycle-below-the-entry": lambda: model_calling(
        [local_function("F", [call("G", ["a"], ["r"])]), local_function("G", [call("H", ["a"], ["r"])]),
         local_function("H", [call("G", ["a"], ["r"])])]),
    "recursion-through-an-if-branch": lambda: model_calling(
        [local_function("F", with_zero(if_inside_function_calling("F")))]),
}


@pytest.mark.parametrize("case", RECURSIVE_FUNCTIONS.keys())
def test_recursive_functions_are_refused(fusionopt_bin, tmp_path, case):
    model = lib.save(RECURSIVE_FUNCTIONS[case](), tmp_path / "model.onnx")
    for args in (["inspect", model], [model, "-o", tmp_path / "out.onnx", "-O3"], ["run", model]):
        lib.assert_error(run(fusionopt_bin, *args, stack_kib=SMALL_STACK_KIB), lib.EXIT_INVALID, str(model),
                         "calls itself", f"{LOCAL}::")


def test_functions_sharing_a_callee_are_not_recursion(fusionopt_bin, tmp_path):
    """A diamond F -> {G, H} -> K calls K twice but has no cycle."""
    k = local_function("K", [helper.make_node("Relu", ["a"], ["r"])])
    g = local_function("G", [call("K", ["a"], ["r"])])
    h = local_function("H", [call("K", ["a"], ["r"])])
    f = local_function("F", [call("G", ["a"], ["g"]), call("H", ["a"], ["h"]),
                             helper.make_node("Add", ["g", "h"], ["r"])])
    model = lib.save(model_calling([f, g, h, k]), tmp_path / "model.onnx")
    rc, stdout, stderr = run(fusionopt_bin, "run", model, "--output-dir", tmp_path)
    assert rc == lib.EXIT_OK, stderr
    rc, _, stderr = run(fusionopt_bin, model, "-o", tmp_path / "out.onnx", "-O3")
    assert rc == lib.EXIT_OK, stderr


# ---------------------------------------------------------------- opset and IR versions

def tiny_with(opsets=(("", 17),), ir_version=8):
    model = lib.tiny_model()
    model.ir_version = ir_version
    del model.opset_import[:]
    model.opset_import.extend(helper.make_opsetid(domain, version) for domain, version in opsets)
    return model


FUTURE_VERSIONS = {
    "default-domain-opset-10000": (tiny_with((("", 10000),)), lib.EXIT_UNSUPPORTED, ["opset 10000"]),
    "ai.onnx-opset-2^62": (tiny_with((("ai.onnx", 2**62),)), lib.EXIT_UNSUPPORTED, [f"opset {2**62}"]),
    "default-domain-opset-negative": (tiny_with((("", -1),)), lib.EXIT_UNSUPPORTED, ["opset -1"]),
    "ai.onnx.ml-opset-10000": (tiny_with((("", 17), ("ai.onnx.ml", 10000))), lib.EXIT_UNSUPPORTED,
                               ["ai.onnx.ml", "10000"]),
    "ir-version-10000": (tiny_with(ir_version=10000), lib.EXIT_UNSUPPORTED, ["IR version 10000"]),
    "ir-version-2^62": (tiny_with(ir_version=2**62), lib.EXIT_UNSUPPORTED, [f"IR version {2**62}"]),
    "ir-version-negative": (tiny_with(ir_version=-3), lib.EXIT_UNSUPPORTED, ["IR version -3"]),
}


@pytest.mark.parametrize("case", FUTURE_VERSIONS.keys())
def test_versions_far_in_the_future_are_unsupported(fusionopt_bin, tmp_path, case):
    model, exit_code, fragments = FUTURE_VERSIONS[case]
    path = lib.save(model, tmp_path / "model.onnx")
    lib.assert_error(run(fusionopt_bin, "inspect", path), exit_code, str(path), *fragments)
    lib.assert_error(run(fusionopt_bin, path, "-o", tmp_path / "out.onnx", "-O3"), exit_code, str(path),
                     *fragments)


def test_custom_domain_with_a_huge_version_is_carried_through(fusionopt_bin, tmp_path):
    """fusionopt gives custom domains no meaning, so any version is kept as written."""
    model = tiny_with((("", 17), ("com.example.future", 2**62)))
    path = lib.save(model, tmp_path / "model.onnx")
    out = tmp_path / "out.onnx"
    rc, _, stderr = run(fusionopt_bin, path, "-o", out, "-O3")
    assert rc == lib.EXIT_OK, stderr
    versions = {opset.domain: opset.version for opset in onnx.load(str(out)).opset_import}
    assert versions["com.example.future"] == 2**62


# ---------------------------------------------------------------- deep nesting
# Encoded by hand: onnx's Python protobuf refuses to build or parse messages this deep. Each
# If/Loop level nests three messages (graph -> node -> attribute -> graph).

varint, field = lib.varint, lib.length_delimited


GRAPH_NODE, NODE_ATTRIBUTE, ATTRIBUTE_GRAPH, MODEL_GRAPH = 1, 5, 6, 7


def with_graph_attribute(node, name, graph_bytes):
    attribute = onnx.AttributeProto(name=name, type=onnx.AttributeProto.GRAPH).SerializeToString()
    return node.SerializeToString() + field(NODE_ATTRIBUTE, attribute + field(ATTRIBUTE_GRAPH, graph_bytes))


def graph_bytes(name, node_bytes, inputs=(), outputs=(), nodes_after=(), initializers=()):
    graph = helper.make_graph([], name, list(inputs), list(outputs), initializer=list(initializers))
    after = b"".join(field(GRAPH_NODE, node.SerializeToString()) for node in nodes_after)
    return graph.SerializeToString() + field(GRAPH_NODE, node_bytes) + after


def model_bytes(graph):
    header = onnx.ModelProto(ir_version=8, opset_import=[helper.make_opsetid("", 17)])
    return header.SerializeToString() + field(MODEL_GRAPH, graph)


def nested_if(depth):
    """If inside the then-branch of If, `depth` deep; y = x when c, else -x at some level."""
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["o0"])], "g0", [],
                              [lib.float_input("o0", [4])]).SerializeToString()
    for level in range(1, depth + 1):
        else_graph = helper.make_graph([helper.make_node("Neg", ["x"], [f"e{level}"])], f"e{level}", [],
                                       [lib.float_input(f"e{level}", [4])])
        node = helper.make_node("If", ["c"], [f"o{level}"], else_branch=else_graph)
        top = level == depth
        condition = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
        inputs = [lib.float_input("x", [4]), condition] if top else []
        graph = graph_bytes(f"g{level}", with_graph_attribute(node, "then_branch", graph), inputs,
                            [lib.float_input(f"o{level}", [4])])
    return model_bytes(graph)


def loop_body_signature(level):
    return ([helper.make_tensor_value_info(f"i{level}", TensorProto.INT64, []),
             helper.make_tensor_value_info(f"cond{level}", TensorProto.BOOL, []),
             lib.float_input(f"v{level}", [4])],
            [helper.make_tensor_value_info(f"cond_out{level}", TensorProto.BOOL, []),
             lib.float_input(f"w{level}", [4])])


def nested_loop(depth):
    """Loop in the body of Loop, `depth` deep, each running once; every body adds 1, so
    y = x + depth."""
    inputs, outputs = loop_body_signature(0)
    body = helper.make_graph([helper.make_node("Identity", ["cond0"], ["cond_out0"]),
                              helper.make_node("Add", ["v0", "one"], ["w0"])], "body0", inputs,
                             outputs).SerializeToString()
    for level in range(1, depth + 1):
        top = level == depth
        node = helper.make_node("Loop", ["n", "", "x" if top else f"v{level}"], ["y" if top else f"u{level}"])
        loop = with_graph_attribute(node, "body", body)
        if top:
            initializers = [numpy_helper.from_array(np.int64(1), "n"),
                            numpy_helper.from_array(np.ones(4, np.float32), "one")]
            return model_bytes(graph_bytes("main", loop, [lib.float_input("x", [4])],
                                           [lib.float_input("y", [4])], initializers=initializers))
        inputs, outputs = loop_body_signature(level)
        body = graph_bytes(f"body{level}", loop, inputs, outputs,
                           nodes_after=[helper.make_node("Identity", [f"cond{level}"], [f"cond_out{level}"]),
                                        helper.make_node("Add", [f"u{level}", "one"], [f"w{level}"])])


NESTED = {"if": nested_if, "loop": nested_loop}


@pytest.mark.parametrize("kind", NESTED.keys())
def test_nesting_90_deep_works_on_a_small_stack(fusionopt_bin, tmp_path, kind):
    model = tmp_path / "model.onnx"
    model.write_bytes(NESTED[kind](90))
    for args in (["inspect", model], [model, "-o", tmp_path / "out.onnx", "-O3"],
                 ["run", model, "--seed", "3", "--output-dir", tmp_path]):
        rc, _, stderr = run(fusionopt_bin, *args, stack_kib=SMALL_STACK_KIB)
        assert rc == lib.EXIT_OK, f"{args[0]}: rc {rc}: {stderr[-2000:]}"
    optimized_dir = tmp_path / "optimized"
    optimized_dir.mkdir()
    rc, _, stderr = run(fusionopt_bin, "run", tmp_path / "out.onnx", "--seed", "3",
                        "--output-dir", optimized_dir, stack_kib=SMALL_STACK_KIB)
    assert rc == lib.EXIT_OK, stderr
    y = numpy_helper.to_array(lib.read_tensor(tmp_path / "output_0.pb"))
    assert np.array_equal(numpy_helper.to_array(lib.read_tensor(optimized_dir / "output_0.pb")), y)
    if kind == "loop":  # y = x + 90, x in [-1, 1)
        assert np.all((y >= 89) & (y < 91)), y


@pytest.mark.parametrize("kind", NESTED.keys())
def test_nesting_beyond_the_parse_limit_is_a_clear_error(fusionopt_bin, tmp_path, kind):
    model = tmp_path / "model.onnx"
    model.write_bytes(NESTED[kind](400))
    lib.assert_error(run(fusionopt_bin, "inspect", model, stack_kib=SMALL_STACK_KIB), lib.EXIT_INVALID,
                     str(model), "nested")


# ---------------------------------------------------------------- a million nodes

def relu_chain_bytes(length):
    """y = Relu(Relu(...Relu(x))) with `length` nodes: the deepest dependency chain a graph
    of that size can have. The nodes are encoded by hand (onnx's helpers take minutes)."""
    op_type = field(4, b"Relu")
    names = [b"x"] + [b"v%d" % i for i in range(1, length)] + [b"y"]
    nodes = b"".join(field(GRAPH_NODE, field(1, names[i]) + field(2, names[i + 1]) + op_type)
                     for i in range(length))
    signature = helper.make_graph([], "chain", [lib.float_input("x", [4])], [lib.float_input("y", [4])])
    return model_bytes(nodes + signature.SerializeToString())


def timed_optimize(binary, folder, length, level):
    model = folder / f"chain{length}.onnx"
    model.write_bytes(relu_chain_bytes(length))
    out = folder / f"chain{length}.out.onnx"
    start = time.perf_counter()
    rc, _, stderr = run(binary, model, "-o", out, level, stack_kib=SMALL_STACK_KIB, timeout=300)
    elapsed = time.perf_counter() - start
    assert rc == lib.EXIT_OK, f"{length} nodes: rc {rc}: {stderr[-2000:]}"
    return elapsed, out


def test_a_million_node_chain_loads_optimizes_and_saves_in_linear_time(fusionopt_bin, tmp_path):
    """-O1: load (with shape inference), the cleanup and folding passes, save."""
    small_s = min(timed_optimize(fusionopt_bin, tmp_path, 100_000, "-O1")[0] for _ in range(2))
    large_s, out = timed_optimize(fusionopt_bin, tmp_path, 1_000_000, "-O1")
    # 10x the nodes: quadratic would be 100x. Linear code measures 16-21x here, not 10x: at 1M
    # nodes the IR no longer fits in cache and a fifth of the time is the kernel zeroing fresh
    # pages (perf: clear_page_erms), so the gate sits between that and quadratic.
    assert large_s / small_s < 40, f"100k nodes {small_s:.2f} s, 1M nodes {large_s:.2f} s"
    assert large_s < 90, f"1M nodes took {large_s:.1f} s"
    rc, stdout, stderr = run(fusionopt_bin, "inspect", out, "--json", stack_kib=SMALL_STACK_KIB)
    assert rc == lib.EXIT_OK, stderr
    assert json.loads(stdout)["node_count"] == 1_000_000


def test_o3_on_a_long_chain_scales_linearly(fusionopt_bin, tmp_path):
    """Vertical fusion, horizontal merging and the cost model's judgement of every group over a
    chain: each group's work is proportional to the group, not to the graph."""
    small_s, _ = timed_optimize(fusionopt_bin, tmp_path, 20_000, "-O3")
    large_s, out = timed_optimize(fusionopt_bin, tmp_path, 200_000, "-O3")
    # 10x the nodes: linear is about 10x; quadratic would be 100x (it was: 20k nodes 6.8 s).
    assert large_s / small_s < 25, f"20k nodes {small_s:.2f} s, 200k nodes {large_s:.2f} s"
    rc, stdout, stderr = run(fusionopt_bin, "inspect", out, "--json", stack_kib=SMALL_STACK_KIB)
    assert rc == lib.EXIT_OK, stderr
    # 32 Relus per fused kernel (6,250 kernels), four kernels merged into one: 1,563 nodes.
    assert json.loads(stdout)["node_count"] == 1_563


def add_tree(leaves):
    """Pairwise Adds down to one value: the reduction that joins `leaves` into y."""
    nodes, level = [], list(leaves)
    while len(level) > 1:
        joined = [f"{level[i]}+" for i in range(0, len(level) - 1, 2)]
        nodes += [helper.make_node("Add", [level[i], level[i + 1]], [joined[i // 2]]) for i in range(0, len(level) - 1, 2)]
        level = joined + level[len(joined) * 2:]
    return nodes + [helper.make_node("Identity", [level[0]], ["y"])]


def wide_model(path, kind, width):
    """`width` independent branches of x joined by an Add tree, nodes unnamed (as many exporters
    leave them): "elementwise" branches Relu(x * c_i) — vertical then horizontal elementwise
    fusion; "matmul" branches x @ W_i — horizontal contraction merging, its Split and epilogues."""
    nodes, initializers, leaves = [], [], []
    for i in range(width):
        if kind == "elementwise":
            initializers.append(numpy_helper.from_array(np.full([1], i + 1, np.float32), f"c{i}"))
            nodes += [helper.make_node("Mul", ["x", f"c{i}"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"b{i}"])]
        else:
            initializers.append(numpy_helper.from_array(np.full([8, 8], 1 / (i + 1), np.float32), f"w{i}"))
            nodes.append(helper.make_node("MatMul", ["x", f"w{i}"], [f"b{i}"]))
        leaves.append(f"b{i}")
    graph = helper.make_graph(nodes + add_tree(leaves), "wide", [lib.float_input("x", [2, 8])],
                              [lib.float_input("y", [2, 8])], initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


@pytest.mark.parametrize("kind", ["elementwise", "matmul"])
def test_o3_on_a_wide_graph_scales_linearly(fusionopt_bin, tmp_path, kind):
    """Many branches side by side: every fusion outlines a function, merges members spread over
    the whole graph or adds nodes beside a shared input read thousands of times. Each of those
    was quadratic (function lookup by printing every body, walks over the members' span, the
    launch-free rescan after each merge, the register estimate scanning the shared input's
    uses, value names searched from the first suffix): 20k branches took 91 s and 6.9 s."""
    timings = {}
    for width in (2_000, 20_000):
        model = wide_model(tmp_path / f"{kind}{width}.onnx", kind, width)
        out = tmp_path / f"{kind}{width}.out.onnx"
        start = time.perf_counter()
        rc, _, stderr = run(fusionopt_bin, model, "-o", out, "-O3", timeout=300)
        timings[width] = time.perf_counter() - start
        assert rc == lib.EXIT_OK, stderr[-2000:]
    # 10x the branches: linear code measures 13-20x here (caches), quadratic was 84-200x.
    ratio = timings[20_000] / timings[2_000]
    assert ratio < 45, f"{kind}: 2k branches {timings[2_000]:.2f} s, 20k {timings[20_000]:.2f} s"
    # Fused for real (elementwise: a few hundred fused calls for 60k nodes; matmul: four
    # MatMuls to one, with a Split), and the same numbers.
    original_nodes = len(onnx.load(str(tmp_path / f"{kind}20000.onnx")).graph.node)
    assert len(onnx.load(str(out)).graph.node) < 0.4 * original_nodes
    feeds = {"x": np.random.default_rng(8).uniform(-1, 1, [2, 8]).astype(np.float32)}
    lib.assert_outputs_close(lib.onnxruntime_outputs(out, feeds),
                             lib.onnxruntime_outputs(tmp_path / f"{kind}20000.onnx", feeds), rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- wrong wire types
# Protobuf keeps a known field sent with the wrong wire type as an unknown field; the loader
# then finds the field missing and says which.

def wrong_wire_type_ir_version():
    model = lib.tiny_model()
    model.ClearField("ir_version")
    return field(1, b"\x08") + model.SerializeToString()  # ir_version as bytes, not a varint


def wrong_wire_type_graph():
    model = lib.tiny_model()
    model.ClearField("graph")
    return model.SerializeToString() + varint(7 << 3 | 0) + varint(5)  # graph as a varint


def wrong_wire_type_data_type():
    weight = numpy_helper.from_array(np.ones(4, np.float32), "w")
    weight.ClearField("data_type")
    weight_bytes = weight.SerializeToString() + field(2, b"\x01")  # data_type as bytes
    model = lib.make_model([helper.make_node("Relu", ["w"], ["y"])], [], [lib.float_input("y", [4])])
    graph = model.graph.SerializeToString() + field(5, weight_bytes)  # GraphProto.initializer
    model.ClearField("graph")
    return model.SerializeToString() + field(MODEL_GRAPH, graph)


@pytest.mark.parametrize("build, fragments", [
    (wrong_wire_type_ir_version, ["no ir_version"]),
    (wrong_wire_type_graph, ["no graph"]),
    (wrong_wire_type_data_type, ["unknown data type 0"]),
], ids=["ir-version-as-bytes", "graph-as-varint", "tensor-data-type-as-bytes"])
def test_wrong_wire_types_are_refused(fusionopt_bin, tmp_path, build, fragments):
    model = tmp_path / "model.onnx"
    model.write_bytes(build())
    lib.assert_error(run(fusionopt_bin, "inspect", model), lib.EXIT_INVALID, str(model), *fragments)


def call_chain(length):
    """F0 -> F1 -> ... -> F<length-1> -> Relu: deep, but not recursive."""
    functions = [local_function(f"F{i}", [call(f"F{i + 1}", ["a"], ["r"])]) for i in range(length - 1)]
    functions.append(local_function(f"F{length - 1}", [helper.make_node("Relu", ["a"], ["r"])]))
    return model_calling(functions, entry="F0")


def test_a_deep_call_chain_runs_on_a_small_stack(fusionopt_bin, tmp_path):
    model = lib.save(call_chain(250), tmp_path / "model.onnx")
    for args in (["inspect", model], [model, "-o", tmp_path / "out.onnx", "-O3"], ["run", model]):
        rc, _, stderr = run(fusionopt_bin, *args, stack_kib=SMALL_STACK_KIB)
        assert rc == lib.EXIT_OK, f"{args[0]}: rc {rc}: {stderr[-2000:]}"


def test_a_call_chain_beyond_the_limit_is_unsupported(fusionopt_bin, tmp_path):
    model = lib.save(call_chain(300), tmp_path / "model.onnx")
    lib.assert_error(run(fusionopt_bin, "inspect", model, stack_kib=SMALL_STACK_KIB), lib.EXIT_UNSUPPORTED,
                     str(model), "nests function calls more than 256 deep")
