// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
// ReduceLogSumExp, ReduceSumSquare — one kernel class over the reduce-over-axes engine, each
// op a (map, combine, identity, finalize) quadruple — and the family's registration.
//
// Axes are an attribute up to opset 12 (ReduceSum) / 17 (the others) and an optional input
// afterwards, which also brings noop_with_empty_axes: empty axes reduce over all axes unless
// that flag is set, in which case nothing is reduced but the op's element-wise steps still
// run (ReduceSumSquare squares, ReduceLogSum takes the log). Reducing an empty set yields the
// identity: 0 for sums, 1 for products, -inf/+inf (or the type's limits) for max/min, -inf
// for the log reductions, NaN for a float mean.
#include <algorithm>
#include <cmath>
#include <functional>

#include "cpu_runtime/onednn/conv_layout_views.h"
#include "cpu_runtime/engine/kernels.h"
#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/reduction/common.h"
#include "cpu_runtime/reduction/engine.h"

namespace fusionopt::cpu {
namespace reduction {
namespace {

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

struct ReduceOpSpec {
  const char* op_type;
  ReduceOp op;
  int64_t axes_input_since;  // first opset where axes is an input rather than an attribute
  unsigned types;
};

constexpr unsigned kNumeric = kFloatTypes | kWideIntTypes;
constexpr unsigned kAnyReduceType = kNumeric | kNarrowIntTypes | kBoolType;
constexpr ReduceOpSpec kReduceOps[] = {
    {"ReduceSum", ReduceOp::kSum, 13, kNumeric},
    {"ReduceMean", ReduceOp::kMean, 18, kNumeric},
    {"ReduceMax", ReduceOp::kMax, 18, kNumeric | kNarrowIntTypes | kBoolType},
    {"ReduceMin", ReduceOp::kMin, 18, kNumeric | kNarrowIntTypes | kBoolType},
    {"ReduceProd", ReduceOp::kProd, 18, kNumeric},
    {"ReduceL1", ReduceOp::kL1, 18, kNumeric},
    {"ReduceL2", ReduceOp::kL2, 18, kNumeric},
    {"ReduceLogSum", ReduceOp::kLogSum, 18, kFloatTypes},
    {"ReduceLogSumExp", ReduceOp::kLogSumExp, 18, kFloatTypes},
    {"ReduceSumSquare", ReduceOp::kSumSquare, 18, kNumeric},
};

// Reduces with the engine, then stores finalize(acc, j) as the element type. Float tensors
// accumulate straight into the output.
template <typename T, typename Map, typename Combine, typename Finalize>
void ReduceAndStore(const ReducePlan& plan, const T* input, AccOf<T> identity, const Map& map,
                    const Combine& combine, const Finalize& finalize, T* output) {
  using Acc = AccOf<T>;
  std::vector<Acc> scratch;
  Acc* acc = nullptr;
  if constexpr (std::is_same_v<T, Acc>) {
    acc = output;
  } else {
    scratch.resize(static_cast<size_t>(plan.output_size()));
    acc = scratch.data();
  }
  ReduceToAcc(plan, input, identity, map, combine, acc);
  const int64_t count = plan.output_size();
#pragma omp parallel for schedule(static) if (count >= kParallelMinElements)
  for (int64_t j = 0; j < count; ++j) output[j] = Elem<T>::Store(finalize(acc[j], j));
}

// A floating-point function of an accumulator; integers go through double and truncate, as
// the ONNX reference's cast back to the input type does.
template <typename Acc, typename F>
Acc ApplyReal(Acc value, const F& f) {
  if constexpr (std::is_integral_v<Acc>) {
    return static_cast<Acc>(f(static_cast<double>(value)));
  } else {
    return f(value);
  }
}

// log(sum(exp(x))) as max + log(sum(exp(x - max))): exp never overflows. A row whose max is
// infinite (or NaN, or that is empty) uses shift 0, which gives the right inf/-inf/NaN.
template <typename T>
void ReduceLogSumExp(const ReducePlan& plan, const T* input, T* output) {
  using Acc = AccOf<T>;
  auto load = [](T x, int64_t) { return Elem<T>::Load(x); };
  std::vector<Acc> shift(static_cast<size_t>(plan.output_size()));
  ReduceToAcc(plan, input, Elem<T>::Lowest(), load, TakeMax(), shift.data());
  for (Acc& value : shift) value = std::isfinite(value) ? value : Acc(0);
  auto shifted_exp = [&](T x, int64_t j) { return std::exp(Elem<T>::Load(x) - shift[j]); };
  auto log_plus_shift = [&](Acc sum, int64_t j) { return std::log(sum) + shift[j]; };
  ReduceAndStore(plan, input, Acc(0), shifted_exp, std::plus<Acc>(), log_plus_shift, output);
}

template <typename T>
void RunExtremum(ReduceOp op, const ReducePlan& plan, const T* input, T* output) {
  auto load = [](T x, int64_t) { return Elem<T>::Load(x); };
  auto keep = [](AccOf<T> a, int64_t) { return a; };
  if (op == ReduceOp::kMax) {
    ReduceAndStore(plan, input, Elem<T>::Lowest(), load, TakeMax(), keep, output);
  } else {
    ReduceAndStore(plan, input, Elem<T>::Highest(), load, TakeMin(), keep, output);
  }
}

template <typename T>
void RunArithmetic(ReduceOp op, const ReducePlan& plan, const T* input, T* output) {
  using Acc = AccOf<T>;
  const int64_t count = plan.reduced();
  auto load = [](T x, int64_t) { return Elem<T>::Load(x); };
  auto square = [](T x, int64_t) { Acc v = Elem<T>::Load(x); return v * v; };
  auto plus = std::plus<Acc>();
  auto keep = [](Acc a, int64_t) { return a; };
  switch (op) {
    case ReduceOp::kSum: return ReduceAndStore(plan, input, Acc(0), load, plus, keep, output);
    case ReduceOp::kSumSquare: return ReduceAndStore(plan, input, Acc(0), square, plus, keep, output);
    case ReduceOp::kProd: return ReduceAndStore(plan, input, Acc(1), load, std::multiplies<Acc>(), keep, output);
    case ReduceOp::kMean: {
      auto mean = [count](Acc sum, int64_t) {
        if constexpr (std::is_integral_v<Acc>) return count == 0 ? Acc(0) : sum / count;
        return sum / static_cast<Acc>(count);  // 0/0 = NaN: the mean of nothing is undefined
      };
      return ReduceAndStore(plan, input, Acc(0), load, plus, mean, output);
    }
    case ReduceOp::kL1: {
      auto magnitude = [](T x, int64_t) { Acc v = Elem<T>::Load(x); return v < 0 ? -v : v; };
      return ReduceAndStore(plan, input, Acc(0), magnitude, plus, keep, output);
    }
    case ReduceOp::kL2: {
      auto root = [](Acc sum, int64_t) { return ApplyReal(sum, [](auto v) { return std::sqrt(v); }); };
      return ReduceAndStore(plan, input, Acc(0), square, plus, root, output);
    }
    default: FUSIONOPT_CHECK(false, "not an arithmetic reduction");
  }
}

template <typename T>
void RunLogarithmic(ReduceOp op, const ReducePlan& plan, const T* input, T* output) {
  using Acc = AccOf<T>;
  if (op == ReduceOp::kLogSumExp) return ReduceLogSumExp(plan, input, output);
  auto load = [](T x, int64_t) { return Elem<T>::Load(x); };
  auto log = [](Acc sum, int64_t) { return std::log(sum); };
  ReduceAndStore(plan, input, Acc(0), load, std::plus<Acc>(), log, output);
}

// Instantiates each op only for the element types it accepts (checked before dispatch).
template <typename T>
void RunReduce(ReduceOp op, const ReducePlan& plan, const T* input, T* output) {
  constexpr bool kFloat = std::is_floating_point_v<AccOf<T>>;
  constexpr bool kArithmetic = kFloat || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
  if (op == ReduceOp::kMax || op == ReduceOp::kMin) return RunExtremum(op, plan, input, output);
  if (op == ReduceOp::kLogSum || op == ReduceOp::kLogSumExp) {
    if constexpr (kFloat) return RunLogarithmic(op, plan, input, output);
  } else {
    if constexpr (kArithmetic) return RunArithmetic(op, plan, input, output);
  }
  FUSIONOPT_CHECK(false, "element type was accepted for an op that cannot compute it");
}

class ReduceKernel : public Kernel {
 public:
  explicit ReduceKernel(const ReduceOpSpec& spec) : spec_(spec) {}

