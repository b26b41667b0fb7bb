// Normalizations that compute or apply per-channel statistics: BatchNormalization
// (inference, and training mode from opset 14), InstanceNormalization, LRN.
//
// BatchNormalization folds into one multiply-add per element, y = x * a[c] + b[c], with
// a and b computed once when the parameters are constant; that loop is memory-bound and as
// fast as a library call. LRN runs on oneDNN (float32); double runs direct loops.
#include <cmath>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/onednn/common.h"
#include "ir/batchnorm.h"
#include "ir/legacy_opsets.h"

namespace fusionopt::cpu {
namespace {

int64_t ProductFrom(const std::vector<int64_t>& dims, size_t first) {
  int64_t product = 1;
  for (size_t axis = first; axis < dims.size(); ++axis) product *= dims[axis];
  return product;
}

// y = x * scale[c] + shift[c] over (batch, channels, inner) row-major data.
template <typename T>
void ApplyChannelAffine(const T* x, T* y, int64_t batch, int64_t channels, int64_t inner,
                        const std::vector<double>& scale, const std::vector<double>& shift) {
  const std::vector<T> a(scale.begin(), scale.end()), b(shift.begin(), shift.end());
#pragma omp parallel for if (batch * channels * inner > kParallelWork)
  for (int64_t plane = 0; plane < batch * channels; ++plane) {
    const T alpha = a[plane % channels], beta = b[plane % channels];
    const T* in = x + plane * inner;
    T* out = y + plane * inner;
    for (int64_t i = 0; i < inner; ++i) out[i] = in[i] * alpha + beta;
  }
}

// Population mean and variance of each channel over the batch and inner axes.
template <typename T>
void ChannelStatistics(const T* x, int64_t batch, int64_t channels, int64_t inner, std::vector<double>& mean,
                       std::vector<double>& variance) {
  mean.assign(channels, 0.0);
  variance.assign(channels, 0.0);
  const double count = static_cast<double>(batch * inner);
#pragma omp parallel for if (batch * channels * inner > kParallelWork)
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0, squares = 0;
    for (int64_t n = 0; n < batch; ++n) {
      const T* in = x + (n * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) sum += in[i];
    }
    const double average = count > 0 ? sum / count : 0.0;
    for (int64_t n = 0; n < batch; ++n) {
      const T* in = x + (n * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) squares += (in[i] - average) * (in[i] - average);
    }
    mean[c] = average;
    variance[c] = count > 0 ? squares / count : 0.0;
  }
}

// The per-channel map (ir/batchnorm.h); empty when the parameter sizes disagree.
ChannelAffine Fold(const std::vector<double>& scale, const std::vector<double>& bias, const std::vector<double>& mean,
                   const std::vector<double>& variance, double epsilon) {
  if (bias.size() != scale.size() || mean.size() != scale.size() || variance.size() != scale.size()) return {};
  return BatchNormChannelAffine(scale, bias, mean, variance, epsilon);
}

// Y = x * a[c] + b[c] in X's dtype (float16/bfloat16 through float32).
void ApplyFolded(KernelContext& context, const RtTensor& x, int64_t batch, int64_t channels, int64_t inner,
                 const ChannelAffine& folded) {
  if (x.dtype() == DataType::kDouble) {
    RtTensor& y = context.Output(0, x.dtype(), x.dims());
    ApplyChannelAffine(x.data<double>(), y.data<double>(), batch, channels, inner, folded.scale, folded.shift);
    return;
  }
  Float32Outputs outputs(context);
  RtTensor x32 = ToFloat32(x, *context.allocator);
  RtTensor& y = outputs.Output(0, x.dtype(), x.dims());
  ApplyChannelAffine(x32.data<float>(), y.data<float>(), batch, channels, inner, folded.scale, folded.shift);
  outputs.Finish();
}

class BatchNormalizationKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    const Node& node = info.node;
    FUSIONOPT_RETURN_IF_ERROR(CheckLegacyNode(node, info.opset));  // is_test=0 before opset 7
    epsilon_ = node.GetFloat("epsilon", 1e-5f);
    momentum_ = node.GetFloat("momentum", 0.9f);
    training_ = info.opset >= 14 && node.GetInt("training_mode", 0) != 0;
    per_channel_ = info.opset >= 9 || node.GetInt("spatial", 1) != 0;
    for (size_t output = 1; output < node.outputs().size() && !training_; ++output) {
      if (node.output(output) == nullptr) continue;
      if (info.opset >= 14) return info.Error("running_mean/running_var are outputs only in training mode");
      return Unsupported(info.Describe() + ": the training outputs of BatchNormalization-" +
                         std::to_string(info.opset) + " are not supported");
    }
    bool constant = !training_;
    for (size_t input = 1; input <= 4; ++input) constant = constant && info.constant_input(input) != nullptr;
    if (!constant) return Status::Ok();
    std::vector<double> params[4];
    for (size_t input = 1; input <= 4; ++input) {
      params[input - 1] = ValuesAsDoubles(RtTensor::WrapConstant(info.constant_input(input)));
    }
    constant_folded_ = Fold(params[0], params[1], params[2], params[3], epsilon_);
    if (constant_folded_.scale.size() != params[0].size()) return info.Error("scale, B, mean and var differ in size");
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    for (size_t input = 0; input < 5; ++input) {
      if (!context.has_input(input)) return InvalidModel("BatchNormalization needs X, scale, B, mean and var");
    }
    const RtTensor& x = *context.input(0);
    if (x.rank() < 2) return InvalidModel("BatchNormalization input must be (N, C, ...), got " + DescribeTensor(x));
    if (!IsSupportedFloat(x.dtype())) return Unsupported("BatchNormalization does not support " + DescribeTensor(x));
    const int64_t batch = x.dim(0);
    const int64_t channels = per_channel_ ? x.dim(1) : ProductFrom(x.dims(), 1);
    const int64_t inner = per_channel_ ? ProductFrom(x.dims(), 2) : 1;
    for (size_t input = 1; input < 5; ++input) {
      if (context.input(input)->NumElements() != channels) {
        return InvalidModel("BatchNormalization parameter " + std::to_string(input) + " is " +
                            DescribeTensor(*context.input(input)) + ", expected " + std::to_string(channels) +
                            " values");
      }
    }
    if (training_) return ComputeTraining(context, x, batch, channels, inner);
    if (!constant_folded_.scale.empty()) {
      ApplyFolded(context, x, batch, channels, inner, constant_folded_);
      return Status::Ok();
    }
    ApplyFolded(context, x, batch, channels, inner,
                Fold(ValuesAsDoubles(*context.input(1)), ValuesAsDoubles(*context.input(2)),
                     ValuesAsDoubles(*context.input(3)), ValuesAsDoubles(*context.input(4)), epsilon_));
    return Status::Ok();
  }

 private:
  // Normalizes with the batch's own statistics and updates the running ones:
  // running = input * momentum + current * (1 - momentum).
  Status ComputeTraining(KernelContext& context, const RtTensor& x, int64_t batch, int64_t channels, int64_t inner) {
    std::vector<double> mean, variance;
    if (x.dtype() == DataType::kDouble) {
      ChannelStatistics(x.data<double>(), batch, channels, inner, mean, variance);
    } else {
      RtTensor x32 = ToFloat32(x, *context.allocator);
      ChannelStatistics(x32.data<float>(), batch, channels, inner, mean, variance);
    }
    ApplyFolded(context, x, batch, channels, inner,
                Fold(ValuesAsDoubles(*context.input(1)), ValuesAsDoubles(*context.input(2)), mean, variance, epsilon_));
    for (size_t output = 1; output <= 2 && output < context.outputs.size(); ++output) {
      const RtTensor& running = *context.input(output + 2);
      std::vector<double> updated = ValuesAsDoubles(running);
      const std::vector<double>& current = output == 1 ? mean : variance;
      for (size_t c = 0; c < updated.size(); ++c) updated[c] = updated[c] * momentum_ + current[c] * (1 - momentum_);
      StoreDoubles(updated, context.Output(output, running.dtype(), running.dims()));
    }
    return Status::Ok();
  }

  float epsilon_ = 1e-5f;
  float momentum_ = 0.9f;
  bool training_ = false;
  bool per_channel_ = true;       // false: opset < 9 with spatial = 0, one parameter per (C, D1, ...) element
  ChannelAffine constant_folded_;  // from constant parameters, at Init
};

