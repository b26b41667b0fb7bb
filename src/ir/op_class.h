// What kind of kernel an op is, for fusion decisions and launch estimates (TVM's op patterns,
// DESIGN.md §5).
//
// kElementwise: output element i depends only on input element i after numpy broadcasting
// (Add, Relu, Cast, Where, Clip, comparisons, activations, QuantizeLinear, DequantizeLinear).
// kReduction: reduces along axes (ReduceX, Softmax, LayerNormalization, ArgMax,
// DynamicQuantizeLinear). kContraction: MatMul, Gemm, Conv,
// ConvTranspose, Einsum, MatMulInteger, ConvInteger. kWindow: pooling, LRN, normalizations over spatial windows.
// kDataMovement: copies elements without arithmetic (Transpose, Concat, Gather, Pad, ...).
// kView: a reinterpretation of the same bytes (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, inference Dropout) — no kernel. kShape: host-side shape arithmetic (Shape,
// Size, Constant, ConstantOfShape over a known shape is not: it writes memory). kControlFlow:
// If, Loop, Scan. kFused: an ai.fusionopt node. kOpaque: everything else (other domains but
// onnxruntime's QuantizeLinear/DequantizeLinear, sequences, QLinearMatMul/QLinearConv, random
// ops) — never fused, never blocks fusion elsewhere.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_set>

#include "ir/constant_value.h"
#include "ir/graph.h"

namespace fusionopt {

inline constexpr std::string_view kFusionDomain = "ai.fusionopt";

enum class OpClass { kElementwise, kReduction, kContraction, kWindow, kDataMovement, kView, kShape,
                     kControlFlow, kFused, kOpaque };

std::string_view NameOf(OpClass op_class);

// Classifies by domain and op type. Ops whose class depends on attributes (Dropout in
// training mode is random) are classified by their inference behaviour.
OpClass ClassifyOp(const Node& node);
OpClass ClassifyOp(std::string_view domain, std::string_view op_type);

// True for ops that read nothing but their inputs and write nothing but their outputs, with
// deterministic results: what a rewrite may move, merge or evaluate at optimize time.
bool IsPure(const Node& node);

// Whether running the node launches a kernel by its op (views, shape arithmetic and
// constants do not; nor does a Split whose input has only unit dims before the axis, whose
// parts are contiguous slices). FindLaunchFreeNodes refines this with what the node reads.
bool LaunchesKernel(const Node& node);

// Nodes that launch no kernel per inference although their op would:
// - load_time: pure nodes computed from constants alone (a ConstantOfShape weight, a
//   Transpose of an initializer). A runtime computes them once when it loads the model.
// - host: integer/bool arithmetic on shapes and integer constants (Shape → Gather → Concat,
//   position ids sliced from a constant buffer). Backends compute these on the host, as
//   onnxruntime's GPU providers do with shape subgraphs.
// Constants are initializers callers cannot override and Constant nodes.
struct LaunchFreeNodes {
  std::unordered_set<const Node*> load_time;
  std::unordered_set<const Node*> host;
  bool contains(const Node* node) const { return load_time.count(node) || host.count(node); }
};
LaunchFreeNodes FindLaunchFreeNodes(const Graph& graph, InitializerRule initializers);
// The rule FindLaunchFreeNodes applies to each node of `graph` in order: adds `node` to `free`
// when it is launch-free given the nodes before it already in `free`; returns whether it did.
bool ClassifyLaunchFree(const Graph& graph, const Node& node, InitializerRule initializers, LaunchFreeNodes& free);

// Kernels one inference is expected to launch: every node that launches a kernel and is not
// launch-free, plus the nodes of every subgraph counted once (a branch or loop body's real
// count depends on data).
int64_t EstimateKernelLaunches(const Graph& graph, InitializerRule initializers);
int64_t EstimateKernelLaunches(const Model& model);

}  // namespace fusionopt
