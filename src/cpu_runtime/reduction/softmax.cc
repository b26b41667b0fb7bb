// Softmax, LogSoftmax and Hardmax.
//
// Before opset 13 the input is coerced to 2-D at `axis` (default 1) and each row of the
// flattened [prod(dims[:axis]), prod(dims[axis:])] matrix is normalized; from opset 13 the op
// works along the single axis `axis` (default -1). Both read as [outer, n, inner]. Softmax is
// max-subtracted so exp never overflows (and can use the vectorized exp of reduction/math.h);
// LogSoftmax is (x - max) - log(sum(exp(x - max)));
// Hardmax puts 1 at the first maximum of each row.
#include <cmath>
#include <functional>

#include "cpu_runtime/reduction/common.h"
#include "cpu_runtime/reduction/engine.h"
#include "cpu_runtime/reduction/math.h"

namespace fusionopt::cpu::reduction {
namespace {

enum class SoftmaxOp { kSoftmax, kLogSoftmax, kHardmax };

template <typename T>
int64_t FirstMaxIndex(const T* x, int64_t n, int64_t stride) {
  int64_t index = 0;
  AccOf<T> best = Elem<T>::Load(x[0]);
  for (int64_t r = 1; r < n; ++r) {
    AccOf<T> value = Elem<T>::Load(x[r * stride]);
    if (Improves<true>(value, best, false)) {
      best = value;
      index = r;
    }
  }
  return index;
}

// One contiguous row of n elements; `work` holds n accumulators (it may alias y when T is
// the accumulator type), where the shifted exponentials wait for their sum.
template <SoftmaxOp kOp, typename T>
void NormalizeRow(const T* x, T* y, int64_t n, AccOf<T>* work) {
  using Acc = AccOf<T>;
  if (n == 0) return;
  if constexpr (kOp == SoftmaxOp::kHardmax) {
    const int64_t index = FirstMaxIndex(x, n, 1);
    for (int64_t i = 0; i < n; ++i) y[i] = Elem<T>::Store(Acc(i == index ? 1 : 0));
    return;
  }
  auto load = [](T v) { return Elem<T>::Load(v); };
  const Acc max = ReduceRun(x, n, Elem<T>::Lowest(), load, TakeMax());
  if constexpr (std::is_same_v<T, Acc>) {
    ExpShifted(x, max, work, n);
  } else {
    for (int64_t i = 0; i < n; ++i) work[i] = Elem<T>::Load(x[i]);
    ExpShifted(work, max, work, n);
  }
  const Acc sum = ReduceRun(work, n, Acc(0), [](Acc v) { return v; }, std::plus<Acc>());
  if constexpr (kOp == SoftmaxOp::kSoftmax) {
    const Acc scale = Acc(1) / sum;
    for (int64_t i = 0; i < n; ++i) y[i] = Elem<T>::Store(work[i] * scale);
  } else {
    // (x - max) - log_sum, in this order: folding max + log_sum first would round the sum
    // to the magnitude of max and lose the small result's precision.
    const Acc log_sum = std::log(sum);
    for (int64_t i = 0; i < n; ++i) y[i] = Elem<T>::Store((Elem<T>::Load(x[i]) - max) - log_sum);
  }
}

template <SoftmaxOp kOp, typename T>
void NormalizeRows(const T* x, T* y, int64_t rows, int64_t n) {
  using Acc = AccOf<T>;
#pragma omp parallel if (rows * n >= kParallelMinElements)
  {
    std::vector<Acc> scratch;
    if constexpr (!std::is_same_v<T, Acc>) scratch.resize(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      Acc* work = nullptr;
      if constexpr (std::is_same_v<T, Acc>) {
        work = y + row * n;
      } else {
        work = scratch.data();
      }
      NormalizeRow<kOp>(x + row * n, y + row * n, n, work);
    }
  }
}

// A tile of `width` neighbouring columns of an [n, inner] slab: per-column statistics in
// small arrays, reads along the axis contiguous across the tile.
template <SoftmaxOp kOp, typename T>
void NormalizeColumnTile(const T* x, T* y, int64_t n, int64_t inner, int64_t width) {
  using Acc = AccOf<T>;
  if (n == 0) return;
  if constexpr (kOp == SoftmaxOp::kHardmax) {
    for (int64_t i = 0; i < width; ++i) {
      const int64_t index = FirstMaxIndex(x + i, n, inner);
      for (int64_t r = 0; r < n; ++r) y[r * inner + i] = Elem<T>::Store(Acc(r == index ? 1 : 0));
    }
    return;
  }
  Acc max[kInnerTile];
  Acc sum[kInnerTile];
  Acc shifted[kInnerTile];
  std::fill(max, max + width, Elem<T>::Lowest());
  std::fill(sum, sum + width, Acc(0));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < width; ++i) max[i] = MaxOf(max[i], Elem<T>::Load(x[r * inner + i]));
  }
  auto shift_row = [&](int64_t r) {
    for (int64_t i = 0; i < width; ++i) shifted[i] = Elem<T>::Load(x[r * inner + i]) - max[i];
  };
  for (int64_t r = 0; r < n; ++r) {
    shift_row(r);
    ExpNonPositiveInPlace(shifted, width);
    for (int64_t i = 0; i < width; ++i) sum[i] += shifted[i];
  }
  if constexpr (kOp == SoftmaxOp::kLogSoftmax) {
    for (int64_t i = 0; i < width; ++i) sum[i] = std::log(sum[i]);  // from here on: log of the sum
  }
  for (int64_t r = 0; r < n; ++r) {
    shift_row(r);
    if constexpr (kOp == SoftmaxOp::kSoftmax) {
      ExpNonPositiveInPlace(shifted, width);
      for (int64_t i = 0; i < width; ++i) y[r * inner + i] = Elem<T>::Store(shifted[i] / sum[i]);
    } else {
      for (int64_t i = 0; i < width; ++i) y[r * inner + i] = Elem<T>::Store(shifted[i] - sum[i]);
    }
  }
}

