// Contraction epilogues as oneDNN post-ops: what oneDNN applies to a MatMul, Gemm or Conv
// output while it writes it, so bias, activation and residual add cost no extra pass.
//
//   Relu, LeakyRelu, Elu, Sigmoid, Tanh, HardSwish, Gelu, Clip    → eltwise post-op
//   HardSigmoid                                                   → eltwise linear, clip
//   GELU (erf or tanh form), SiLU x·Sigmoid(αx) decomposed        → eltwise gelu / swish(α)
//   Add / Mul of a constant scalar                                → eltwise linear
//   Add of a tensor (bias per output channel, a scalar, or a residual of the output's shape)
//                                                                 → binary add (Conv: a
//                                                                   residual is summed into
//                                                                   the output, see below)
//
// A Conv writes a blocked layout; a residual in the runtime's row-major layout is reordered
// into the output buffer first and oneDNN's sum post-op adds the product to it, which its
// direct kernels support for every layout.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cpu_runtime/elementwise/elementwise.h"
#include "cpu_runtime/fused/body.h"
#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

struct PostOp {
  // kEltwise: `algorithm` (an eltwise one) with alpha and beta. kAdd: a tensor added (an
  // addend, or a Conv's summed residual). kScalar: `algorithm` (binary_mul, _add, _max or _min)
  // with the scalar `alpha`: what LowerRepeatedEltwise makes of a repeated eltwise step.
  enum class Kind { kEltwise, kAdd, kScalar };
  Kind kind = Kind::kEltwise;
  dnnl::algorithm algorithm = dnnl::algorithm::undef;  // kEltwise, kScalar
  float alpha = 0.0f;
  float beta = 0.0f;
};

// oneDNN 2.6's post-op injectors hold one set of parameters per eltwise algorithm, so a chain
// that has an algorithm twice with different parameters computes the second with the first's:
// two Clips of different bounds, or two linear steps (measured on its brgemm and jit int8 and
// float convolutions; tests/unit/cpu_contraction_test.cc). Every repeat after the first is
// rewritten here as exact binary post-ops with scalar operands — linear a·x + b as a multiply and
// an add, clip as a max and a min. False, with `post_ops` unchanged, when a repeat has no such
// form (LeakyRelu, Elu or Swish of two different slopes): the chain cannot run as post-ops.
bool LowerRepeatedEltwise(std::vector<PostOp>& post_ops);

struct PostOpChain {
  std::vector<PostOp> post_ops;
  std::vector<size_t> addends;  // the body input each kAdd reads, in order
};

// The epilogue after `contraction` in `info.body` as post-ops: one path from the product to
// the body's only output, every body node on it (or a Constant it reads), each step a post-op
// above. nullopt otherwise.
std::optional<PostOpChain> MatchPostOpChain(const FusedBodyInfo& info, const Node& contraction, int64_t opset);
// The same from `product`, the output of a head of several nodes (a dynamically quantized
// contraction), every one of them taken as part of the chain.
std::optional<PostOpChain> MatchPostOpChain(const FusedBodyInfo& info, const Value& product,
                                            const std::vector<const Node*>& head, int64_t opset);

// The post-ops of a one-input activation (Relu, LeakyRelu, Elu, Sigmoid, Tanh, HardSwish,
// HardSigmoid, Gelu, Clip with constant bounds); nullopt for anything else.
std::optional<std::vector<PostOp>> ActivationPostOps(const Node& node, int64_t opset);

// How many inputs MatMul (2), Gemm and Conv (3) take at most: where the addends begin.
size_t ContractionInputs(const std::string& op_type);

// The kernel of `info.node` (MatMul, Gemm or Conv) with `post_ops` applied to its output. Its
// context holds the node's inputs (null for omitted ones, up to ContractionInputs), then one
// addend per kAdd. Compute returns Unsupported —
// and writes nothing — for dtypes other than float32/float16/bfloat16, addends broadcast in
// ways the post-ops do not take, and shapes for which oneDNN has only its reference
// implementation with these post-ops.
Result<std::unique_ptr<Kernel>> CreateContractionWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops);

// ---- for the contraction kernels

// How one addend enters: a binary add reading `desc`, or (Conv) the residual summed into the
// output.
struct AddendLayout {
  bool summed = false;
  dnnl::memory::desc desc;  // binary: the addend's dims as oneDNN broadcasts them
  // summed: oneDNN adds sum_scale · (residual - sum_zero), the residual read as sum_type (an
  // integer kernel's quantized residual; undef: the dst's own type).
  float sum_scale = 1.0f;
  int32_t sum_zero = 0;
  dnnl::memory::data_type sum_type = dnnl::memory::data_type::undef;
};

