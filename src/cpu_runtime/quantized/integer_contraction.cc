// The parts of the integer contractions that do not depend on the primitive: quantization
// parameters read from inputs, oneDNN attributes for the epilogue, and the float32 path's
// epilogue (quantized/integer_internal.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/contraction/matmul_shape.h"
#include "cpu_runtime/engine/host_cpu.h"
#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/quantized/integer_internal.h"
#include "cpu_runtime/quantized/quantize_expr.h"

namespace fusionopt::cpu {

bool CpuHasVnni() {
  const std::string& isa = ThisHost().onednn_isa;
  return isa == "avx512_core_vnni" || isa == "avx512_core_bf16" || isa == "avx512_core_amx" || isa == "avx2_vnni";
}

Int8Path Int8PathOnThisHost() {
  const char* requested = std::getenv("FUSIONOPT_CPU_INT8");
  if (requested != nullptr && std::strcmp(requested, "float32") == 0) return Int8Path::kFloat32;
  if (requested != nullptr && std::strcmp(requested, "onednn") == 0) return Int8Path::kOneDnn;
  return CpuHasVnni() ? Int8Path::kOneDnn : Int8Path::kFloat32;
}

Status CheckQuantizedOperand(const RtTensor& x, const std::string& op) {
  if (!IsEightBitInteger(x.dtype())) {
    return InvalidModel(op + " takes uint8 or int8 tensors, not " + std::string(NameOf(x.dtype())));
  }
  return Status::Ok();
}

Result<std::vector<int32_t>> ZeroPointValues(const RtTensor* zero_point, const char* what) {
  if (zero_point == nullptr || !zero_point->defined()) return std::vector<int32_t>{0};
  if (zero_point->rank() > 1) {
    return InvalidModel(std::string(what) + " must be a scalar or 1-D, got " + DimsToString(zero_point->dims()));
  }
  std::vector<int32_t> values;
  const int64_t count = zero_point->NumElements();
  for (int64_t i = 0; i < count; ++i) {
    switch (zero_point->dtype()) {
      case DataType::kUint8: values.push_back(zero_point->data<uint8_t>()[i]); break;
      case DataType::kInt8: values.push_back(zero_point->data<int8_t>()[i]); break;
      case DataType::kInt32: values.push_back(zero_point->data<int32_t>()[i]); break;
      default:
        return InvalidModel(std::string(what) + " must be uint8, int8 or int32, not " +
                            std::string(NameOf(zero_point->dtype())));
    }
  }
  if (values.empty()) return InvalidModel(std::string(what) + " is empty");
  return values;
}

Result<std::vector<float>> ScaleValues(const RtTensor& scale, const char* what) {
  if (scale.rank() > 1) return InvalidModel(std::string(what) + " must be a scalar or 1-D, got " + DimsToString(scale.dims()));
  if (scale.dtype() != DataType::kFloat && !IsHalfPrecision(scale.dtype())) {
    return InvalidModel(std::string(what) + " must be a float type, not " + std::string(NameOf(scale.dtype())));
  }
  std::vector<float> values;
  for (double value : ValuesAsDoubles(scale)) values.push_back(static_cast<float>(value));
  if (values.empty()) return InvalidModel(std::string(what) + " is empty");
  return values;
}

std::vector<float> ScaleProduct(const std::vector<float>& a, const std::vector<float>& b) {
  const size_t count = std::max(a.size(), b.size());
  std::vector<float> product(count);
  for (size_t i = 0; i < count; ++i) product[i] = a[a.size() == 1 ? 0 : i] * b[b.size() == 1 ? 0 : i];
  return product;
}

namespace integer {

using dnnl::memory;

bool Uniform(const std::vector<int32_t>& values) {
  return std::all_of(values.begin(), values.end(), [&](int32_t v) { return v == values.front(); });
}

std::vector<int64_t> EpilogueKey(const IntegerEpilogue& epilogue, const IntegerParameters& parameters) {
  std::vector<int64_t> key = {static_cast<int64_t>(epilogue.output), !parameters.bias.empty() || !parameters.int_bias.empty(),
                              parameters.runtime_scale.has_value()};
  auto bits_of = [](float value) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    return static_cast<int64_t>(bits);
  };
  if (epilogue.output != IntegerEpilogue::Output::kInt32) {
    key.push_back(static_cast<int64_t>(parameters.scale.size()));
    for (float scale : parameters.scale) key.push_back(bits_of(scale));
  }
  if (epilogue.output == IntegerEpilogue::Output::kQuantized) {
    key.push_back(bits_of(parameters.y_scale));
    key.push_back(parameters.y_zero);
  }
  return key;
}

memory::data_type Int8Type(DataType type) {
  return type == DataType::kUint8 ? memory::data_type::u8 : memory::data_type::s8;
}

memory::data_type DstType(const IntegerEpilogue& epilogue) {
  switch (epilogue.output) {
    case IntegerEpilogue::Output::kInt32: return memory::data_type::s32;
    case IntegerEpilogue::Output::kFloat: return memory::data_type::f32;
    case IntegerEpilogue::Output::kQuantized: return Int8Type(epilogue.quantized_type);
  }
  return memory::data_type::undef;
}

bool OneDnnWritesOutput(const IntegerEpilogue& epilogue) { return OutputType(epilogue) != DataType::kFloat16; }

DataType OutputType(const IntegerEpilogue& epilogue) {
  switch (epilogue.output) {
    case IntegerEpilogue::Output::kInt32: return DataType::kInt32;
    case IntegerEpilogue::Output::kFloat: return epilogue.float_type;
    case IntegerEpilogue::Output::kQuantized: return epilogue.quantized_type;
  }
  return DataType::kUndefined;
}

memory::desc ScalarDesc(const ChannelLayout& layout) {
  return onednn::RowMajorDesc(std::vector<int64_t>(layout.dst_dims.size(), 1));
}

memory::desc BiasDesc(const ChannelLayout& layout) {
  std::vector<int64_t> dims(layout.dst_dims.size(), 1);
  dims[layout.channel_axis] = layout.channels();
  return onednn::RowMajorDesc(dims);
}

std::optional<std::vector<PostOp>> EltwiseSteps(const IntegerEpilogue& epilogue, const IntegerParameters& parameters) {
  std::vector<PostOp> steps = epilogue.activation;
  if (epilogue.output == IntegerEpilogue::Output::kQuantized) {
    steps.push_back({PostOp::Kind::kEltwise, dnnl::algorithm::eltwise_linear, 1.0f / parameters.y_scale,
                     static_cast<float>(parameters.y_zero)});
  }
  if (!LowerRepeatedEltwise(steps)) return std::nullopt;
  return steps;
}

// The residual's summed layout, for the epilogue's kAdd step (at most one).
std::vector<AddendLayout> ResidualLayouts(const IntegerEpilogue& epilogue) {
  if (epilogue.residual_type == DataType::kUndefined) return {};
  AddendLayout layout;
  layout.summed = true;
  layout.sum_scale = epilogue.residual_scale;
  layout.sum_zero = epilogue.residual_zero;
  // A float residual (a float-output kernel's) is read as dst's own type.
  const bool quantized = IsEightBitInteger(epilogue.residual_type);
  layout.sum_type = quantized ? Int8Type(epilogue.residual_type) : memory::data_type::undef;
  return {layout};
}

dnnl::primitive_attr Attributes(const IntegerEpilogue& epilogue, const IntegerParameters& parameters,
                                const ChannelLayout& layout, bool src_zero, bool weights_zero) {
  dnnl::primitive_attr attributes;
  if (src_zero) attributes.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (weights_zero) attributes.set_zero_points(DNNL_ARG_WEIGHTS, 0, {DNNL_RUNTIME_S32_VAL});
  if (epilogue.output == IntegerEpilogue::Output::kInt32) return attributes;
  attributes.set_output_scales(parameters.scale.size() == 1 ? 0 : 1 << layout.channel_axis, parameters.scale);
  dnnl::post_ops own;
  if (parameters.runtime_scale) own.append_binary(dnnl::algorithm::binary_mul, ScalarDesc(layout));
  if (!parameters.bias.empty() || !parameters.int_bias.empty()) {
    own.append_binary(dnnl::algorithm::binary_add, BiasDesc(layout));
  }
  std::optional<std::vector<PostOp>> steps = EltwiseSteps(epilogue, parameters);
  FUSIONOPT_CHECK(steps.has_value(), "the kernel checked the steps have post-ops");
  attributes.set_post_ops(BuildPostOps(*steps, ResidualLayouts(epilogue), layout.dst_dims.size(), own));
  return attributes;
}

std::vector<float> CombinedBias(const IntegerParameters& parameters, int64_t channels) {
  if (parameters.bias.empty() && parameters.int_bias.empty()) return {};
  std::vector<float> combined(static_cast<size_t>(channels), 0.0f);
  for (int64_t c = 0; c < channels; ++c) {
    const auto at = [c](const auto& values) { return values[values.size() == 1 ? 0 : static_cast<size_t>(c)]; };
    float value = parameters.bias.empty() ? 0.0f : at(parameters.bias);
    if (!parameters.int_bias.empty()) {
      value += static_cast<float>(at(parameters.int_bias)) * at(parameters.scale) * parameters.runtime_scale.value_or(1.0f);
    }
    combined[static_cast<size_t>(c)] = value;
  }
  return combined;
}

RunArguments ArgumentsFor(const IntegerEpilogue& epilogue, const IntegerParameters& parameters, int64_t channels,
                          int32_t weights_zero_shift) {
  RunArguments arguments;
  arguments.src_zero = parameters.a_zero.front();
  arguments.weights_zero = parameters.b_zero.front() - weights_zero_shift;
  if (epilogue.output == IntegerEpilogue::Output::kInt32) return arguments;
  arguments.runtime_scale = parameters.runtime_scale;
  arguments.bias = CombinedBias(parameters, channels);
  return arguments;
}

std::unordered_map<int, memory> RunArguments::Bind(const IntegerEpilogue& epilogue, const IntegerParameters& parameters,
                                                   const ChannelLayout& layout, bool src_zero_set, bool weights_zero_set) {
  std::unordered_map<int, memory> bound;
  const memory::desc one_int({1}, memory::data_type::s32, memory::format_tag::a);
  if (src_zero_set) bound[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = onednn::Wrap(one_int, &src_zero);
  if (weights_zero_set) bound[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_WEIGHTS] = onednn::Wrap(one_int, &weights_zero);
  if (epilogue.output == IntegerEpilogue::Output::kInt32) return bound;
  int post_op = 0;
  if (runtime_scale) {
    bound[DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_op++) | DNNL_ARG_SRC_1] = onednn::Wrap(ScalarDesc(layout), &*runtime_scale);
  }
  if (!bias.empty()) bound[DNNL_ARG_ATTR_MULTIPLE_POST_OP(post_op++) | DNNL_ARG_SRC_1] = onednn::Wrap(BiasDesc(layout), bias.data());
  if (std::optional<std::vector<PostOp>> steps = EltwiseSteps(epilogue, parameters)) {
    PostOpAddends summed;  // the residual is in dst already: nothing to bind for it
    summed.layouts = ResidualLayouts(epilogue);
    summed.values.resize(summed.layouts.size());
    BindAddends(*steps, summed, layout.dst_dims.size(), bound, static_cast<size_t>(post_op));
  }
  return bound;
}

RtTensor ShiftedToInt8(const RtTensor& values, Allocator* allocator) {
  RtTensor shifted = allocator != nullptr ? allocator->Allocate(DataType::kInt8, values.dims())
                                          : RtTensor::Allocate(DataType::kInt8, values.dims());
  const uint8_t* from = values.data<uint8_t>();
  uint8_t* to = shifted.data<uint8_t>();
  const int64_t count = values.NumElements();
  for (int64_t i = 0; i < count; ++i) to[i] = from[i] ^ 0x80;  // b - 128 in two's complement
  return shifted;
}

RtTensor CenteredFloat32(const RtTensor& values, const std::vector<int32_t>& zero, int64_t outer, int64_t axis,
                         int64_t inner, Allocator& allocator) {
  RtTensor out = allocator.Allocate(DataType::kFloat, values.dims());
  float* to = out.data<float>();
  const bool is_signed = values.dtype() == DataType::kInt8;
  const auto* from = values.data<uint8_t>();
#pragma omp parallel for if (values.NumElements() > kParallelWork)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t a = 0; a < axis; ++a) {
      const float shift = static_cast<float>(zero[zero.size() == 1 ? 0 : static_cast<size_t>(a)]);
      const int64_t base = (o * axis + a) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const float value = is_signed ? static_cast<float>(static_cast<int8_t>(from[base + i])) : from[base + i];
        to[base + i] = value - shift;
      }
    }
  }
  return out;
}

