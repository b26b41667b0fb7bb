"""Graph-building helpers that name nodes, values and weights the way PyTorch's ONNX exporter does.

Node names are module scopes joined by "/" plus the op type ("/layer1/layer1.0/conv1/Conv"), with
"_1", "_2"... for repeats in one scope; outputs are "<node>_output_<i>"; parameters use the dotted
module path ("layer1.0.conv1.weight"), and transposed Linear weights get "onnx::MatMul_<n>" names.
Mirroring that naming makes our passes and round-trip tests meet real-world names with slashes,
dots and colons.
"""

import itertools
from contextlib import contextmanager

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
# Opset 17 first appeared in IR version 8; pinning it keeps files stable across onnx releases.
IR_VERSION = 8
PRODUCER_NAME = "fusionopt-models"
PRODUCER_VERSION = "0.1"

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
# torch.finfo(torch.float32).min, the fill value HuggingFace uses for masked attention scores.
FLOAT32_MIN = float(np.finfo(np.float32).min)


class GraphBuilder:
    """Accumulates nodes, initializers and graph inputs/outputs under PyTorch-style scopes."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self._nodes = []
        self._initializers = []
        self._inputs = []
        self._outputs = []
        self._scope = []
        self._name_counts = {}
        self._matmul_weight_ids = itertools.count(1000)

    @contextmanager
    def scope(self, *segments):
        self._scope.extend(segments)
        try:
            yield
        finally:
            del self._scope[-len(segments):]

    def _unique_node_name(self, op_type):
        base = "/" + "/".join([*self._scope, op_type])
        count = self._name_counts.get(base, 0)
        self._name_counts[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def _parameter_prefix(self):
        # A Sequential child shows up as scope "layer1.0" below "layer1", but its parameters are
        # named "layer1.0.*", not "layer1.layer1.0.*".
        parts = []
        for segment in self._scope:
            if parts and segment.startswith(parts[-1] + "."):
                parts[-1] = segment
            else:
                parts.append(segment)
        return ".".join(parts)

    def op(self, op_type, *inputs, num_outputs=1, output_names=None, **attributes):
        """Adds a node; returns its output name, or the list of names when it has several."""
        name = self._unique_node_name(op_type)
        outputs = output_names or [f"{name}_output_{i}" for i in range(num_outputs)]
        self._nodes.append(helper.make_node(op_type, list(inputs), outputs, name=name, **attributes))
        return outputs[0] if len(outputs) == 1 else outputs

    def constant(self, value, dtype=np.float32):
        """A Constant node, as the exporter emits for scalars and shape pieces."""
        return self.op("Constant", value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))

    def parameter(self, leaf_name, array):
        """An initializer named after the current module path, e.g. "encoder.layer.0.query.bias"."""
        prefix = self._parameter_prefix()
        return self._initializer(f"{prefix}.{leaf_name}" if prefix else leaf_name, array)

    def matmul_weight(self, array):
        """An exporter-made initializer (a Linear weight it transposed), named "onnx::MatMul_<n>"."""
        return self._initializer(f"onnx::MatMul_{next(self._matmul_weight_ids)}", array)

    def _initializer(self, name, array):
        self._initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def normal(self, shape, std, mean=0.0):
        return self.rng.normal(mean, std, size=shape).astype(np.float32)

    def uniform(self, shape, low, high):
        return self.rng.uniform(low, high, size=shape).astype(np.float32)

    def add_input(self, name, elem_type, dims):
        self._inputs.append(helper.make_tensor_value_info(name, elem_type, dims))
        return name

    def add_output(self, name, elem_type, dims):
        self._outputs.append(helper.make_tensor_value_info(name, elem_type, dims))
        return name

    def rename_value(self, old, new):
        """Gives a node output the name a graph output needs, as the exporter's output_names do."""
        for node in self._nodes:
            node.output[:] = [new if name == old else name for name in node.output]
            node.input[:] = [new if name == old else name for name in node.input]
        return new

    def build(self, graph_name, doc_string, metadata=None):
        graph = helper.make_graph(self._nodes, graph_name, self._inputs, self._outputs,
                                  initializer=self._initializers, doc_string=doc_string)
        model = helper.make_model(graph, producer_name=PRODUCER_NAME,
                                  producer_version=PRODUCER_VERSION, ir_version=IR_VERSION,
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        if metadata:
            helper.set_model_props(model, metadata)
        return model


# ---- Layers shared by several models. Each one emits the op sequence torch.onnx.export produces. ----

def linear(b, x, in_features, out_features, module):
    """nn.Linear on a rank-3 input: MatMul with the transposed weight, then Add(bias, product)."""
    with b.scope(module):
        # std 1/sqrt(fan_in) keeps attention scores O(1), so Softmax and masking visibly matter.
        weight = b.matmul_weight(b.normal((in_features, out_features), in_features ** -0.5))
        bias = b.parameter("bias", b.normal((out_features,), 0.02))
        return b.op("Add", bias, b.op("MatMul", x, weight))


def linear_2d(b, x, in_features, out_features, module, output_names=None):
    """nn.Linear on a rank-2 input, which the exporter emits as one Gemm with transB=1."""
    with b.scope(module):
        weight = b.parameter("weight", b.normal((out_features, in_features), in_features ** -0.5))
        bias = b.parameter("bias", b.normal((out_features,), 0.02))
        return b.op("Gemm", x, weight, bias, alpha=1.0, beta=1.0, transB=1, output_names=output_names)


def layer_norm_parameters(b, hidden):
    weight = b.parameter("weight", b.normal((hidden,), 0.1, mean=1.0))
    bias = b.parameter("bias", b.normal((hidden,), 0.1))
    return weight, bias


def layer_norm(b, x, hidden, module, epsilon):
    """nn.LayerNorm as the single LayerNormalization op of opset 17."""
    with b.scope(module):
        weight, bias = layer_norm_parameters(b, hidden)
        return b.op("LayerNormalization", x, weight, bias, axis=-1, epsilon=epsilon)


def layer_norm_decomposed(b, x, hidden, module, epsilon):
    """nn.LayerNorm as exporters below opset 17 spell it out, op by op."""
    with b.scope(module):
        weight, bias = layer_norm_parameters(b, hidden)
        mean = b.op("ReduceMean", x, axes=[-1], keepdims=1)
        centered = b.op("Sub", x, mean)
        squared = b.op("Pow", centered, b.constant(2.0))
        variance = b.op("ReduceMean", squared, axes=[-1], keepdims=1)
        stddev = b.op("Sqrt", b.op("Add", variance, b.constant(epsilon)))
        normalized = b.op("Div", centered, stddev)
        return b.op("Add", b.op("Mul", normalized, weight), bias)


def gelu_erf(b, x):
    """F.gelu(x) (exact): x * (1 + erf(x / sqrt(2))) * 0.5."""
    erf = b.op("Erf", b.op("Div", x, b.constant(1.4142135381698608)))
    return b.op("Mul", b.op("Mul", x, b.op("Add", erf, b.constant(1.0))), b.constant(0.5))


def gelu_tanh(b, x):
    """GPT-2's NewGELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    half_x = b.op("Mul", x, b.constant(0.5))
    cubed = b.op("Pow", x, b.constant(3.0))
    inner = b.op("Add", x, b.op("Mul", cubed, b.constant(0.044715)))
    tanh = b.op("Tanh", b.op("Mul", inner, b.constant(float(np.sqrt(2.0 / np.pi)))))
    return b.op("Mul", half_x, b.op("Add", tanh, b.constant(1.0)))


def dim_of(b, x, axis):
    """x.size(axis) as the exporter traces it: Shape, then Gather with a scalar index."""
    return b.op("Gather", b.op("Shape", x), b.constant(axis, np.int64), axis=0)


def unsqueeze0(b, scalar):
    return b.op("Unsqueeze", scalar, b.constant([0], np.int64))


def split_heads(b, x, num_heads, head_dim, perm=(0, 2, 1, 3)):
    """x.view(x.size()[:-1] + (heads, head_dim)).permute(perm), shape computed at run time."""
    batch = unsqueeze0(b, dim_of(b, x, 0))
    sequence = unsqueeze0(b, dim_of(b, x, 1))
    shape = b.op("Concat", batch, sequence, b.constant([num_heads], np.int64),
                 b.constant([head_dim], np.int64), axis=0)
    return b.op("Transpose", b.op("Reshape", x, shape), perm=list(perm))


def merge_heads(b, context, hidden):
    """context.permute(0, 2, 1, 3).reshape(batch, sequence, hidden)."""
    transposed = b.op("Transpose", context, perm=[0, 2, 1, 3])
    batch = unsqueeze0(b, dim_of(b, transposed, 0))
    sequence = unsqueeze0(b, dim_of(b, transposed, 1))
    shape = b.op("Concat", batch, sequence, b.constant([hidden], np.int64), axis=0)
    return b.op("Reshape", transposed, shape)


def self_attention(b, x, hidden, num_heads, mask=None):
    """HuggingFace BERT/ViT self-attention: per-head scores, optional additive mask, Softmax.

    The key's two transposes (split_heads, then .transpose(-1, -2)) appear as one Transpose
    because the exporter's peephole pass merges consecutive permutations.
    """
    head_dim = hidden // num_heads
    query = linear(b, x, hidden, hidden, "query")
    key = linear(b, x, hidden, hidden, "key")
    value = linear(b, x, hidden, hidden, "value")
    key_t = split_heads(b, key, num_heads, head_dim, perm=(0, 2, 3, 1))
    value_heads = split_heads(b, value, num_heads, head_dim)
    query_heads = split_heads(b, query, num_heads, head_dim)
    scores = b.op("MatMul", query_heads, key_t)
    scores = b.op("Div", scores, b.constant(float(np.sqrt(head_dim))))
    if mask is not None:
        scores = b.op("Add", scores, mask)
    probs = b.op("Softmax", scores, axis=-1)
    return merge_heads(b, b.op("MatMul", probs, value_heads), hidden)


def conv(b, x, in_channels, out_channels, kernel, stride=1, groups=1, bias=False, module=None,
         padding=None):
    """nn.Conv2d, padded by kernel // 2 unless told; He-initialised so activations stay O(1)."""
    fan_in = (in_channels // groups) * kernel * kernel
    with b.scope(*([module] if module else [])):
        weight = b.parameter("weight", b.normal((out_channels, in_channels // groups, kernel, kernel),
                                                np.sqrt(2.0 / fan_in)))
        inputs = [x, weight] + ([b.parameter("bias", b.normal((out_channels,), 0.02))] if bias else [])
        pad = kernel // 2 if padding is None else padding
        return b.op("Conv", *inputs, dilations=[1, 1], group=groups, kernel_shape=[kernel, kernel],
                    pads=[pad, pad, pad, pad], strides=[stride, stride])


def batch_norm(b, x, channels, module):
    """nn.BatchNorm2d in eval mode, with non-trivial running statistics."""
    with b.scope(module):
        scale = b.parameter("weight", b.uniform((channels,), 0.5, 1.5))
        shift = b.parameter("bias", b.normal((channels,), 0.1))
        mean = b.parameter("running_mean", b.normal((channels,), 0.1))
        var = b.parameter("running_var", b.uniform((channels,), 0.5, 1.5))
        return b.op("BatchNormalization", x, scale, shift, mean, var, epsilon=1e-5, momentum=0.9)
