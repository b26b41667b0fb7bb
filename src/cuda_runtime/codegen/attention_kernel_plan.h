// What both attention kernels of attention_codegen.h are generated from: each operand's
// addressing at the planned sizes (patterns/attention/layout.h's derivation, as pointers and
// strides of the kernel's parameters) and the statements they share — an operand element as the
// compute type (rotated when the body rotates it), the score epilogue (scale, softcap, mask,
// causal) and a row's final 1/l. Internal to the attention family.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "ir/dtype.h"
#include "patterns/attention/attention.h"
#include "patterns/attention/layout.h"

namespace fusionopt::cuda::attention_kernel {

// Where element (b, h, s, d) of an operand lies: base + b·batch + h·head + s·seq + d·depth.
struct Addressing {
  std::string pointer;
  int64_t base = 0, batch = 0, head = 0, seq = 0, depth = 0;
  int64_t depth_size = 0;  // D (or Dv)
  int64_t seq_size = 0;    // S
  int64_t batch_size = 0;
  int64_t group = 1;  // query heads per head of this operand (grouped-query K and V)
  DataType dtype = DataType::kUndefined;
  std::string At(const std::string& b, const std::string& h, const std::string& s, const std::string& d) const;
};

// The rotary tables' pointers and addressing (patterns/attention/layout.h's RotaryLayout).
struct RotaryAddressing {
  std::string cos, sin;
  DataType dtype = DataType::kUndefined;
  RotaryLayout layout;
};

// The mask's (or the score bias's) pointer and broadcast strides over [B,H,Sq,Sk].
struct MaskAddressing {
  std::string pointer;
  bool additive = true;
  std::array<int64_t, 4> strides = {0, 0, 0, 0};
  DataType dtype = DataType::kUndefined;
};

struct Geometry {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0;
};

struct KernelPlan {
  Geometry geometry;
  Addressing q, k, v;
  std::optional<RotaryAddressing> q_rotary, k_rotary;
  std::optional<MaskAddressing> bias;  // additive, before the mask
  std::optional<MaskAddressing> mask;
  // Output element (b, h, query, d).
  int64_t out_batch = 0, out_head = 0, out_seq = 0;
  DataType dtype = DataType::kFloat;
};

std::string Number(int64_t value);

// -inf as a float expression of the generated source.
inline constexpr const char* kNegativeInfinity = "__int_as_float(0xff800000)";

// The larger of `candidate` and `current`, NaN winning (a NaN score makes its row NaN, as the
// softmax of the unfused body does): the online softmax's running maximum in both kernels.
std::string MaxOrNan(const std::string& candidate, const std::string& current);

// Element (b, h, `s`, d) of an operand as the compute type (float), with the variables `b`,
// `h` and `d` in scope.
std::string Load(const Addressing& operand, const std::optional<RotaryAddressing>& rotary, const std::string& s);

// Statements turning the float `s` (a raw score Q·K) into the body's masked score (the plan's
// bias and mask), with `b`, `h`, `query` and `key` in scope.
std::string ScoreEpilogue(const FusedAttention& attention, const KernelPlan& plan, int64_t depth);

// 1 / l of row `r` from `row_max[r]` and `row_sum[r]`, or what a row without a finite softmax gives.
std::string RowInverse(const FusedAttention& attention);

// Output element (b, h, query, `d`).
std::string OutputAt(const KernelPlan& plan, const std::string& d);

// One generated attention kernel: its source (without the prelude) and launch.
struct AttentionKernel {
  std::string source;
  int64_t blocks = 0;
  uint32_t threads = 0;
  uint32_t shared_bytes = 0;
  std::string description;
};

// The tensor-core kernel (attention_mma_kernel.cc) runs fp16 and bf16 operands on sm_80 and newer,
// head sizes padded with zeros to the fragments' 16 and 8 (every plan's are at most
// kMaxAttentionHeadDim, which its registers and 48 KiB of shared memory hold).
bool TensorCoreEligible(const KernelPlan& plan, int sm_arch);

AttentionKernel TensorCoreKernel(const FusedAttention& attention, const KernelPlan& plan, const std::string& entry,
                                 const std::string& parameters);

}  // namespace fusionopt::cuda::attention_kernel
