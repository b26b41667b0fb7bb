"""What `--report`'s `fusions` must say about an optimized model, at every level (docs/passes.md §3,
"--report"), checked against the original model and the written one.

Two kinds of record:

- a fused node (every O2 pass, fuse-attention, fuse-horizontal-elementwise): `node` names an
  `ai.fusionopt` node calling `function`, whose body — Constants aside, in order — is one op per
  name in `replaced`;
- a horizontal contraction merge (fuse-horizontal-contractions, kind `horizontal_<Op>`, no
  function): the members' contractions and the bias/activation nodes moved below the Split are
  replaced by a *standard* merged contraction named `node`, its merged epilogue and a Split with
  one output per member. A later fusion may take any of these new nodes into its body, so their
  names may be listed in a later record's `replaced`; everything else a record replaces is an
  original node.

The check expands every fused node of the optimized model into its body, naming the body's nodes
after the record's `replaced` list, and then accounts for every node of the expanded graph: an
original node (same name, same op), a node created by a horizontal merge (found by following the
merged contraction's output to its Split), a Shape fuse-attention added when it rewired a dim read
outside the attention block (counter `shape_reads_rewired`), the Mul and Add lower-batchnorm
wrote for a BatchNormalization (`<bn>_scale`, `<bn>_shift`; counter `batchnorms_lowered`), or an
unnamed node of an op the original has unnamed.
"""
from collections import Counter
from dataclasses import dataclass

FUSION_DOMAIN = "ai.fusionopt"
HORIZONTAL_CONTRACTIONS = "fuse-horizontal-contractions"
HORIZONTAL_ELEMENTWISE = "fuse-horizontal-elementwise"
ATTENTION = "fuse-attention"
# The kinds the O3 passes record; an O3 pass recording another kind is a mistake. (When
# fuse-horizontal-elementwise inlines fused members and then cannot outline their union, each
# member becomes its own elementwise node again: kind `elementwise`.)
O3_PASS_KINDS = {
    HORIZONTAL_CONTRACTIONS: {"horizontal_MatMul", "horizontal_Gemm", "horizontal_Conv"},
    ATTENTION: {"attention"},
    HORIZONTAL_ELEMENTWISE: {"horizontal_elementwise", "elementwise"},
}
INTERNAL = "::"  # body-internal values of the expanded graph are "<fused node>::<body value>"


@dataclass
class ExpandedNode:
    name: str
    op_type: str
    inputs: list
    outputs: list
    fused_into: str = None  # the ai.fusionopt node whose body it is, or None for a node of the graph


def original_node_ops(original):
    ops = {}
    for node in original.graph.node:
        if node.name:
            assert node.name not in ops, f"original node name {node.name!r} is not unique"
            ops[node.name] = node.op_type
    return ops


def expand_fused_nodes(out, record_of_node):
    """The optimized graph with every ai.fusionopt node replaced by its function's body; the body's
    non-Constant nodes take the names of the node's record's `replaced`, in order."""
    functions = {(function.domain, function.name): function for function in out.functions}
    expanded = []
    for node in out.graph.node:
        if node.domain != FUSION_DOMAIN:
            expanded.append(ExpandedNode(node.name, node.op_type, list(node.input), list(node.output)))
            continue
        fusion = record_of_node.get(node.name)
        assert fusion is not None, f"fused node {node.name} has no record in the report"
        what = f"fusion {node.name} ({fusion['pass']})"
        assert node.op_type == fusion["function"], what
        function = functions.get((FUSION_DOMAIN, fusion["function"]))
        assert function is not None, f"{what}: the model has no function {fusion['function']}"
        assert (len(function.input), len(function.output)) == (len(node.input), len(node.output)), what
        actual = {**dict(zip(function.input, node.input)), **dict(zip(function.output, node.output))}

        def rename(value):
            return actual.get(value, f"{node.name}{INTERNAL}{value}") if value else ""

        body = [body_node for body_node in function.node if body_node.op_type != "Constant"]
        assert len(body) == len(fusion["replaced"]), \
            f"{what}: {len(fusion['replaced'])} replaced names for a body of {len(body)} ops"
        for body_node, name in zip(body, fusion["replaced"]):
            assert body_node.domain in ("", "ai.onnx"), f"{what}: body op {body_node.domain}::{body_node.op_type}"
            expanded.append(ExpandedNode(name, body_node.op_type, [rename(value) for value in body_node.input],
                                         [rename(value) for value in body_node.output], node.name))
    return expanded


def split_into_members(fusion, original_ops):
    """A horizontal record's `replaced` as [[contraction, epilogue...], ...], one list per member."""
    contraction = fusion["kind"][len("horizontal_"):]
    members = []
    for name in fusion["replaced"]:
        if original_ops.get(name) == contraction:
            members.append([name])
        else:
            assert members, f"{fusion['node']}: replaced starts with {name}, not a {contraction}"
            members[-1].append(name)
    return members


