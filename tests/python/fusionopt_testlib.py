"""Helpers for the end-to-end tests: model locations, tiny model builders, file
snapshots, comparisons of ONNX models written by fusionopt against their inputs, seeded
model inputs, and runs on fusionopt and onnxruntime."""
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT_MODELS = REPO_ROOT / "models"
SHARED_MODELS = REPO_ROOT / ".." / "shared" / "models"
SHARED_MODELS_MISSING = (f"{SHARED_MODELS} is absent: the model-zoo models live outside the "
                         "repository (../shared/models from the project root)")

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_IO, EXIT_UNSUPPORTED, EXIT_MISMATCH = 0, 1, 2, 3, 4, 5


# ---------------------------------------------------------------- the Python package

def import_fusionopt():
    """The fusionopt package from the sources (python/), over the library of the build under
    test ($FUSIONOPT_BIN's folder, or build/), unless FUSIONOPT_LIBRARY names another."""
    import sys
    build = Path(os.environ.get("FUSIONOPT_BIN", REPO_ROOT / "build" / "fusionopt")).parent
    os.environ.setdefault("FUSIONOPT_LIBRARY", str(build / "libfusionopt.so.1"))
    if str(REPO_ROOT / "python") not in sys.path:
        sys.path.insert(0, str(REPO_ROOT / "python"))
    import fusionopt
    return fusionopt


# ---------------------------------------------------------------- model files

def project_models():
    return sorted(PROJECT_MODELS.glob("*.onnx"))


def shared_models():
    return sorted(SHARED_MODELS.glob("*.onnx")) if SHARED_MODELS.is_dir() else []


def all_model_params():
    """pytest params for every model in models/ and ../shared/models; a skipped param
    stands in for the shared folder when it is absent, so the skip shows in the report."""
    params = [pytest.param(path, id=path.stem) for path in project_models()]
    if SHARED_MODELS.is_dir():
        params += [pytest.param(path, id=path.stem) for path in shared_models()]
    else:
        params.append(pytest.param(None, id="shared-models",
                                   marks=pytest.mark.skip(reason=SHARED_MODELS_MISSING)))
    return params


# ---------------------------------------------------------------- byte comparisons

def assert_same_bytes(actual, expected, what):
    """Fails naming `what`, the lengths and the first differing offset when the bytes differ.

    A plain `assert a == b` on two written models is no good: pytest explains a failed
    comparison of bytes with difflib, which takes hours on a few hundred kilobytes."""
    if actual == expected:
        return
    offset = next((i for i, (a, b) in enumerate(zip(actual, expected)) if a != b),
                  min(len(actual), len(expected)))
    pytest.fail(f"{what}: {len(actual)} bytes vs {len(expected)} expected, first differing at "
                f"offset {offset} ({actual[offset:offset + 8]!r} vs {expected[offset:offset + 8]!r})",
                pytrace=False)


# ---------------------------------------------------------------- snapshots

class FileSnapshot:
    """Content hash and mtime of a file, to prove fusionopt left it alone."""

    def __init__(self, path):
        self.path = Path(path)
        self.sha256, self.mtime_ns = self._read()

    def _read(self):
        data = self.path.read_bytes()
        return hashlib.sha256(data).hexdigest(), os.stat(self.path).st_mtime_ns

    def assert_unchanged(self):
        sha256, mtime_ns = self._read()
        assert sha256 == self.sha256, f"{self.path} was modified"
        assert mtime_ns == self.mtime_ns, f"{self.path} was touched (mtime changed)"


def folder_listing(folder):
    return sorted(entry.name for entry in Path(folder).iterdir())


def stray_temp_files(folder):
    return [name for name in folder_listing(folder) if ".tmp" in name]


# ---------------------------------------------------------------- error checks

