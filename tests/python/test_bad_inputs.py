"""Bad inputs: each fails with its exit code and one `error: <file>: <problem>` line, leaves
the input untouched and writes nothing to the output folder."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionopt_testlib as lib


# ---------------------------------------------------------------- bad model builders
# Each writes its model (and any side files) into `folder` and returns the model path.

def empty_file(folder):
    path = folder / "empty.onnx"
    path.write_bytes(b"")
    return path


def random_bytes(folder):
    path = folder / "random.onnx"
    path.write_bytes(np.random.default_rng(3).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    return path


def text_file(folder):
    path = folder / "notes.onnx"
    path.write_text("this is a text file, not an ONNX model\n" * 20)
    return path


def truncated_model(folder):
    big = lib.make_model([helper.make_node("Identity", ["w"], ["y"])], [], [lib.float_input("y", [256])],
                         [numpy_helper.from_array(np.ones(256, np.float32), "w")])
    data = big.SerializeToString()
    path = folder / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    return path


def _save(folder, model, name="model.onnx"):
    return lib.save(model, folder / name)


def cycle(folder):
    nodes = [helper.make_node("Add", ["x", "b_val"], ["a_val"], name="node_a"),
             helper.make_node("Relu", ["a_val"], ["b_val"], name="node_b"),
             helper.make_node("Identity", ["a_val"], ["y"], name="out")]
    return _save(folder, lib.make_model(nodes, [lib.float_input("x", [4])], [lib.float_input("y", [4])]))


def dangling_input(folder):
    nodes = [helper.make_node("Add", ["x", "ghost_value"], ["y"], name="add")]
    return _save(folder, lib.make_model(nodes, [lib.float_input("x", [4])], [lib.float_input("y", [4])]))


def duplicate_outputs(folder):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    outputs = [lib.float_input("y", [4]), lib.float_input("y", [4])]
    return _save(folder, lib.make_model(nodes, [lib.float_input("x", [4])], outputs))


def missing_custom_opset(folder):
    nodes = [helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.missing.domain")]
    return _save(folder, lib.make_model(nodes, [lib.float_input("x", [4])], [lib.float_input("y", [4])]))


def with_ir_version(version):
    def build(folder):
        model = lib.tiny_model()
        model.ir_version = version
        return _save(folder, model)
    return build


def with_opset(version):
    return lambda folder: _save(folder, lib.tiny_model(opset=version))


def sparse_initializer(folder):
    values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "sparse_w")
    indices = numpy_helper.from_array(np.array([0, 3], np.int64), "sparse_w_indices")
    model = lib.make_model([helper.make_node("Add", ["x", "sparse_w"], ["y"])], [lib.float_input("x", [4])],
                           [lib.float_input("y", [4])])
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [4]))
    return _save(folder, model)


def external_weight_model(folder, location, offset=0, length=16, data_bytes=16, data_name="w.bin"):
    """Initializer `w` (4 floats) in external data at `location`."""
    (folder / data_name).write_bytes(np.arange(data_bytes // 4, dtype=np.float32).tobytes())
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4],
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        weight.external_data.append(onnx.StringStringEntryProto(key=key, value=str(value)))
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return _save(folder, lib.make_model(nodes, [lib.float_input("x", [4])], [lib.float_input("y", [4])],
                                        [weight]))


def external_missing(folder):
    return external_weight_model(folder, "nowhere.bin")


def external_absolute(folder):
    # The file exists: the rejection is for the absolute path, not a missing file.
    return external_weight_model(folder, str((folder / "w.bin").resolve()))


def external_parent_reference(folder):
    (folder.parent / "outside.bin").write_bytes(bytes(16))
    return external_weight_model(folder, "../outside.bin")


def external_symlink_outside(folder):
    outside = folder.parent / "outside.bin"
    outside.write_bytes(bytes(16))
    os.symlink(outside, folder / "link.bin")
    return external_weight_model(folder, "link.bin")


def external_past_end(folder):
    return external_weight_model(folder, "w.bin", offset=8, length=16)


def external_wrong_length(folder):
    return external_weight_model(folder, "w.bin", length=12)


# id -> (builder, exit code, fragments the message must contain)
BAD_MODELS = {
    "empty-file": (empty_file, lib.EXIT_INVALID, ["empty"]),
    "random-bytes": (random_bytes, lib.EXIT_INVALID, []),
    "text-file": (text_file, lib.EXIT_INVALID, []),
    "truncated": (truncated_model, lib.EXIT_INVALID, []),
    "cycle": (cycle, lib.EXIT_INVALID, ["cycle"]),
    "dangling-input": (dangling_input, lib.EXIT_INVALID, ["ghost_value"]),
    "duplicate-outputs": (duplicate_outputs, lib.EXIT_INVALID, ["'y'"]),
    "missing-custom-opset": (missing_custom_opset, lib.EXIT_INVALID, ["com.missing.domain"]),
    "ir-version-15": (with_ir_version(15), lib.EXIT_UNSUPPORTED, ["IR version 15"]),
    "ir-version-2": (with_ir_version(2), lib.EXIT_UNSUPPORTED, ["IR version 2"]),
    "opset-0": (with_opset(0), lib.EXIT_UNSUPPORTED, ["opset 0", "1-28"]),
    "opset-29": (with_opset(29), lib.EXIT_UNSUPPORTED, ["opset 29"]),
    "sparse-initializer": (sparse_initializer, lib.EXIT_UNSUPPORTED, ["sparse"]),
    "external-missing": (external_missing, lib.EXIT_INVALID, ["nowhere.bin"]),
    "external-absolute": (external_absolute, lib.EXIT_INVALID, ["absolute"]),
    "external-parent": (external_parent_reference, lib.EXIT_INVALID, ["../outside.bin"]),
    "external-symlink-outside": (external_symlink_outside, lib.EXIT_INVALID, ["link.bin", "outside"]),
    "external-past-end": (external_past_end, lib.EXIT_INVALID, ["w.bin"]),
    "external-wrong-length": (external_wrong_length, lib.EXIT_INVALID, ["12"]),
}

# Neighbours of the bad models that must load: the checks are not over-eager.
GOOD_NEIGHBOURS = {
    "ir-version-3-opset-1": lambda folder: _save(folder, lib.tiny_model(ir_version=3, opset=1)),
    "ir-version-3-opset-7": lambda folder: _save(folder, lib.tiny_model(ir_version=3, opset=7)),
    "ir-version-11-opset-23": lambda folder: _save(folder, lib.tiny_model(ir_version=11, opset=23)),
    "external-exact-end": lambda folder: external_weight_model(folder, "w.bin", offset=8, length=16,
                                                               data_bytes=24),
    "external-in-subfolder": lambda folder: external_weight_model(
        folder, "sub/w.bin", data_name="sub/w.bin"),
    "external-symlink-inside": lambda folder: _symlink_inside(folder),
}


def _symlink_inside(folder):
    path = external_weight_model(folder, "link.bin")
    os.symlink(folder / "w.bin", folder / "link.bin")
    return path


@pytest.fixture
def folders(tmp_path):
    model_dir, out_dir = tmp_path / "in", tmp_path / "out"
    model_dir.mkdir()
    (model_dir / "sub").mkdir()
    out_dir.mkdir()
    return model_dir, out_dir


def snapshots_of(folder):
    return [lib.FileSnapshot(path) for path in folder.rglob("*") if path.is_file()]


@pytest.mark.parametrize("case", BAD_MODELS.keys())
def test_bad_model_is_rejected(fusionopt, folders, case):
    build, exit_code, fragments = BAD_MODELS[case]
    model_dir, out_dir = folders
    model = build(model_dir)
    snapshots = snapshots_of(model_dir.parent)

    optimize_error = lib.assert_error(fusionopt(model, "-o", out_dir / "out.onnx"), exit_code,
                                      str(model), *fragments)
    inspect_error = lib.assert_error(fusionopt("inspect", model), exit_code, str(model), *fragments)

    assert optimize_error == inspect_error
    assert lib.folder_listing(out_dir) == []
    for snapshot in snapshots:
        snapshot.assert_unchanged()


@pytest.mark.parametrize("case", GOOD_NEIGHBOURS.keys())
def test_neighbour_of_a_bad_model_loads(fusionopt, folders, case):
    model_dir, out_dir = folders
    model = GOOD_NEIGHBOURS[case](model_dir)

    rc, _, stderr = fusionopt(model, "-o", out_dir / "out.onnx")

    assert rc == lib.EXIT_OK, stderr
    # onnx's checker refuses every symlinked data file, so the values are checked directly.
    written = onnx.load(str(out_dir / "out.onnx"))
    values = numpy_helper.to_array(written.graph.initializer[0])
    expected = [2.0, 3.0, 4.0, 5.0] if case == "external-exact-end" else [0.0, 1.0, 2.0, 3.0]
    assert values.tolist() == expected
    assert values.dtype == np.float32


def test_missing_file(fusionopt, folders):
    model_dir, out_dir = folders
    missing = model_dir / "missing.onnx"
    lib.assert_error(fusionopt(missing, "-o", out_dir / "out.onnx"), lib.EXIT_IO, str(missing))
    lib.assert_error(fusionopt("inspect", missing), lib.EXIT_IO, str(missing))
    assert lib.folder_listing(out_dir) == []


def test_directory_instead_of_a_model(fusionopt, folders):
    model_dir, out_dir = folders
    lib.assert_error(fusionopt(model_dir, "-o", out_dir / "out.onnx"), lib.EXIT_IO, str(model_dir),
                     "directory")
    lib.assert_error(fusionopt("inspect", model_dir), lib.EXIT_IO, str(model_dir), "directory")
    assert lib.folder_listing(out_dir) == []


def test_truncated_real_model(fusionopt, folders, project_model):
    model_dir, out_dir = folders
    data = project_model.read_bytes()
    truncated = model_dir / "half.onnx"
    truncated.write_bytes(data[: len(data) // 2])
    lib.assert_error(fusionopt(truncated, "-o", out_dir / "out.onnx"), lib.EXIT_INVALID, str(truncated))
    assert lib.folder_listing(out_dir) == []


# ---------------------------------------------------------------- bad destinations

@pytest.fixture
def good_model(folders):
    model_dir, _ = folders
    return _save(model_dir, lib.tiny_model())


def test_refuses_to_overwrite_the_input(fusionopt, good_model):
    snapshot = lib.FileSnapshot(good_model)
    lib.assert_error(fusionopt(good_model, "-o", good_model), lib.EXIT_USAGE, str(good_model), "overwrite")
    snapshot.assert_unchanged()
    assert lib.folder_listing(good_model.parent) == ["model.onnx", "sub"]


def test_refuses_to_overwrite_the_input_through_another_spelling(fusionopt, good_model):
    snapshot = lib.FileSnapshot(good_model)
    alias = good_model.parent / "sub" / ".." / good_model.name
    lib.assert_error(fusionopt(good_model, "-o", alias), lib.EXIT_USAGE, str(alias), "overwrite")
    link = good_model.parent / "link.onnx"
    os.symlink(good_model, link)
    lib.assert_error(fusionopt(good_model, "-o", link), lib.EXIT_USAGE, str(link), "overwrite")
    snapshot.assert_unchanged()
    assert lib.folder_listing(good_model.parent) == ["link.onnx", "model.onnx", "sub"]


def test_output_folder_missing(fusionopt, folders, good_model):
    _, out_dir = folders
    out = out_dir / "no" / "such" / "out.onnx"
    lib.assert_error(fusionopt(good_model, "-o", out), lib.EXIT_IO, str(out), "does not exist")
    assert lib.folder_listing(out_dir) == []


def test_output_folder_is_a_file(fusionopt, folders, good_model):
    _, out_dir = folders
    (out_dir / "plain.txt").write_text("not a folder")
    out = out_dir / "plain.txt" / "out.onnx"
    lib.assert_error(fusionopt(good_model, "-o", out), lib.EXIT_IO, str(out))
    assert lib.folder_listing(out_dir) == ["plain.txt"]


def test_output_is_a_directory(fusionopt, folders, good_model):
    _, out_dir = folders
    (out_dir / "taken.onnx").mkdir()
    out = out_dir / "taken.onnx"
    lib.assert_error(fusionopt(good_model, "-o", out, "-O0"), lib.EXIT_IO, str(out), "directory")
    assert lib.folder_listing(out_dir) == ["taken.onnx"]
    assert lib.folder_listing(out) == []


def test_save_error_at_the_default_level_is_one_line(fusionopt, folders, good_model):
    _, out_dir = folders
    (out_dir / "taken.onnx").mkdir()
    lib.assert_error(fusionopt(good_model, "-o", out_dir / "taken.onnx"), lib.EXIT_IO,
                     str(out_dir / "taken.onnx"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_output_folder_not_writable(fusionopt, folders, good_model):
    _, out_dir = folders
    out_dir.chmod(0o500)
    try:
        lib.assert_error(fusionopt(good_model, "-o", out_dir / "out.onnx"), lib.EXIT_IO,
                         str(out_dir / "out.onnx"))
    finally:
        out_dir.chmod(0o700)
    assert lib.folder_listing(out_dir) == []


# ---------------------------------------------------------------- usage errors

@pytest.mark.parametrize("args", [
    ["--no-such-flag"],
    ["MODEL", "-o", "OUT", "--no-such-flag"],
    ["MODEL", "-o", "OUT", "-O4"],
    ["MODEL", "-o", "OUT", "-Ofast"],
    ["MODEL"],                      # no -o
    [],                             # no model
    ["-v"],                         # flags but no model
    ["inspect"],                    # subcommand without its model
    ["inspect", "MODEL", "--bogus"],
], ids=["unknown-flag", "unknown-optimize-flag", "level-4", "level-word", "no-output", "no-args",
        "flags-only", "inspect-no-model", "inspect-unknown-flag"])
def test_usage_errors(fusionopt, folders, good_model, args):
    _, out_dir = folders
    out = out_dir / "out.onnx"
    argv = [str(good_model) if a == "MODEL" else str(out) if a == "OUT" else a for a in args]
    snapshot = lib.FileSnapshot(good_model)

    lib.assert_error(fusionopt(*argv), lib.EXIT_USAGE)

    snapshot.assert_unchanged()
    assert lib.folder_listing(out_dir) == []
