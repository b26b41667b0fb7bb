#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus (scripts/fuzz.sh runs it; nothing here is committed).

    python scripts/fuzz_seeds.py OUT_DIR

OUT_DIR/onnx/ gets, for every models/*.onnx, a "structure" seed (the same graph with each
initializer of more than 16 elements turned into a graph input of its type, so the seed is a
few KB and the printer can write it in full) and a tiny rebuild of the same model from
models/generate.py's builders with toy sizes (real constant weights the folding and fusion
passes act on), a structure seed of every real-export fixture (models/real/fixtures: what
torch.onnx.export writes, its node metadata dropped to keep the seed small), plus hand-made
models for control flow, model-local functions and external data. The IR text seeds for the text parser are printed from these by `fusionopt --dump`
(scripts/fuzz.sh), since only fusionopt can print its own text form.
"""

import math
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
import generate  # noqa: E402  (models/generate.py, found through the path above)

# Toy sizes for models/generate.py's builders: every weight a few hundred elements at most
# (mobilenet_style's channel counts are fixed multiples of 16, too big for a seed: its
# structure seed stands for it).
TINY_SIZES = {
    "resnet_style": dict(image=8, widths=(4, 8, 8), blocks_per_stage=(1, 1, 1), stem_kernel=3,
                         stem_stride=1, classes=4),
    "bert_style": dict(vocab=32, max_positions=8, hidden=8, heads=2, ffn=16, layers=1),
    "gpt2_style": dict(hidden=8, heads=2, ffn=16, max_positions=8),
    "vit_style": dict(image=8, patch=4, hidden=8, heads=2, mlp=16, classes=4),
}
MAX_KEPT_ELEMENTS = 16
MAX_SEED_BYTES = 65536  # scripts/fuzz.sh's -max_len
IR_VERSION = 8  # what the committed models use; onnx's default is newer than fusionopt reads


def structure_seed(model):
    graph = model.graph
    input_names = {value.name for value in graph.input}
    kept = []
    for initializer in graph.initializer:
        if math.prod(initializer.dims) <= MAX_KEPT_ELEMENTS:
            kept.append(initializer)
        elif initializer.name not in input_names:
            graph.input.append(helper.make_tensor_value_info(
                initializer.name, initializer.data_type, list(initializer.dims)))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return model


def real_export_seed(path):
    """A fixture's structure seed without the exporter's per-node metadata (stack traces that
    make up most of a dynamo export's bytes and that no pass reads)."""
    model = structure_seed(onnx.load(str(path)))
    for node in model.graph.node:
        del node.metadata_props[:]
    return model


def tiny_rebuild(name):
    spec = generate.MODELS[name]
    builder = generate.GraphBuilder(spec.seed)
    spec.build(builder, **TINY_SIZES[name])
    return builder.build(name, spec.doc, spec.metadata)


def if_loop_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    then_body = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                                  [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    else_body = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                                  [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])])
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["acc_in", "acc_in"], ["acc_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2, 3])])
    trips = numpy_helper.from_array(np.array(3, dtype=np.int64), "trips")
    nodes = [helper.make_node("If", ["cond"], ["branch"], then_branch=then_body, else_branch=else_body),
             helper.make_node("Loop", ["trips", "cond", "branch"], ["y"], body=loop_body)]
    graph = helper.make_graph(nodes, "control_flow", [x, cond], [y], [trips])
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17)])


def function_model():
    body = [helper.make_node("Mul", ["a", "a"], ["sq"]), helper.make_node("Add", ["sq", "a"], ["r"])]
    function = helper.make_function("local", "SquarePlus", ["a"], ["r"], body,
                                    [helper.make_opsetid("", 17)])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("SquarePlus", ["x"], ["y"], domain="local")],
                              "with_function", [x], [y])
    return helper.make_model(graph, ir_version=IR_VERSION, functions=[function],
                             opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])


def external_data_model():
    weight = numpy_helper.from_array(np.ones((4,), dtype=np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", "16")):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "external", [x], [y], [weight])
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17)])


def main(argv):
    out = Path(argv[1]) / "onnx"
    out.mkdir(parents=True, exist_ok=True)
    seeds = {}
    for path in sorted((ROOT / "models").glob("*.onnx")):
        seeds[f"{path.stem}.structure"] = structure_seed(onnx.load(str(path)))
        if path.stem in TINY_SIZES:
            seeds[f"{path.stem}.tiny"] = tiny_rebuild(path.stem)
    for path in sorted((ROOT / "models" / "real" / "fixtures").glob("*.onnx")):
        seed = real_export_seed(path)
        if seed.ByteSize() <= MAX_SEED_BYTES:  # libFuzzer would truncate a longer one
            seeds[f"real_{path.stem}.structure"] = seed
    seeds["control_flow"] = if_loop_model()
    seeds["local_function"] = function_model()
    seeds["external_data"] = external_data_model()
    for name, model in seeds.items():
        (out / f"{name}.onnx").write_bytes(model.SerializeToString(deterministic=True))
    print(f"fuzz_seeds: {len(seeds)} models in {out}")


if __name__ == "__main__":
    main(sys.argv)
