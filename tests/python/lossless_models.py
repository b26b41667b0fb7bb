"""Models that use the corners of the ONNX format the IR does not model itself: doc
strings, metadata, model-local functions, subgraphs reading outer-scope values, custom
ops with every attribute kind, training info, typed-field initializers."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fusionopt_testlib import float_input, make_model

CUSTOM_DOMAIN = "com.example.custom"
FUNCTION_DOMAIN = "com.example.functions"


def _weights():
    return numpy_helper.from_array(np.array([0.5, -1.0, 2.0, 0.25], np.float32), "w")


def doc_strings_model():
    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="leaky", doc_string="node doc", alpha=0.2)
    node.attribute[0].doc_string = "attribute doc"
    y = float_input("y", ["batch", 4])
    y.doc_string = "output doc"
    x = float_input("x", ["batch", 4])
    x.doc_string = "input doc"
    model = make_model([node], [x], [y], doc_string="graph doc")
    model.doc_string = "model doc"
    model.domain = "com.example"
    model.model_version = 42
    model.producer_version = "9.9.9"
    return model


def metadata_model():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [float_input("x", [4])],
                       [float_input("y", [4])])
    # Keys out of order and a repeated-looking key: the order in the file is kept.
    helper.set_model_props(model, {"zeta": "last", "alpha": "first", "unicode": "héllo ✓", "empty": ""})
    return model


def local_function_model():
    leaky = helper.make_node("LeakyRelu", ["scaled"], ["Y"])
    leaky.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="slope",
                                               type=onnx.AttributeProto.FLOAT))
    function = helper.make_function(
        FUNCTION_DOMAIN, "ScaledLeakyRelu", ["X", "S"], ["Y"],
        [helper.make_node("Mul", ["X", "S"], ["scaled"]), leaky],
        opset_imports=[helper.make_opsetid("", 17)], attributes=["slope"],
        doc_string="function doc")
    call = helper.make_node("ScaledLeakyRelu", ["x", "w"], ["y"], name="call",
                            domain=FUNCTION_DOMAIN, slope=0.1)
    model = make_model([call], [float_input("x", ["batch", 4])], [float_input("y", ["batch", 4])],
                       [_weights()], opsets=(("", 17), (FUNCTION_DOMAIN, 1)))
    model.functions.append(function)
    return model


def if_outer_scope_model():
    """Both branches read `x` and `w` from the enclosing graph."""
    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["then_y"], name="then_mul")], "then_branch", [],
        [float_input("then_y", ["batch", 4])])
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["x", "w"], ["else_y"], name="else_sub"),
         helper.make_node("Neg", ["else_y"], ["else_neg"], name="else_neg")], "else_branch", [],
        [float_input("else_neg", ["batch", 4])])
    node = helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_branch,
                            else_branch=else_branch)
    inputs = [float_input("x", ["batch", 4]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    return make_model([node], inputs, [float_input("y", ["batch", 4])], [_weights()])


def loop_model():
    """acc += w, `trip` times; the optional condition input is left empty."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Add", ["acc_in", "w"], ["acc_out"], name="accumulate"),
         helper.make_node("Cast", ["iteration"], ["iteration_f"], name="cast", to=TensorProto.FLOAT),
         helper.make_node("Mul", ["acc_out", "iteration_f"], ["scanned"], name="scan_value")],
        "body",
        [helper.make_tensor_value_info("iteration", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         float_input("acc_in", ["batch", 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         float_input("acc_out", ["batch", 4]), float_input("scanned", ["batch", 4])])
    node = helper.make_node("Loop", ["trip", "", "x"], ["acc", "scan"], name="loop", body=body)
    inputs = [helper.make_tensor_value_info("trip", TensorProto.INT64, []), float_input("x", ["batch", 4])]
    outputs = [float_input("acc", ["batch", 4]), float_input("scan", [None, "batch", 4])]
    return make_model([node], inputs, outputs, [_weights()])


def custom_op_model():
    """An op nobody knows, with every attribute kind, typed through value_info."""
    table = numpy_helper.from_array(np.arange(6, dtype=np.int32).reshape(2, 3), "table")
    mystery = helper.make_node(
        "Mystery", ["x", "w"], ["m"], name="mystery", domain=CUSTOM_DOMAIN,
        alpha=0.5, count=3, mode="fast", scales=[1.0, 2.5], axes=[0, -1], tags=["a", "bc"],
        table=table, tables=[table, table])
    mystery.attribute.append(helper.make_attribute("empty_ints", [], attr_type=onnx.AttributeProto.INTS))
    nodes = [mystery, helper.make_node("Relu", ["m"], ["y"], name="relu")]
    m_info = float_input("m", ["batch", 4])
    m_info.doc_string = "value_info doc"
    return make_model(nodes, [float_input("x", ["batch", 4])], [float_input("y", ["batch", 4])],
                      [_weights()], opsets=(("", 17), (CUSTOM_DOMAIN, 3)), value_info=[m_info])


def value_info_model():
    nodes = [helper.make_node("Add", ["x", "w"], ["sum"], name="add"),
             helper.make_node("Relu", ["sum"], ["relu"], name="relu"),
             helper.make_node("Neg", ["relu"], ["y"], name="neg")]
    # Declared out of topological order and with a symbol the inputs do not use.
    value_info = [float_input("relu", ["rows", 4]), float_input("sum", ["batch", 4])]
    return make_model(nodes, [float_input("x", ["batch", 4])], [float_input("y", ["batch", 4])],
                      [_weights()], value_info=value_info)


def training_info_model():
    model = make_model([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")],
                       [float_input("x", [4])], [float_input("y", [4])], [_weights()])
    training = onnx.TrainingInfoProto()
    training.algorithm.CopyFrom(helper.make_graph(
        [helper.make_node("Add", ["w", "w"], ["w_next"], name="step")], "algorithm", [],
        [float_input("w_next", [4])]))
    training.update_binding.append(onnx.StringStringEntryProto(key="w", value="w_next"))
    model.training_info.append(training)
    return model


def ir10_fields_model():
    """IR 10 additions: metadata on nodes and graphs, function overloads, value_info and
    attribute defaults inside functions, a documented initializer."""
    model = local_function_model()
    model.ir_version = 10
    function = model.functions[0]
    function.overload = "v2"
    function.value_info.append(float_input("scaled", ["batch", 4]))
    function.attribute_proto.append(helper.make_attribute("gain", 2.0))
    call = model.graph.node[0]
    call.overload = "v2"
    call.metadata_props.append(onnx.StringStringEntryProto(key="origin", value="layer3"))
    model.graph.metadata_props.append(onnx.StringStringEntryProto(key="stage", value="encoder"))
    model.graph.initializer[0].doc_string = "initializer doc"
    return model


def _gated_scale_v1():
    """Body with a nested If whose branch reads the function's values and refers to the
    function's attribute, a Constant with a tensor, and doc strings at every level."""
    then_leaky = helper.make_node("LeakyRelu", ["scaled"], ["then_y"], name="then_leaky",
                                  doc_string="branch node doc")
    then_leaky.attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="slope",
                                                    type=onnx.AttributeProto.FLOAT))
    then_branch = helper.make_graph([then_leaky], "then_branch", [], [float_input("then_y", ["batch", 4])],
                                    doc_string="branch doc")
    else_branch = helper.make_graph(
        [helper.make_node("Mul", ["scaled", "half"], ["else_y"], name="else_mul")], "else_branch", [],
        [float_input("else_y", ["batch", 4])])
    gate = helper.make_node("If", ["G"], ["Y"], name="gate", then_branch=then_branch,
                            else_branch=else_branch)
    gate.attribute[0].doc_string = "attribute doc"
    half = helper.make_node("Constant", [], ["half"], name="half",
                            value=numpy_helper.from_array(np.array([0.5], np.float32)))
    scale = helper.make_node("Mul", ["X", "S"], ["scaled"], name="scale", doc_string="body node doc")
    function = helper.make_function(
        FUNCTION_DOMAIN, "GatedScale", ["X", "S", "G"], ["Y"], [scale, half, gate],
        opset_imports=[helper.make_opsetid("", 17)], attributes=["slope"],
        doc_string="gated scale, first overload")
    function.overload = "v1"
    function.attribute_proto.append(helper.make_attribute("gain", 2.0, doc_string="unused default"))
    function.value_info.extend([float_input("scaled", ["batch", 4]), float_input("X", ["batch", 4])])
    function.metadata_props.append(onnx.StringStringEntryProto(key="origin", value="tests"))
    return function


def _gated_scale_v2():
    """The second overload: calls another model-local function, passing its attribute on."""
    call = helper.make_node("ScaledLeakyRelu", ["X", "S"], ["Y"], name="inner_call", domain=FUNCTION_DOMAIN)
    call.attribute.append(onnx.AttributeProto(name="slope", ref_attr_name="slope",
                                              type=onnx.AttributeProto.FLOAT))
    function = helper.make_function(
        FUNCTION_DOMAIN, "GatedScale", ["X", "S", "G"], ["Y"], [call],
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(FUNCTION_DOMAIN, 1)],
        attributes=["slope"])
    function.overload = "v2"
    return function