def assert_error(result, exit_code, file_name=None, *fragments):
    """The error contract: the exit code, one stderr line `error: <file>: <problem>`,
    nothing on stdout, and the problem mentions every fragment."""
    rc, stdout, stderr = result
    assert rc == exit_code, f"exit code {rc}, expected {exit_code}; stderr: {stderr!r}"
    assert stdout == "", f"stdout should be empty on error: {stdout!r}"
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected exactly one stderr line, got {lines!r}"
    line = lines[0]
    assert line.startswith("error: "), line
    problem = line[len("error: "):]
    if file_name is not None:
        prefix = f"error: {file_name}: "
        assert line.startswith(prefix), f"error does not name {file_name}: {line}"
        problem = line[len(prefix):]
    for fragment in fragments:
        assert fragment.lower() in problem.lower(), f"{fragment!r} missing from {line!r}"
    return problem


# ---------------------------------------------------------------- builders

def float_input(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def make_model(nodes, inputs, outputs, initializers=(), opsets=(("", 17),), ir_version=8,
               **graph_kwargs):
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs),
                              initializer=list(initializers), **graph_kwargs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                              producer_name="fusionopt-tests")
    model.ir_version = ir_version
    return model


def tiny_model(ir_version=8, opset=17):
    """y = Relu(x + b): the smallest valid model with a node and an initializer."""
    bias = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    nodes = [helper.make_node("Add", ["x", "b"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    inputs = [float_input("x", [2, 4])]
    if ir_version < 4:  # IR 3 requires initializers to be listed as graph inputs
        inputs.append(float_input("b", [4]))
    return make_model(nodes, inputs, [float_input("y", [2, 4])], [bias],
                      opsets=(("", opset),), ir_version=ir_version)


def save(model, path):
    path = Path(path)
    path.write_bytes(model.SerializeToString())
    return path


# ---------------------------------------------------------------- comparisons

def assert_same_tensor_values(actual, expected):
    assert actual.name == expected.name
    assert actual.data_type == expected.data_type, actual.name
    assert list(actual.dims) == list(expected.dims), actual.name
    a, e = numpy_helper.to_array(actual), numpy_helper.to_array(expected)
    assert a.dtype == e.dtype, actual.name
    assert a.shape == e.shape, actual.name
    if a.dtype.kind in "fc":
        # Bit-identical, NaNs included: compare the raw bytes, not the values.
        assert a.tobytes() == e.tobytes(), f"initializer {actual.name} differs"
    else:
        assert np.array_equal(a, e), f"initializer {actual.name} differs"


def assert_same_initializers(actual_graph, expected_graph):
    assert [t.name for t in actual_graph.initializer] == [t.name for t in expected_graph.initializer]
    for actual, expected in zip(actual_graph.initializer, expected_graph.initializer):
        assert_same_tensor_values(actual, expected)


TYPED_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data")


def _graph_tensors(graph):
    yield from graph.initializer
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node):
    for attribute in node.attribute:
        if attribute.HasField("t"):
            yield attribute.t
        yield from attribute.tensors
        for subgraph in subgraphs_of(node):
            yield from _graph_tensors(subgraph)


def all_tensors(model):
    """Every TensorProto of the model: initializers and attribute tensors, in subgraphs,
    functions and training graphs too."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        for node in function.node:
            yield from _node_tensors(node)
    for training in model.training_info:
        yield from _graph_tensors(training.initialization)
        yield from _graph_tensors(training.algorithm)


def _clear_explicit_defaults(message):
    """Clears optional scalars set to their default value (`producer_version: ""`,
    `data_location: DEFAULT`): ONNX reads them as unset. Oneof members keep their presence,
    since `dim_value: 0` (a zero-size dim) differs from an unknown dim."""
    for field, value in message.ListFields():
        if field.message_type is not None:
            for child in (value if field.is_repeated else [value]):
                _clear_explicit_defaults(child)
        elif (not field.is_repeated and field.containing_oneof is None
              and value == field.default_value):
            message.ClearField(field.name)


def canonical_copy(model):
    """A copy with one encoding for everything that may be re-encoded without loss: tensor
    numbers in raw_data, optional fields set to their default value unset. The round trip may
    re-encode this way (and onnx.load marks loaded external tensors DEFAULT explicitly);
    nothing else may change."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in all_tensors(copy):
        if any(len(getattr(tensor, field)) for field in TYPED_FIELDS):
            little_endian = helper.tensor_dtype_to_np_dtype(tensor.data_type).newbyteorder("<")
            raw = np.asarray(numpy_helper.to_array(tensor), dtype=little_endian).tobytes()
            for field in TYPED_FIELDS:
                tensor.ClearField(field)
            tensor.raw_data = raw
    _clear_explicit_defaults(copy)
    return copy


def assert_round_trip_equal(written, original, exact=True):
    """Equal up to canonical encoding (a readable diff of the parts first), then — unless the
    caller moved tensors between encodings on purpose, e.g. into external data — exactly
    equal: the saver keeps typed fields and explicitly set defaults as the file had them."""
    canonical_written, canonical_original = canonical_copy(written), canonical_copy(original)
    assert_same_model_parts(canonical_written, canonical_original)
    assert canonical_written == canonical_original
    if exact:
        assert written == original


def assert_same_model_parts(actual, expected):
    """Field-by-field comparison, so a failure names the part that differs before the
    whole-message comparison does."""
    assert actual.ir_version == expected.ir_version
    assert list(actual.opset_import) == list(expected.opset_import)
    assert actual.producer_name == expected.producer_name
    assert actual.producer_version == expected.producer_version
    assert actual.domain == expected.domain
    assert actual.model_version == expected.model_version
    assert actual.doc_string == expected.doc_string
    assert list(actual.metadata_props) == list(expected.metadata_props)
    assert list(actual.functions) == list(expected.functions)
    a, e = actual.graph, expected.graph
    assert a.name == e.name
    assert a.doc_string == e.doc_string
    assert len(a.node) == len(e.node)
    for index, (node_a, node_e) in enumerate(zip(a.node, e.node)):
        assert node_a == node_e, f"node {index} ({node_e.op_type} '{node_e.name}') differs"
    assert list(a.input) == list(e.input)
    assert list(a.output) == list(e.output)
    assert list(a.value_info) == list(e.value_info)
    assert_same_initializers(a, e)


# ---------------------------------------------------------------- expected summaries

def dtype_name(elem_type):
    return TensorProto.DataType.Name(elem_type).lower()


def shape_of(value_info):
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    dims = []
    for dim in tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(dim.dim_value)
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return dims


def subgraphs_of(node):
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == onnx.AttributeProto.GRAPHS:
            yield from attribute.graphs


def walk_nodes(graph):
    """Every node of the graph and of its subgraphs, with the number of subgraphs."""
    nodes, subgraph_count = [], 0
    for node in graph.node:
        nodes.append(node)
        for subgraph in subgraphs_of(node):
            inner, inner_count = walk_nodes(subgraph)
            nodes += inner
            subgraph_count += 1 + inner_count
    return nodes, subgraph_count


SUB_BYTE_BITS = {TensorProto.INT4: 4, TensorProto.UINT4: 4, TensorProto.FLOAT4E2M1: 4,
                 TensorProto.INT2: 2, TensorProto.UINT2: 2}


def bits_per_element(data_type):
    """Storage bits; 4- and 2-bit types are packed, so a tensor takes ceil(bits / 8) bytes."""
    return SUB_BYTE_BITS.get(data_type, 8 * helper.tensor_dtype_to_np_dtype(data_type).itemsize)


def expected_summary(model):
    """What `fusionopt inspect --json` must report, computed with the onnx package."""
    graph = model.graph
    initializer_names = {t.name for t in graph.initializer}
    all_nodes, subgraph_count = walk_nodes(graph)
    histogram = {}
    for node in all_nodes:
        ops = histogram.setdefault(node.domain, {})
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    parameter_count = parameter_bytes = 0
    for tensor in graph.initializer:
        elements = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
        parameter_count += elements
        parameter_bytes += (elements * bits_per_element(tensor.data_type) + 7) // 8
    return {
        "ir_version": model.ir_version,
        "producer_name": model.producer_name,
        "producer_version": model.producer_version,
        "domain": model.domain,
        "model_version": model.model_version,
        "opsets": [{"domain": o.domain, "version": o.version} for o in model.opset_import],
        "inputs": [{"name": v.name, "dtype": dtype_name(v.type.tensor_type.elem_type),
                    "shape": shape_of(v)} for v in graph.input if v.name not in initializer_names],
        "node_count": len(graph.node),
        "total_node_count": len(all_nodes),
        "subgraph_count": subgraph_count,
        "op_histogram": histogram,
        "initializer_count": len(graph.initializer),
        "parameter_count": parameter_count,
        "parameter_bytes": parameter_bytes,
        "functions": [f"{f.domain}:{f.name}" for f in model.functions],
        "metadata": {p.key: p.value for p in model.metadata_props},
    }


def assert_refines(reported_shape, declared_shape, what):
    """Inferred output shapes may fill in what the file leaves unknown, never contradict it."""
    if declared_shape is None:
        return
    assert reported_shape is not None, f"{what}: declared rank {len(declared_shape)} lost"
    assert len(reported_shape) == len(declared_shape), f"{what}: rank differs"
    for reported, declared in zip(reported_shape, declared_shape):
        if declared is not None:
            assert reported == declared, f"{what}: {reported_shape} contradicts {declared_shape}"


# ---------------------------------------------------------------- model inputs

# Symbolic dims of the inputs we generate: a batch of 2 shows batch mix-ups, a sequence of 16
# stays inside every position table (at most 64 positions).
SYMBOLIC_DIMS = {"sequence": 16}
DEFAULT_SYMBOLIC_DIM = 2


def data_inputs(model):
    """Graph inputs the caller feeds: initializers (listed as inputs in IR 3) excluded."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in initializers]


def concrete_shape(value_info, symbolic=None):
    dims = []
    for dim in value_info.type.tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(dim.dim_value)
        elif symbolic is not None:
            dims.append(symbolic)
        else:
            dims.append(SYMBOLIC_DIMS.get(dim.dim_param, DEFAULT_SYMBOLIC_DIM))
    return dims


def gather_table_size(model, input_name):
    """Rows of the embedding table that a Gather reads with this input as its indices."""
    tables = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == input_name:
            table = tables.get(node.input[0])
            if table is not None:
                return table.dims[0]
    return None


def make_input(model, value_info, rng):
    shape = concrete_shape(value_info)
    elem_type = value_info.type.tensor_type.elem_type
    if elem_type == TensorProto.FLOAT:
        return rng.standard_normal(shape).astype(np.float32)
    assert elem_type == TensorProto.INT64, f"no generator for input {value_info.name} of type {elem_type}"
    if "mask" in value_info.name:
        mask = np.ones(shape, dtype=np.int64)
        mask[-1, shape[-1] * 3 // 4:] = 0  # the last sequence is padded
        return mask
    vocab = gather_table_size(model, value_info.name)
    assert vocab is not None, f"int64 input {value_info.name} feeds no embedding Gather"
    return rng.integers(0, vocab, size=shape, dtype=np.int64)


def make_inputs(model, seed=0):
    rng = np.random.default_rng(seed)
    return {value.name: make_input(model, value, rng) for value in data_inputs(model)}


def shape_flags(model):
    """`--shape NAME=D1xD2...` arguments that give `fusionopt run/verify` (whose symbolic dims
    default to 1) the shapes make_inputs generates."""
    flags = []
    for value in data_inputs(model):
        if any(not dim.HasField("dim_value") for dim in value.type.tensor_type.shape.dim):
            flags += ["--shape", f"{value.name}={'x'.join(map(str, concrete_shape(value)))}"]
    return flags


def write_inputs(inputs, folder, suffix=".pb"):
    """Writes each input to a file; returns the `--input NAME=FILE` arguments."""
    folder.mkdir(exist_ok=True)
    args = []
    for index, (name, array) in enumerate(inputs.items()):
        path = folder / f"input_{index}{suffix}"
        if suffix == ".npy":
            np.save(path, array)
        else:
            path.write_bytes(numpy_helper.from_array(array, name).SerializeToString())
        args += ["--input", f"{name}={path}"]
    return args


def read_tensor(path):
    tensor = TensorProto()
    tensor.ParseFromString(Path(path).read_bytes())
    return tensor


# ---------------------------------------------------------------- running models

def fusionopt_outputs(fusionopt, model_path, input_args, out_dir, *extra):
    """Runs `fusionopt run` and returns [(name, array)] in graph-output order."""
    out_dir.mkdir(exist_ok=True)
    rc, stdout, stderr = fusionopt("run", model_path, *input_args, "--output-dir", out_dir, *extra,
                                   timeout=600)
    assert rc == EXIT_OK, stderr
    output_names = [value.name for value in onnx.load(str(model_path), load_external_data=False).graph.output]
    lines = stdout.splitlines()
    assert len(lines) == len(output_names), f"expected one line per output: {stdout!r}"
    for line, name in zip(lines, output_names):
        assert name in line, f"line {line!r} does not name output {name}"
    outputs = []
    for index, name in enumerate(output_names):
        tensor = read_tensor(out_dir / f"output_{index}.pb")
        assert tensor.name == name
        outputs.append((name, numpy_helper.to_array(tensor)))
    assert not (out_dir / f"output_{len(output_names)}.pb").exists()
    return outputs


def fusionopt_arrays(fusionopt, model_path, feeds, folder, *extra):
    """`fusionopt run` on `feeds` ({name: array}, written under `folder`): the output arrays in
    graph-output order."""
    arguments = write_inputs(feeds, folder / "inputs")
    return [array for _, array in fusionopt_outputs(fusionopt, model_path, arguments, folder / "out", *extra)]


def ort_session(path, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL, optimized_to=None):
    """A one-thread onnxruntime CPU session on `path` with graph optimizations at `level` (off by
    default: ORT's reference, which runs the ops as written), errors-only logging, and the model
    ORT optimized written to `optimized_to` when given."""
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    if optimized_to is not None:
        options.optimized_model_filepath = str(optimized_to)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def corpus_optimizer(fusionopt, folder):
    """optimize(entry, level) for a corpus entry (models/real/corpus.py): the -O`level` file written
    to `folder` with --check-each-pass, and `fusionopt inspect --json`'s summary of it, made once per
    (entry, level)."""
    cache = {}

    def optimize(entry, level):
        key = (entry.name, level)
        if key not in cache:
            out = Path(folder) / f"{entry.name}.O{level}.onnx"
            rc, _, stderr = fusionopt(entry.path, f"-O{level}", "-o", out, "--check-each-pass", timeout=300)
            assert rc == EXIT_OK, f"-O{level} on {entry.path.name} failed ({rc}): {stderr}"
            rc, stdout, stderr = fusionopt("inspect", out, "--json")
            assert rc == EXIT_OK, stderr
            cache[key] = (out, json.loads(stdout))
        return cache[key]

    return optimize


def onnxruntime_outputs(model_path, inputs):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # Errors only: it warns once per initializer that no node reads (the IR-3 models list
    # initializers as inputs), hundreds of lines that bury a failure's message.
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return list(zip(names, session.run(names, inputs)))


def assert_outputs_close(actual, expected, rtol, atol):
    assert [name for name, _ in actual] == [name for name, _ in expected]
    for (name, got), (_, want) in zip(actual, expected):
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, expected {want.dtype}"
        assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)


# ---------------------------------------------------------------- protobuf by hand
# For messages onnx's Python protobuf refuses to build (nesting deeper than its limit).

def varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def length_delimited(field, payload):
    """A length-delimited field (wire type 2): its key, its length, the payload."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def project_version():
    """The version CMakeLists.txt's project() declares (what --version and the packages carry)."""
    import re
    text = (REPO_ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(fusionopt VERSION ([0-9.]+)", text).group(1)
