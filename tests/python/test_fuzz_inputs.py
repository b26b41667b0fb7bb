"""Robustness fuzz of the loader, saver, shape inference and CLI.

Hostile models go through `fusionopt inspect` and `fusionopt MODEL -o OUT -O0`: seeded byte
edits of every models/*.onnx and of four small hand-built models, seeded field-value edits of
the same seeds (the wire format stays valid, so the loader's checks and the shape rules see
the hostile numbers), and a table of hand-written structural mutations.

The contract: an exit code in {0, 1, 3, 4}, never a signal, an internal error (70) or a hang
(5 s); on failure nothing on stdout and a last stderr line `error: <file>: <problem>`, the
only error line; on success only log lines; no output or temporary file left by a failed
run, and fusionopt can read back what it wrote.

The binary runs with bytes in and out (not through the `fusionopt` fixture, which decodes
text): mutated names are echoed in error messages and need not be UTF-8.
"""
import os
import random
import shutil
import subprocess
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fusionopt_testlib as lib

TIMEOUT_S = 5
ALLOWED_EXIT_CODES = {lib.EXIT_OK, lib.EXIT_INVALID, lib.EXIT_IO, lib.EXIT_UNSUPPORTED}
LOG_PREFIXES = (b"info: ", b"warning: ", b"debug: ", b"trace: ")
BYTE_CASES_PER_SEED = 100
FIELD_CASES_PER_SEED = 30
FUZZ_SEED = 20240611
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


# ---------------------------------------------------------------- running and the contract

@dataclass
class Outcome:
    args: tuple
    rc: int = None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False

    def describe(self):
        tail = self.stderr[-400:].decode("utf-8", "backslashreplace")
        return f"`fusionopt {' '.join(map(str, self.args))}` -> rc {self.rc}, stderr {tail!r}"


