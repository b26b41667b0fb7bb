"""Issue 43: the quantized corpus — real exports quantized by onnxruntime's own quantizer
(models/real/quantize.py: QDQ static per-channel, QOperator, dynamic int8, 4-bit MatMulNBits
and its int4 QDQ form) — optimized at every level and run, in fusionopt's runtime and in ORT,
against ORT's reference: ORT with graph optimizations off, which runs every Q/DQ as written.

Tolerance: quantization turns a float's last-bit difference into a whole quantization step
wherever a value sits on a rounding boundary, so two correct int8 engines differ by a step or
two of each quantized tensor, and that carries to the outputs. An output may differ from the
reference by QUANTIZED_STEPS steps of its 8-bit range ((max - min) / 255), or by twice what
ORT's own int8 kernels (ORT ENABLE_ALL on the quantized original) differ, whichever is larger;
a wrong scale, zero point or layout moves an output by a large part of its range.

The same checks run on the full-size quantized corpus on request (it is not committed: made by
models/real/quantize.py --full after export.py --full; minutes per model, so not in `make test`):

    FUSIONOPT_QUANTIZED_CORPUS=models/bench/real/quantized FUSIONOPT_BIN=build/fusionopt \
        .venv/bin/python -m pytest tests/python/test_quantized_corpus.py -k "O3 or O0"
"""
import collections
import os
import json
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import fusionopt_testlib as lib

sys.path.insert(0, str(lib.REPO_ROOT / "models" / "real"))
import corpus  # noqa: E402

ENTRIES = corpus.load(lib.REPO_ROOT / os.environ["FUSIONOPT_QUANTIZED_CORPUS"] if "FUSIONOPT_QUANTIZED_CORPUS" in os.environ
                      else corpus.FIXTURES / "quantized")
LEVELS = [0, 1, 2, 3]
QUANTIZED_STEPS = 2


def params():
    if not ENTRIES:
        return [pytest.param(None, id="no-fixtures",
                             marks=pytest.mark.skip(reason="models/real/fixtures/quantized/manifest.json is missing"))]
    return [pytest.param(entry, id=entry.path.stem) for entry in ENTRIES]


session = lib.ort_session


def allowed_difference(expected, ort_int8):
    """Per output: QUANTIZED_STEPS steps of its 8-bit range, or twice ORT's own int8 deviation."""
    expected = np.asarray(expected, np.float64)
    span = float(expected.max() - expected.min()) if expected.size else 0.0
    ort_deviation = float(np.abs(np.asarray(ort_int8, np.float64) - expected).max()) if expected.size else 0.0
    return max(QUANTIZED_STEPS * span / 255, 2 * ort_deviation)


def assert_within_quantization(actual, expected, ort_int8, what):
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    for index, (a, e, o) in enumerate(zip(actual, expected, ort_int8)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape and a.dtype == e.dtype, f"{what} output {index}: {a.dtype}{a.shape} vs {e.dtype}{e.shape}"
        assert np.isfinite(a.astype(np.float64)).all() == np.isfinite(e.astype(np.float64)).all()
        difference = float(np.abs(a.astype(np.float64) - e.astype(np.float64)).max(initial=0))
        allowed = allowed_difference(e, o)
        assert difference <= allowed, f"{what} output {index}: off by {difference:.3g}, at most {allowed:.3g} allowed"


@pytest.fixture(scope="module")
def reference():
    cache = {}

    def outputs(entry):
        if entry.name not in cache:
            feeds = entry.feeds()
            expected = session(entry.path).run(None, feeds)
            ort_int8 = session(entry.path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, feeds)
            # The fixtures must compute something: a degenerate output hides every error.
            assert all(np.ptp(np.asarray(e, np.float64)) > 0 for e in expected), entry.name
            cache[entry.name] = (feeds, expected, ort_int8)
        return cache[entry.name]

    return outputs


@pytest.fixture(scope="module")
def optimized(fusionopt, tmp_path_factory):
    return lib.corpus_optimizer(fusionopt, tmp_path_factory.mktemp("quantized"))


@pytest.mark.parametrize("level", LEVELS, ids=[f"O{level}" for level in LEVELS])
@pytest.mark.parametrize("entry", params())
def test_quantized_export_optimizes_and_runs_like_ort(optimized, reference, fusionopt, tmp_path, entry, level):
    path, _ = optimized(entry, level)
    onnx.checker.check_model(str(path), full_check=True)
    feeds, expected, ort_int8 = reference(entry)
    actual = lib.fusionopt_arrays(fusionopt, path, feeds, tmp_path, "--threads", "2")
    assert_within_quantization(actual, expected, ort_int8, f"fusionopt's runtime on -O{level}")
    assert_within_quantization(session(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, feeds), expected,
                               ort_int8, f"ORT on -O{level}")


@pytest.mark.parametrize("entry", params())
def test_kernels_never_grow_with_the_level(optimized, entry):
    launches = [optimized(entry, level)[1]["estimated_kernel_launches"] for level in LEVELS]
    assert launches == sorted(launches, reverse=True), f"kernels by level O0..O3: {launches}"


@pytest.mark.parametrize("entry", params())
def test_the_int8_weights_stay_integer(optimized, entry):
    """No level turns the integer weights back into float: the -O3 file is no larger than the
    quantized original (a dequantized copy of the weights would make it about four times so)."""
    for level in LEVELS:
        path, _ = optimized(entry, level)
        assert path.stat().st_size <= entry.path.stat().st_size * 1.05, f"-O{level}"


DYNAMIC = [entry for entry in ENTRIES if entry.info["form"] == "dynamic"]


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.path.stem) for e in DYNAMIC])
def test_dynamic_quantization_fuses_every_projection(optimized, entry):
    """Every MatMulInteger/ConvInteger of a dynamically quantized export runs inside a fused integer
    kernel at -O3, and a transformer keeps one fused attention per layer, as its float export does."""
    _, info = optimized(entry, 3)
    standard = info["op_histogram"].get("", {})
    assert "MatMulInteger" not in standard and "ConvInteger" not in standard, standard
    fused = info["op_histogram"].get("ai.fusionopt", {})
    assert any(name.startswith("FusedDynamicQ") for name in fused), fused
    if entry.info.get("attention") and "layers" in entry.info:  # transformers, ViT included
        attention = sum(count for name, count in fused.items() if name.startswith("FusedAttention"))
        assert attention == entry.info["layers"], fused


