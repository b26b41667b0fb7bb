"""External data: reading models whose weights live in a side file, and writing them."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionopt_testlib as lib

DATA_FILE = "weights.bin"
# name -> shape; float32, so bytes = 4 * elements
TENSORS = {"big": (64, 64), "medium": (300,), "small": (4,)}
TENSOR_BYTES = {name: 4 * int(np.prod(shape)) for name, shape in TENSORS.items()}


def weights_model():
    rng = np.random.default_rng(7)
    initializers = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
                    for name, shape in TENSORS.items()]
    nodes = [helper.make_node("Add", ["x", "small"], ["y"], name="add")]
    outputs = [lib.float_input("y", [2, 4])]
    for name, shape in TENSORS.items():
        nodes.append(helper.make_node("Identity", [name], [f"{name}_out"], name=f"copy_{name}"))
        outputs.append(lib.float_input(f"{name}_out", list(shape)))
    return lib.make_model(nodes, [lib.float_input("x", [2, 4])], outputs, initializers)


@pytest.fixture
def external_model(tmp_path):
    """in/model.onnx with big and medium in in/weights.bin, small inline."""
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "model.onnx"
    onnx.save_model(weights_model(), str(path), save_as_external_data=True,
                    all_tensors_to_one_file=True, location=DATA_FILE, size_threshold=1024)
    stored = onnx.load(str(path), load_external_data=False)
    assert external_names(stored) == {"big", "medium"}  # the fixture is what we think
    return path


def external_names(model):
    return {t.name for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL}


def external_locations(model):
    return {entry.value for t in model.graph.initializer for entry in t.external_data
            if entry.key == "location"}


def optimize(fusionopt, model_path, out_path, *options):
    snapshots = [lib.FileSnapshot(model_path), lib.FileSnapshot(model_path.parent / DATA_FILE)]
    rc, stdout, stderr = fusionopt(model_path, "-o", out_path, "-O0", *options)
    assert rc == lib.EXIT_OK, stderr
    for snapshot in snapshots:
        snapshot.assert_unchanged()
    return out_path


def assert_same_values(out_path, model_path):
    onnx.checker.check_model(str(out_path), full_check=True)
    # Loading resolves external data into raw_data on both sides, so the models compare whole.
    written, original = onnx.load(str(out_path)), onnx.load(str(model_path))
    lib.assert_same_initializers(written.graph, original.graph)
    # Not exact: onnx.load marks the tensors it read from a data file DEFAULT explicitly.
    lib.assert_round_trip_equal(written, original, exact=False)


def test_inspect_lists_the_data_file(fusionopt, external_model):
    rc, stdout, stderr = fusionopt("inspect", external_model, "--json")
    assert rc == lib.EXIT_OK, stderr
    summary = json.loads(stdout)
    assert summary["external_data_files"] == [DATA_FILE]
    assert summary["parameter_count"] == sum(TENSOR_BYTES.values()) // 4
    assert summary["parameter_bytes"] == sum(TENSOR_BYTES.values())


def test_inspect_of_an_embedded_model_lists_no_data_file(fusionopt, tmp_path):
    path = lib.save(weights_model(), tmp_path / "model.onnx")
    rc, stdout, stderr = fusionopt("inspect", path, "--json")
    assert rc == lib.EXIT_OK, stderr
    assert json.loads(stdout)["external_data_files"] == []


def test_external_data_output_to_another_folder(fusionopt, tmp_path, external_model):
    out_dir = tmp_path / "elsewhere"
    out_dir.mkdir()
    out = optimize(fusionopt, external_model, out_dir / "model.onnx", "--external-data")

    assert lib.folder_listing(out_dir) == ["model.onnx", "model.onnx.data"]
    stored = onnx.load(str(out), load_external_data=False)
    assert external_names(stored) == {"big", "medium"}  # default threshold 1024 bytes
    assert external_locations(stored) == {"model.onnx.data"}
    assert (out_dir / "model.onnx.data").stat().st_size >= TENSOR_BYTES["big"] + TENSOR_BYTES["medium"]
    assert out.stat().st_size < TENSOR_BYTES["medium"]
    assert_same_values(out, external_model)


@pytest.mark.parametrize("threshold, expected_external", [
    (TENSOR_BYTES["medium"], {"big", "medium"}),      # at the threshold: moved
    (TENSOR_BYTES["medium"] + 1, {"big"}),            # one byte under: stays inline
    (TENSOR_BYTES["small"], {"big", "medium", "small"}),
    (TENSOR_BYTES["big"] + 1, set()),
])
def test_external_data_threshold(fusionopt, tmp_path, external_model, threshold, expected_external):
    out = optimize(fusionopt, external_model, tmp_path / "out.onnx", "--external-data",
                   "--external-data-threshold", threshold)

    stored = onnx.load(str(out), load_external_data=False)
    assert external_names(stored) == expected_external
    if expected_external:
        assert external_locations(stored) == {"out.onnx.data"}
    assert_same_values(out, external_model)


def test_external_data_name(fusionopt, tmp_path, external_model):
    out_dir = tmp_path / "named"
    out_dir.mkdir()
    out = optimize(fusionopt, external_model, out_dir / "model.onnx", "--external-data",
                   "--external-data-name", "tensors.bin")

    assert lib.folder_listing(out_dir) == ["model.onnx", "tensors.bin"]
    assert external_locations(onnx.load(str(out), load_external_data=False)) == {"tensors.bin"}
    assert_same_values(out, external_model)


def test_without_external_data_everything_is_embedded(fusionopt, tmp_path, external_model):
    out_dir = tmp_path / "embedded"
    out_dir.mkdir()
    out = optimize(fusionopt, external_model, out_dir / "model.onnx")

    assert lib.folder_listing(out_dir) == ["model.onnx"]
    stored = onnx.load(str(out), load_external_data=False)
    assert external_names(stored) == set()
    assert all(not t.external_data for t in stored.graph.initializer)
    assert out.stat().st_size > TENSOR_BYTES["big"] + TENSOR_BYTES["medium"]
    assert_same_values(out, external_model)


def test_output_next_to_the_input_with_external_data(fusionopt, external_model):
    out = optimize(fusionopt, external_model, external_model.parent / "copy.onnx", "--external-data")
    assert lib.folder_listing(external_model.parent) == ["copy.onnx", "copy.onnx.data", "model.onnx", DATA_FILE]
    assert_same_values(out, external_model)


@pytest.mark.parametrize("name", ["sub/tensors.bin", "../tensors.bin"])
def test_external_data_name_must_be_a_plain_file_name(fusionopt, tmp_path, external_model, name):
    out_dir = tmp_path / "out"
    (out_dir / "sub").mkdir(parents=True)
    out = out_dir / "model.onnx"

    result = fusionopt(external_model, "-o", out, "-O0", "--external-data", "--external-data-name", name)

    lib.assert_error(result, lib.EXIT_USAGE, None, name)
    assert lib.folder_listing(out_dir) == ["sub"]
    assert lib.folder_listing(out_dir / "sub") == []
    assert lib.folder_listing(tmp_path) == ["in", "out"]


def test_refuses_to_overwrite_the_input_data_file(fusionopt, external_model):
    folder = external_model.parent
    snapshot = lib.FileSnapshot(folder / DATA_FILE)

    result = fusionopt(external_model, "-o", folder / "out.onnx", "-O0", "--external-data",
                       "--external-data-name", DATA_FILE)

    lib.assert_error(result, lib.EXIT_USAGE, str(folder / "out.onnx"), DATA_FILE)
    snapshot.assert_unchanged()
    assert lib.folder_listing(folder) == ["model.onnx", DATA_FILE]


def test_negative_threshold_is_a_usage_error(fusionopt, tmp_path, external_model):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = fusionopt(external_model, "-o", out_dir / "model.onnx", "-O0", "--external-data",
                       "--external-data-threshold", "-5")
    lib.assert_error(result, lib.EXIT_USAGE, None, "threshold")
    assert lib.folder_listing(out_dir) == []


def test_non_numeric_threshold_is_a_usage_error(fusionopt, tmp_path, external_model):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    result = fusionopt(external_model, "-o", out_dir / "model.onnx", "--external-data",
                       "--external-data-threshold", "lots")
    lib.assert_error(result, lib.EXIT_USAGE, None, "threshold")
    assert lib.folder_listing(out_dir) == []