def assert_horizontal_merge(fusion, level_one, original_ops, expanded, created):
    """A horizontal record against the graph the O3 passes start from, the -O1 model (its members),
    and the expanded optimized graph (the merged contraction, its merged epilogue and the Split);
    adds what it created to `created` (name -> op)."""
    what = f"horizontal merge {fusion['node']}"
    assert fusion["function"] == "", f"{what}: a horizontal merge is standard ops, it calls no function"
    unknown = [name for name in fusion["replaced"] if name not in original_ops]
    assert not unknown, f"{what}: replaced {unknown} are not nodes of the original"
    members = split_into_members(fusion, original_ops)
    assert len(members) >= 2, f"{what}: {len(members)} member(s)"
    member_ops = [[original_ops[name] for name in member] for member in members]
    assert all(ops == member_ops[0] for ops in member_ops), f"{what}: members continue differently: {member_ops}"
    by_name = {node.name: node for node in level_one.graph.node}
    shared_inputs = {by_name[member[0]].input[0] for member in members}
    assert len(shared_inputs) == 1, f"{what}: the contractions read {shared_inputs}"
    tails = []
    for member in members:
        for earlier, later in zip(member, member[1:]):
            assert set(by_name[later].input) & set(by_name[earlier].output), f"{what}: {later} does not continue {earlier}"
        tails.append(by_name[member[-1]].output[0])

    readers = {}
    for node in expanded:
        for value in node.inputs:
            readers.setdefault(value, []).append(node)
    merged = [node for node in expanded if node.name == fusion["node"]]
    assert len(merged) == 1, f"{what}: the merged contraction is {'missing' if not merged else 'there twice'}"
    current = merged[0]
    assert fusion["node"] not in original_ops, f"{what}: the merged contraction reuses an original name"
    shared_input = shared_inputs.pop()
    assert current.op_type == member_ops[0][0] and current.inputs[0] == shared_input, \
        f"{what}: is a {current.op_type} of {current.inputs[:1]}, not a {member_ops[0][0]} of {shared_input}"
    chain = [current]
    for op in member_ops[0][1:]:
        following = readers.get(current.outputs[0], [])
        assert len(following) == 1 and following[0].op_type == op, \
            f"{what}: after {current.name} expected one {op}, found {[(n.name, n.op_type) for n in following]}"
        current = following[0]
        chain.append(current)
    split = readers.get(current.outputs[0], [])
    assert len(split) == 1 and split[0].op_type == "Split" and len(split[0].outputs) == len(members), \
        f"{what}: {current.name} is not read by one Split of {len(members)} outputs"
    for value, tail in zip(split[0].outputs, tails):
        assert value == tail or INTERNAL in value, f"{what}: the Split writes {value}, the member wrote {tail}"
    for node in [*chain, *split]:
        assert node.name not in original_ops and node.name not in created, f"{what}: {node.name} is not new"
        created[node.name] = node.op_type


def attention_shape_reads(expanded, original_ops, report):
    """The Shape nodes fuse-attention added (name -> "Shape"): new standard Shapes outside fused
    bodies that only original Gathers read, no more than its `shape_reads_rewired` counter."""
    readers = {}
    for node in expanded:
        for value in node.inputs:
            readers.setdefault(value, []).append(node)
    added = {node.name: node.op_type for node in expanded
             if node.name and node.name not in original_ops and node.fused_into is None and node.op_type == "Shape" and
             readers.get(node.outputs[0]) and
             all(reader.op_type == "Gather" and reader.name in original_ops for reader in readers[node.outputs[0]])}
    rewired = sum(entry["counters"].get("shape_reads_rewired", 0) for entry in report["passes"]
                  if entry["pass"] == ATTENTION)
    assert len(added) <= rewired, f"{len(added)} new Shape nodes, fuse-attention rewired {rewired} reads: {added}"
    return added


def lowered_batchnorms(expanded, original, original_ops, report):
    """The Mul and Add lower-batchnorm wrote for an original BatchNormalization `bn` (named
    `bn_scale` and `bn_shift`, name -> op), no more pairs than its `batchnorms_lowered` counter."""
    created = {}
    names = {node.name: node.op_type for node in expanded}
    # Named after the BatchNormalization, or after its output when it has no name.
    stems = [name for name, op in original_ops.items() if op == "BatchNormalization" and name not in names]
    stems += [node.output[0] for node in original.graph.node if node.op_type == "BatchNormalization" and not node.name]
    for stem in stems:
        for suffix, lowered_op in (("_scale", "Mul"), ("_shift", "Add")):
            if names.get(stem + suffix) == lowered_op:
                created[stem + suffix] = lowered_op
    lowered = sum(entry["counters"].get("batchnorms_lowered", 0) for entry in report["passes"]
                  if entry["pass"] == "lower-batchnorm")
    assert len(created) <= 2 * lowered, f"{len(created)} lowered nodes, lower-batchnorm counted {lowered}: {created}"
    return created