def test_the_manifest_records_every_fixture_and_its_form():
    assert {entry.info["form"] for entry in ENTRIES} == {"qdq", "qoperator", "dynamic", "nbits", "int4qdq"}
    for entry in ENTRIES:
        assert entry.path.name == f"{entry.info['quantized_from'][:-len('.onnx')]}.{entry.info['form']}.onnx"
        assert entry.info["quantization_ops"], entry.path.name


def test_bench_and_verify_compare_within_quantization_steps(fusionopt, optimized, tmp_path):
    """Item 5: bench, verify and --verify on a quantized model allow quantization steps, and say so."""
    entry = next(e for e in ENTRIES if e.path.stem == "resnet_dynamo18.qdq")
    report = tmp_path / "bench.json"
    rc, stdout, stderr = fusionopt("bench", entry.path, "--warmup", "1", "--iters", "3", "--json", report, timeout=300)
    assert rc == lib.EXIT_OK, stderr
    assert "verified: outputs match (rtol 1e-4, atol 1e-5, 2 quantization steps)" in stdout
    assert json.loads(report.read_text())["tolerance"] == "rtol 1e-4, atol 1e-5, 2 quantization steps"
    path, _ = optimized(entry, 3)
    rc, stdout, stderr = fusionopt("verify", entry.path, path, "--runs", "2")
    assert rc == lib.EXIT_OK, stdout + stderr
    assert stdout.count("PASS") == 2
    rc, _, stderr = fusionopt(entry.path, "-O3", "-o", tmp_path / "checked.onnx", "--verify")
    assert rc == lib.EXIT_OK, stderr
    # A float model keeps verify's plain tolerance.
    rc, stdout, _ = fusionopt("bench", lib.PROJECT_MODELS / "resnet_style.onnx", "--warmup", "1", "--iters", "3")
    assert rc == lib.EXIT_OK and "verified: outputs match (rtol 1e-4, atol 1e-5)\n" in stdout


# ---------------------------------------------------------------- structure of the optimized forms

DEFAULT_CORPUS = "FUSIONOPT_QUANTIZED_CORPUS" not in os.environ
QOPERATOR = [entry for entry in ENTRIES if entry.info["form"] == "qoperator"]
# The QOperator ops qoperator-to-qdq (O2) reads into QDQ units; none may remain at -O2 and -O3.
QOPERATOR_REWRITTEN = {("com.microsoft", "QLinearAdd"), ("com.microsoft", "QLinearMul"), ("com.microsoft", "QGemm"),
                       ("", "QLinearConv"), ("ai.onnx", "QLinearConv")}


def entry_named(name):
    """A fixture by its stem; the committed corpus must hold it (another corpus may not)."""
    matches = [entry for entry in ENTRIES if entry.path.stem == name]
    if not matches:
        if DEFAULT_CORPUS:
            pytest.fail(f"{name} is missing from models/real/fixtures/quantized")
        pytest.skip(f"{name} is not in $FUSIONOPT_QUANTIZED_CORPUS")
    return matches[0]