def function_overloads_model():
    """IR 10: two overloads of one function with every FunctionProto field, and calls of both."""
    model = local_function_model()
    model.ir_version = 10
    model.functions.extend([_gated_scale_v1(), _gated_scale_v2()])
    calls = [helper.make_node("GatedScale", ["x", "w", "cond"], [f"gated_{overload}"], name=f"gated_{overload}",
                              domain=FUNCTION_DOMAIN, slope=0.2)
             for overload in ("v1", "v2")]
    for call, overload in zip(calls, ("v1", "v2")):
        call.overload = overload
    model.graph.node.extend(calls)
    model.graph.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    model.graph.output.extend([float_input("gated_v1", ["batch", 4]), float_input("gated_v2", ["batch", 4])])
    return model


def non_tensor_types_model():
    """Sequence-typed values, declared through value_info."""
    sequence = helper.make_tensor_sequence_value_info("items", TensorProto.FLOAT, ["n"])
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["items"], name="pack"),
             helper.make_node("SequenceAt", ["items", "index"], ["y"], name="pick")]
    inputs = [float_input("x", ["n"]), helper.make_tensor_value_info("index", TensorProto.INT64, [])]
    return make_model(nodes, inputs, [float_input("y", ["n"])], value_info=[sequence])


def small_types_model():
    """bfloat16, float8 and packed int4 initializers, stored as raw bytes."""
    tensors = [
        TensorProto(name="bf16", data_type=TensorProto.BFLOAT16, dims=[2], raw_data=b"\x80\x3f\x00\x40"),
        TensorProto(name="f8", data_type=TensorProto.FLOAT8E4M3FN, dims=[3], raw_data=b"\x38\x40\xb8"),
        TensorProto(name="i4", data_type=TensorProto.INT4, dims=[3], raw_data=b"\x21\x03"),
    ]
    nodes = [helper.make_node("Identity", [t.name], [f"{t.name}_out"]) for t in tensors]
    outputs = [helper.make_tensor_value_info(f"{t.name}_out", t.data_type, list(t.dims)) for t in tensors]
    return make_model(nodes, [], outputs, tensors, opsets=(("", 21),), ir_version=10)