namespace {

float LargestMagnitude(const RtTensor& values) {
  float largest = 0.0f;
  const float* data = values.data<float>();
  for (int64_t i = 0; i < values.NumElements(); ++i) largest = std::max(largest, std::abs(data[i]));
  return largest;
}

}  // namespace

bool ExactInFloat32(const RtTensor& a32, const RtTensor& b32, int64_t k) {
  const double largest = static_cast<double>(LargestMagnitude(a32)) * LargestMagnitude(b32) * static_cast<double>(k);
  return largest < 16777216.0;  // 2^24
}

std::vector<double> Widened(const RtTensor& f32) {
  return std::vector<double>(f32.data<float>(), f32.data<float>() + f32.NumElements());
}

void StoreInt32(const std::vector<double>& values, RtTensor& y) {
  int32_t* out = y.data<int32_t>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<int32_t>(values[i]);
}

Status FinishFromFloat(const RtTensor& acc, const IntegerEpilogue& epilogue, const IntegerParameters& parameters,
                       size_t channel_axis, RtTensor& y, const RtTensor* residual) {
  const std::vector<int64_t>& dims = acc.dims();
  const int64_t channels = dims[channel_axis];
  const int64_t inner = Product({dims.begin() + static_cast<std::ptrdiff_t>(channel_axis) + 1, dims.end()});
  const int64_t count = acc.NumElements();
  const float* values = acc.data<float>();
  if (epilogue.output == IntegerEpilogue::Output::kInt32) {
    int32_t* out = y.data<int32_t>();
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(std::nearbyint(values[i]));
    return Status::Ok();
  }
  const std::vector<float> bias = CombinedBias(parameters, channels);
  RtTensor scaled = RtTensor::Allocate(DataType::kFloat, dims);
  float* result = scaled.data<float>();
#pragma omp parallel for if (count > kParallelWork)
  for (int64_t i = 0; i < count; ++i) {
    const size_t c = static_cast<size_t>((i / inner) % channels);
    const float scaled_value = values[i] * parameters.scale[parameters.scale.size() == 1 ? 0 : c];
    result[i] = scaled_value * parameters.runtime_scale.value_or(1.0f) + (bias.empty() ? 0.0f : bias[c]);
  }
  if (!epilogue.activation.empty()) {
    const std::vector<AddendLayout> summed = ResidualLayouts(epilogue);
    std::optional<ew::Program> activation = PostOpsAsProgram(epilogue.activation, summed);
    if (!activation) return Unsupported("the activation has no form the engine computes");
    if (summed.empty()) {
      FUSIONOPT_RETURN_IF_ERROR(ew::Evaluate(*activation, {&scaled}, {&scaled}));
    } else {
      // The residual dequantized: scale · (r - zero); a float one as it is.
      FUSIONOPT_CHECK(residual != nullptr && residual->NumElements() == count, "the residual of the output's shape");
      RtTensor real = RtTensor::Allocate(DataType::kFloat, dims);
      const DataType type = residual->dtype();
      for (int64_t i = 0; i < count; ++i) {
        const float r = type == DataType::kInt8    ? residual->data<int8_t>()[i]
                        : type == DataType::kUint8 ? residual->data<uint8_t>()[i]
                                                   : residual->data<float>()[i];
        real.data<float>()[i] = epilogue.residual_scale * (r - static_cast<float>(epilogue.residual_zero));
      }
      FUSIONOPT_RETURN_IF_ERROR(ew::Evaluate(*activation, {&scaled, &real}, {&scaled}));
    }
  }
  if (epilogue.output == IntegerEpilogue::Output::kFloat) {
    ConvertFromFloat32(scaled, y);
    return Status::Ok();
  }
  const QuantRange range = *IntegerRange(epilogue.quantized_type);
  for (int64_t i = 0; i < count; ++i) {
    // Divided, as QuantizeLinear does (a reciprocal's product can round a tie the other way).
    const float q = std::clamp(std::nearbyint(result[i] / parameters.y_scale) + static_cast<float>(parameters.y_zero),
                               static_cast<float>(range.lo), static_cast<float>(range.hi));
    if (epilogue.quantized_type == DataType::kUint8) {
      y.data<uint8_t>()[i] = static_cast<uint8_t>(q);
    } else {
      y.data<int8_t>()[i] = static_cast<int8_t>(q);
    }
  }
  return Status::Ok();
}

}  // namespace integer
}  // namespace fusionopt::cpu
