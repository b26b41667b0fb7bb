// QuantizeLinear, DequantizeLinear (ONNX, and onnxruntime's com.microsoft forms) and
// DynamicQuantizeLinear: one engine program each (quantized/quantize_expr.h) over views that
// make the scale and zero point broadcast against x.
//
//   per tensor  scale [] or [1]                → broadcast as a scalar
//   per axis    scale [D_axis]                 → viewed as [D_axis, 1, ..., 1]
//   blocked     scale [..., ceil(D/B), ...]    → x viewed with the axis split as [D/B, B] and the
//                                                scale as [D/B, 1]; when B does not divide D the
//                                                scale is repeated along the axis instead
// 4- and 2-bit integers and minifloats go through their stand-in types (unpacked before,
// packed after), so the engine's program is the same for every type.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/quantized/kernels.h"
#include "cpu_runtime/quantized/quantize_expr.h"
#include "ir/minifloat.h"

namespace fusionopt::cpu {
namespace {

using data_movement::Product;

// How x and the quantization parameters are viewed for the engine.
struct ParameterViews {
  std::vector<int64_t> x;       // x's dims, a blocked axis split as [D/B, B]
  std::vector<int64_t> params;  // the scale's and zero point's dims, broadcasting against `x`
  // Blocks that do not divide the axis: the parameters are repeated `block` times along
  // `axis` (to x's dims) before the engine reads them.
  bool repeat = false;
  size_t axis = 0;
  int64_t block = 0;
};

Result<ParameterViews> ViewParameters(const std::vector<int64_t>& x, const std::vector<int64_t>& params,
                                      int64_t axis_attribute, int64_t block) {
  ParameterViews views;
  views.x = x;
  int64_t count = Product(params, 0, params.size());
  if (block <= 0 && count == 1 && params.size() <= 1) return views;  // per tensor
  std::optional<int64_t> axis = NormalizeAxis(axis_attribute, static_cast<int64_t>(x.size()));
  if (!axis) {
    return InvalidModel("axis " + std::to_string(axis_attribute) + " is out of range for an input of rank " +
                        std::to_string(x.size()));
  }
  const size_t a = static_cast<size_t>(*axis);
  if (block <= 0) {
    if (params.size() != 1 || params[0] != x[a]) {
      return InvalidModel("a per-axis scale must be 1-D with the " + std::to_string(x[a]) + " values of axis " +
                          std::to_string(a) + ", got " + DimsToString(params));
    }
    views.params.assign(x.size() - a, 1);
    views.params[0] = x[a];
    return views;
  }
  // Blocked: the scale has x's rank and ceil(D / B) entries along the axis.
  bool same_elsewhere = params.size() == x.size();
  for (size_t i = 0; same_elsewhere && i < x.size(); ++i) same_elsewhere = i == a || params[i] == x[i];
  if (!same_elsewhere || params[a] != (x[a] + block - 1) / block) {
    return InvalidModel("a blocked scale for input " + DimsToString(x) + " with block_size " + std::to_string(block) +
                        " along axis " + std::to_string(a) + " must have " + std::to_string((x[a] + block - 1) / block) +
                        " entries on that axis and the input's dims elsewhere, got " + DimsToString(params));
  }
  if (x[a] % block == 0) {
    views.x.insert(views.x.begin() + static_cast<std::ptrdiff_t>(a) + 1, block);
    views.x[a] = x[a] / block;
    views.params = params;
    views.params.insert(views.params.begin() + static_cast<std::ptrdiff_t>(a) + 1, 1);
    return views;
  }
  views.params = x;
  views.repeat = true;
  views.axis = a;
  views.block = block;
  return views;
}

// `params` repeated `block` times along `axis` and cut to `dims` (the input's).
RtTensor RepeatAlongAxis(const RtTensor& params, const std::vector<int64_t>& dims, size_t axis, int64_t block,
                         Allocator& allocator) {
  RtTensor out = allocator.Allocate(params.dtype(), dims);
  const size_t element = ByteSizeOf(params.dtype(), 1);
  const int64_t outer = Product(dims, 0, axis), inner = Product(dims, axis + 1, dims.size());
  const int64_t length = dims[axis], blocks = params.dim(axis);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t d = 0; d < length; ++d) {
      const uint8_t* from = params.raw() + ((o * blocks + d / block) * inner) * static_cast<int64_t>(element);
      uint8_t* to = out.raw() + ((o * length + d) * inner) * static_cast<int64_t>(element);
      std::memcpy(to, from, static_cast<size_t>(inner) * element);
    }
  }
  return out;
}

