"""`fusionopt inspect` reports what the onnx package computes for the same file."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionopt_testlib as lib
from lossless_models import (CUSTOM_DOMAIN, FUNCTION_DOMAIN, LOSSLESS_MODELS,
                             lossless_params)


JSON_KEYS = ["file", "ir_version", "producer_name", "producer_version", "domain", "model_version",
             "opsets", "inputs", "outputs", "node_count", "total_node_count", "subgraph_count",
             "estimated_kernel_launches", "op_histogram", "initializer_count", "parameter_count", "parameter_bytes",
             "external_data_files", "functions", "metadata"]


def inspect_json(fusionopt, path):
    snapshot = lib.FileSnapshot(path)
    rc, stdout, stderr = fusionopt("inspect", path, "--json")
    assert rc == lib.EXIT_OK, stderr
    snapshot.assert_unchanged()
    return json.loads(stdout)


def assert_summary_matches(summary, model, path):
    assert list(summary) == JSON_KEYS
    assert summary["file"] == str(path)
    expected = lib.expected_summary(model)
    for key, value in expected.items():
        assert summary[key] == value, key
    assert summary["external_data_files"] == []
    declared_outputs = model.graph.output
    assert [o["name"] for o in summary["outputs"]] == [o.name for o in declared_outputs]
    for reported, declared in zip(summary["outputs"], declared_outputs):
        assert reported["dtype"] == lib.dtype_name(declared.type.tensor_type.elem_type)
        lib.assert_refines(reported["shape"], lib.shape_of(declared), declared.name)


@pytest.mark.parametrize("model_path", lib.all_model_params())
def test_inspect_json_matches_onnx(fusionopt, model_path):
    summary = inspect_json(fusionopt, model_path)
    assert_summary_matches(summary, onnx.load(str(model_path)), model_path)


@pytest.mark.parametrize("build", lossless_params())
def test_inspect_json_matches_onnx_on_unusual_models(fusionopt, tmp_path, build):
    model = build()
    path = lib.save(model, tmp_path / "model.onnx")
    assert_summary_matches(inspect_json(fusionopt, path), model, path)


def test_inspect_estimates_kernel_launches(fusionopt, tmp_path):
    """Nodes that launch work count; views and shape arithmetic do not (the count the real-export
    benchmark compares across tools)."""
    shape = numpy_helper.from_array(np.array([4, 2], np.int64), "shape")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["v"]),
             helper.make_node("Shape", ["v"], ["s"]), helper.make_node("Add", ["v", "v"], ["y"])]
    model = lib.make_model(nodes, [lib.float_input("x", [2, 4])],
                           [lib.float_input("y", [4, 2]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                           [shape])
    summary = inspect_json(fusionopt, lib.save(model, tmp_path / "model.onnx"))
    assert summary["node_count"] == 4
    assert summary["estimated_kernel_launches"] == 2  # Relu and Add
    rc, stdout, _ = fusionopt("inspect", tmp_path / "model.onnx")
    assert rc == 0 and "kernels:    2 estimated launches per inference" in stdout


def test_inspect_counts_subgraphs(fusionopt, tmp_path):
    path = lib.save(LOSSLESS_MODELS["everything"](), tmp_path / "model.onnx")
    summary = inspect_json(fusionopt, path)
    # mystery, relu, call, if in the main graph; then: mul; else: sub, neg.
    assert summary["node_count"] == 4
    assert summary["total_node_count"] == 7
    assert summary["subgraph_count"] == 2
    assert summary["op_histogram"] == {
        "": {"If": 1, "Mul": 1, "Neg": 1, "Relu": 1, "Sub": 1},
        CUSTOM_DOMAIN: {"Mystery": 1},
        FUNCTION_DOMAIN: {"ScaledLeakyRelu": 1},
    }


def test_inspect_lists_functions_and_metadata(fusionopt, tmp_path):
    path = lib.save(LOSSLESS_MODELS["functions-and-custom-ops"](), tmp_path / "model.onnx")
    summary = inspect_json(fusionopt, path)
    assert summary["node_count"] == summary["total_node_count"] == 3
    assert summary["subgraph_count"] == 0
    assert summary["op_histogram"] == {"": {"Relu": 1}, CUSTOM_DOMAIN: {"Mystery": 1},
                                       FUNCTION_DOMAIN: {"ScaledLeakyRelu": 1}}
    assert summary["functions"] == [f"{FUNCTION_DOMAIN}:ScaledLeakyRelu"]
    assert summary["metadata"] == {"author": "tests", "purpose": "everything"}
    assert summary["opsets"] == [{"domain": "", "version": 17}, {"domain": CUSTOM_DOMAIN, "version": 3},
                                 {"domain": FUNCTION_DOMAIN, "version": 1}]
    assert summary["initializer_count"] == 1
    assert summary["parameter_count"] == 4
    assert summary["parameter_bytes"] == 16


def test_inspect_ir3_model_excludes_weights_from_inputs(fusionopt, tmp_path):
    path = lib.save(lib.tiny_model(ir_version=3, opset=9), tmp_path / "ir3.onnx")
    assert [i.name for i in onnx.load(str(path)).graph.input] == ["x", "b"]
    summary = inspect_json(fusionopt, path)
    assert summary["inputs"] == [{"name": "x", "dtype": "float", "shape": [2, 4]}]
    assert summary["initializer_count"] == 1


def test_inspect_reports_symbolic_dims_by_name(fusionopt):
    path = lib.PROJECT_MODELS / "bert_style.onnx"
    if not path.exists():
        pytest.skip("models/bert_style.onnx has not been generated")
    summary = inspect_json(fusionopt, path)
    assert summary["inputs"], "bert_style has inputs"
    for value in summary["inputs"]:
        assert value["shape"][:2] == ["batch", "sequence"], value
        assert value["dtype"] == "int64"


def test_inspect_shape_json_forms(fusionopt, tmp_path):
    """Known dims as ints, symbols as strings, unknown dims as null, unknown rank as null."""
    inputs = [lib.float_input("mixed", [3, "n", None]),
              onnx.helper.make_tensor_value_info("no_rank", onnx.TensorProto.INT64, None),
              lib.float_input("scalar", [])]
    nodes = [onnx.helper.make_node("Identity", ["mixed"], ["y"]),
             onnx.helper.make_node("Identity", ["no_rank"], ["z"]),
             onnx.helper.make_node("Identity", ["scalar"], ["s"])]
    outputs = [lib.float_input("y", [3, "n", None]),
               onnx.helper.make_tensor_value_info("z", onnx.TensorProto.INT64, None),
               lib.float_input("s", [])]
    path = lib.save(lib.make_model(nodes, inputs, outputs), tmp_path / "shapes.onnx")
    summary = inspect_json(fusionopt, path)
    assert summary["inputs"] == [{"name": "mixed", "dtype": "float", "shape": [3, "n", None]},
                                 {"name": "no_rank", "dtype": "int64", "shape": None},
                                 {"name": "scalar", "dtype": "float", "shape": []}]
    assert summary["outputs"][0]["shape"][:2] == [3, "n"]
    assert summary["outputs"][2]["shape"] == []


def parse_ops_section(text):
    lines = text.splitlines()
    start = lines.index("ops:") + 1
    ops = {}
    for line in lines[start:]:
        label, count = line.split()
        ops[label] = int(count)
    return ops


@pytest.mark.parametrize("model_path", lib.all_model_params())
def test_inspect_text_names_inputs_and_ops(fusionopt, model_path):
    model = onnx.load(str(model_path))
    rc, stdout, stderr = fusionopt("inspect", model_path)
    assert rc == lib.EXIT_OK, stderr
    assert stdout.splitlines()[0].split() == ["model:", str(model_path)]
    expected = lib.expected_summary(model)
    for value in expected["inputs"]:
        assert f"  {value['name']} " in stdout, value["name"]
    for value in model.graph.output:
        assert f"  {value.name} " in stdout, value.name
    flattened = {(op if not domain else f"{domain}::{op}"): count
                 for domain, ops in expected["op_histogram"].items() for op, count in ops.items()}
    assert parse_ops_section(stdout) == flattened
    assert f"ir version: {model.ir_version}\n" in stdout


def test_inspect_text_shows_custom_domains(fusionopt, tmp_path):
    path = lib.save(LOSSLESS_MODELS["functions-and-custom-ops"](), tmp_path / "model.onnx")
    rc, stdout, _ = fusionopt("inspect", path)
    assert rc == lib.EXIT_OK
    assert parse_ops_section(stdout)[f"{CUSTOM_DOMAIN}::Mystery"] == 1
    assert f"function:   {FUNCTION_DOMAIN}:ScaledLeakyRelu" in stdout
    assert "Conv" not in stdout
