// ArgMax and ArgMin: the int64 index of the largest / smallest element along one axis
// (keepdims, and from opset 12 select_last_index to break ties towards the last index).
#include "cpu_runtime/reduction/common.h"
#include "cpu_runtime/reduction/engine.h"

namespace fusionopt::cpu::reduction {
namespace {

constexpr unsigned kArgTypes = kFloatTypes | kWideIntTypes | kNarrowIntTypes;

// One contiguous row: the extreme value by a vectorized reduction, then the first (or last)
// index holding it — a NaN extreme is found as the first (last) NaN, as numpy does.
template <bool kMax, typename T>
int64_t ArgOfRow(const T* row, int64_t n, bool select_last) {
  using Acc = AccOf<T>;
  auto load = [](T v) { return Elem<T>::Load(v); };
  const Acc extreme = kMax ? ReduceRun(row, n, Elem<T>::Lowest(), load, TakeMax())
                           : ReduceRun(row, n, Elem<T>::Highest(), load, TakeMin());
  const bool nan = IsNan(extreme);
  auto holds_extreme = [&](int64_t i) {
    const Acc value = Elem<T>::Load(row[i]);
    return nan ? IsNan(value) : value == extreme;
  };
  if (select_last) {
    for (int64_t i = n - 1; i > 0; --i) {
      if (holds_extreme(i)) return i;
    }
    return 0;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (holds_extreme(i)) return i;
  }
  return 0;
}

// A tile of up to kInnerTile neighbouring columns of an [n, inner] slab, scanned together so
// the reads along the axis stay contiguous.
template <bool kMax, typename T>
void ArgOfColumns(const T* base, int64_t n, int64_t inner, int64_t width, bool select_last, int64_t* index) {
  using Acc = AccOf<T>;
  Acc best[kInnerTile];
  for (int64_t i = 0; i < width; ++i) {
    best[i] = Elem<T>::Load(base[i]);
    index[i] = 0;
  }
  for (int64_t r = 1; r < n; ++r) {
    const T* src = base + r * inner;
    for (int64_t i = 0; i < width; ++i) {
      Acc value = Elem<T>::Load(src[i]);
      if (Improves<kMax>(value, best[i], select_last)) {
        best[i] = value;
        index[i] = r;
      }
    }
  }
}

// Input viewed as [outer, n, inner].
template <bool kMax, typename T>
void ArgReduce(const T* input, int64_t outer, int64_t n, int64_t inner, bool select_last, int64_t* output) {
  const bool parallel = outer * n * inner >= kParallelMinElements;
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t row = 0; row < outer; ++row) output[row] = ArgOfRow<kMax>(input + row * n, n, select_last);
    return;
  }
  const int64_t tiles = (inner + kInnerTile - 1) / kInnerTile;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < outer * tiles; ++task) {
    const int64_t row = task / tiles;
    const int64_t start = (task % tiles) * kInnerTile;
    ArgOfColumns<kMax>(input + row * n * inner + start, n, inner, std::min(kInnerTile, inner - start), select_last,
                       output + row * inner + start);
  }
}

template <bool kMax>
class ArgReduceKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", 0);
    keepdims_ = info.node.GetInt("keepdims", 1) != 0;
    select_last_ = info.node.GetInt("select_last_index", 0) != 0;
    FUSIONOPT_RETURN_IF_ERROR(CheckDeclaredType(info, 0, kArgTypes));
    return CheckAxisAgainstDeclaredRank(info, axis_);
  }

  Status Compute(KernelContext& context) override {
    const RtTensor* data = context.input(0);
    if (data == nullptr) return InvalidModel("the data input is missing");
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, NormalizeAxes({axis_}, static_cast<int64_t>(data->rank())));
    const size_t axis = static_cast<size_t>(axes[0]);
    const std::vector<int64_t>& dims = data->dims();
    const int64_t n = dims[axis];
    if (n == 0) return InvalidModel("cannot take the index of an extreme value along an empty axis");
    std::vector<int64_t> output_dims = dims;
    if (keepdims_) {
      output_dims[axis] = 1;
    } else {
      output_dims.erase(output_dims.begin() + static_cast<std::ptrdiff_t>(axis));
    }
    RtTensor& output = context.Output(0, DataType::kInt64, output_dims);
    const int64_t outer = ProductOf(dims, 0, axis);
    const int64_t inner = ProductOf(dims, axis + 1, dims.size());
    return DispatchType<kArgTypes>(data->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      ArgReduce<kMax>(DataOf<T>(*data), outer, n, inner, select_last_, MutableDataOf<int64_t>(output));
      return Status::Ok();
    });
  }

 private:
  int64_t axis_ = 0;
  bool keepdims_ = true;
  bool select_last_ = false;
};

}  // namespace

void RegisterArgReduceKernels(KernelRegistry& registry) {
  registry.Register("", "ArgMax", 1, kAnyOpset, Make<ArgReduceKernel<true>>());
  registry.Register("", "ArgMin", 1, kAnyOpset, Make<ArgReduceKernel<false>>());
}

}  // namespace fusionopt::cpu::reduction