def test_the_committed_corpus_holds_the_qoperator_fixtures():
    """The parametrizations below must not be silently empty."""
    if not DEFAULT_CORPUS:
        pytest.skip("counts the committed fixtures")
    assert sorted(entry.path.stem for entry in QOPERATOR) == [
        "bert_dynamo18_sdpa.qoperator", "mobilenet_v3_dynamo18.qoperator", "resnet_dynamo18.qoperator"]


def ops_of(nodes):
    return collections.Counter((node.domain, node.op_type) for node in nodes)


@pytest.mark.parametrize("level", [2, 3], ids=["O2", "O3"])
@pytest.mark.parametrize("entry", [pytest.param(e, id=e.path.stem) for e in QOPERATOR])
def test_qoperator_ops_become_qdq_units_that_fuse(optimized, entry, level):
    """qoperator-to-qdq: no QLinearConv, QGemm, QLinearAdd or QLinearMul is left in the optimized
    main graph; a QLinearMatMul stays only where both its inputs are activations (attention's
    products), never over an initializer (constant) B."""
    original = ops_of(onnx.load(str(entry.path), load_external_data=False).graph.node)
    assert sum(original[op] for op in QOPERATOR_REWRITTEN) > 0, original  # there was something to rewrite
    path, _ = optimized(entry, level)
    graph = onnx.load(str(path)).graph
    left = {op: count for op, count in ops_of(graph.node).items() if op in QOPERATOR_REWRITTEN}
    assert not left, f"-O{level} left QOperator ops: {left}"
    initializers = {tensor.name for tensor in graph.initializer}
    constants = {output for node in graph.node if node.op_type == "Constant" for output in node.output}
    for node in graph.node:
        if node.op_type == "QLinearMatMul":
            assert node.input[3] not in initializers | constants, f"{node.name}: B {node.input[3]} is a constant"
            assert node.input[0] not in initializers | constants, f"{node.name}: A {node.input[0]} is a constant"


@pytest.mark.parametrize("level", [2, 3], ids=["O2", "O3"])
def test_resnet_qoperator_runs_no_more_kernels_than_its_qdq_form(optimized, level):
    qoperator = optimized(entry_named("resnet_dynamo18.qoperator"), level)[1]["estimated_kernel_launches"]
    qdq = optimized(entry_named("resnet_dynamo18.qdq"), level)[1]["estimated_kernel_launches"]
    assert qoperator <= qdq, f"-O{level}: ResNet QOperator {qoperator} kernels, its QDQ form {qdq}"


# Outputs of an elementwise program (GELU-tanh, SiLU) that leave it dequantized today, because a
# float Concat in the main graph reads them: YOLOv8n's C2f and detection-head Concats (each input
# dequantized at its own scale, concatenated in float, quantized again by the convolution after).
# An upper bound: fewer is better.
# Float values one elementwise program hands another, made by a DequantizeLinear: none since
# fuse-elementwise hands on the 8-bit value where it is read outside anyway (YOLOv8n's residual
# stream, whose sum also feeds the next convolution). Concats read no float since
# quantize-concat-inputs (before it, YOLOv8n's took 33 float inputs).
FLOAT_HANDOFFS = {"gpt2_dynamo18_sdpa.qdq": 0, "yolov8n_dynamo18.qdq": 0}
EIGHT_BIT = (onnx.TensorProto.UINT8, onnx.TensorProto.INT8)


def zero_point_type(quantize, body, call, initializers):
    """The element type a QuantizeLinear inside a function body writes: its zero point's (a
    Constant of the body, or an initializer the call passes in); uint8 without one."""
    if len(quantize.input) < 3 or not quantize.input[2]:
        return onnx.TensorProto.UINT8
    name = quantize.input[2]
    for inner in body.node:
        if inner.op_type == "Constant" and inner.output[0] == name:
            return inner.attribute[0].t.data_type
    if name in body.input:
        return initializers.get(call.input[list(body.input).index(name)])
    return None


TABLE_READERS = ["bert_dynamo18_sdpa.qdq", "efficientnet_dynamo18.qdq", "gpt2_dynamo18_sdpa.qdq",
                 "llama_dynamo18_sdpa.qdq", "vit_dynamo18_sdpa.qdq", "yolov8n_dynamo18.qdq"]
NO_TABLES = ["bert_dynamo18_sdpa.dynamic", "llama_dynamo18_sdpa.nbits"]


def table_programs_per_run(fusionopt, path, feeds, folder):
    """The elementwise programs that read 256-entry tables in one `fusionopt run` of `path`."""
    rc, _, stderr = fusionopt("run", path, *lib.write_inputs(feeds, folder), "--threads", "2")
    assert rc == lib.EXIT_OK, stderr
    match = re.search(r"(\d+) elementwise programs reading 256-entry tables", stderr)
    assert match, stderr
    return int(match.group(1))


