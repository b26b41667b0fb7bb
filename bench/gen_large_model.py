#!/usr/bin/env python3
"""Writes a large MatMul/Add chain whose weights live in one external-data file.

    python bench/gen_large_model.py --out DIR --size-gb 1.0 [--hidden 2048] [--verify]

DIR receives model.onnx and weights.bin. The weights file is written one tensor at a time, so
memory stays at a few weight tensors whatever the size; each tensor starts on a 4096-byte
boundary so loaders can memory-map it directly. The graph is
output = ((input @ W0 + b0) @ W1 + b1) ... with input float32 [batch, hidden].
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

WEIGHTS_FILE = "weights.bin"
MODEL_FILE = "model.onnx"
ALIGNMENT = 4096
BYTES_PER_GB = 10 ** 9


def hashed_uniform(shape, salt, std):
    """Deterministic pseudo-random floats with mean 0 and the given std, from an integer hash.

    Hashing the element index is several times faster than a seeded RNG on gigabytes, and,
    unlike a periodic pattern, its rows are uncorrelated, so the product of many layers keeps
    its scale instead of growing geometrically.
    """
    index = np.arange(int(np.prod(shape)), dtype=np.uint32).reshape(shape)
    h = index * np.uint32(0x9E3779B1) + np.uint32((salt * 0x85EBCA77) & 0xFFFFFFFF)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x7FEB352D)
    h ^= h >> np.uint32(15)
    h *= np.uint32(0x846CA68B)
    h ^= h >> np.uint32(16)
    unit = (h >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24) - np.float32(0.5)
    return unit * np.float32(std * np.sqrt(12.0))


def layer_weights(layer, hidden):
    # std 1/sqrt(hidden) keeps activations O(1) through the whole chain.
    weight = hashed_uniform((hidden, hidden), salt=2 * layer, std=hidden ** -0.5)
    bias = hashed_uniform((hidden,), salt=2 * layer + 1, std=0.01)
    return weight, bias


def external_tensor(name, array, offset):
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=array.shape,
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", WEIGHTS_FILE), ("offset", str(offset)),
                       ("length", str(array.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def write_weights(path, layer_count, hidden):
    """Streams every layer's tensors into path; returns their TensorProtos (data stays on disk)."""
    tensors = []
    with open(path, "wb") as weights_file:
        for layer in range(layer_count):
            for kind, array in zip(("weight", "bias"), layer_weights(layer, hidden)):
                offset = -(-weights_file.tell() // ALIGNMENT) * ALIGNMENT
                weights_file.write(b"\0" * (offset - weights_file.tell()))
                weights_file.write(array.astype("<f4", copy=False).tobytes())
                tensors.append(external_tensor(f"layers.{layer}.{kind}", array, offset))
    return tensors


def build_graph(tensors, layer_count, hidden):
    nodes = []
    x = "input"
    for layer in range(layer_count):
        scope = f"/layers.{layer}"
        product = f"{scope}/MatMul_output_0"
        nodes.append(helper.make_node("MatMul", [x, f"layers.{layer}.weight"], [product],
                                      name=f"{scope}/MatMul"))
        x = "output" if layer == layer_count - 1 else f"{scope}/Add_output_0"
        nodes.append(helper.make_node("Add", [product, f"layers.{layer}.bias"], [x],
                                      name=f"{scope}/Add"))
    return helper.make_graph(
        nodes, "large_matmul_chain",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", hidden])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", hidden])],
        initializer=tensors,
        doc_string=f"{layer_count} MatMul+Add layers of width {hidden}, weights in {WEIGHTS_FILE}.")


def verify(model_path, layer_count, hidden):
    """Runs the model in onnxruntime and compares it with numpy, regenerating weights one by one."""
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal((2, hidden)).astype(np.float32)
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    actual = session.run(None, {"input": x})[0]
    expected = x
    for layer in range(layer_count):
        weight, bias = layer_weights(layer, hidden)
        expected = expected @ weight + bias
    error = float(np.max(np.abs(actual - expected)) / max(float(np.max(np.abs(expected))), 1e-30))
    print(f"verify: onnxruntime vs numpy, max error relative to max |output|: {error:.2e}, "
          f"output std {float(np.std(actual)):.3f}")
    return error < 1e-4


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--size-gb", type=float, default=1.0,
                        help="approximate weight size in GB (10^9 bytes)")
    parser.add_argument("--hidden", type=int, default=2048, help="layer width")
    parser.add_argument("--verify", action="store_true",
                        help="also run it in onnxruntime and compare with numpy")
    args = parser.parse_args(argv)
    if args.size_gb <= 0 or args.hidden <= 0:
        parser.error("--size-gb and --hidden must be positive")

    layer_bytes = 4 * (args.hidden * args.hidden + args.hidden)
    layer_count = max(1, round(args.size_gb * BYTES_PER_GB / layer_bytes))
    args.out.mkdir(parents=True, exist_ok=True)
    weights_path = args.out / WEIGHTS_FILE
    model_path = args.out / MODEL_FILE

    tensors = write_weights(weights_path, layer_count, args.hidden)
    model = helper.make_model(build_graph(tensors, layer_count, args.hidden),
                              producer_name="fusionopt-bench", ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17)])
    model_path.write_bytes(model.SerializeToString(deterministic=True))
    # The path form resolves external data relative to the model and checks it is there.
    onnx.checker.check_model(str(model_path), full_check=True)

    print(f"{model_path}: {model_path.stat().st_size} bytes")
    print(f"{weights_path}: {weights_path.stat().st_size} bytes "
          f"({layer_count} layers, hidden {args.hidden})")
    if args.verify and not verify(model_path, layer_count, args.hidden):
        print("verify: FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