template <SoftmaxOp kOp, typename T>
void NormalizeColumns(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  const int64_t tiles = (inner + kInnerTile - 1) / kInnerTile;
#pragma omp parallel for schedule(static) if (outer * n * inner >= kParallelMinElements)
  for (int64_t task = 0; task < outer * tiles; ++task) {
    const int64_t row = task / tiles;
    const int64_t start = (task % tiles) * kInnerTile;
    const int64_t offset = row * n * inner + start;
    NormalizeColumnTile<kOp>(x + offset, y + offset, n, inner, std::min(kInnerTile, inner - start));
  }
}

template <SoftmaxOp kOp>
class SoftmaxKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    coerce_to_2d_ = info.opset < 13;
    axis_ = info.node.GetInt("axis", coerce_to_2d_ ? 1 : -1);
    FUSIONOPT_RETURN_IF_ERROR(CheckDeclaredType(info, 0, kFloatTypes));
    return CheckAxisAgainstDeclaredRank(info, axis_);
  }

  Status Compute(KernelContext& context) override {
    const RtTensor* input = context.input(0);
    if (input == nullptr) return InvalidModel("the input is missing");
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, NormalizeAxes({axis_}, static_cast<int64_t>(input->rank())));
    const std::vector<int64_t>& dims = input->dims();
    const size_t axis = static_cast<size_t>(axes[0]);
    const int64_t outer = ProductOf(dims, 0, axis);
    const int64_t n = coerce_to_2d_ ? ProductOf(dims, axis, dims.size()) : dims[axis];
    const int64_t inner = coerce_to_2d_ ? 1 : ProductOf(dims, axis + 1, dims.size());
    RtTensor& output = context.Output(0, input->dtype(), dims);
    return DispatchType<kFloatTypes>(input->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (inner == 1) {
        NormalizeRows<kOp>(DataOf<T>(*input), MutableDataOf<T>(output), outer, n);
      } else {
        NormalizeColumns<kOp>(DataOf<T>(*input), MutableDataOf<T>(output), outer, n, inner);
      }
      return Status::Ok();
    });
  }

 private:
  bool coerce_to_2d_ = false;
  int64_t axis_ = -1;
};

}  // namespace

void RegisterSoftmaxKernels(KernelRegistry& registry) {
  registry.Register("", "Softmax", 1, kAnyOpset, Make<SoftmaxKernel<SoftmaxOp::kSoftmax>>());
  registry.Register("", "LogSoftmax", 1, kAnyOpset, Make<SoftmaxKernel<SoftmaxOp::kLogSoftmax>>());
  registry.Register("", "Hardmax", 1, kAnyOpset, Make<SoftmaxKernel<SoftmaxOp::kHardmax>>());
}

}  // namespace fusionopt::cpu::reduction
