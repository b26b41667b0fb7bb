// The integer contraction ops, each a reading of its inputs into the one integer kernel
// (quantized/integer_contraction.h):
//
//   MatMulInteger(A, B, a_zero, b_zero)                      → int32
//   ConvInteger(x, w, x_zero, w_zero)                        → int32
//   QLinearMatMul(a, a_s, a_zero, b, b_s, b_zero, y_s, y_zero) → requantized
//   QLinearConv(x, x_s, x_zero, w, w_s, w_zero, y_s, y_zero, B)→ requantized, B an int32 bias
//   com.microsoft:
//   MatMulIntegerToFloat(A, B, a_s, b_s, a_zero, b_zero, bias) → float
//   DynamicQuantizeMatMul(A, B, b_s, b_zero, bias)           → float, A quantized to uint8 first
//   QGemm(A, a_s, a_zero, B, b_s, b_zero, C, y_s, y_zero)    → float, or requantized with y_s;
//                                                              C an int32 bias at alpha·a_s·b_s
#include <functional>
#include <map>
#include <mutex>

#include "cpu_runtime/quantized/integer_contraction.h"
#include "cpu_runtime/quantized/kernels.h"

namespace fusionopt::cpu {
namespace {

const RtTensor* Optional(const KernelContext& context, size_t index) {
  return context.has_input(index) ? context.input(index) : nullptr;
}

Status RequireInputs(const KernelContext& context, const std::vector<size_t>& required, const std::string& op) {
  for (size_t index : required) {
    if (!context.has_input(index)) return InvalidModel(op + " needs input " + std::to_string(index));
  }
  return Status::Ok();
}

// A per-tensor scale (or a 1-D one of a single value) as one float.
Result<float> ScalarScale(const RtTensor& scale, const char* what) {
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> values, ScaleValues(scale, what));
  if (values.size() != 1) return Unsupported(std::string(what) + " must be per tensor (one value)");
  return values[0];
}

Result<int32_t> ScalarZero(const RtTensor* zero, const char* what) {
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int32_t> values, ZeroPointValues(zero, what));
  if (values.size() != 1) return Unsupported(std::string(what) + " must be per tensor (one value)");
  return values[0];
}

// The requantization's output type: the output zero point's, uint8 without one.
Result<DataType> QuantizedType(const RtTensor* zero, const std::string& op) {
  const DataType type = zero != nullptr ? zero->dtype() : DataType::kUint8;
  if (!IsEightBitInteger(type)) {
    return InvalidModel(op + "'s output zero point must be uint8 or int8, not " + std::string(NameOf(type)));
  }
  return type;
}

// Integer engines by the epilogue's output type, made on the first run that needs each (an
// output type follows an input's type, known for certain only when the node runs).
template <typename Engine>
class Engines {
 public:
  using Factory = std::function<std::unique_ptr<Engine>(const IntegerEpilogue&)>;
  explicit Engines(Factory factory) : factory_(std::move(factory)) {}

  Engine& For(const IntegerEpilogue& epilogue) {
    const auto key = std::make_pair(static_cast<int>(epilogue.output),
                                    static_cast<int>(epilogue.output == IntegerEpilogue::Output::kFloat
                                                         ? epilogue.float_type
                                                         : epilogue.quantized_type));
    std::lock_guard<std::mutex> lock(mutex_);
    auto& engine = engines_[key];
    if (!engine) engine = factory_(epilogue);
    return *engine;
  }

 private:
  Factory factory_;
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::unique_ptr<Engine>> engines_;
};

IntegerEpilogue Int32Output() { return IntegerEpilogue{}; }

IntegerEpilogue FloatOutput(DataType type) {
  IntegerEpilogue epilogue;
  epilogue.output = IntegerEpilogue::Output::kFloat;
  epilogue.float_type = type;
  return epilogue;
}

IntegerEpilogue QuantizedOutput(DataType type) {
  IntegerEpilogue epilogue;
  epilogue.output = IntegerEpilogue::Output::kQuantized;
  epilogue.quantized_type = type;
  return epilogue;
}

// QLinearMatMul's and QLinearConv's shared layout: (a, a_scale, a_zero_point, b, b_scale,
// b_zero_point, y_scale, y_zero_point); per-tensor a and y, b per tensor or per column/channel.
Result<IntegerParameters> QLinearParameters(const KernelContext& context, const std::string& op) {
  FUSIONOPT_RETURN_IF_ERROR(RequireInputs(context, {0, 1, 3, 4, 6}, op));
  IntegerParameters parameters;
  FUSIONOPT_ASSIGN_OR_RETURN(float a_scale, ScalarScale(*context.input(1), "the input's scale"));
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> b_scale, ScaleValues(*context.input(4), "the weights' scale"));
  parameters.scale = ScaleProduct({a_scale}, b_scale);
  FUSIONOPT_ASSIGN_OR_RETURN(parameters.a_zero, ZeroPointValues(Optional(context, 2), "the input's zero point"));
  FUSIONOPT_ASSIGN_OR_RETURN(parameters.b_zero, ZeroPointValues(Optional(context, 5), "the weights' zero point"));
  FUSIONOPT_ASSIGN_OR_RETURN(parameters.y_scale, ScalarScale(*context.input(6), "y_scale"));
  FUSIONOPT_ASSIGN_OR_RETURN(parameters.y_zero, ScalarZero(Optional(context, 7), "y_zero_point"));
  return parameters;
}

