// Fused kernels for the bodies of function calls (function_call.h): what the runtime
// recognises in a body and runs as one kernel.
//
// Each factory looks at the instantiated body and returns null when the body is not its
// kind (the call then runs op by op), so adding a kind never changes what a body computes.
#pragma once

#include <memory>
#include <vector>

#include "cpu_runtime/engine/graph_executor.h"
#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

// What a factory sees: the call, the body instantiated for it (its inputs are the call's
// arguments in order, its outputs the call's results; the call's own copy, so matchers that
// take non-const nodes may read it), and the context the body's ops are prepared in (the
// function's opsets).
struct FusedBodyInfo {
  const Node& call;
  Graph& body;
  const PrepareContext& context;
  std::vector<TensorPtr> constant_inputs;  // per body input: the call's argument when constant
};

class FusedBodyKernel {
 public:
  virtual ~FusedBodyKernel() = default;
  // Computes the call's outputs (context.inputs are the body's inputs) and returns how many
  // kernels that launched; or returns 0, with nothing written, when this run's dtypes or
  // shapes fall outside what the kernel implements — the body then runs op by op.
  virtual Result<int> Compute(KernelContext& context) = 0;
  // Whether Compute takes inputs in convolution layouts and honours conv_layout_output (kernel.h).
  virtual bool ReadsConvLayouts() const { return false; }
};

// Every node an elementwise op (or a scalar Constant): one elementwise program.
std::unique_ptr<FusedBodyKernel> CreateFusedElementwise(const FusedBodyInfo& info);
// One MatMul, Gemm or Conv followed by elementwise ops: oneDNN post-ops where they express
// the epilogue, else the contraction then one elementwise program.
std::unique_ptr<FusedBodyKernel> CreateFusedContraction(const FusedBodyInfo& info);
// A quantized contraction unit (patterns/quantized/contraction.h): DQ → Conv/MatMul/Gemm → bias
// → activations → Q as one int8 kernel with its epilogue as post-ops.
std::unique_ptr<FusedBodyKernel> CreateFusedQuantized(const FusedBodyInfo& info);
// A dynamically quantized contraction (patterns/quantized/dynamic_contraction.h) with its bias,
// activations and residual: one int8 kernel that quantizes its float input itself.
std::unique_ptr<FusedBodyKernel> CreateFusedDynamicQuantized(const FusedBodyInfo& info);
// LayerNorm, RMSNorm (with a residual-add prologue) and Softmax (with scale and mask) over
// the last axis: one pass per row.
std::unique_ptr<FusedBodyKernel> CreateFusedRows(const FusedBodyInfo& info);
// Attention (patterns/attention/attention.h), head split and merge included: one tiled kernel with an
// online softmax that never holds the whole score matrix.
std::unique_ptr<FusedBodyKernel> CreateFusedAttention(const FusedBodyInfo& info);

}  // namespace fusionopt::cpu
