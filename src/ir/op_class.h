// What kind of kernel an op is, for fusion decisions and launch estimates (TVM's op patterns,
// DESIGN.md §5).
//
// kElementwise: output element i depends only on input element i after numpy broadcasting
// (Add, Relu, Cast, Where, Clip, comparisons, activations). kReduction: reduces along axes
// (ReduceX, Softmax, LayerNormalization, ArgMax). kContraction: MatMul, Gemm, Conv,
// ConvTranspose, Einsum. kWindow: pooling, LRN, normalizations over spatial windows.
// kDataMovement: copies elements without arithmetic (Transpose, Concat, Gather, Pad, ...).
// kView: a reinterpretation of the same bytes (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, inference Dropout) — no kernel. kShape: host-side shape arithmetic (Shape,
// Size, Constant, ConstantOfShape over a known shape is not: it writes memory). kControlFlow:
// If, Loop, Scan. kFused: an ai.fusionopt node. kOpaque: everything else (other domains,
// sequences, quantization, random ops) — never fused, never blocks fusion elsewhere.
#pragma once

#include <cstdint>
#include <string_view>

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

// Whether running the node launches a kernel (views, shape arithmetic and constants do not).
bool LaunchesKernel(const Node& node);

// Kernels one inference is expected to launch: every launching node of the graph, plus the
// nodes of every subgraph counted once (a branch or loop body's real count depends on data).
int64_t EstimateKernelLaunches(const Graph& graph);

}  // namespace fusionopt