  Status Init(const KernelInfo& info) {
    keepdims_ = info.node.GetInt("keepdims", 1) != 0;
    axes_from_input_ = info.opset >= spec_.axes_input_since;
    FUSIONOPT_RETURN_IF_ERROR(CheckDeclaredType(info, 0, spec_.types));
    if (axes_from_input_) {
      if (info.node.FindAttribute("axes") != nullptr) {
        return info.Error("axes is an input, not an attribute, from opset " + std::to_string(spec_.axes_input_since));
      }
      noop_with_empty_axes_ = info.node.GetInt("noop_with_empty_axes", 0) != 0;
      if (const TensorPtr& axes = info.constant_input(1)) {
        auto values = axes->AsInt64s();
        if (!values || axes->dims().size() > 1) return info.Error("axes must be a 1-D integer tensor");
        attribute_axes_ = *values;
      }
    } else {
      attribute_axes_ = info.node.GetInts("axes").value_or(std::vector<int64_t>{});
    }
    std::optional<int64_t> rank = DeclaredRank(info, 0);
    if (rank && (!axes_from_input_ || info.constant_input(1))) {
      auto normalized = NormalizeAxes(attribute_axes_, *rank);
      if (!normalized.ok()) return info.Error(normalized.status().message());
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    const RtTensor* data = context.input(0);
    if (data == nullptr) return InvalidModel("the data input is missing");
    if (!Accepts(data->dtype(), spec_.types)) return UnsupportedType(data->dtype());
    const int64_t rank = static_cast<int64_t>(data->rank());
    std::vector<int64_t> axes = attribute_axes_;
    if (axes_from_input_ && context.has_input(1)) {
      const RtTensor& axes_tensor = *context.input(1);
      if (axes_tensor.rank() > 1 || !IsInteger(axes_tensor.dtype())) {
        return InvalidModel("axes must be a 1-D integer tensor, got " + std::string(NameOf(axes_tensor.dtype())) +
                            DimsToString(axes_tensor.dims()));
      }
      axes = axes_tensor.ToInt64s();
    }
    if (axes.empty() && !noop_with_empty_axes_) {
      for (int64_t axis = 0; axis < rank; ++axis) axes.push_back(axis);
    }
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> normalized, NormalizeAxes(axes, rank));
    RtTensor in_place;
    const bool physical = ReadsPhysically(*data, normalized);
    if (physical) {
      in_place = layouts::PhysicalView(*data);
      std::vector<int64_t> mapped;
      for (int64_t axis : normalized) {
        for (int64_t each : layouts::PhysicalAxes(axis, rank, data->layout())) mapped.push_back(each);
      }
      std::sort(mapped.begin(), mapped.end());
      normalized = std::move(mapped);
    } else if (!data->row_major()) {
      in_place = onednn::RowMajor(*data, *context.allocator);
    }
    const RtTensor& source = in_place.defined() ? in_place : *data;
    ReducePlan plan = PlanReduction(source.dims(), normalized, keepdims_);
    RtTensor& output = context.Output(0, data->dtype(), plan.output_dims);
    FUSIONOPT_RETURN_IF_ERROR(DispatchType<kAnyReduceType>(data->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      RunReduce(spec_.op, plan, DataOf<T>(source), MutableDataOf<T>(output));
      return Status::Ok();
    }));
    // Without keepdims the axes left keep their logical order (ReadsPhysically).
    if (physical && keepdims_) {
      output = layouts::FinishResult(std::move(output), data->layout(), context.conv_layout_output, *context.allocator);
    }
    return Status::Ok();
  }