@pytest.mark.parametrize("name", TABLE_READERS + NO_TABLES)
def test_activation_programs_read_tables(optimized, fusionopt, tmp_path, name):
    """-O3 on the exports whose activations are quantized: their GELU, SiLU, SwiGLU and RMSNorm
    programs read 256-entry tables (fused/program.h; the numbers are held by
    test_quantized_export_optimizes_and_runs_like_ort); -O1, which fuses nothing, reads none, and
    neither do the weight-only and dynamic exports, which hold no 8-bit activation."""
    entry = entry_named(name)
    feeds = entry.feeds()
    at_o3 = table_programs_per_run(fusionopt, optimized(entry, 3)[0], feeds, tmp_path / "o3")
    assert table_programs_per_run(fusionopt, optimized(entry, 1)[0], feeds, tmp_path / "o1") == 0
    if name in NO_TABLES:
        assert at_o3 == 0
    else:
        assert at_o3 > 0, f"no elementwise program of {name} at -O3 reads a table"


def test_yolo_concats_join_8_bit_values(optimized):
    """-O3 on YOLOv8n QDQ: quantize-concat-inputs quantizes each C2f Concat's inputs instead of its
    result, so every Concat of the main graph joins uint8 values (onnx's shape inference, which
    reads the model-local functions, gives the types), where the original joins float ones."""
    def concat_types(path):
        model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
        types = {value.name: value.type.tensor_type.elem_type
                 for value in [*model.graph.value_info, *model.graph.input, *model.graph.output]}
        types.update({tensor.name: tensor.data_type for tensor in model.graph.initializer})
        return [[types.get(value) for value in node.input] for node in model.graph.node if node.op_type == "Concat"]

    entry = entry_named("yolov8n_dynamo18.qdq")
    path, _ = optimized(entry, 3)
    joined = concat_types(path)
    assert len(joined) >= 13, joined  # the C2f, SPPF and head Concats
    assert all(dtype == onnx.TensorProto.UINT8 for inputs in joined for dtype in inputs), joined
    assert any(dtype == onnx.TensorProto.FLOAT for inputs in concat_types(entry.path) for dtype in inputs)


@pytest.mark.parametrize("name", sorted(FLOAT_HANDOFFS))
def test_elementwise_programs_hand_on_8_bit_values(optimized, name):
    """-O3: a fused elementwise program around a Tanh or Sigmoid (no Conv/MatMul/Gemm: GPT-2's
    tanh GELU, YOLOv8n's SiLU) quantizes its own results: each output is made by a QuantizeLinear
    in the function body, so the next unit reads 8 bits (fold-constants and the quantized units
    leave the QuantizeLinear to the program). Exempt: a graph output, and up to FLOAT_HANDOFFS
    outputs made by a DequantizeLinear that only other fused programs read."""
    path, _ = optimized(entry_named(name), 3)
    model = onnx.load(str(path))
    functions = {(function.domain, function.name): function for function in model.functions}
    graph_outputs = {value.name for value in model.graph.output}
    readers = collections.defaultdict(list)
    for node in model.graph.node:
        for value in node.input:
            readers[value].append(node)
    initializers = {tensor.name: tensor.data_type for tensor in model.graph.initializer}
    programs, quantized, handoffs, wrong = 0, 0, [], []
    for node in model.graph.node:
        if node.domain != "ai.fusionopt":
            continue
        body = functions[(node.domain, node.op_type)]
        ops = {inner.op_type for inner in body.node}
        if not ops & {"Tanh", "Sigmoid"} or ops & {"Conv", "MatMul", "Gemm"}:
            continue
        programs += 1
        producers = {value: inner for inner in body.node for value in inner.output}
        assert len(body.output) == len(node.output), node.op_type
        for inner_output, output in zip(body.output, node.output):
            producer = producers.get(inner_output)
            made_by = producer.op_type if producer is not None else "a function input"
            if made_by == "QuantizeLinear":
                zero_point = zero_point_type(producer, body, node, initializers)
                assert zero_point in EIGHT_BIT, f"{node.op_type}:{output} is quantized to type {zero_point}"
                quantized += 1
            elif output in graph_outputs:
                continue
            elif made_by == "DequantizeLinear" and readers[output] and all(
                    reader.domain == "ai.fusionopt" for reader in readers[output]):
                handoffs.append(f"{node.op_type}:{output}")
            else:
                wrong.append(f"{node.op_type}:{output} made by {made_by}, read by "
                             f"{[reader.op_type for reader in readers[output]]}")
    assert programs > 0 and quantized > 0, f"no elementwise program with a Tanh or Sigmoid in {name} at -O3"
    assert not wrong, f"{len(wrong)} outputs are not 8-bit: {wrong}"
    assert len(handoffs) <= FLOAT_HANDOFFS[name], handoffs