bool IsScaleType(DataType type) {
  return type == DataType::kFloat || type == DataType::kFloat16 || type == DataType::kBFloat16;
}

// QuantizeLinear and DequantizeLinear: the one kernel, the direction chosen at creation.
class LinearQuantizationKernel : public Kernel {
 public:
  explicit LinearQuantizationKernel(bool quantize) : quantize_(quantize) {}

  Status Init(const KernelInfo& info) {
    const Node& node = info.node;
    label_ = node.op_type();
    if (info.node.inputs().size() < 2 || node.input(0) == nullptr || node.input(1) == nullptr) {
      return info.Error("needs x and a scale");
    }
    // QuantizeLinear-10 and DequantizeLinear-10 (ONNX domain) have no axis: per tensor only.
    axis_ = node.GetInt("axis", 1);
    block_ = node.GetInt("block_size", 0);
    if (block_ < 0) return info.Error("block_size must be positive");
    saturate_ = node.GetInt("saturate", 1) != 0;
    if (int64_t dtype = node.GetInt("output_dtype", 0); dtype != 0) {
      if (!IsKnownDataType(static_cast<int32_t>(dtype))) return info.Error("unknown output_dtype " + std::to_string(dtype));
      output_dtype_ = static_cast<DataType>(dtype);
    }
    if (int64_t precision = node.GetInt("precision", 0); precision != 0) {
      const auto type = static_cast<DataType>(precision);
      if (!IsKnownDataType(static_cast<int32_t>(precision)) || !IsScaleType(type)) {
        return info.Error("precision must be float, float16 or bfloat16");
      }
      precision_ = type;
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    const RtTensor& x = *context.input(0);
    const RtTensor& scale = *context.input(1);
    const RtTensor* zero_point = context.has_input(2) ? context.input(2) : nullptr;
    if (!IsScaleType(scale.dtype())) {
      return InvalidModel(label_ + ": the scale must be float, float16 or bfloat16, not " +
                          std::string(NameOf(scale.dtype())));
    }
    // A scalar against a [1] (onnxruntime's quantizer writes both) is one value either way.
    const bool one_each = zero_point != nullptr && zero_point->NumElements() == 1 && scale.NumElements() == 1;
    if (zero_point != nullptr && zero_point->dims() != scale.dims() && !one_each) {
      return InvalidModel(label_ + ": the zero point " + DimsToString(zero_point->dims()) +
                          " must have the scale's shape " + DimsToString(scale.dims()));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(DataType output, OutputType(x, scale, zero_point));
    FUSIONOPT_ASSIGN_OR_RETURN(ParameterViews views, ViewParameters(x.dims(), scale.dims(), axis_, block_));
    Allocator& allocator = *context.allocator;
    RtTensor x_values = Unpacked(x, allocator);
    RtTensor scale_values = scale;
    RtTensor zero_values = zero_point != nullptr ? Unpacked(*zero_point, allocator) : RtTensor();
    if (views.repeat) {
      scale_values = RepeatAlongAxis(scale_values, x.dims(), views.axis, views.block, allocator);
      if (zero_values.defined()) zero_values = RepeatAlongAxis(zero_values, x.dims(), views.axis, views.block, allocator);
    }
    std::vector<RtTensor> operands = {x_values.Reshaped(views.x), scale_values.Reshaped(views.params)};
    if (zero_values.defined()) operands.push_back(zero_values.Reshaped(views.params));
    std::vector<const RtTensor*> present;
    std::vector<DataType> dtypes;
    for (const RtTensor& operand : operands) {
      present.push_back(&operand);
      dtypes.push_back(operand.dtype());
    }
    const std::vector<int> registers = {0, 1, zero_values.defined() ? 2 : -1};
    const DataType stand_in = ComputeStandIn(output);
    FUSIONOPT_ASSIGN_OR_RETURN(const ew::Program* program,
                               programs_.Get(dtypes, registers, Expression(output, stand_in, scale.dtype()), label_));
    RtTensor& y = context.Output(0, output, x.dims());
    RtTensor result = stand_in == output ? y : allocator.Allocate(stand_in, x.dims());
    RtTensor result_view = result.Reshaped(views.x);
    FUSIONOPT_RETURN_IF_ERROR(ew::Evaluate(*program, present, {&result_view}));
    if (stand_in != output) Pack(result, y, saturate_);
    return Status::Ok();
  }

 private:
  Result<DataType> OutputType(const RtTensor& x, const RtTensor& scale, const RtTensor* zero_point) const {
    if (!quantize_) {
      if (zero_point != nullptr && zero_point->dtype() != x.dtype()) {
        return InvalidModel(label_ + ": the zero point's type " + std::string(NameOf(zero_point->dtype())) +
                            " differs from x's " + std::string(NameOf(x.dtype())));
      }
      if (!IntegerRange(x.dtype()) && x.dtype() != DataType::kInt32 && !IsMinifloat(x.dtype())) {
        return InvalidModel(label_ + " does not dequantize " + std::string(NameOf(x.dtype())));
      }
      const DataType output = output_dtype_.value_or(scale.dtype());
      if (!IsScaleType(output)) return InvalidModel(label_ + ": output_dtype must be a float type");
      return output;
    }
    if (x.dtype() != DataType::kFloat && !IsScaleType(x.dtype()) && x.dtype() != DataType::kInt32) {
      return InvalidModel(label_ + " does not quantize " + std::string(NameOf(x.dtype())));
    }
    DataType output = output_dtype_.value_or(DataType::kUint8);
    if (zero_point != nullptr) {
      if (output_dtype_ && *output_dtype_ != zero_point->dtype()) {
        return InvalidModel(label_ + ": output_dtype " + std::string(NameOf(*output_dtype_)) +
                            " differs from the zero point's type " + std::string(NameOf(zero_point->dtype())));
      }
      output = zero_point->dtype();
    }
    if (!IntegerRange(output) && !IsMinifloat(output)) {
      return InvalidModel(label_ + " does not quantize to " + std::string(NameOf(output)));
    }
    return output;
  }

  ExprBuilder Expression(DataType output, DataType stand_in, DataType scale_type) const {
    if (!quantize_) return DequantizeExpr(output);
    return QuantizeExpr(stand_in, IntegerRange(output), precision_.value_or(scale_type));
  }

  bool quantize_;
  std::string label_;
  int64_t axis_ = 1;
  int64_t block_ = 0;
  bool saturate_ = true;
  std::optional<DataType> output_dtype_;
  std::optional<DataType> precision_;
  ExprPrograms programs_;
};

class QuantizeLinearKernel : public LinearQuantizationKernel {
 public:
  QuantizeLinearKernel() : LinearQuantizationKernel(true) {}
};

class DequantizeLinearKernel : public LinearQuantizationKernel {
 public:
  DequantizeLinearKernel() : LinearQuantizationKernel(false) {}
};

// DynamicQuantizeLinear: uint8 with parameters from x's range (DynamicUint8Parameters).
class DynamicQuantizeLinearKernel : public Kernel {
 public:
  Status Init(const KernelInfo&) { return Status::Ok(); }

  Status Compute(KernelContext& context) override {
    const RtTensor& x = *context.input(0);
    if (x.dtype() != DataType::kFloat) {
      return InvalidModel("DynamicQuantizeLinear takes float, not " + std::string(NameOf(x.dtype())));
    }
    const DynamicParameters parameters = DynamicUint8Parameters(x.data<float>(), x.NumElements());
    RtTensor& y_scale = context.Output(1, DataType::kFloat, {});
    RtTensor& y_zero = context.Output(2, DataType::kUint8, {});
    y_scale.data<float>()[0] = parameters.scale;
    y_zero.data<uint8_t>()[0] = parameters.zero_point;
    RtTensor& y = context.Output(0, DataType::kUint8, x.dims());
    return QuantizeDynamically(x, parameters, y);
  }
};

}  // namespace

DynamicParameters DynamicUint8Parameters(const float* values, int64_t count) {
  float low = 0.0f, high = 0.0f;
#pragma omp parallel for reduction(min : low) reduction(max : high) if (count > kParallelWork)
  for (int64_t i = 0; i < count; ++i) {
    low = std::min(low, values[i]);
    high = std::max(high, values[i]);
  }
  DynamicParameters parameters;
  parameters.scale = (high - low) / 255.0f;
  if (parameters.scale != 0.0f) {
    parameters.zero_point = static_cast<uint8_t>(std::clamp(std::nearbyint(-low / parameters.scale), 0.0f, 255.0f));
  }
  return parameters;
}

Status QuantizeDynamically(const RtTensor& x, const DynamicParameters& parameters, RtTensor& y) {
  if (parameters.scale == 0.0f) {
    std::fill(y.data<uint8_t>(), y.data<uint8_t>() + y.NumElements(), uint8_t{0});
    return Status::Ok();
  }
  return QuantizePerTensor(x, parameters.scale, parameters.zero_point, y);
}

namespace {

// A per-tensor grid's scale and zero point as the scalar operands of a quantize program.
std::pair<RtTensor, RtTensor> GridOperands(float scale, int32_t zero_point, DataType type) {
  FUSIONOPT_CHECK(IsEightBitInteger(type), "an 8-bit grid");
  RtTensor scale_tensor = RtTensor::Allocate(DataType::kFloat, {});
  RtTensor zero = RtTensor::Allocate(type, {});
  scale_tensor.data<float>()[0] = scale;
  if (type == DataType::kUint8) zero.data<uint8_t>()[0] = static_cast<uint8_t>(zero_point);
  else zero.data<int8_t>()[0] = static_cast<int8_t>(zero_point);
  return {std::move(scale_tensor), std::move(zero)};
}

}  // namespace

Status QuantizePerTensor(const RtTensor& x, float scale, int32_t zero_point, RtTensor& y) {
  const DataType type = y.dtype();
  const auto [scale_tensor, zero] = GridOperands(scale, zero_point, type);
  static ExprPrograms programs;
  FUSIONOPT_ASSIGN_OR_RETURN(const ew::Program* quantize,
                             programs.Get({DataType::kFloat, DataType::kFloat, type}, {0, 1, 2},
                                          QuantizeExpr(type, IntegerRange(type), DataType::kFloat), "QuantizeLinear"));
  return ew::Evaluate(*quantize, {&x, &scale_tensor, &zero}, {&y});
}

Status DequantizePerTensor(const RtTensor& q, float scale, int32_t zero_point, RtTensor& y) {
  const DataType type = q.dtype();
  FUSIONOPT_CHECK(y.dtype() == DataType::kFloat, "a float result");
  const auto [scale_tensor, zero] = GridOperands(scale, zero_point, type);
  static ExprPrograms programs;
  FUSIONOPT_ASSIGN_OR_RETURN(const ew::Program* dequantize,
                             programs.Get({type, DataType::kFloat, type}, {0, 1, 2}, DequantizeExpr(DataType::kFloat),
                                          "DequantizeLinear"));
  return ew::Evaluate(*dequantize, {&q, &scale_tensor, &zero}, {&y});
}

void RegisterQuantizeLinearKernels(KernelRegistry& registry) {
  registry.Register("", "QuantizeLinear", 10, kAnyOpset, Make<QuantizeLinearKernel>());
  registry.Register("", "DequantizeLinear", 10, kAnyOpset, Make<DequantizeLinearKernel>());
  registry.Register("com.microsoft", "QuantizeLinear", 1, kAnyOpset, Make<QuantizeLinearKernel>());
  registry.Register("com.microsoft", "DequantizeLinear", 1, kAnyOpset, Make<DequantizeLinearKernel>());
  registry.Register("", "DynamicQuantizeLinear", 11, kAnyOpset, Make<DynamicQuantizeLinearKernel>());
}

}  // namespace fusionopt::cpu
