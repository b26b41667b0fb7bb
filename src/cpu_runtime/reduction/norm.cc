// LayerNormalization, RMSNormalization (and onnxruntime's SimplifiedLayerNormalization),
// GroupNormalization and MeanVarianceNormalization: reduce to per-row
// statistics, then normalize every element of the row while it is still in cache.
//
// Variance is computed in two passes over the row (mean first, then squared deviations),
// which, unlike E[x²] - E[x]², cannot go negative or lose the small variance of large values.
#include <cmath>
#include <functional>

#include "cpu_runtime/reduction/common.h"
#include "cpu_runtime/reduction/engine.h"

namespace fusionopt::cpu::reduction {
namespace {

template <typename Acc>
struct Moments {
  Acc mean;
  Acc inv_std;  // 1 / sqrt(variance + epsilon)
};

// Centered: mean and 1/sqrt(variance + epsilon). Otherwise (RMS normalization) mean 0 and
// 1/sqrt(mean(x²) + epsilon).
template <bool kCentered, typename T>
Moments<AccOf<T>> RowMoments(const T* x, int64_t n, AccOf<T> epsilon) {
  using Acc = AccOf<T>;
  auto load = [](T v) { return Elem<T>::Load(v); };
  const Acc mean = kCentered ? ReduceRun(x, n, Acc(0), load, std::plus<Acc>()) / static_cast<Acc>(n) : Acc(0);
  auto squared_deviation = [mean](T v) {
    const Acc d = Elem<T>::Load(v) - mean;
    return d * d;
  };
  const Acc variance = ReduceRun(x, n, Acc(0), squared_deviation, std::plus<Acc>()) / static_cast<Acc>(n);
  return {mean, Acc(1) / std::sqrt(variance + epsilon)};
}

// A Scale/B input of LayerNormalization broadcast (numpy rules, towards the normalized
// dims only) to one value per element of a normalized row.
template <typename T>
Result<std::vector<AccOf<T>>> ExpandToRow(const RtTensor& param, const std::vector<int64_t>& row_dims,
                                          const char* name) {
  const std::vector<int64_t>& dims = param.dims();
  bool broadcastable = dims.size() <= row_dims.size();
  std::vector<int64_t> strides(row_dims.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; broadcastable && k < dims.size(); ++k) {
    const size_t p = dims.size() - 1 - k, r = row_dims.size() - 1 - k;
    broadcastable = dims[p] == row_dims[r] || dims[p] == 1;
    strides[r] = dims[p] == 1 ? 0 : stride;
    stride *= dims[p];
  }
  if (!broadcastable) {
    return InvalidModel(std::string(name) + " of shape " + DimsToString(dims) +
                        " does not broadcast to the normalized shape " + DimsToString(row_dims));
  }
  const T* values = DataOf<T>(param);
  std::vector<AccOf<T>> expanded(static_cast<size_t>(ProductOf(row_dims, 0, row_dims.size())));
  for (int64_t i = 0; i < static_cast<int64_t>(expanded.size()); ++i) {
    int64_t offset = 0;
    for (int64_t rest = i, d = static_cast<int64_t>(row_dims.size()) - 1; d >= 0; --d) {
      offset += (rest % row_dims[d]) * strides[d];
      rest /= row_dims[d];
    }
    expanded[i] = Elem<T>::Load(values[offset]);
  }
  return expanded;
}

// LayerNormalization (kCentered): Y = (X - mean) * inv_std * Scale + B, outputs Y, Mean,
// InvStdDev. RMSNormalization and onnxruntime's SimplifiedLayerNormalization (not centered):
// Y = X * inv_rms * Scale, outputs Y and (Simplified only) the inverse RMS.
template <bool kCentered>
class RowNormalizationKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", -1);
    epsilon_ = info.node.GetFloat("epsilon", 1e-5f);
    const int64_t stash_type = info.node.GetInt("stash_type", static_cast<int64_t>(DataType::kFloat));
    if (stash_type != static_cast<int64_t>(DataType::kFloat)) {
      return Unsupported(info.Describe() + ": stash_type " + std::to_string(stash_type) +
                         " is not supported (only 1, float)");
    }
    writes_mean_ = kCentered && info.node.output(1) != nullptr;
    writes_inv_std_ = info.node.output(kInvStdOutput) != nullptr;
    FUSIONOPT_RETURN_IF_ERROR(CheckDeclaredType(info, 0, kFloatTypes));
    return CheckAxisAgainstDeclaredRank(info, axis_);
  }