// ---- InstanceNormalization: each (n, c) plane normalized by its own mean and variance.

template <typename T>
void InstanceNormalize(const T* x, T* y, int64_t batch, int64_t channels, int64_t inner,
                       const std::vector<double>& scale, const std::vector<double>& bias, double epsilon) {
#pragma omp parallel for if (batch * channels * inner > kParallelWork)
  for (int64_t plane = 0; plane < batch * channels; ++plane) {
    const T* in = x + plane * inner;
    T* out = y + plane * inner;
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < inner; ++i) sum += in[i];
    const double mean = inner > 0 ? sum / static_cast<double>(inner) : 0.0;
    for (int64_t i = 0; i < inner; ++i) squares += (in[i] - mean) * (in[i] - mean);
    const double variance = inner > 0 ? squares / static_cast<double>(inner) : 0.0;
    const double a = scale[plane % channels] / std::sqrt(variance + epsilon);
    const T alpha = static_cast<T>(a), beta = static_cast<T>(bias[plane % channels] - mean * a);
    for (int64_t i = 0; i < inner; ++i) out[i] = in[i] * alpha + beta;
  }
}

class InstanceNormalizationKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    epsilon_ = info.node.GetFloat("epsilon", 1e-5f);
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    for (size_t input = 0; input < 3; ++input) {
      if (!context.has_input(input)) return InvalidModel("InstanceNormalization needs input, scale and B");
    }
    const RtTensor& x = *context.input(0);
    if (x.rank() < 3) {
      return InvalidModel("InstanceNormalization input must be (N, C, D1, ...), got " + DescribeTensor(x));
    }
    if (!IsSupportedFloat(x.dtype())) return Unsupported("InstanceNormalization does not support " + DescribeTensor(x));
    const int64_t channels = x.dim(1);
    for (size_t input = 1; input < 3; ++input) {
      if (context.input(input)->NumElements() != channels) {
        return InvalidModel("InstanceNormalization " + std::string(input == 1 ? "scale " : "B ") +
                            DescribeTensor(*context.input(input)) + " needs " + std::to_string(channels) + " values");
      }
    }
    const std::vector<double> scale = ValuesAsDoubles(*context.input(1)), bias = ValuesAsDoubles(*context.input(2));
    const int64_t inner = ProductFrom(x.dims(), 2);
    if (x.dtype() == DataType::kDouble) {
      RtTensor& y = context.Output(0, x.dtype(), x.dims());
      InstanceNormalize(x.data<double>(), y.data<double>(), x.dim(0), channels, inner, scale, bias, epsilon_);
      return Status::Ok();
    }
    Float32Outputs outputs(context);
    RtTensor x32 = ToFloat32(x, *context.allocator);
    RtTensor& y = outputs.Output(0, x.dtype(), x.dims());
    InstanceNormalize(x32.data<float>(), y.data<float>(), x.dim(0), channels, inner, scale, bias, epsilon_);
    outputs.Finish();
    return Status::Ok();
  }

 private:
  float epsilon_ = 1e-5f;
};