def run_binary(binary, *args):
    try:
        done = subprocess.run([str(binary), *map(str, args)], capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Outcome(args, timed_out=True)
    return Outcome(args, done.returncode, done.stdout, done.stderr)


def contract_problems(outcome, *named_files):
    """Everything in `outcome` that breaks the error contract; the error must name one of
    `named_files`. Lines are split on '\\n' only: other control characters in messages are
    covered by their own test."""
    if outcome.timed_out:
        return [f"hang: no exit within {TIMEOUT_S} s"]
    problems = []
    rc = outcome.rc
    if rc < 0:
        problems.append(f"killed by signal {-rc}")
    elif rc not in ALLOWED_EXIT_CODES:
        problems.append(f"exit code {rc} is not one of {sorted(ALLOWED_EXIT_CODES)}")
    if b"internal error" in outcome.stderr or b"terminate called" in outcome.stderr:
        problems.append("internal error / uncaught exception")
    lines = outcome.stderr.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if rc == 0:
        problems += [f"unexpected stderr line {line!r}" for line in lines
                     if not line.startswith(LOG_PREFIXES)]
        return problems
    if outcome.stdout:
        problems.append(f"stdout not empty on error: {outcome.stdout[:200]!r}")
    if not lines:
        return problems + ["no error line on stderr"]
    prefixes = [f"error: {name}: ".encode() for name in named_files]
    if not any(lines[-1].startswith(prefix) for prefix in prefixes):
        problems.append(f"last stderr line is not `error: <file>: ...`: {lines[-1][:300]!r}")
    extra = [line for line in lines[:-1] if not line.startswith(LOG_PREFIXES)]
    if extra:
        problems.append(f"stderr has more than the error line: {extra[:3]!r}")
    return problems


PARSE_FAILURE = b"protobuf parsing failed"


def check_model(binary, model_path, out_dir, optimize_unparsable=True):
    """Runs inspect and -O0 on `model_path`; returns (contract problems, outcomes). A
    successful optimize must leave exactly the output file, which fusionopt can read back.
    `optimize_unparsable=False` skips -O0 when inspect found no protobuf message at all:
    both commands start with the same LoadModel, and the fuzz makes many such files."""
    model_path, out_dir = Path(model_path), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    before = lib.folder_listing(model_path.parent)
    input_bytes = model_path.read_bytes()
    problems, outcomes = [], []

    inspect = run_binary(binary, "inspect", model_path)
    outcomes.append(inspect)
    problems += [f"inspect: {p}" for p in contract_problems(inspect, model_path)]
    if inspect.timed_out:
        return problems, outcomes  # one hang says enough; do not spend another timeout
    if not optimize_unparsable and inspect.rc == lib.EXIT_INVALID and PARSE_FAILURE in inspect.stderr:
        return problems, outcomes

    out = out_dir / "result.onnx"
    optimize = run_binary(binary, model_path, "-o", out, "-O0")
    outcomes.append(optimize)
    problems += [f"optimize: {p}" for p in contract_problems(optimize, model_path, out)]
    listing = lib.folder_listing(out_dir)
    if optimize.rc == lib.EXIT_OK:
        if listing != ["result.onnx"]:
            problems.append(f"optimize succeeded but the output folder holds {listing}")
        elif inspect.rc == lib.EXIT_OK:
            reread = run_binary(binary, "inspect", out)
            if reread.rc != lib.EXIT_OK:
                problems.append(f"fusionopt cannot read its own output: {reread.describe()}")
    elif not optimize.timed_out and listing:
        problems.append(f"failed optimize left files behind: {listing}")
    if model_path.read_bytes() != input_bytes:
        problems.append("the input model was modified")
    if lib.folder_listing(model_path.parent) != before:
        problems.append("files appeared next to the input model")
    return problems, outcomes


# ---------------------------------------------------------------- seed models

def seed_tiny(folder):
    return lib.save(lib.tiny_model(), folder / "tiny.onnx")


def seed_control_flow(folder):
    """If with an outer-scope read, a Loop with a carried value, a Constant-fed Reshape."""
    then_graph = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                                   [lib.float_input("t", [2, 4])])
    else_graph = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                                   [lib.float_input("e", [2, 4])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         lib.float_input("acc_in", [2, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         lib.float_input("acc_out", [2, 4])])
    shape = numpy_helper.from_array(np.array([4, -1], np.int64), "shape")
    trips = numpy_helper.from_array(np.array(3, np.int64), "trips")
    nodes = [helper.make_node("If", ["c"], ["branch"], then_branch=then_graph, else_branch=else_graph),
             helper.make_node("Loop", ["trips", "", "branch"], ["looped"], body=body),
             helper.make_node("Reshape", ["looped", "shape"], ["y"])]
    inputs = [lib.float_input("x", [2, 4]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
    model = lib.make_model(nodes, inputs, [lib.float_input("y", [4, 2])], [shape, trips])
    return lib.save(model, folder / "control_flow.onnx")


def seed_shape_chain(folder):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch exports it."""
    index = numpy_helper.from_array(np.array(0, np.int64), "index")
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    tail = numpy_helper.from_array(np.array([4, -1], np.int64), "tail")
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "index"], ["batch"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "zero"], ["batch_1d"]),
             helper.make_node("Concat", ["batch_1d", "tail"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"]),
             helper.make_node("Softmax", ["y"], ["z"], axis=-1)]
    model = lib.make_model(nodes, [lib.float_input("x", ["N", 8, 2])], [lib.float_input("z", None)],
                           [index, zero, tail])
    return lib.save(model, folder / "shape_chain.onnx")


def seed_external_data(folder):
    weights = np.arange(64, dtype=np.float32)
    (folder / "weights.bin").write_bytes(bytes(16) + weights.tobytes())
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[64],
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "weights.bin"), ("offset", "16"), ("length", "256")):
        tensor.external_data.append(onnx.StringStringEntryProto(key=key, value=value))
    model = lib.make_model([helper.make_node("Mul", ["x", "w"], ["y"])], [lib.float_input("x", [64])],
                           [lib.float_input("y", [64])], [tensor])
    return lib.save(model, folder / "external.onnx")


HAND_BUILT_SEEDS = {"tiny": seed_tiny, "control_flow": seed_control_flow,
                    "shape_chain": seed_shape_chain, "external_data": seed_external_data}


# ---------------------------------------------------------------- byte mutations

def payload_spans(data):
    """Byte ranges of large raw tensor payloads: mutating them only changes numbers, so
    most mutations are aimed at the structure around them."""
    model = onnx.ModelProto()
    model.ParseFromString(data)
    spans, start = [], 0
    for tensor in lib.all_tensors(model):
        if len(tensor.raw_data) >= 64:
            at = data.find(tensor.raw_data, start)
            if at >= 0:
                spans.append((at, at + len(tensor.raw_data)))
                start = at + len(tensor.raw_data)
    return sorted(spans)


def structural_positions(data):
    """Intervals outside the payloads, as (begin, end) pairs."""
    intervals, cursor = [], 0
    for begin, end in payload_spans(data):
        if begin > cursor:
            intervals.append((cursor, begin))
        cursor = max(cursor, end)
    if cursor < len(data):
        intervals.append((cursor, len(data)))
    return intervals


def pick_position(rng, data, intervals):
    if intervals and rng.random() < 0.85:
        begin, end = rng.choices(intervals, weights=[e - b for b, e in intervals])[0]
        position = rng.randrange(begin, end)
        if position < len(data):  # an earlier edit of this case may have shortened the data
            return position
    return rng.randrange(len(data))


INTERESTING_BYTES = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x08, 0x0A, 0x12, 0x3A]


def mutate_once(rng, data, intervals):
    """One random edit; returns the new bytes and a description for the reproducer."""
    pos = pick_position(rng, data, intervals)
    kind = rng.choice(["flip", "set", "interesting", "insert", "delete", "duplicate", "truncate",
                       "varint"])
    if kind == "flip":
        bit = rng.randrange(8)
        return data[:pos] + bytes([data[pos] ^ (1 << bit)]) + data[pos + 1:], f"flip bit {bit} @{pos}"
    if kind == "set":
        value = rng.randrange(256)
        return data[:pos] + bytes([value]) + data[pos + 1:], f"set {value:#x} @{pos}"
    if kind == "interesting":
        value = rng.choice(INTERESTING_BYTES)
        return data[:pos] + bytes([value]) + data[pos + 1:], f"set {value:#x} @{pos}"
    if kind == "insert":
        chunk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        return data[:pos] + chunk + data[pos:], f"insert {chunk.hex()} @{pos}"
    if kind == "delete":
        count = rng.randint(1, 16)
        return data[:pos] + data[pos + count:], f"delete {count} @{pos}"
    if kind == "duplicate":
        count = rng.randint(1, 64)
        return data[:pos] + data[pos:pos + count] * 2 + data[pos + count:], f"duplicate {count} @{pos}"
    if kind == "truncate":
        return data[:pos], f"truncate @{pos}"
    # Varints that claim a huge length or run past ten bytes.
    bomb = rng.choice([b"\xff\xff\xff\xff\x07", b"\xff\xff\xff\xff\x0f", b"\x80" * 9 + b"\x01"])
    return data[:pos] + bomb + data[pos + len(bomb):], f"varint {bomb.hex()} @{pos}"


def mutations(data, seed, count):
    rng = random.Random(seed)
    intervals = structural_positions(data)
    for case in range(count):
        mutated, steps = data, []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            if not mutated:
                break
            mutated, step = mutate_once(rng, mutated, intervals)
            steps.append(step)
        yield case, mutated, "; ".join(steps)


def fuzz_seed_model(binary, source, work, name, mutate, count):
    """Runs `count` cases of `mutate` on `source`; returns the violations found."""
    data = source.read_bytes()
    seed = FUZZ_SEED ^ zlib.crc32(name.encode())
    side_files = [p for p in source.parent.iterdir() if p != source and p.is_file()]

    def one(case_and_bytes):
        case, mutated, steps = case_and_bytes
        folder = work / f"case{case:03d}"
        folder.mkdir()
        for side in side_files:  # external data travels with the mutated model
            (folder / side.name).write_bytes(side.read_bytes())
        model_path = folder / f"{name}.onnx"
        model_path.write_bytes(mutated)
        # Unparsable files go through -O0 one time in four (see check_model).
        out_dir = work / f"out{case:03d}"
        problems, _ = check_model(binary, model_path, out_dir, optimize_unparsable=case % 4 == 0)
        if not problems:  # keep only reproducers: the seeds are large and the cases many
            shutil.rmtree(folder)
            shutil.rmtree(out_dir)
        return [f"{name} case {case} ({steps}); file {model_path}: {p}" for p in problems]

    with ThreadPoolExecutor(max_workers=4) as pool:  # optimize waits on fsync; overlap it
        results = list(pool.map(one, mutate(data, seed, count)))
    return [problem for problems in results for problem in problems]


# ---------------------------------------------------------------- field mutations
# Byte edits mostly break the wire format; these keep it valid and change field values
# (dims, axes, data types, names, list lengths), so the loader's checks and the shape rules
# see hostile numbers rather than parse errors.

INT64_VALUES = [0, 1, 2, 3, -1, -2, 7, 64, 65, 2**31 - 1, 2**31, 2**32, 2**40, 2**58, 2**62,
                INT64_MAX, INT64_MIN, INT64_MIN + 1]
FLOAT_VALUES = [0.0, -1.0, float("nan"), float("inf"), float("-inf"), 1e30, 1e-45]


def collect_slots(message, slots, names):
    """(message, field) for every set non-bytes scalar or list field, depth first."""
    for field, value in message.ListFields():
        if field.message_type is not None:
            for child in (value if field.is_repeated else [value]):
                collect_slots(child, slots, names)
        elif field.type != field.TYPE_BYTES:
            slots.append((message, field))
            if field.type == field.TYPE_STRING and field.name in ("name", "input", "output"):
                names.extend(value if field.is_repeated else [value])


def interesting_value(rng, field, names):
    kind = field.type
    if kind == field.TYPE_STRING:
        pool = ["", "\x00", "a\x00b", "x" * 5000, "..", "../escape.bin", "/etc/passwd", "ai.onnx",
                "com.microsoft", "If", "Loop", "Reshape"]
        # Names of other values are the likeliest to get past the loader's checks.
        return rng.choice(names) if names and rng.random() < 0.3 else rng.choice(pool)
    if kind in (field.TYPE_FLOAT, field.TYPE_DOUBLE):
        return rng.choice(FLOAT_VALUES)
    if kind == field.TYPE_BOOL:
        return rng.random() < 0.5
    value = rng.choice(INT64_VALUES + [rng.randint(-4, 30)] * 4)
    if kind in (field.TYPE_INT32, field.TYPE_SINT32, field.TYPE_SFIXED32, field.TYPE_ENUM):
        return max(-(2**31), min(2**31 - 1, value))
    if kind in (field.TYPE_UINT64, field.TYPE_FIXED64):
        return value % 2**64
    if kind in (field.TYPE_UINT32, field.TYPE_FIXED32):
        return value % 2**32
    return value


def mutate_field(rng, message, field, names):
    new = interesting_value(rng, field, names)
    if not field.is_repeated:
        setattr(message, field.name, new)
        return f"{message.DESCRIPTOR.name}.{field.name} = {new!r:.40}"
    values = getattr(message, field.name)
    action = rng.choice(["replace", "replace", "delete", "append", "duplicate"])
    if action == "replace" and len(values):
        index = rng.randrange(len(values))
        values[index] = new
        return f"{message.DESCRIPTOR.name}.{field.name}[{index}] = {new!r:.40}"
    if action == "delete" and len(values):
        index = rng.randrange(len(values))
        del values[index]
        return f"del {message.DESCRIPTOR.name}.{field.name}[{index}]"
    if action == "duplicate" and len(values):
        values.append(values[rng.randrange(len(values))])
        return f"duplicate in {message.DESCRIPTOR.name}.{field.name}"
    values.append(new)
    return f"{message.DESCRIPTOR.name}.{field.name} += {new!r:.40}"


def field_mutations(data, seed, count):
    rng = random.Random(seed)
    for case in range(count):
        model = onnx.ModelProto()
        model.ParseFromString(data)
        slots, names = [], []
        collect_slots(model, slots, names)
        steps = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            message, field = rng.choice(slots)
            try:
                steps.append(mutate_field(rng, message, field, names))
            except (ValueError, TypeError):  # e.g. an enum value the proto2 enum rejects
                continue
        yield case, model.SerializeToString(), "; ".join(steps)


def seed_params():
    params = [pytest.param(("file", path), id=f"models-{path.stem}") for path in lib.project_models()]
    params += [pytest.param(("built", name), id=f"built-{name}") for name in HAND_BUILT_SEEDS]
    return params


def prepare_seed(tmp_path, seed):
    """Copies or builds the seed model into its own folder; returns (path, name)."""
    kind, what = seed
    source_dir = tmp_path / "source"
    source_dir.mkdir()
    if kind == "built":
        return HAND_BUILT_SEEDS[what](source_dir), what
    source = source_dir / what.name
    source.write_bytes(what.read_bytes())
    return source, what.stem


def assert_fuzz_keeps_contract(binary, tmp_path, seed, mutate, count):
    source, name = prepare_seed(tmp_path, seed)
    # The unmutated seed must load; otherwise the fuzz would only exercise one error path.
    baseline = run_binary(binary, "inspect", source)
    assert baseline.rc == lib.EXIT_OK, baseline.describe()
    work = tmp_path / "work"
    work.mkdir()
    violations = fuzz_seed_model(binary, source, work, name, mutate, count)
    assert not violations, f"{len(violations)} contract violations:\n" + "\n".join(violations[:20])


@pytest.mark.parametrize("seed", seed_params())
def test_byte_mutations_keep_the_contract(fusionopt_bin, tmp_path, seed):
    assert_fuzz_keeps_contract(fusionopt_bin, tmp_path, seed, mutations, BYTE_CASES_PER_SEED)


@pytest.mark.parametrize("seed", seed_params())
def test_field_mutations_keep_the_contract(fusionopt_bin, tmp_path, seed):
    assert_fuzz_keeps_contract(fusionopt_bin, tmp_path, seed, field_mutations, FIELD_CASES_PER_SEED)


# ---------------------------------------------------------------- structured mutations
# Each builder writes one hostile model into `folder` and returns its path; each case lists
# the exit codes it may end with (always within the contract).

def value_info(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def tensor_without_data(name, data_type, dims, raw=b""):
    tensor = TensorProto(name=name, data_type=data_type, dims=dims)
    tensor.raw_data = raw
    return tensor


def single_op(op_type, inputs, attributes=None, opset=17, outputs=1):
    """A model with one node. `inputs`: name -> ndarray (initializer), (elem_type, shape)
    (graph input), a TensorProto (initializer as is) or None (omitted optional input)."""
    names, graph_inputs, initializers = [], [], []
    for name, spec in inputs.items():
        if spec is None:
            names.append("")
            continue
        names.append(name)
        if isinstance(spec, (np.ndarray, np.generic)):
            initializers.append(numpy_helper.from_array(np.asarray(spec), name))
        elif isinstance(spec, TensorProto):
            initializers.append(spec)
        else:
            graph_inputs.append(value_info(name, *spec))
    output_names = [f"out{i}" for i in range(outputs)]
    node = helper.make_node(op_type, names, output_names, name=f"the_{op_type.lower()}",
                            **(attributes or {}))
    graph_outputs = [value_info(name, 0, None) for name in output_names]
    return lib.make_model([node], graph_inputs, graph_outputs, initializers, opsets=(("", opset),))


def with_attribute(model, attribute):
    model.graph.node[0].attribute.append(attribute)
    return model


F32, I64 = TensorProto.FLOAT, TensorProto.INT64
X4 = {"x": (F32, [1, 3, 8, 8])}


def ints(*values):
    return np.array(values, dtype=np.int64)


def floats(*values):
    return np.array(values, dtype=np.float32)


def slice_inputs(shape, start, end, axis, step):
    return {"x": (F32, shape), "st": ints(start), "en": ints(end), "ax": ints(axis), "sp": ints(step)}


def saved(make, name="model.onnx"):
    """A builder that writes what `make()` returns (a ModelProto or bytes); models are made
    when the test runs, not at collection."""
    def build(folder):
        model = make()
        data = model if isinstance(model, bytes) else model.SerializeToString()
        path = folder / name
        path.write_bytes(data)
        return path
    return build


def with_bytes_replaced(model, old, new):
    data = model.SerializeToString()
    assert old in data and len(old) == len(new)
    return data.replace(old, new)


def relu_over(initializer):
    return lib.make_model([helper.make_node("Relu", [initializer.name], ["y"])], [],
                          [value_info("y", 0, None)], [initializer])


def relu_of_input(elem_type, shape):
    return lib.make_model([helper.make_node("Relu", ["x"], ["y"])], [value_info("x", elem_type, shape)],
                          [value_info("y", elem_type, None)])


def external_tensor(folder, entries, dims=(4,), data=bytes(16), data_type=F32):
    (folder / "w.bin").write_bytes(data)
    tensor = TensorProto(name="w", data_type=data_type, dims=list(dims),
                         data_location=TensorProto.EXTERNAL)
    for key, value in entries:
        tensor.external_data.append(onnx.StringStringEntryProto(key=key, value=value))
    model = lib.make_model([helper.make_node("Identity", ["w"], ["y"])], [], [value_info("y", 0, None)],
                           [tensor])
    return lib.save(model, folder / "model.onnx")


def external(entries, **kwargs):
    return lambda folder: external_tensor(folder, entries, **kwargs)


def external_fifo(folder):
    os.mkfifo(folder / "pipe.bin")
    path = external_tensor(folder, [("location", "pipe.bin")])
    (folder / "w.bin").unlink()
    return path


def branch(output, source="x"):
    return helper.make_graph([helper.make_node("Identity", [source], [output])], f"{output}_graph", [],
                             [lib.float_input(output, [4])])


def if_model(then_graph, else_graph, outputs=("y",)):
    attributes = {}
    if then_graph is not None:
        attributes["then_branch"] = then_graph
    if else_graph is not None:
        attributes["else_branch"] = else_graph
    node = helper.make_node("If", ["c"], list(outputs), **attributes)
    inputs = [lib.float_input("x", [4]), value_info("c", TensorProto.BOOL, [])]
    return lib.make_model([node], inputs, [lib.float_input(name, None) for name in outputs])


def loop_model(body_inputs, carried=1):
    body = helper.make_graph([helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
                             [value_info(name, 0, None) for name in body_inputs],
                             [value_info("cond_out", TensorProto.BOOL, [])])
    node = helper.make_node("Loop", ["trips", ""] + ["x"] * carried, [f"o{i}" for i in range(carried)],
                            body=body)
    return lib.make_model([node], [lib.float_input("x", [4]), value_info("trips", I64, [])],
                          [lib.float_input(f"o{i}", None) for i in range(carried)])


varint, length_delimited = lib.varint, lib.length_delimited


def nested_if_bytes(depth):
    """If inside If `depth` deep, encoded by hand: onnx's own protobuf refuses to build or
    parse messages this deep, which is the point."""
    graph = branch("o0").SerializeToString()
    for level in range(1, depth + 1):
        then_attribute = (onnx.AttributeProto(name="then_branch", type=onnx.AttributeProto.GRAPH)
                          .SerializeToString() + length_delimited(6, graph))
        else_attribute = helper.make_attribute("else_branch", branch(f"e{level}")).SerializeToString()
        node = (helper.make_node("If", ["c"], [f"o{level}"]).SerializeToString()
                + length_delimited(5, then_attribute) + length_delimited(5, else_attribute))
        outputs = [lib.float_input(f"o{level}", [4])]
        outer = [lib.float_input("x", [4]), value_info("c", TensorProto.BOOL, [])]
        inputs = outer if level == depth else []
        graph = (helper.make_graph([], f"g{level}", inputs, outputs).SerializeToString()
                 + length_delimited(1, node))
    header = onnx.ModelProto(ir_version=8, opset_import=[helper.make_opsetid("", 17)])
    return header.SerializeToString() + length_delimited(7, graph)


def nested_if_model(depth):
    graph = branch("o0")
    for level in range(1, depth + 1):
        node = helper.make_node("If", ["c"], [f"o{level}"], then_branch=graph,
                                else_branch=branch(f"e{level}"))
        graph = helper.make_graph([node], f"g{level}", [], [lib.float_input(f"o{level}", [4])])
    return lib.make_model(graph.node, [lib.float_input("x", [4]), value_info("c", TensorProto.BOOL, [])],
                          graph.output)


def many_inputs(op_type, count, **attributes):
    node = helper.make_node(op_type, ["x"] * count, ["y"], **attributes)
    return lib.make_model([node], [lib.float_input("x", [4])], [lib.float_input("y", None)])


def named(name):
    nodes = [helper.make_node("Relu", ["x"], [name], name=name),
             helper.make_node("Identity", [name], ["y"], name=name + "_id")]
    return lib.make_model(nodes, [lib.float_input("x", [4])], [lib.float_input("y", [4])])


def ghost_read():
    node = helper.make_node("Add", ["x", "ghost"], ["y"])
    return lib.make_model([node], [lib.float_input("x", [4])], [lib.float_input("y", [4])],
                          value_info=[lib.float_input("ghost", [4])])


def ghost_output():
    node = helper.make_node("Relu", ["x"], ["y"])
    outputs = [lib.float_input("y", [4]), lib.float_input("ghost", [4])]
    return lib.make_model([node], [lib.float_input("x", [4])], outputs,
                          value_info=[lib.float_input("ghost", [4])])


def if_reads_own_output():
    return if_model(branch("t", source="y"), branch("e"))


def shape_of_scalar_plus_one():
    """Shape(scalar) is the empty vector; [] + [1] broadcasts to []."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Add", ["s", "one"], ["y"])]
    return lib.make_model(nodes, [lib.float_input("x", [])], [value_info("y", I64, None)],
                          [numpy_helper.from_array(ints(1), "one")])


def unsqueeze_many_axes(count):
    node = helper.make_node("Unsqueeze", ["x"], ["y"], axes=list(range(count)))
    return lib.make_model([node], [lib.float_input("x", [4])], [lib.float_input("y", None)],
                          opsets=(("", 11),))


def invalid_utf8_producer():
    return with_bytes_replaced(lib.tiny_model(), b"fusionopt-tests", b"fusionopt-test\xff")


def invalid_utf8_metadata():
    model = lib.tiny_model()
    helper.set_model_props(model, {"author": "AUTHORNAME"})
    return with_bytes_replaced(model, b"AUTHORNAME", b"AUTHOR\xc3\x28ME")


OK, INVALID, IO = {lib.EXIT_OK}, {lib.EXIT_INVALID}, {lib.EXIT_IO}
ANY = set(ALLOWED_EXIT_CODES)

def case(builder, expected):
    """A STRUCTURED entry: the builder and the exit codes it may end with."""
    return (builder, expected)


def made(expected, make):
    return case(saved(make), expected)


def op(expected, op_type, inputs, attributes=None, **kwargs):
    return made(expected, lambda: single_op(op_type, inputs, attributes, **kwargs))


def weight(expected, data_type, dims, raw=b""):
    return made(expected, lambda: relu_over(tensor_without_data("w", data_type, dims, raw)))


def typed_weight(expected, **fields):
    return made(expected, lambda: relu_over(TensorProto(name="w", dims=[4], **fields)))


CONV = {"x": (F32, [1, 3, 8, 8]), "w": (F32, [4, 3, 3, 3])}
IMAGE = {"x": (F32, [1, 1, 4, 4]), "roi": None}
TWO = {"a": (F32, [2, 3]), "b": (F32, [2, 3])}

STRUCTURED = {
    # ---- tensors and declared types (loader)
    "initializer-negative-dim": weight(INVALID, F32, [-1]),
    "initializer-2^40-elements-16-bytes": weight(INVALID, F32, [2**40], bytes(16)),
    "initializer-int64-max-dim": weight(INVALID, F32, [INT64_MAX]),
    "initializer-2^62-floats-no-data": weight(INVALID, F32, [2**62]),
    "initializer-2^31x2^31-floats-no-data": weight(INVALID, F32, [2**31, 2**31]),
    "initializer-2^57-complex128-no-data": weight(INVALID, TensorProto.COMPLEX128, [2**57]),
    "raw-data-short": weight(INVALID, F32, [4], bytes(15)),
    "raw-data-long": weight(INVALID, F32, [4], bytes(17)),
    "typed-data-count-mismatch": typed_weight(INVALID, data_type=F32, float_data=[1.0, 2.0, 3.0]),
    "string-count-mismatch": typed_weight(INVALID, data_type=TensorProto.STRING, string_data=[b"a"]),
    "data-type-0": weight(INVALID, 0, [4], bytes(16)),
    "data-type-99": weight(INVALID, 99, [4], bytes(16)),
    "data-type-negative": weight(INVALID, -7, [4], bytes(16)),
    "attribute-tensor-data-type-99": op(INVALID, "Constant", {},
                                        {"value": tensor_without_data("v", 99, [1], bytes(4))}),
    "declared-negative-dim": made(INVALID, lambda: relu_of_input(F32, [2, -3])),
    "declared-elem-type-99": made(INVALID, lambda: relu_of_input(99, [2])),
    "declared-dim-2^40": made(OK, lambda: relu_of_input(F32, [2**40, 3])),
    "declared-dims-int64-max-concat": op(OK, "Concat", {"a": (F32, [INT64_MAX, 2]),
                                                        "b": (F32, [INT64_MAX, 2])}, {"axis": 0}),
    # ---- external data
    "external-offset-2^64-1": case(external([("location", "w.bin"), ("offset", str(2**64 - 1))]),
                                   INVALID),
    "external-offset-2^64-8-wraps-range": case(external(
        [("location", "w.bin"), ("offset", str(2**64 - 8)), ("length", "16")]), INVALID),
    "external-offset-2^64": case(external([("location", "w.bin"), ("offset", str(2**64))]), INVALID),
    "external-offset-negative": case(external([("location", "w.bin"), ("offset", "-1")]), INVALID),
    "external-offset-not-a-number": case(external([("location", "w.bin"), ("offset", "12abc")]),
                                         INVALID),
    "external-length-2^64-1": case(external([("location", "w.bin"), ("length", str(2**64 - 1))]),
                                   INVALID),
    "external-no-location": case(external([("offset", "0")]), INVALID),
    "external-location-is-folder": case(external([("location", ".")]), INVALID | IO),
    "external-location-with-nul": case(external([("location", "w.bin\x00../../etc/passwd")]), ANY),
    "external-2^62-floats-zero-bytes": case(external([("location", "w.bin")], dims=(2**62,)),
                                            INVALID),
    "external-location-is-fifo": case(external_fifo, INVALID | IO),
    # ---- graph structure
    "if-empty-branches": made(ANY, lambda: if_model(helper.make_graph([], "t", [], []),
                                                    helper.make_graph([], "e", [], []))),
    "if-without-branches": made(ANY, lambda: if_model(None, None)),
    "if-more-outputs-than-branches": made(ANY, lambda: if_model(branch("t"), branch("e"), ("y", "z"))),
    "loop-body-one-input": made(ANY, lambda: loop_model(["only"])),
    "loop-body-five-inputs": made(ANY, lambda: loop_model(["i", "cond", "a", "b", "c"])),
    "loop-without-carried-values": made(ANY, lambda: loop_model(["i", "cond"], carried=0)),
    "scan-negative-num-scan-inputs": op(ANY, "Scan", {"x": (F32, [4])},
                                        {"body": branch("b"), "num_scan_inputs": -3}),
    "sum-with-10k-inputs": made(OK, lambda: many_inputs("Sum", 10_000)),
    "concat-with-10k-inputs": made(OK, lambda: many_inputs("Concat", 10_000, axis=0)),
    "split-with-10k-outputs": op(OK, "Split", {"x": (F32, [4])}, {"axis": 0}, opset=11,
                                 outputs=10_000),
    "nested-if-depth-30": made(OK, lambda: nested_if_model(30)),
    "nested-if-depth-200": made(INVALID, lambda: nested_if_bytes(200)),
    "names-1MB-long": made(OK, lambda: named("n" * 1_000_000)),
    "names-with-nul-bytes": made(OK, lambda: named("a\x00b")),
    "value-info-defines-nothing": made(INVALID, ghost_read),
    "graph-output-only-in-value-info": made(INVALID, ghost_output),
    "if-branch-reads-the-if-output": made(INVALID, if_reads_own_output),
    # ---- shape inference on hostile attributes: warnings, never failures
    "concat-axis-100": op(OK, "Concat", TWO, {"axis": 100}),
    "concat-axis-int64-min": op(OK, "Concat", TWO, {"axis": INT64_MIN}),
    "concat-rank-mismatch": op(OK, "Concat", {"a": (F32, [2, 3]), "b": (F32, [2, 3, 4])}, {"axis": 0}),
    "softmax-axis-int64-max": op(OK, "Softmax", X4, {"axis": INT64_MAX}),
    "gather-axis-minus-5": op(OK, "Gather", {"x": (F32, [2, 3]), "i": ints(0)}, {"axis": -5}),
    "gathernd-batch-dims-huge": op(OK, "GatherND", {"x": (F32, [2, 3]), "i": (I64, [2, INT64_MAX])},
                                   {"batch_dims": 2**62}),
    "transpose-perm-out-of-range": op(OK, "Transpose", X4, {"perm": [0, 1, 2, 9]}),
    "transpose-perm-repeated": op(OK, "Transpose", X4, {"perm": [0, 0, 1, 2]}),
    "transpose-perm-too-short": op(OK, "Transpose", X4, {"perm": [1, 0]}),
    "transpose-perm-empty": made(OK, lambda: with_attribute(single_op("Transpose", X4), helper.make_attribute(
        "perm", [], attr_type=onnx.AttributeProto.INTS))),
    "reshape-two-minus-ones": op(OK, "Reshape", {"x": (F32, [2, 6]), "s": ints(-1, -1)}),
    "reshape-zero-past-rank": op(OK, "Reshape", {"x": (F32, [12]), "s": ints(0, 0, 0)}),
    "reshape-negative-size": op(OK, "Reshape", {"x": (F32, [12]), "s": ints(-5, 2)}),
    "reshape-huge-sizes": op(OK, "Reshape", {"x": (F32, [12]), "s": ints(2**62, 2**62, -1)}),
    "slice-step-0": op(OK, "Slice", slice_inputs([8], 0, 4, 0, 0)),
    "slice-int64-extremes": op(OK, "Slice", slice_inputs([8], INT64_MIN, INT64_MAX, 0, INT64_MIN)),
    "slice-int64-max-dim-int64-min-step": op(OK, "Slice", slice_inputs([INT64_MAX], -1, INT64_MIN, 0,
                                                                       INT64_MIN)),
    "slice-negative-step-on-empty-dim": op(OK, "Slice", slice_inputs([0], -1, -10, 0, -1)),
    "slice-axis-out-of-range": op(OK, "Slice", slice_inputs([8], 0, 4, 3, 1)),
    "slice-starts-declared-2^40-long": op(OK, "Slice", {"x": (F32, [8]), "st": (I64, [2**40]),
                                                        "en": (I64, [2**40])}),
    "conv-stride-0": op(OK, "Conv", CONV, {"strides": [0, 0]}),
    "conv-kernel-bigger-than-input": op(OK, "Conv", {"x": (F32, [1, 3, 2, 2]),
                                                      "w": (F32, [4, 3, 9, 9])}),
    "conv-dilation-2^62": op(OK, "Conv", CONV, {"dilations": [2**62, 2**62]}),
    "conv-negative-pads": op(OK, "Conv", CONV, {"pads": [-9, -9, -9, -9]}),
    "conv-kernel-shape-wrong-length": op(OK, "Conv", CONV, {"kernel_shape": [3]}),
    "conv-input-rank-1": op(OK, "Conv", {"x": (F32, [8]), "w": (F32, [4, 3, 3, 3])}),
    "conv-transpose-output-padding-short": op(OK, "ConvTranspose", CONV,
                                              {"output_padding": [1], "strides": [2, 2]}),
    "maxpool-ceil-mode-huge-dim": op(OK, "MaxPool", {"x": (F32, [1, 1, INT64_MAX, 8])},
                                     {"kernel_shape": [3, 3], "ceil_mode": 1, "strides": [2, 2]}),
    "pad-negative-pads": op(OK, "Pad", {"x": (F32, [2, 3]), "p": ints(-5, -5, -5, -5)}),
    "pad-odd-pads-length": op(OK, "Pad", {"x": (F32, [2, 3]), "p": ints(1, 1, 1)}),
    "pad-axes-out-of-range": op(OK, "Pad", {"x": (F32, [2, 3]), "p": ints(1, 1), "v": None,
                                            "a": ints(7)}, opset=18),
    "split-sizes-not-summing": op(OK, "Split", {"x": (F32, [6]), "s": ints(1, 2)}, outputs=2),
    "split-sizes-negative": op(OK, "Split", {"x": (F32, [6]), "s": ints(-4, 10)}, outputs=2),
    "split-more-sizes-than-outputs": op(OK, "Split", {"x": (F32, [6]), "s": ints(1, 2, 3)}, outputs=2),
    "squeeze-axis-out-of-range": op(OK, "Squeeze", {"x": (F32, [1, 3]), "a": ints(5)}),
    "unsqueeze-repeated-axes": op(OK, "Unsqueeze", {"x": (F32, [3]), "a": ints(0, 0)}),
    "unsqueeze-300k-axes": made(OK, lambda: unsqueeze_many_axes(300_000)),
    "unsqueeze-axes-2^58-int64-no-data": op(INVALID, "Unsqueeze", {
        "x": (F32, [3]), "a": tensor_without_data("a", I64, [2**58])}),
    "resize-scales-2^62-floats-no-data": op(INVALID, "Resize", {
        **IMAGE, "scales": tensor_without_data("scales", F32, [2**62])}),
    "resize-scales-zero-nan-inf": op(OK, "Resize", {**IMAGE, "scales": floats(0, np.nan, np.inf, -1)}),
    "resize-sizes-negative": op(OK, "Resize", {**IMAGE, "scales": None,
                                               "sizes": ints(1, 1, -4, INT64_MIN)}),
    "flatten-axis-out-of-range": op(OK, "Flatten", X4, {"axis": 9}),
    "tile-repeats-huge-and-negative": op(OK, "Tile", {"x": (F32, [2, 3]), "r": ints(2**62, -3)}),
    "expand-negative-shape": op(OK, "Expand", {"x": (F32, [2, 3]), "s": ints(-2, 3)}),
    "constant-of-shape-negative": op(OK, "ConstantOfShape", {"s": ints(3, -1)}),
    "constant-of-shape-huge": op(OK, "ConstantOfShape", {"s": ints(2**62, 2**62)}),
    "range-delta-0": op(OK, "Range", {"a": np.int64(0), "b": np.int64(10), "d": np.int64(0)}),
    "range-huge-count": op(OK, "Range", {"a": np.float32(0), "b": np.float32(1e30),
                                         "d": np.float32(1e-30)}),
    "onehot-depth-nan": op(OK, "OneHot", {"i": (I64, [3]), "d": floats(np.nan), "v": floats(0, 1)}),
    "onehot-axis-out-of-range": op(OK, "OneHot", {"i": (I64, [3]), "d": ints(4), "v": floats(0, 1)},
                                   {"axis": 5}),
    "topk-k-huge": op(OK, "TopK", {"x": (F32, [4]), "k": ints(2**62)}, outputs=2),
    "einsum-malformed": op(OK, "Einsum", {"a": (F32, [2, 3]), "b": (F32, [3, 4])},
                           {"equation": "ij,...j...->k."}),
    "einsum-wrong-rank": op(OK, "Einsum", {"a": (F32, [2, 3]), "b": (F32, [3])},
                            {"equation": "ijk,jk->i"}),
    "depth-to-space-blocksize-0": op(OK, "DepthToSpace", X4, {"blocksize": 0}),
    "reduce-axes-out-of-range": op(OK, "ReduceSum", {"x": (F32, [2, 3]), "a": ints(-9)}),
    "argmax-axis-out-of-range": op(OK, "ArgMax", {"x": (F32, [2, 3])}, {"axis": 2**40}),
    "layernorm-axis-out-of-range": op(OK, "LayerNormalization", {"x": (F32, [2, 3]), "g": (F32, [3])},
                                      {"axis": -9}),
    "matmul-scalar-operands": op(OK, "MatMul", {"a": (F32, []), "b": (F32, [])}),
    "cast-to-99": op(OK, "Cast", {"x": (F32, [2])}, {"to": 99}),
    "eyelike-dtype-99": op(OK, "EyeLike", {"x": (F32, [2, 2])}, {"dtype": 99}),
    "shape-of-scalar-plus-one": made(OK, shape_of_scalar_plus_one),
    "empty-int64-plus-scalar-initializers": op(OK, "Add", {"a": np.zeros([0], np.int64),
                                                           "b": np.int64(1)}),
}


def structured_params():
    params = []
    for case_id, (builder, expected, *marks) in STRUCTURED.items():
        params.append(pytest.param(builder, expected, id=case_id, marks=marks))
    return params


@pytest.mark.parametrize("builder, expected", structured_params())
def test_structured_mutation_keeps_the_contract(fusionopt_bin, tmp_path, builder, expected):
    source = tmp_path / "in"
    source.mkdir()
    model_path = builder(source)
    problems, outcomes = check_model(fusionopt_bin, model_path, tmp_path / "out")
    assert not problems, "\n".join(problems + [o.describe() for o in outcomes])
    for outcome in outcomes:
        assert outcome.rc in expected, f"expected exit code in {sorted(expected)}: {outcome.describe()}"
    assert len({outcome.rc for outcome in outcomes}) == 1, "inspect and optimize disagree"


# ---------------------------------------------------------------- CLI edges

@pytest.mark.parametrize("make", [
    pytest.param(invalid_utf8_producer, id="producer-name"),
    pytest.param(invalid_utf8_metadata, id="metadata-value"),
])
def test_inspect_json_survives_invalid_utf8(fusionopt_bin, tmp_path, make):
    path = saved(make)(tmp_path)
    outcome = run_binary(fusionopt_bin, "inspect", "--json", path)
    assert not contract_problems(outcome, path), outcome.describe()
    assert outcome.rc == lib.EXIT_OK


@pytest.mark.parametrize("separator", ["\r", "\x0b", "\u2028"], ids=["CR", "VT", "U+2028"])
def test_error_message_is_one_line_whatever_the_names(fusionopt_bin, tmp_path, separator):
    model = lib.make_model([helper.make_node("Add", ["x", f"gho{separator}st"], ["y"])],
                           [lib.float_input("x", [4])], [lib.float_input("y", [4])])
    path = lib.save(model, tmp_path / "model.onnx")
    outcome = run_binary(fusionopt_bin, "inspect", path)
    assert outcome.rc == lib.EXIT_INVALID
    lines = outcome.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), lines