def functions_and_custom_ops_model():
    """A custom op, a local function, doc strings and metadata side by side."""
    model = custom_op_model()
    function_model = local_function_model()
    model.functions.extend(function_model.functions)
    model.opset_import.append(helper.make_opsetid(FUNCTION_DOMAIN, 1))
    graph = model.graph
    graph.node.append(helper.make_node("ScaledLeakyRelu", ["y", "w"], ["f"], name="call",
                                       domain=FUNCTION_DOMAIN, slope=0.3))
    graph.output.append(float_input("f", ["batch", 4]))
    graph.doc_string = "graph doc"
    model.doc_string = "model doc"
    helper.set_model_props(model, {"author": "tests", "purpose": "everything"})
    return model


def everything_model():
    """Every feature above in one model, so they also survive side by side."""
    model = functions_and_custom_ops_model()
    graph = model.graph
    graph.node.extend(if_outer_scope_model().graph.node)
    graph.node[-1].output[0] = "y_if"
    graph.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    graph.output.append(float_input("y_if", ["batch", 4]))
    model.training_info.extend(training_info_model().training_info)
    return model


LOSSLESS_MODELS = {
    "doc-strings": doc_strings_model,
    "metadata": metadata_model,
    "local-function": local_function_model,
    "if-outer-scope": if_outer_scope_model,
    "loop": loop_model,
    "custom-op": custom_op_model,
    "value-info": value_info_model,
    "training-info": training_info_model,
    "ir10-fields": ir10_fields_model,
    "function-overloads": function_overloads_model,
    "non-tensor-types": non_tensor_types_model,
    "small-types": small_types_model,
    "functions-and-custom-ops": functions_and_custom_ops_model,
    "everything": everything_model,
}


# ---------------------------------------------------------------- typed fields

def typed_field_initializers():
    """Initializers stored in the typed repeated fields instead of raw_data."""
    f16 = np.array([1.0, -0.5, 65504.0, 0.0], np.float16)
    return [
        helper.make_tensor("f32", TensorProto.FLOAT, [2, 2], [1.5, -2.0, 3.25, float("inf")]),
        helper.make_tensor("f32_scalar", TensorProto.FLOAT, [], [7.0]),
        helper.make_tensor("f64", TensorProto.DOUBLE, [3], [1e300, -0.0, 2.5]),
        helper.make_tensor("i64", TensorProto.INT64, [2, 2], [1, -2, 2**40, -(2**62)]),
        helper.make_tensor("i32", TensorProto.INT32, [3], [-(2**31), 0, 2**31 - 1]),
        # float16 in int32_data: one bit pattern per element.
        onnx.TensorProto(name="f16", data_type=TensorProto.FLOAT16, dims=[4],
                         int32_data=f16.view(np.uint16).astype(np.int32).tolist()),
        helper.make_tensor("i8", TensorProto.INT8, [3], [-128, 0, 127]),
        helper.make_tensor("u8", TensorProto.UINT8, [2], [0, 255]),
        helper.make_tensor("flags", TensorProto.BOOL, [3], [True, False, True]),
        helper.make_tensor("u64", TensorProto.UINT64, [2], [0, 2**64 - 1]),
        helper.make_tensor("words", TensorProto.STRING, [3], [b"hello", b"", "héllo".encode()]),
    ]


def typed_fields_model():
    initializers = typed_field_initializers()
    nodes, outputs = [], []
    for tensor in initializers:
        nodes.append(helper.make_node("Identity", [tensor.name], [f"{tensor.name}_out"]))
        outputs.append(helper.make_tensor_value_info(f"{tensor.name}_out", tensor.data_type,
                                                     list(tensor.dims)))
    return make_model(nodes, [], outputs, initializers)


def lossless_params():
    """LOSSLESS_MODELS as pytest params, named by their keys."""
    return [pytest.param(build, id=name) for name, build in LOSSLESS_MODELS.items()]
