"""The check of `--report`'s fusion records (fusion_records.py) that test_optimize_models.py runs on
every model at O2 and O3: it accepts fuse-horizontal-elementwise merges, a kind no model in
models/ or ../shared/models produces at the default target, and it refuses reports and models
that do not describe each other."""
import json

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import fusion_records
import fusionopt_testlib as lib


@pytest.fixture(scope="module")
def pass_levels(fusionopt):
    rc, stdout, stderr = fusionopt("--list-passes")
    assert rc == lib.EXIT_OK, stderr
    return {row[0]: row[1] for row in (line.split("\t") for line in stdout.splitlines()[1:])}


def optimize(fusionopt, path, level, folder):
    out, report = folder / f"{path.stem}.O{level}.onnx", folder / f"{path.stem}.O{level}.json"
    rc, _, stderr = fusionopt(path, f"-O{level}", "-o", out, "--check-each-pass", "--report", report)
    assert rc == lib.EXIT_OK, stderr
    return onnx.load(str(out)), json.loads(report.read_text())


# ---------------------------------------------------------------- horizontal elementwise merges

def two_lone_ops():
    """a = Sigmoid(x), b = Mul(y, s): two single-op kernels over [B, 64], nothing for O2 to fuse."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["a"], name="sig"), helper.make_node("Mul", ["y", "s"], ["b"], name="mul")]
    scale = numpy_helper.from_array(np.linspace(-1, 1, 64, dtype=np.float32), "s")
    return lib.make_model(nodes, [lib.float_input(name, ["B", 64]) for name in "xy"],
                          [lib.float_input(name, ["B", 64]) for name in "ab"], [scale])


def two_fused_chains_and_a_lone_op():
    """a = Relu(x * 2 + 1), b = Exp(-y), c = Sigmoid(z): O2 fuses the two chains (the first with
    scalar constants in its body), O3 merges them with the Sigmoid by inlining their bodies."""
    nodes = [helper.make_node("Mul", ["x", "two"], ["t"], name="mul"),
             helper.make_node("Add", ["t", "one"], ["u"], name="add"),
             helper.make_node("Relu", ["u"], ["a"], name="relu"),
             helper.make_node("Neg", ["y"], ["v"], name="neg"),
             helper.make_node("Exp", ["v"], ["b"], name="exp"),
             helper.make_node("Sigmoid", ["z"], ["c"], name="sig")]
    constants = [numpy_helper.from_array(np.array(value, dtype=np.float32), name) for name, value in
                 (("two", 2.0), ("one", 1.0))]
    return lib.make_model(nodes, [lib.float_input(name, ["B", 64]) for name in "xyz"],
                          [lib.float_input(name, ["B", 64]) for name in "abc"], constants)


def assert_merged_and_described(fusionopt, pass_levels, tmp_path, model, replaced):
    path = lib.save(model, tmp_path / "model.onnx")
    out, report = optimize(fusionopt, path, 3, tmp_path)
    onnx.checker.check_model(out, full_check=True)
    merges = [fusion for fusion in report["fusions"] if fusion["kind"] == "horizontal_elementwise"]
    assert [fusion["replaced"] for fusion in merges] == [replaced]
    assert [(node.domain, node.op_type) for node in out.graph.node] == [("ai.fusionopt", merges[0]["function"])]

    level_one, _ = optimize(fusionopt, path, 1, tmp_path)
    fusion_records.assert_fusions_describe_the_graph(report, pass_levels, 3, model, out, level_one)

    inputs = lib.make_inputs(model, seed=3)
    optimized_path = lib.save(out, tmp_path / "optimized.onnx")
    lib.assert_outputs_close(lib.onnxruntime_outputs(optimized_path, inputs), lib.onnxruntime_outputs(path, inputs),
                             1e-6, 1e-7)


def test_a_merge_of_lone_elementwise_ops_is_described(fusionopt, pass_levels, tmp_path):
    assert_merged_and_described(fusionopt, pass_levels, tmp_path, two_lone_ops(), ["sig", "mul"])


def test_a_merge_that_inlines_fused_bodies_names_their_original_nodes(fusionopt, pass_levels, tmp_path):
    assert_merged_and_described(fusionopt, pass_levels, tmp_path, two_fused_chains_and_a_lone_op(),
                                ["mul", "add", "relu", "neg", "exp", "sig"])


# ---------------------------------------------------------------- reports that do not describe the model

def first(report, kind):
    return next(fusion for fusion in report["fusions"] if fusion["kind"] == kind)


def rename_merged_contraction(report, out):
    first(report, "horizontal_MatMul")["node"] = "no such node"


def drop_a_merged_member(report, out):
    del first(report, "horizontal_MatMul")["replaced"][-2:]


def swap_two_replaced_names(report, out):
    replaced = first(report, "layernorm")["replaced"]  # an Add, then a ReduceMean
    replaced[0], replaced[1] = replaced[1], replaced[0]


def forget_a_horizontal_merge(report, out):
    report["fusions"].remove(first(report, "horizontal_MatMul"))


def call_attention_a_softmax(report, out):
    first(report, "attention")["kind"] = "softmax"


def claim_a_node_still_in_the_graph(report, out):
    standard = next(node.name for node in out.graph.node if node.domain == "")
    first(report, "horizontal_MatMul")["replaced"].append(standard)


def keep_an_uncalled_function(report, out):
    copy = onnx.FunctionProto()
    copy.CopyFrom(out.functions[0])
    copy.name = "Uncalled"
    out.functions.append(copy)


def list_a_node_twice(report, out):
    first(report, "layernorm")["replaced"].append(first(report, "contraction_epilogue")["replaced"][0])


def claim_no_shape_reads_rewired(report, out):
    for entry in report["passes"]:
        if entry["pass"] == "fuse-attention":
            entry["counters"]["shape_reads_rewired"] = 0


CORRUPTIONS = [
    pytest.param("bert_style", 3, rename_merged_contraction, "the merged contraction is missing", id="merged-node-renamed"),
    pytest.param("bert_style", 3, drop_a_merged_member, "is not read by one Split of 2 outputs", id="member-dropped"),
    pytest.param("bert_style", 3, swap_two_replaced_names, "was a", id="replaced-out-of-order"),
    pytest.param("bert_style", 3, forget_a_horizontal_merge, "neither original nor created by a merge",
                 id="merge-unreported"),
    pytest.param("bert_style", 3, call_attention_a_softmax, "(fuse-attention, softmax)", id="wrong-kind"),
    pytest.param("bert_style", 3, claim_a_node_still_in_the_graph, "is still in the optimized model",
                 id="replaced-node-survives"),
    pytest.param("bert_style", 2, keep_an_uncalled_function, "functions nothing calls", id="uncalled-function"),
    pytest.param("bert_style", 2, list_a_node_twice, "replaced names for a body of", id="node-listed-twice"),
    pytest.param("gpt2_style", 3, claim_no_shape_reads_rewired, "new Shape nodes", id="shape-reads-unreported"),
]


@pytest.mark.parametrize("model_name, level, corrupt, message", CORRUPTIONS)
def test_a_report_that_does_not_describe_the_model_is_refused(fusionopt, pass_levels, tmp_path, model_name, level,
                                                              corrupt, message):
    path = lib.PROJECT_MODELS / f"{model_name}.onnx"
    original = onnx.load(str(path))
    out, report = optimize(fusionopt, path, level, tmp_path)
    level_one = optimize(fusionopt, path, 1, tmp_path)[0]
    # As written, the report describes the model.
    fusion_records.assert_fusions_describe_the_graph(report, pass_levels, level, original, out, level_one)

    corrupt(report, out)

    with pytest.raises(AssertionError) as refused:
        fusion_records.assert_fusions_describe_the_graph(report, pass_levels, level, original, out, level_one)
    assert message in str(refused.value)


def test_an_o3_record_in_an_o2_report_is_refused(fusionopt, pass_levels, tmp_path):
    path = lib.PROJECT_MODELS / "bert_style.onnx"
    out, report = optimize(fusionopt, path, 3, tmp_path)
    with pytest.raises(AssertionError, match="fuse-horizontal-contractions"):
        fusion_records.assert_fusions_describe_the_graph(report, pass_levels, 2, onnx.load(str(path)), out,
                                                         optimize(fusionopt, path, 1, tmp_path)[0])