def external_model_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    return external_tensor(folder, [("location", "w.bin"), ("offset", "0"), ("length", "16")],
                           data=np.arange(4, dtype=np.float32).tobytes())


def test_output_over_the_inputs_external_data_is_refused(fusionopt_bin, tmp_path):
    model_path = external_model_folder(tmp_path)
    weights = lib.FileSnapshot(model_path.parent / "w.bin")
    outcome = run_binary(fusionopt_bin, model_path, "-o", model_path.parent / "w.bin", "-O0")
    assert outcome.rc == lib.EXIT_USAGE, outcome.describe()
    weights.assert_unchanged()


def test_output_that_is_a_folder_fails_without_leftovers(fusionopt_bin, tmp_path):
    model_path = lib.save(lib.tiny_model(), tmp_path / "model.onnx")
    out_dir = tmp_path / "out"
    (out_dir / "result.onnx").mkdir(parents=True)
    outcome = run_binary(fusionopt_bin, model_path, "-o", out_dir / "result.onnx", "-O0")
    assert not contract_problems(outcome, model_path, out_dir / "result.onnx"), outcome.describe()
    assert outcome.rc == lib.EXIT_IO
    assert lib.folder_listing(out_dir) == ["result.onnx"]


def test_failed_external_data_save_leaves_no_data_file(fusionopt_bin, tmp_path):
    model_path = lib.save(lib.tiny_model(), tmp_path / "model.onnx")
    out_dir = tmp_path / "out"
    (out_dir / "result.onnx").mkdir(parents=True)
    outcome = run_binary(fusionopt_bin, model_path, "-o", out_dir / "result.onnx", "-O0",
                         "--external-data", "--external-data-threshold", "0")
    assert not contract_problems(outcome, model_path, out_dir / "result.onnx"), outcome.describe()
    assert lib.folder_listing(out_dir) == ["result.onnx"]