// The layout of an addend of `addend_dims` added to an output of `output_dims` that oneDNN
// writes as `dst_dims` (MatMul may fold batch dims into rows), or nullopt when the post-ops
// cannot take it: a scalar, one value per `channel_axis` position of the output, or the
// output's full shape (summed when `sum_full`, else a binary add).
std::optional<AddendLayout> LayoutAddend(const std::vector<int64_t>& addend_dims,
                                         const std::vector<int64_t>& output_dims,
                                         const std::vector<int64_t>& dst_dims, size_t channel_axis, bool sum_full);

// oneDNN's post-ops for `post_ops`, the i-th kAdd laid out as `addends[i]`, appended to
// `start` (a kernel's own post-ops, which run first). `rank` is the primitive's dst rank (a
// kScalar operand has it, all dims 1).
dnnl::post_ops BuildPostOps(const std::vector<PostOp>& post_ops, const std::vector<AddendLayout>& addends,
                            size_t rank, dnnl::post_ops start = dnnl::post_ops());

// The execute() argument id of the binary post-op at `index` in the post-op list.
inline int PostOpAddendArgument(size_t index) {
  return DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(index)) | DNNL_ARG_SRC_1;
}

// A run's addends: the context's inputs from `first` on, one per kAdd, laid out and
// converted to float32.
struct PostOpAddends {
  std::vector<AddendLayout> layouts;
  std::vector<RtTensor> values;    // float32
  int summed = -1;                 // the residual a Conv sums into its output (index into values)
  std::vector<int64_t> key;        // the addends' dims, for primitive caches
};
Result<PostOpAddends> GatherAddends(const KernelContext& context, size_t first, const std::vector<PostOp>& post_ops,
                                    const std::vector<int64_t>& output_dims, const std::vector<int64_t>& dst_dims,
                                    size_t channel_axis, bool sum_full);
// Adds the binary addends and the kScalar operands (for a dst of `rank`) to a primitive's
// execute() arguments; `first_index` is the position of post_ops[0] in the primitive's list.
void BindAddends(const std::vector<PostOp>& post_ops, const PostOpAddends& addends, size_t rank,
                 std::unordered_map<int, dnnl::memory>& arguments, size_t first_index = 0);

// Throws dnnl::error when oneDNN fell back to its reference implementation — orders of
// magnitude slower than the unfused primitive plus an elementwise pass (or, for the int8
// contractions and pooling, than their float32 path and direct loop, where the refusal sends
// them) — or, for a summed residual, to its GEMM-based convolution, whose sum post-op is slow.
void RejectSlowImplementation(const char* implementation, bool sums_residual = false);

// Whether SiLU x·sigmoid(αx) runs in the engine after the contraction rather than as oneDNN's
// swish post-op. oneDNN's AVX-512 kernels spend 0.25–0.3 ns an element on it at 2 threads,
// more than a separate pass of the engine's FMA exponential costs with its memory traffic
// (EfficientNet-B0 8% faster on AMD EPYC, docs/benchmarks.md); its AVX2 kernels, measured
// before this choice existed, keep the post-op. FUSIONOPT_CPU_SWISH=engine|post-op overrides.
bool SwishInEngine();

// The last step of a contraction's epilogue when oneDNN 2.6 applies it inside the kernel far
// below memory speed, run instead as one in-place pass of the elementwise engine over the
// product. The tanh GELU is one everywhere: 0.86 ms as a post-op on a [128, 3072] Gemm output
// (2.2 ns an element) against 0.17 ms for the erf form (docs/benchmarks.md, issue 15). SiLU
// (swish) is one where SwishInEngine() says so. Only the last step moves, so the steps
// before it still run as post-ops in their order.
class HostEpilogueStep {
 public:
  // Takes the step off the end of `post_ops` when it is one; nullopt leaves them as they are.
  static std::optional<HostEpilogueStep> TakeFrom(std::vector<PostOp>& post_ops);
  // `output` is the float32 product with every post-op before this step applied.
  Status Apply(RtTensor& output) const;

 private:
  explicit HostEpilogueStep(ew::Program program) : program_(std::move(program)) {}
  ew::Program program_;
};

// The post-ops as one elementwise program over float32 values, for kernels that apply the
// epilogue themselves (the Winograd convolution, on its output tiles): input 0 is the product
// with its bias, input 1 the summed residual where there is one. nullopt when a step has no
// such form: a binary addend (per channel or scalar) or an algorithm not listed in this
// file's header.
std::optional<ew::Program> PostOpsAsProgram(const std::vector<PostOp>& post_ops,
                                            const std::vector<AddendLayout>& addends);

// Factories for the contraction kernels with post-ops (contraction/matmul.cc,
// contraction/conv.cc).
Result<std::unique_ptr<Kernel>> CreateMatMulWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops);
Result<std::unique_ptr<Kernel>> CreateGemmWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops);
Result<std::unique_ptr<Kernel>> CreateConvWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops);

}  // namespace fusionopt::cpu