// ---- LRN: y = x / (bias + alpha / size * sum of x^2 over nearby channels)^beta, where the
// window spans floor((size-1)/2) channels before and ceil((size-1)/2) after.

struct LrnParameters {
  int64_t size = 0;
  float alpha = 1e-4f;
  float beta = 0.75f;
  float bias = 1.0f;
};

template <typename T>
void DirectLrn(const T* x, T* y, int64_t batch, int64_t channels, int64_t inner, const LrnParameters& lrn) {
  const int64_t before = (lrn.size - 1) / 2, after = lrn.size - 1 - before;
  const double scale = static_cast<double>(lrn.alpha) / static_cast<double>(lrn.size);
#pragma omp parallel for if (batch * channels * inner * lrn.size > kParallelWork)
  for (int64_t plane = 0; plane < batch * channels; ++plane) {
    const int64_t n = plane / channels, c = plane % channels;
    const int64_t first = std::max<int64_t>(0, c - before), last = std::min(channels - 1, c + after);
    for (int64_t i = 0; i < inner; ++i) {
      double squares = 0;
      for (int64_t other = first; other <= last; ++other) {
        const double value = x[(n * channels + other) * inner + i];
        squares += value * value;
      }
      y[plane * inner + i] = static_cast<T>(x[plane * inner + i] / std::pow(lrn.bias + scale * squares, lrn.beta));
    }
  }
}