@pytest.mark.parametrize("output", ["", "missing/result.onnx", "result.onnx/"])
def test_unusable_output_paths_fail_without_leftovers(fusionopt_bin, tmp_path, output):
    model_path = lib.save(lib.tiny_model(), tmp_path / "model.onnx")
    work = tmp_path / "cwd"
    work.mkdir()
    done = subprocess.run([str(fusionopt_bin), str(model_path), "-o", output, "-O0"], cwd=work,
                          capture_output=True, timeout=TIMEOUT_S)
    outcome = Outcome([model_path, "-o", output], done.returncode, done.stdout, done.stderr)
    assert outcome.rc in {lib.EXIT_USAGE, lib.EXIT_IO}, outcome.describe()
    one_error_line = outcome.stderr.count(b"\n") == 1 and outcome.stderr.startswith(b"error: ")
    assert one_error_line, outcome.describe()
    assert lib.folder_listing(work) == []
    assert lib.folder_listing(tmp_path) == ["cwd", "model.onnx"]


def test_external_data_name_equal_to_the_output_is_refused(fusionopt_bin, tmp_path):
    model_path = lib.save(lib.tiny_model(), tmp_path / "model.onnx")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    outcome = run_binary(fusionopt_bin, model_path, "-o", out_dir / "result.onnx", "-O0",
                         "--external-data", "--external-data-threshold", "0",
                         "--external-data-name", "result.onnx")
    assert outcome.rc == lib.EXIT_USAGE, outcome.describe()
    assert lib.folder_listing(out_dir) == []