def assert_fusions_describe_the_graph(report, pass_levels, level, original, out, level_one=None):
    """Every record names what it replaced and where that went (see the module's docstring);
    every node of the optimized model, fused bodies expanded, is accounted for. `level_one`, the
    model -O1 writes (the graph the O3 passes start from), is needed when the report has
    horizontal contraction merges."""
    fusions = report["fusions"]
    assert fusions, f"-O{level} fused nothing"
    original_ops = original_node_ops(original)
    out_names = {node.name for node in out.graph.node}
    allowed_levels = {f"O{number}" for number in range(2, level + 1)}
    record_of_node = {}  # the last record naming each node: a later record may reuse a freed name
    for fusion in fusions:
        what = f"fusion {fusion['node']} ({fusion['pass']}, {fusion['kind']})"
        assert pass_levels.get(fusion["pass"]) in allowed_levels, what
        if fusion["pass"] in O3_PASS_KINDS:
            assert fusion["kind"] in O3_PASS_KINDS[fusion["pass"]], what
        assert fusion["replaced"], what
        assert bool(fusion["function"]) == (fusion["pass"] != HORIZONTAL_CONTRACTIONS), \
            f"{what}: only a horizontal contraction merge calls no function"
        for name in fusion["replaced"]:
            assert name not in out_names, f"{what}: replaced {name!r} is still in the optimized model"
        if fusion["function"]:
            record_of_node[fusion["node"]] = fusion
    surviving = [fusion for fusion in record_of_node.values() if fusion["node"] in out_names]
    surviving_ids = {id(fusion) for fusion in surviving}
    expanded = expand_fused_nodes(out, {fusion["node"]: fusion for fusion in surviving})

    # Horizontal merges first: they create the standard nodes later records may list.
    created = {}
    horizontal = [fusion for fusion in fusions if fusion["pass"] == HORIZONTAL_CONTRACTIONS]
    assert level_one is not None or not horizontal, "horizontal merges are checked against the -O1 model"
    for fusion in horizontal:
        assert_horizontal_merge(fusion, level_one, original_ops, expanded, created)
    created.update(attention_shape_reads(expanded, original_ops, report))
    created.update(lowered_batchnorms(expanded, original, original_ops, report))

    # A fused node that is gone had its body inlined into a later horizontal elementwise merge.
    for index, fusion in enumerate(fusions):
        if not fusion["function"] or id(fusion) in surviving_ids:
            continue
        absorbers = [later for later in fusions[index + 1:] if later["pass"] == HORIZONTAL_ELEMENTWISE and
                     id(later) in surviving_ids and set(fusion["replaced"]) <= set(later["replaced"])]
        assert absorbers, f"fusion {fusion['node']} ({fusion['pass']}) is gone and no later merge took its body"

    # Every node of the expanded graph: original, created by a merge, or unnamed as in the original.
    for node in expanded:
        where = f"{node.name!r} ({node.op_type}{', in ' + node.fused_into if node.fused_into else ''})"
        if node.name in original_ops:
            assert node.op_type == original_ops[node.name], f"{where} was a {original_ops[node.name]}"
        elif node.name in created:
            assert node.op_type == created[node.name], where
        else:
            assert node.name == "" and node.fused_into is None, f"{where} is neither original nor created by a merge"
    unnamed_out = Counter(node.op_type for node in expanded if not node.name)
    unnamed_original = Counter(node.op_type for node in original.graph.node if not node.name)
    assert not unnamed_out - unnamed_original, f"unnamed nodes the original lacks: {unnamed_out - unnamed_original}"

    # Each original node is replaced once, by a record that stands in the final model.
    final_records = [*surviving, *horizontal]
    replaced_anywhere = Counter(name for fusion in final_records for name in fusion["replaced"])
    shared = [name for name, count in replaced_anywhere.items() if count > 1]
    assert not shared, f"nodes replaced by more than one fusion: {shared}"
    expanded_names = Counter(node.name for node in expanded if node.name)
    assert not [name for name, count in expanded_names.items() if count > 1], "a node name occurs twice"

    functions = {(function.domain, function.name) for function in out.functions}
    called = {(node.domain, node.op_type) for node in out.graph.node}
    assert functions <= called, f"the optimized model keeps functions nothing calls: {functions - called}"
