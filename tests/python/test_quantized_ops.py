"""Issue 43, item 1: every quantization op on the CPU runtime, checked against an independent
oracle. The com.microsoft ops onnxruntime's quantizer writes run against onnxruntime itself
(optimizations off, so each op runs its own kernel); ONNX's QuantizeLinear and
DequantizeLinear in their newest forms (blocked, 4- and 2-bit, float8, 16-bit, output_dtype)
run against ONNX's reference evaluator on ONNX's own node test cases.

A quantized output may differ from the oracle's by one quantization step where the two
compute the same real value in a different order of float operations and it lands on a
rounding tie; float outputs agree to float rounding.
"""
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import fusionopt_testlib as lib

fusionopt = lib.import_fusionopt()
MS = "com.microsoft"


def model_of(nodes, inputs, outputs, initializers=(), opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model


def run_both(model, feeds):
    data = model.SerializeToString()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, feeds)
    actual = fusionopt.InferenceSession(data).run(None, feeds)
    return actual, expected


def assert_within_one_step(actual, expected, what=""):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    difference = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
    assert difference.max(initial=0) <= 1, f"{what}: {difference.max()} steps apart"
    # Ties are rare: most values must agree exactly.
    assert np.count_nonzero(difference) <= max(1, difference.size // 50), f"{what}: {np.count_nonzero(difference)} differ"


def tensor_input(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


RNG = np.random.default_rng(43)


def uint8(shape):
    return RNG.integers(0, 256, size=shape, dtype=np.uint8)


def int8(shape):
    return RNG.integers(-128, 128, size=shape).astype(np.int8)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_binary_ops_broadcast_like_onnxruntime(op, dtype):
    elem = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    zero = (lambda v: np.array(v, dtype)) if dtype == np.uint8 else (lambda v: np.array(v - 128, dtype))
    model = model_of([helper.make_node(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain=MS)],
                     [tensor_input("a", elem, [2, 3, 8]), tensor_input("b", elem, [3, 1])],
                     [tensor_input("c", elem, None)],
                     [init("as", np.float32(0.02)), init("az", zero(120)), init("bs", np.float32(0.05)),
                      init("bz", zero(130)), init("cs", np.float32(0.07 if op == "QLinearAdd" else 0.3)),
                      init("cz", zero(128))])
    make = uint8 if dtype == np.uint8 else int8
    feeds = {"a": make((2, 3, 8)), "b": make((3, 1))}
    (actual,), (expected,) = run_both(model, feeds)
    assert_within_one_step(actual, expected, op)


@pytest.mark.parametrize("op,attributes", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1})])
def test_qlinear_unary_ops_like_onnxruntime(op, attributes):
    model = model_of([helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, **attributes)],
                     [tensor_input("x", TensorProto.UINT8, [4, 64])], [tensor_input("y", TensorProto.UINT8, None)],
                     [init("xs", np.float32(0.05)), init("xz", np.uint8(128)), init("ys", np.float32(1 / 255)),
                      init("yz", np.uint8(0 if op == "QLinearSigmoid" else 100))])
    (actual,), (expected,) = run_both(model, {"x": uint8((4, 64))})
    assert_within_one_step(actual, expected, op)


def test_qlinear_softmax_like_onnxruntime():
    model = model_of([helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, axis=-1,
                                       opset=13)],
                     [tensor_input("x", TensorProto.UINT8, [2, 4, 16])], [tensor_input("y", TensorProto.UINT8, None)],
                     [init("xs", np.float32(0.1)), init("xz", np.uint8(128)), init("ys", np.float32(1 / 256)),
                      init("yz", np.uint8(0))])
    (actual,), (expected,) = run_both(model, {"x": uint8((2, 4, 16))})
    assert_within_one_step(actual, expected, "QLinearSoftmax")


@pytest.mark.parametrize("attributes", [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                                        dict(kernel_shape=[2, 2], count_include_pad=1, pads=[0, 0, 1, 1])])
def test_qlinear_average_pool_like_onnxruntime(attributes):
    model = model_of([helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                                       **attributes)],
                     [tensor_input("x", TensorProto.UINT8, [1, 3, 7, 7])], [tensor_input("y", TensorProto.UINT8, None)],
                     [init("xs", np.float32(0.04)), init("xz", np.uint8(10)), init("ys", np.float32(0.03)),
                      init("yz", np.uint8(5))])
    (actual,), (expected,) = run_both(model, {"x": uint8((1, 3, 7, 7))})
    assert_within_one_step(actual, expected, "QLinearAveragePool")


