// What the integer matrix product and the integer convolution share (quantized/
// integer_contraction.h): oneDNN attributes for the epilogue, the run's argument memories, and
// the float32 path's epilogue.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <optional>
#include <unordered_map>
#include <vector>

#include "cpu_runtime/quantized/integer_contraction.h"

namespace fusionopt::cpu::integer {

// Where the output channel lies in the primitive's dst: dims, and the channel axis.
struct ChannelLayout {
  std::vector<int64_t> dst_dims;
  size_t channel_axis = 0;
  int64_t channels() const { return dst_dims[channel_axis]; }
};

// The epilogue's values a primitive is built with — the output scales and the post-ops'
// parameters, fixed at creation (oneDNN 2.6's convolution takes no scales at run time, and its
// matmul given run-time scales leaves its brgemm kernels for a slower GEMM); part of each plan's
// cache key. Only a dynamically quantized A's scale changes per run: a binary Mul post-op.
std::vector<int64_t> EpilogueKey(const IntegerEpilogue& epilogue, const IntegerParameters& parameters);

// Whether a zero point is one value for the whole operand.
bool Uniform(const std::vector<int32_t>& values);

// oneDNN attributes: the output scales (per channel when there are several), runtime common
// zero points for src and weights where non-zero, and post-ops: the run-time scale (binary Mul
// of a scalar), the bias (binary Add over the channel), the activation, the requantization
// (linear 1/y_scale, + y_zero; the store rounds half to even and saturates).
dnnl::primitive_attr Attributes(const IntegerEpilogue& epilogue, const IntegerParameters& parameters,
                                const ChannelLayout& layout, bool src_zero, bool weights_zero);

// The residual of an epilogue with one, as oneDNN's sum post-op reads it from dst: empty without.
std::vector<AddendLayout> ResidualLayouts(const IntegerEpilogue& epilogue);

// The epilogue's eltwise steps after the scale and the bias — the activation, then the
// requantization — with repeated algorithms lowered (contraction/epilogue.h); nullopt when a
// repeat has no post-op form, and the kernel computes on the float32 path.
std::optional<std::vector<PostOp>> EltwiseSteps(const IntegerEpilogue& epilogue, const IntegerParameters& parameters);

// The bias as the binary post-op reads it: bias[n] + int_bias[n] · scale[n], broadcast to the
// channels; empty when there is none.
std::vector<float> CombinedBias(const IntegerParameters& parameters, int64_t channels);
dnnl::memory::desc BiasDesc(const ChannelLayout& layout);
dnnl::memory::desc ScalarDesc(const ChannelLayout& layout);  // one value, broadcast everywhere

// Memories a run passes beside src/weights/dst; kept alive by the caller until it executes.
struct RunArguments {
  std::optional<float> runtime_scale;
  std::vector<float> bias;
  int32_t src_zero = 0;
  int32_t weights_zero = 0;
  std::unordered_map<int, dnnl::memory> Bind(const IntegerEpilogue& epilogue, const IntegerParameters& parameters,
                                             const ChannelLayout& layout, bool src_zero_set, bool weights_zero_set);
};
RunArguments ArgumentsFor(const IntegerEpilogue& epilogue, const IntegerParameters& parameters, int64_t channels,
                          int32_t weights_zero_shift);

// Whether oneDNN's int8 primitive may write the epilogue's output: every output type but
// float16, which its dst (f32) is not; those take the float32 path, which converts.
bool OneDnnWritesOutput(const IntegerEpilogue& epilogue);

// The dst type oneDNN writes for the epilogue.
dnnl::memory::data_type DstType(const IntegerEpilogue& epilogue);
DataType OutputType(const IntegerEpilogue& epilogue);
dnnl::memory::data_type Int8Type(DataType type);  // uint8 → u8, int8 → s8

// uint8 values as int8 (b - 128) in a fresh tensor; the zero point moves by the same 128.
RtTensor ShiftedToInt8(const RtTensor& values, Allocator* allocator);

// Integer values less their zero points as float32: `zero` has one value, or one per
// index of `axis`'s position in (outer, axis, inner) order.
RtTensor CenteredFloat32(const RtTensor& values, const std::vector<int32_t>& zero, int64_t outer, int64_t axis,
                         int64_t inner, Allocator& allocator);

// Whether oneDNN's float32 product of centered operands is exact: its largest partial sum, k
// products of max|a|·max|b|, stays below 2^24. An int32 output that would not be is computed in
// double (exact to 2^53) by the reference loops instead.
bool ExactInFloat32(const RtTensor& a32, const RtTensor& b32, int64_t k);
// float32 values widened to double (exactly).
std::vector<double> Widened(const RtTensor& f32);
// Integer-valued doubles into an int32 tensor of as many elements.
void StoreInt32(const std::vector<double>& values, RtTensor& y);

// The float32 path's epilogue: `acc` (float32, exact integer values, the output's dims) becomes
// `y` through the scale, the bias, the activation and the requantization, with the channel
// at `channel_axis` of `dims`.
Status FinishFromFloat(const RtTensor& acc, const IntegerEpilogue& epilogue, const IntegerParameters& parameters,
                       size_t channel_axis, RtTensor& y, const RtTensor* residual = nullptr);

}  // namespace fusionopt::cpu::integer
