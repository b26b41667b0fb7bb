// Integer contractions of quantized operands on oneDNN's int8 primitives: the one kernel
// behind MatMulInteger, QLinearMatMul, MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm,
// ConvInteger, QLinearConv and the fused QDQ units (DQ → MatMul/Gemm/Conv → bias → activation → Q).
//
// The accumulator is exact int32:   acc = Σ_k (a - a_zero) · (b - b_zero[n])
// and leaves the kernel as one of
//   int32      y = acc
//   float      y = act(acc · scale[n] + bias[n])             scale = a_scale · b_scale[n] (· alpha)
//   quantized  y = saturate(round(act(acc · scale[n] + bias[n]) / y_scale) + y_zero)
// bias[n] is a float bias, plus an int32 bias (QLinearConv's B, QGemm's C) times scale[n]: what
// onnxruntime's kernels compute, to the rounding of one float multiply.
//
// oneDNN computes u8·s8 and s8·s8 with a common zero point per operand, per-channel scales,
// the bias and activation as post-ops and the requantization in its store (VNNI and AMX where
// the host has them). uint8 weights become int8 once (b - 128, zero point - 128). A per-row zero
// point of A, per-column zero points of B that differ, or weights zero points of a convolution
// run on the float32 path below instead (no exporter writes those; ONNX's tests do).
//
// Hosts without VNNI multiply u8·s8 pairs with an instruction that saturates the sum of two
// products at int16; oneDNN then computes a wrong accumulator for weights beyond ±63 (the
// reason onnxruntime's quantizer has reduce_range). There the kernel runs on float32 values
// instead, exact while |acc| < 2^24 and within one float rounding beyond (CpuHasVnni()); an int32
// output (MatMulInteger, ConvInteger), whose every bit counts, is summed in double beyond that.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "cpu_runtime/contraction/epilogue.h"
#include "cpu_runtime/contraction/window.h"
#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

// What a kernel does with the accumulator; fixed when the kernel is created.
struct IntegerEpilogue {
  enum class Output { kInt32, kFloat, kQuantized };
  Output output = Output::kInt32;
  DataType float_type = DataType::kFloat;       // kFloat: float, or float16 (computed in float)
  DataType quantized_type = DataType::kUint8;   // kQuantized: uint8 or int8
  // Float-domain steps between the bias and the requantization (a fused unit's activation):
  // eltwise post-ops, and at most one kAdd, where a residual of the output's shape is added as
  // residual_scale · (r - residual_zero): an 8-bit one, or (residual_type float, scale 1,
  // zero 0) the float residual of a float-output kernel.
  std::vector<PostOp> activation;
  float residual_scale = 1.0f;
  int32_t residual_zero = 0;
  DataType residual_type = DataType::kUndefined;
};

// One run's quantization parameters, read from the node's inputs.
struct IntegerParameters {
  std::vector<int32_t> a_zero = {0};  // 1, or M (per row of A; reference loops)
  std::vector<int32_t> b_zero = {0};  // 1, or N (per column of B / output channel)
  std::vector<float> scale = {1.0f};  // 1 or N: a_scale · b_scale[n] (· alpha)
  // A factor known only when the kernel runs (a dynamically quantized A's scale), applied
  // after `scale`: the primitive is built once for every value of it.
  std::optional<float> runtime_scale;
  std::vector<float> bias;            // empty, 1 or N: float, added after scaling
  std::vector<int32_t> int_bias;      // empty, 1 or N: int32, scaled with the accumulator
  float y_scale = 1.0f;
  int32_t y_zero = 0;
};

// Whether the instruction set oneDNN runs on has VNNI (AVX512-VNNI or AVX-VNNI) or AMX: u8·s8
// products then sum in int32 without saturation.
bool CpuHasVnni();
// The path a kernel created now takes: oneDNN's int8 primitives where the host has VNNI, else
// float32. FUSIONOPT_CPU_INT8=float32|onednn overrides (read at each kernel's creation, so tests
// can run both paths on one host).
enum class Int8Path { kOneDnn, kFloat32 };
Int8Path Int8PathOnThisHost();

// A matrix product of quantized operands with numpy batching (MatMul's shapes; Gemm's transA
// and transB as views).
class IntegerMatMul {
 public:
  // `constant_b` (when B is an initializer): packed once, converted to int8 first if uint8.
  IntegerMatMul(IntegerEpilogue epilogue, TensorPtr constant_b, bool trans_a = false, bool trans_b = false);
  ~IntegerMatMul();

  // y's dtype follows the epilogue; its dims are MatMul's (or Gemm's) output. `residual`: the
  // epilogue's quantized residual, of the output's dims.
  Status Run(const RtTensor& a, const RtTensor& b, const IntegerParameters& parameters, KernelContext& context,
             size_t output = 0, const RtTensor* residual = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A convolution of quantized operands (Conv's attributes and shapes). x and the residual may lie
// in a convolution layout (rt_tensor.h); output 0 stays in oneDNN's where context.conv_layout_output
// allows it.
class IntegerConv {
 public:
  IntegerConv(IntegerEpilogue epilogue, WindowAttributes attributes, int64_t group, TensorPtr constant_w);
  ~IntegerConv();

  Status Run(const RtTensor& x, const RtTensor& w, const IntegerParameters& parameters, KernelContext& context,
             size_t output = 0, const RtTensor* residual = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ---- reading quantization parameters from a node's inputs

// An error unless `x` is uint8 or int8 ("`op` takes uint8 or int8 tensors, not float").
Status CheckQuantizedOperand(const RtTensor& x, const std::string& op);
// A zero point (int8/uint8/int32, scalar or 1-D) as int32 values; {0} when absent.
Result<std::vector<int32_t>> ZeroPointValues(const RtTensor* zero_point, const char* what);
// A scale (float or float16, scalar or 1-D) as float values.
Result<std::vector<float>> ScaleValues(const RtTensor& scale, const char* what);
// a · b elementwise, where either has one value.
std::vector<float> ScaleProduct(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace fusionopt::cpu