  Status Compute(KernelContext& context) override {
    const RtTensor* x = context.input(0);
    const RtTensor* scale = context.input(1);
    if (x == nullptr || scale == nullptr) return InvalidModel("X and Scale are required");
    if (scale->dtype() != x->dtype() || (context.has_input(2) && context.input(2)->dtype() != x->dtype())) {
      return InvalidModel("Scale and B must have the element type of X");
    }
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, NormalizeAxes({axis_}, static_cast<int64_t>(x->rank())));
    const std::vector<int64_t>& dims = x->dims();
    const size_t axis = static_cast<size_t>(axes[0]);
    std::vector<int64_t> stats_dims = dims;
    std::fill(stats_dims.begin() + static_cast<std::ptrdiff_t>(axis), stats_dims.end(), 1);
    RtTensor& y = context.Output(0, x->dtype(), dims);
    float* mean = writes_mean_ ? MutableDataOf<float>(context.Output(1, DataType::kFloat, stats_dims)) : nullptr;
    float* inv_std =
        writes_inv_std_ ? MutableDataOf<float>(context.Output(kInvStdOutput, DataType::kFloat, stats_dims)) : nullptr;
    return DispatchType<kFloatTypes>(x->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const std::vector<int64_t> row_dims(dims.begin() + static_cast<std::ptrdiff_t>(axis), dims.end());
      FUSIONOPT_ASSIGN_OR_RETURN(auto scale_row, ExpandToRow<T>(*scale, row_dims, "Scale"));
      std::vector<AccOf<T>> bias_row(scale_row.size(), AccOf<T>(0));
      if (kCentered && context.has_input(2)) {
        FUSIONOPT_ASSIGN_OR_RETURN(bias_row, ExpandToRow<T>(*context.input(2), row_dims, "B"));
      }
      Normalize(DataOf<T>(*x), ProductOf(dims, 0, axis), static_cast<int64_t>(scale_row.size()), scale_row.data(),
                bias_row.data(), MutableDataOf<T>(y), mean, inv_std);
      return Status::Ok();
    });
  }

 private:
  template <typename T>
  void Normalize(const T* x, int64_t rows, int64_t n, const AccOf<T>* scale, const AccOf<T>* bias, T* y,
                 float* mean_out, float* inv_std_out) const {
    using Acc = AccOf<T>;
    // Narrow types are staged a row at a time in the compute type (bulk conversions), so the
    // row is read once from memory and converted once.
    constexpr bool kStaged = !std::is_same_v<T, Acc>;
#pragma omp parallel if (rows * n >= kParallelMinElements)
    {
      std::vector<Acc> staged(kStaged ? static_cast<size_t>(n) : 0);
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row) {
        const T* in = x + row * n;
        T* out = y + row * n;
        Moments<Acc> moments;
        if constexpr (kStaged) {
          LoadElements(in, staged.data(), n);
          moments = RowMoments<kCentered>(staged.data(), n, static_cast<Acc>(epsilon_));
          for (int64_t i = 0; i < n; ++i) staged[i] = (staged[i] - moments.mean) * moments.inv_std * scale[i] + bias[i];
          StoreElements(staged.data(), out, n);
        } else {
          moments = RowMoments<kCentered>(in, n, static_cast<Acc>(epsilon_));
          for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - moments.mean) * moments.inv_std * scale[i] + bias[i];
        }
        if (mean_out != nullptr) mean_out[row] = static_cast<float>(moments.mean);
        if (inv_std_out != nullptr) inv_std_out[row] = static_cast<float>(moments.inv_std);
      }
    }
  }

  static constexpr size_t kInvStdOutput = kCentered ? 2 : 1;
  int64_t axis_ = -1;
  float epsilon_ = 1e-5f;
  bool writes_mean_ = false;
  bool writes_inv_std_ = false;
};