struct LrnPlan {
  dnnl::lrn_forward primitive;
  dnnl::memory::desc data;
};

class LrnKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    const Node& node = info.node;
    if (node.FindAttribute("size") == nullptr) return info.Error("the size attribute is required");
    lrn_.size = node.GetInt("size", 0);
    if (lrn_.size < 1) return info.Error("size " + std::to_string(lrn_.size) + " must be >= 1");
    lrn_.alpha = node.GetFloat("alpha", 1e-4f);
    lrn_.beta = node.GetFloat("beta", 0.75f);
    lrn_.bias = node.GetFloat("bias", 1.0f);
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    if (!context.has_input(0)) return InvalidModel("LRN needs an input");
    const RtTensor& x = *context.input(0);
    if (x.rank() < 2) return InvalidModel("LRN input must be (N, C, ...), got " + DescribeTensor(x));
    if (!IsSupportedFloat(x.dtype())) return Unsupported("LRN does not support " + DescribeTensor(x));
    const int64_t batch = x.dim(0), channels = x.dim(1), inner = ProductFrom(x.dims(), 2);
    if (x.dtype() == DataType::kDouble) {
      RtTensor& y = context.Output(0, x.dtype(), x.dims());
      DirectLrn(x.data<double>(), y.data<double>(), batch, channels, inner, lrn_);
      return Status::Ok();
    }
    Float32Outputs outputs(context);
    RtTensor x32 = ToFloat32(x, *context.allocator);
    RtTensor& y = outputs.Output(0, x.dtype(), x.dims());
    if (lrn_.size % 2 == 0) {
      // oneDNN centres an even window on the channel; ONNX reaches one channel further forward.
      DirectLrn(x32.data<float>(), y.data<float>(), batch, channels, inner, lrn_);
    } else if (y.NumElements() > 0) {
      FUSIONOPT_RETURN_IF_ERROR(onednn::Guarded("LRN " + DescribeTensor(x), [&] {
        // Only the channel axis matters, so every rank maps onto oneDNN's 4-D (N, C, H, 1).
        const LrnPlan& plan = PlanFor({batch, channels, inner, 1});
        plan.primitive.execute(onednn::Stream(), {{DNNL_ARG_SRC, onednn::Wrap(plan.data, x32.raw())},
                                                  {DNNL_ARG_DST, onednn::Wrap(plan.data, y.raw())}});
        onednn::Stream().wait();
        return Status::Ok();
      }));
    }
    outputs.Finish();
    return Status::Ok();
  }

 private:
  const LrnPlan& PlanFor(const std::vector<int64_t>& dims) {
    if (const LrnPlan* plan = plans_.Find(dims)) return *plan;
    LrnPlan plan;
    plan.data = onednn::RowMajorDesc(dims);
    // oneDNN's across-channel LRN divides alpha by the window size, as ONNX does.
    dnnl::lrn_forward::desc description(dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels,
                                        plan.data, lrn_.size, lrn_.alpha, lrn_.beta, lrn_.bias);
    plan.primitive = dnnl::lrn_forward(dnnl::lrn_forward::primitive_desc(description, onednn::Engine()));
    return plans_.Insert(dims, std::move(plan));
  }

  LrnParameters lrn_;
  onednn::PlanCache<LrnPlan> plans_;
};

}  // namespace

void RegisterNormalizationKernels(KernelRegistry& registry) {
  registry.Register("", "BatchNormalization", 1, kAnyOpset, Make<BatchNormalizationKernel>());
  registry.Register("", "InstanceNormalization", 1, kAnyOpset, Make<InstanceNormalizationKernel>());
  registry.Register("", "LRN", 1, kAnyOpset, Make<LrnKernel>());
}

}  // namespace fusionopt::cpu