// A float bias of one value per column (or one value), as read from a tensor.
Result<std::vector<float>> BiasValues(const RtTensor* bias, const char* what) {
  if (bias == nullptr) return std::vector<float>{};
  return ScaleValues(*bias, what);
}

// Matrix-product kernels: B's constant (when it is one) and the parameters read per run.
class MatMulFamilyKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    op_ = info.node.op_type();
    const size_t b_index = op_ == "QLinearMatMul" || op_ == "QGemm" ? 3 : 1;
    TensorPtr constant_b = info.constant_input(b_index);
    bool trans_a = false, trans_b = false;
    if (op_ == "QGemm") {
      trans_a = info.node.GetInt("transA", 0) != 0;
      trans_b = info.node.GetInt("transB", 0) != 0;
      alpha_ = info.node.GetFloat("alpha", 1.0f);
    }
    // A scale computed at run time (DynamicQuantizeLinear's, ahead of a MatMulIntegerToFloat)
    // enters the kernel per run, so its primitive is built once.
    a_scale_constant_ = op_ != "MatMulIntegerToFloat" || info.constant_input(2) != nullptr;
    engines_ = std::make_unique<Engines<IntegerMatMul>>([=](const IntegerEpilogue& epilogue) {
      return std::make_unique<IntegerMatMul>(epilogue, constant_b, trans_a, trans_b);
    });
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    if (op_ == "MatMulInteger") return MatMulInteger(context);
    if (op_ == "QLinearMatMul") return QLinearMatMul(context);
    if (op_ == "MatMulIntegerToFloat") return MatMulIntegerToFloat(context);
    if (op_ == "DynamicQuantizeMatMul") return DynamicQuantizeMatMul(context);
    return QGemm(context);
  }

 private:
  Status MatMulInteger(KernelContext& context) {
    FUSIONOPT_RETURN_IF_ERROR(RequireInputs(context, {0, 1}, op_));
    IntegerParameters parameters;
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.a_zero, ZeroPointValues(Optional(context, 2), "a_zero_point"));
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.b_zero, ZeroPointValues(Optional(context, 3), "b_zero_point"));
    return engines_->For(Int32Output()).Run(*context.input(0), *context.input(1), parameters, context);
  }

  Status QLinearMatMul(KernelContext& context) {
    FUSIONOPT_ASSIGN_OR_RETURN(IntegerParameters parameters, QLinearParameters(context, op_));
    FUSIONOPT_ASSIGN_OR_RETURN(DataType type, QuantizedType(Optional(context, 7), op_));
    return engines_->For(QuantizedOutput(type)).Run(*context.input(0), *context.input(3), parameters, context);
  }

  Status MatMulIntegerToFloat(KernelContext& context) {
    FUSIONOPT_RETURN_IF_ERROR(RequireInputs(context, {0, 1, 2, 3}, op_));
    IntegerParameters parameters;
    FUSIONOPT_ASSIGN_OR_RETURN(float a_scale, ScalarScale(*context.input(2), "a_scale"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> b_scale, ScaleValues(*context.input(3), "b_scale"));
    if (a_scale_constant_) {
      parameters.scale = ScaleProduct({a_scale}, b_scale);
    } else {
      parameters.scale = b_scale;
      parameters.runtime_scale = a_scale;
    }
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.a_zero, ZeroPointValues(Optional(context, 4), "a_zero_point"));
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.b_zero, ZeroPointValues(Optional(context, 5), "b_zero_point"));
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.bias, BiasValues(Optional(context, 6), "bias"));
    const IntegerEpilogue epilogue = FloatOutput(context.input(2)->dtype());
    return engines_->For(epilogue).Run(*context.input(0), *context.input(1), parameters, context);
  }

  Status DynamicQuantizeMatMul(KernelContext& context) {
    FUSIONOPT_RETURN_IF_ERROR(RequireInputs(context, {0, 1, 2}, op_));
    const RtTensor& a = *context.input(0);
    if (a.dtype() != DataType::kFloat) return InvalidModel(op_ + " takes a float A, not " + std::string(NameOf(a.dtype())));
    const DynamicParameters dynamic = DynamicUint8Parameters(a.data<float>(), a.NumElements());
    RtTensor quantized = context.allocator->Allocate(DataType::kUint8, a.dims());
    FUSIONOPT_RETURN_IF_ERROR(QuantizeDynamically(a, dynamic, quantized));
    IntegerParameters parameters;
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.scale, ScaleValues(*context.input(2), "b_scale"));
    parameters.runtime_scale = dynamic.scale;
    parameters.a_zero = {dynamic.zero_point};
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.b_zero, ZeroPointValues(Optional(context, 3), "b_zero_point"));
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.bias, BiasValues(Optional(context, 4), "bias"));
    return engines_->For(FloatOutput(DataType::kFloat)).Run(quantized, *context.input(1), parameters, context);
  }

  Status QGemm(KernelContext& context) {
    FUSIONOPT_RETURN_IF_ERROR(RequireInputs(context, {0, 1, 2, 3, 4, 5}, op_));
    IntegerParameters parameters;
    FUSIONOPT_ASSIGN_OR_RETURN(float a_scale, ScalarScale(*context.input(1), "a_scale"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<float> b_scale, ScaleValues(*context.input(4), "b_scale"));
    parameters.scale = ScaleProduct({a_scale * alpha_}, b_scale);
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.a_zero, ZeroPointValues(context.input(2), "a_zero_point"));
    FUSIONOPT_ASSIGN_OR_RETURN(parameters.b_zero, ZeroPointValues(context.input(5), "b_zero_point"));
    if (const RtTensor* c = Optional(context, 6)) {
      if (c->dtype() != DataType::kInt32) return InvalidModel("QGemm's C must be int32");
      if (c->rank() > 1 && !(c->rank() == 2 && c->dim(0) == 1)) {
        return Unsupported("QGemm's C must be a scalar or one value per column, got " + DimsToString(c->dims()));
      }
      parameters.int_bias.assign(c->data<int32_t>(), c->data<int32_t>() + c->NumElements());
    }
    IntegerEpilogue epilogue = FloatOutput(DataType::kFloat);
    if (const RtTensor* y_scale = Optional(context, 7)) {
      FUSIONOPT_ASSIGN_OR_RETURN(parameters.y_scale, ScalarScale(*y_scale, "y_scale"));
      FUSIONOPT_ASSIGN_OR_RETURN(parameters.y_zero, ScalarZero(Optional(context, 8), "y_zero_point"));
      FUSIONOPT_ASSIGN_OR_RETURN(DataType type, QuantizedType(Optional(context, 8), op_));
      epilogue = QuantizedOutput(type);
    }
    return engines_->For(epilogue).Run(*context.input(0), *context.input(3), parameters, context);
  }

  std::string op_;
  float alpha_ = 1.0f;
  bool a_scale_constant_ = true;
  std::unique_ptr<Engines<IntegerMatMul>> engines_;
};

class ConvFamilyKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    op_ = info.node.op_type();
    FUSIONOPT_ASSIGN_OR_RETURN(WindowAttributes attributes, ReadWindowAttributes(info));
    const int64_t group = info.node.GetInt("group", 1);
    if (group < 1) return info.Error("group " + std::to_string(group) + " must be >= 1");
    TensorPtr constant_w = info.constant_input(op_ == "QLinearConv" ? 3 : 1);
    engines_ = std::make_unique<Engines<IntegerConv>>([=](const IntegerEpilogue& epilogue) {
      return std::make_unique<IntegerConv>(epilogue, attributes, group, constant_w);
    });
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    IntegerParameters parameters;
    if (op_ == "ConvInteger") {
      FUSIONOPT_RETURN_IF_ERROR(RequireInputs(context, {0, 1}, op_));
      FUSIONOPT_ASSIGN_OR_RETURN(parameters.a_zero, ZeroPointValues(Optional(context, 2), "x_zero_point"));
      FUSIONOPT_ASSIGN_OR_RETURN(parameters.b_zero, ZeroPointValues(Optional(context, 3), "w_zero_point"));
      return engines_->For(Int32Output()).Run(*context.input(0), *context.input(1), parameters, context);
    }
    FUSIONOPT_ASSIGN_OR_RETURN(parameters, QLinearParameters(context, op_));
    if (const RtTensor* bias = Optional(context, 8)) {
      if (bias->dtype() != DataType::kInt32 || bias->rank() != 1) return InvalidModel("QLinearConv's B must be 1-D int32");
      parameters.int_bias.assign(bias->data<int32_t>(), bias->data<int32_t>() + bias->NumElements());
    }
    FUSIONOPT_ASSIGN_OR_RETURN(DataType type, QuantizedType(Optional(context, 7), op_));
    return engines_->For(QuantizedOutput(type)).Run(*context.input(0), *context.input(3), parameters, context);
  }

 private:
  std::string op_;
  std::unique_ptr<Engines<IntegerConv>> engines_;
};

}  // namespace

void RegisterIntegerContractionKernels(KernelRegistry& registry) {
  registry.Register("", std::vector<std::string>{"MatMulInteger", "QLinearMatMul"}, 10, kAnyOpset, Make<MatMulFamilyKernel>());
  registry.Register("", std::vector<std::string>{"ConvInteger", "QLinearConv"}, 10, kAnyOpset, Make<ConvFamilyKernel>());
  registry.Register("com.microsoft", std::vector<std::string>{"MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QGemm"}, 1, kAnyOpset,
                    Make<MatMulFamilyKernel>());
}

}  // namespace fusionopt::cpu