@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool_like_onnxruntime(channels_last):
    shape = [2, 5, 5, 6] if channels_last else [2, 6, 5, 5]
    model = model_of([helper.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                                       channels_last=channels_last)],
                     [tensor_input("x", TensorProto.INT8, shape)], [tensor_input("y", TensorProto.INT8, None)],
                     [init("xs", np.float32(0.04)), init("xz", np.int8(-3)), init("ys", np.float32(0.01)),
                      init("yz", np.int8(4))])
    (actual,), (expected,) = run_both(model, {"x": int8(shape)})
    assert_within_one_step(actual, expected, "QLinearGlobalAveragePool")


def test_qlinear_concat_requantizes_each_input_like_onnxruntime():
    model = model_of([helper.make_node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"],
                                       ["y"], domain=MS, axis=1)],
                     [tensor_input("a", TensorProto.UINT8, [2, 3, 4]), tensor_input("b", TensorProto.UINT8, [2, 1, 4]),
                      tensor_input("c", TensorProto.UINT8, [2, 2, 4])],
                     [tensor_input("y", TensorProto.UINT8, None)],
                     [init("ys", np.float32(0.05)), init("yz", np.uint8(128)), init("as", np.float32(0.02)),
                      init("az", np.uint8(100)), init("bs", np.float32(0.1)), init("bz", np.uint8(128))])
    feeds = {"a": uint8((2, 3, 4)), "b": uint8((2, 1, 4)), "c": uint8((2, 2, 4))}
    (actual,), (expected,) = run_both(model, feeds)
    assert_within_one_step(actual, expected, "QLinearConcat")
    # The third input shares the output's parameters: its bytes pass through unchanged.
    assert np.array_equal(actual[:, 4:], feeds["c"])


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1)])
@pytest.mark.parametrize("quantized_output", [False, True])
def test_qgemm_like_onnxruntime(trans_a, trans_b, quantized_output):
    m, k, n = 5, 37, 6
    a_shape = [k, m] if trans_a else [m, k]
    b = int8([n, k] if trans_b else [k, n])
    inputs = ["a", "as", "az", "b", "bs", "bz", "c"] + (["ys", "yz"] if quantized_output else [])
    initializers = [init("as", np.float32(0.03)), init("az", np.uint8(118)), init("b", b),
                    init("bs", (RNG.random(n) * 0.01 + 0.001).astype(np.float32)), init("bz", np.zeros(n, np.int8)),
                    init("c", RNG.integers(-5000, 5000, size=n).astype(np.int32))]
    if quantized_output:
        initializers += [init("ys", np.float32(0.2)), init("yz", np.uint8(90))]
    out_type = TensorProto.UINT8 if quantized_output else TensorProto.FLOAT
    model = model_of([helper.make_node("QGemm", inputs, ["y"], domain=MS, transA=trans_a, transB=trans_b, alpha=0.5)],
                     [tensor_input("a", TensorProto.UINT8, a_shape)], [tensor_input("y", out_type, None)], initializers)
    (actual,), (expected,) = run_both(model, {"a": uint8(a_shape)})
    if quantized_output:
        assert_within_one_step(actual, expected, "QGemm")
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
def test_dynamic_quantize_matmul_and_matmul_integer_to_float_like_onnxruntime(b_type):
    k, n = 48, 10
    b = int8((k, n)) if b_type == np.int8 else uint8((k, n))
    zero = np.zeros(n, b_type) if b_type == np.int8 else np.full(n, 128, np.uint8)
    elem = TensorProto.INT8 if b_type == np.int8 else TensorProto.UINT8
    model = model_of([helper.make_node("DynamicQuantizeMatMul", ["x", "b", "bs", "bz", "bias"], ["y"], domain=MS),
                      helper.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "bz", "bias"], ["z"],
                                       domain=MS)],
                     [tensor_input("x", TensorProto.FLOAT, [3, 4, k]), tensor_input("a", TensorProto.UINT8, [3, 4, k])],
                     [tensor_input("y", TensorProto.FLOAT, None), tensor_input("z", TensorProto.FLOAT, None)],
                     [init("b", b), init("bs", (RNG.random(n) * 0.02).astype(np.float32)), init("bz", zero),
                      init("bias", RNG.standard_normal(n).astype(np.float32)), init("as", np.float32(0.04)),
                      init("az", np.uint8(125))])
    # The weights and their zero points are the 8-bit type this case is about.
    weights = {tensor.name: tensor.data_type for tensor in model.graph.initializer}
    assert (weights["b"], weights["bz"]) == (elem, elem), (weights["b"], weights["bz"], elem)
    feeds = {"x": RNG.standard_normal((3, 4, k)).astype(np.float32), "a": uint8((3, 4, k))}
    actual, expected = run_both(model, feeds)
    assert len(actual) == len(expected) == 2, (len(actual), len(expected))
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype == np.float32 and got.shape == want.shape == (3, 4, n), (got.dtype, got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def pack_nbits(q, bits):
    """[N, K] values of `bits` bits into onnxruntime's [N, K/block, blob] bytes (low bits first)."""
    per_byte = 8 // bits
    n, k = q.shape
    flat = q.reshape(n, k // per_byte, per_byte).astype(np.uint16)
    packed = np.zeros((n, k // per_byte), np.uint16)
    for j in range(per_byte):
        packed |= flat[:, :, j] << (j * bits)
    return packed.astype(np.uint8)


@pytest.mark.parametrize("bits,block,rows", [(4, 32, 1), (4, 32, 19), (4, 128, 3), (8, 16, 7), (2, 64, 1)])
@pytest.mark.parametrize("zeros", ["none", "packed", "float"])
def test_matmul_nbits_like_onnxruntime(bits, block, rows, zeros):
    if bits == 8 and zeros == "float":
        pytest.skip("onnxruntime's CPU MatMulNBits refuses 8-bit weights with float zero points")
    k, n = 256, 72
    blocks = k // block
    q = RNG.integers(0, 1 << bits, size=(n, k))
    b = pack_nbits(q, bits).reshape(n, blocks, block * bits // 8)
    scales = (RNG.random((n, blocks)) * 0.02 + 0.001).astype(np.float32)
    inputs = ["a", "b", "scales"]
    initializers = [init("b", b), init("scales", scales.reshape(-1)), init("bias", RNG.standard_normal(n).astype(np.float32))]
    if zeros == "packed":
        zero_values = RNG.integers(0, 1 << bits, size=(n, blocks))
        per_byte = 8 // bits
        padded = np.zeros((n, -(-blocks // per_byte) * per_byte), np.int64)
        padded[:, :blocks] = zero_values
        initializers.append(init("zeros", pack_nbits(padded, bits).reshape(-1)))
        inputs.append("zeros")
    elif zeros == "float":
        initializers.append(init("zeros", (RNG.random(n * blocks) * (1 << bits)).astype(np.float32)))
        inputs.append("zeros")
    else:
        inputs.append("")
    inputs += ["", "bias"]
    model = model_of([helper.make_node("MatMulNBits", inputs, ["y"], domain=MS, K=k, N=n, bits=bits, block_size=block)],
                     [tensor_input("a", TensorProto.FLOAT, [rows, k])], [tensor_input("y", TensorProto.FLOAT, None)],
                     initializers)
    (actual,), (expected,) = run_both(model, {"a": RNG.standard_normal((rows, k)).astype(np.float32)})
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)


def test_matmul_nbits_refuses_a_packed_weight_of_the_wrong_size(fusionopt, tmp_path):
    model = model_of([helper.make_node("MatMulNBits", ["a", "b", "scales"], ["y"], domain=MS, K=64, N=4, bits=4,
                                       block_size=32)],
                     [tensor_input("a", TensorProto.FLOAT, [1, 64])], [tensor_input("y", TensorProto.FLOAT, None)],
                     [init("b", np.zeros((4, 2, 8), np.uint8)), init("scales", np.ones(8, np.float32))])
    path = lib.save(model, tmp_path / "nbits.onnx")
    np.save(tmp_path / "a.npy", np.ones((1, 64), np.float32))
    rc, _, stderr = fusionopt("run", path, "--input", f"a={tmp_path / 'a.npy'}")
    assert rc == lib.EXIT_INVALID, stderr
    assert "MatMulNBits B must be uint8 [N, K/block, block*bits/8] = [4, 2, 16]" in stderr
    assert stderr.count("\n") <= 1


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
@pytest.mark.parametrize("dtype", [np.uint16, np.int16])
def test_onnxruntime_domain_quantize_ops_16_bit_like_onnxruntime(op, dtype):
    elem = TensorProto.UINT16 if dtype == np.uint16 else TensorProto.INT16
    if op == "QuantizeLinear":
        inputs, x = [tensor_input("x", TensorProto.FLOAT, [4, 6])], RNG.standard_normal((4, 6)).astype(np.float32) * 100
        out = tensor_input("y", elem, None)
    else:
        x = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, size=(4, 6)).astype(dtype)
        inputs, out = [tensor_input("x", elem, [4, 6])], tensor_input("y", TensorProto.FLOAT, None)
    model = model_of([helper.make_node(op, ["x", "s", "z"], ["y"], domain=MS, axis=1)], inputs, [out],
                     [init("s", (RNG.random(6) * 0.01 + 0.001).astype(np.float32)),
                      init("z", np.array([0, 1, 100, 7, 3, 2], dtype))])
    (actual,), (expected,) = run_both(model, {"x": x})
    if op == "QuantizeLinear":
        assert_within_one_step(actual, expected, op)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-6)


# ---------------------------------------------------------------- ONNX's own node test cases

QUANTIZATION_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
                    "QLinearMatMul", "QLinearConv"}


def onnx_node_cases():
    """ONNX's backend node test cases of the quantization ops (their generators ship with the
    onnx package; the Debian test data the conformance driver reads stops at ONNX 1.12, before
    blocked, 4-bit and float8 quantization)."""
    from onnx.backend.test.case.node import collect_testcases
    # The generators of other ops divide by zero on purpose (inf results) and say so.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        every_case = collect_testcases()
    cases = []
    for case in every_case:
        ops = {node.op_type for node in case.model.graph.node} if case.model else set()
        if ops & QUANTIZATION_OPS and ops <= QUANTIZATION_OPS | {"Constant"}:
            cases.append(pytest.param(case, id=case.name))
    return cases


ONNX_NODE_CASES = onnx_node_cases()
# onnx 1.23's generators give 42 such cases (QuantizeLinear and DequantizeLinear in every form,
# DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv); fewer means the
# collection lost some, which an empty or shorter parametrization would not say.
MIN_ONNX_NODE_CASES = 42


def test_the_onnx_node_cases_cover_every_quantization_op():
    assert len(ONNX_NODE_CASES) >= MIN_ONNX_NODE_CASES, [param.id for param in ONNX_NODE_CASES]
    covered = {node.op_type for param in ONNX_NODE_CASES for node in param.values[0].model.graph.node}
    assert QUANTIZATION_OPS <= covered, QUANTIZATION_OPS - covered


def as_array(value):
    """A data set's value: the test generators give exotic types as TensorProtos."""
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


@pytest.mark.parametrize("case", ONNX_NODE_CASES)
def test_onnx_node_cases_match_the_reference(case):
    model = case.model
    assert case.data_sets, case.name
    for inputs, outputs in case.data_sets:
        assert len(inputs) == len(model.graph.input), (len(inputs), len(model.graph.input))
        feeds = {value.name: as_array(array) for value, array in zip(model.graph.input, inputs)}
        actual = fusionopt.InferenceSession(model.SerializeToString()).run(None, feeds)
        assert len(actual) == len(outputs) == len(model.graph.output), (len(actual), len(outputs))
        for got, want in zip(actual, outputs):
            want = as_array(want)
            assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
            if want.dtype in (np.float32, np.float16, np.float64):
                np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-6)
            else:  # integers and minifloats: the same values (NaN where the reference has NaN)
                np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