// Opset 18 takes scale and bias per group, opset 21 per channel (18 was deprecated for
// that); statistics are per (instance, group) either way, over a contiguous block of X.
class GroupNormalizationKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    const Attribute* groups = info.node.FindAttribute("num_groups");
    if (groups == nullptr) return info.Error("the num_groups attribute is required");
    num_groups_ = groups->i;
    if (num_groups_ <= 0) return info.Error("num_groups must be positive, got " + std::to_string(num_groups_));
    epsilon_ = info.node.GetFloat("epsilon", 1e-5f);
    per_channel_ = info.opset >= 21;
    return CheckDeclaredType(info, 0, kFloatTypes);
  }

  Status Compute(KernelContext& context) override {
    const RtTensor* x = context.input(0);
    const RtTensor* scale = context.input(1);
    const RtTensor* bias = context.input(2);
    if (x == nullptr || scale == nullptr || bias == nullptr) return InvalidModel("X, scale and bias are required");
    if (x->rank() < 2) return InvalidModel("X must have rank >= 2 (N, C, ...), got " + DimsToString(x->dims()));
    const int64_t channels = x->dim(1);
    if (channels % num_groups_ != 0) {
      return InvalidModel(std::to_string(channels) + " channels do not split into " + std::to_string(num_groups_) +
                          " groups");
    }
    const int64_t params = per_channel_ ? channels : num_groups_;
    if (scale->NumElements() != params || bias->NumElements() != params || scale->dtype() != x->dtype() ||
        bias->dtype() != x->dtype()) {
      return InvalidModel(std::string("scale and bias must hold one value of X's type per ") +
                          (per_channel_ ? "channel" : "group") + " (" + std::to_string(params) + ")");
    }
    RtTensor& y = context.Output(0, x->dtype(), x->dims());
    const int64_t spatial = ProductOf(x->dims(), 2, x->rank());
    return DispatchType<kFloatTypes>(x->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      Normalize(DataOf<T>(*x), x->dim(0), channels, spatial, DataOf<T>(*scale), DataOf<T>(*bias), MutableDataOf<T>(y));
      return Status::Ok();
    });
  }

 private:
  template <typename T>
  void Normalize(const T* x, int64_t batch, int64_t channels, int64_t spatial, const T* scale, const T* bias,
                 T* y) const {
    using Acc = AccOf<T>;
    const int64_t group_channels = channels / num_groups_;
    const int64_t group_size = group_channels * spatial;
    const int64_t rows = batch * num_groups_;
#pragma omp parallel for schedule(static) if (rows * group_size >= kParallelMinElements)
    for (int64_t row = 0; row < rows; ++row) {
      if (group_size == 0) continue;
      const int64_t group = row % num_groups_;
      const Moments<Acc> moments = RowMoments<true>(x + row * group_size, group_size, static_cast<Acc>(epsilon_));
      for (int64_t c = 0; c < group_channels; ++c) {
        const int64_t param = per_channel_ ? group * group_channels + c : group;
        const Acc gain = moments.inv_std * Elem<T>::Load(scale[param]);
        const Acc shift = Elem<T>::Load(bias[param]);
        const int64_t offset = row * group_size + c * spatial;
        for (int64_t i = 0; i < spatial; ++i) {
          y[offset + i] = Elem<T>::Store((Elem<T>::Load(x[offset + i]) - moments.mean) * gain + shift);
        }
      }
    }
  }

  int64_t num_groups_ = 1;
  float epsilon_ = 1e-5f;
  bool per_channel_ = true;
};