  // Data in convolution layouts is reduced in place (ReadsPhysically) or reordered.
  bool ReadsConvLayouts() const override { return true; }

 private:
  // Whether data in a convolution layout is reduced over its physical dims: with keepdims
  // always (the result is in that layout again); without, when the axes left are in logical
  // order there too — the channels reduced, or every spatial axis.
  bool ReadsPhysically(const RtTensor& data, const std::vector<int64_t>& axes) const {
    if (data.row_major()) return false;
    if (keepdims_) return true;
    const bool channels = std::find(axes.begin(), axes.end(), 1) != axes.end();
    const size_t spatial = static_cast<size_t>(std::count_if(axes.begin(), axes.end(), [](int64_t a) { return a >= 2; }));
    return channels || spatial == data.rank() - 2;
  }

  const ReduceOpSpec& spec_;
  bool keepdims_ = true;
  bool axes_from_input_ = false;
  bool noop_with_empty_axes_ = false;
  std::vector<int64_t> attribute_axes_;  // the attribute, or the constant axes input
};

}  // namespace

void RegisterReduceKernels(KernelRegistry& registry) {
  for (const ReduceOpSpec& spec : kReduceOps) {
    auto factory = [spec = &spec](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
      auto kernel = std::make_unique<ReduceKernel>(*spec);
      FUSIONOPT_RETURN_IF_ERROR(kernel->Init(info));
      return std::unique_ptr<Kernel>(std::move(kernel));
    };
    registry.Register("", spec.op_type, 1, kAnyOpset, factory);
  }
}

}  // namespace reduction

void RegisterReductionKernels(KernelRegistry& registry) {
  reduction::RegisterReduceKernels(registry);
  reduction::RegisterArgReduceKernels(registry);
  reduction::RegisterSoftmaxKernels(registry);
  reduction::RegisterNormalizationKernels(registry);
}

}  // namespace fusionopt::cpu