// (X - mean) / (sqrt(variance) + 1e-9) over `axes` (default [0, 2, 3]: per channel of NCHW),
// with the epsilon where the ONNX function body puts it.
class MeanVarianceNormalizationKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axes_ = info.node.GetInts("axes").value_or(std::vector<int64_t>{0, 2, 3});
    FUSIONOPT_RETURN_IF_ERROR(CheckDeclaredType(info, 0, kFloatTypes));
    if (std::optional<int64_t> rank = DeclaredRank(info, 0)) {
      auto normalized = NormalizeAxes(axes_, *rank);
      if (!normalized.ok()) return info.Error(normalized.status().message());
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    const RtTensor* x = context.input(0);
    if (x == nullptr) return InvalidModel("the input is missing");
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, NormalizeAxes(axes_, static_cast<int64_t>(x->rank())));
    const ReducePlan plan = PlanReduction(x->dims(), axes, true);
    RtTensor& y = context.Output(0, x->dtype(), x->dims());
    return DispatchType<kFloatTypes>(x->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      Normalize(plan, DataOf<T>(*x), MutableDataOf<T>(y));
      return Status::Ok();
    });
  }

 private:
  template <typename T>
  static void Normalize(const ReducePlan& plan, const T* x, T* y) {
    using Acc = AccOf<T>;
    const Acc count = static_cast<Acc>(plan.reduced());
    std::vector<Acc> mean(static_cast<size_t>(plan.output_size()));
    std::vector<Acc> scale(mean.size());
    ReduceToAcc(plan, x, Acc(0), [](T v, int64_t) { return Elem<T>::Load(v); }, std::plus<Acc>(), mean.data());
    for (Acc& value : mean) value /= count;
    auto squared_deviation = [&mean](T v, int64_t j) {
      const Acc d = Elem<T>::Load(v) - mean[j];
      return d * d;
    };
    ReduceToAcc(plan, x, Acc(0), squared_deviation, std::plus<Acc>(), scale.data());
    for (Acc& value : scale) value = Acc(1) / (std::sqrt(value / count) + Acc(1e-9));
    ForEachRun(plan, [&](int64_t offset, int64_t length, int64_t stat, int64_t stat_step) {
      for (int64_t i = 0; i < length; ++i) {
        const int64_t j = stat + i * stat_step;
        y[offset + i] = Elem<T>::Store((Elem<T>::Load(x[offset + i]) - mean[j]) * scale[j]);
      }
    });
  }

  // Visits the input as contiguous stretches: body(offset, length, stat, stat_step) covers
  // elements offset..offset+length, whose statistics are at stat + i * stat_step.
  template <typename Body>
  static void ForEachRun(const ReducePlan& plan, const Body& body) {
#pragma omp parallel for schedule(static) if (plan.input_size() >= kParallelMinElements)
    for (int64_t row = 0; row < plan.outer; ++row) {
      const int64_t base = plan.RowOffset(row);
      for (int64_t segment : plan.segment_offsets) {
        if (plan.inner == 1) {
          body(base + segment, plan.run, row, 0);  // a row's run shares one statistic
          continue;
        }
        for (int64_t k = 0; k < plan.run; ++k) body(base + segment + k * plan.inner, plan.inner, row * plan.inner, 1);
      }
    }
  }

  std::vector<int64_t> axes_;
};

}  // namespace

void RegisterNormalizationKernels(KernelRegistry& registry) {
  // Before 17 the op is onnxruntime's registration in the ONNX domain, with the same meaning.
  registry.Register("", "LayerNormalization", 1, kAnyOpset, Make<RowNormalizationKernel<true>>());
  registry.Register("", "RMSNormalization", 23, kAnyOpset, Make<RowNormalizationKernel<false>>());
  for (const char* domain : {"", "com.microsoft"}) {
    registry.Register(domain, "SimplifiedLayerNormalization", 1, kAnyOpset, Make<RowNormalizationKernel<false>>());
  }
  registry.Register("", "GroupNormalization", 18, kAnyOpset, Make<GroupNormalizationKernel>());
  registry.Register("", "MeanVarianceNormalization", 9, kAnyOpset, Make<MeanVarianceNormalizationKernel>());
}

}  // namespace fusionopt::cpu::reduction
