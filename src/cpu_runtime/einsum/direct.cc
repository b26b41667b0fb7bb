// Einsum steps as direct loops over the label space: projections of one operand (diagonals,
// sums, permutations) and the contractions of types oneDNN does not compute.
//
// Each operand is read through one stride per label (the sum of the strides of the axes
// carrying it, which is what walks a diagonal; 0 where it lacks the label), so no operand
// is rearranged before the loops read it.
#include <algorithm>
#include <array>

#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/einsum/contract.h"

namespace fusionopt::cpu::einsum {
namespace {

using data_movement::ContiguousStrides;
using data_movement::Product;

// Element stride of each of `labels` in `operand`; 0 for labels it lacks or broadcasts.
std::vector<int64_t> LabelStrides(const Operand& operand, const std::vector<int>& labels) {
  const std::vector<int64_t> axis_strides = ContiguousStrides(operand.tensor.dims());
  std::vector<int64_t> strides(labels.size(), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    for (size_t axis = 0; axis < operand.labels.size(); ++axis) {
      if (operand.labels[axis] == labels[i] && operand.tensor.dim(axis) > 1) strides[i] += axis_strides[axis];
    }
  }
  return strides;
}

std::vector<int> Without(const std::vector<int>& labels, const std::vector<int>& removed) {
  std::vector<int> kept;
  for (int label : labels) {
    if (std::find(removed.begin(), removed.end(), label) == removed.end()) kept.push_back(label);
  }
  return kept;
}

// A loop nest over the result's labels, then the summed labels; per operand, one stride per label.
template <size_t N>
struct LoopNest {
  std::vector<int64_t> result_dims, summed_dims;
  std::array<std::vector<int64_t>, N> result_strides, summed_strides;
};

// A row-major walk over `dims` that keeps each operand's element offset.
template <size_t N>
class StridedWalk {
 public:
  StridedWalk(const std::vector<int64_t>& dims, const std::array<std::vector<int64_t>, N>& strides)
      : dims_(dims), strides_(strides), index_(dims.size(), 0) {}

  void Seek(int64_t position) {
    offsets_.fill(0);
    for (size_t axis = dims_.size(); axis-- > 0;) {
      index_[axis] = position % dims_[axis];
      position /= dims_[axis];
      for (size_t op = 0; op < N; ++op) offsets_[op] += index_[axis] * strides_[op][axis];
    }
  }
  void Next() {
    for (size_t axis = dims_.size(); axis-- > 0;) {
      for (size_t op = 0; op < N; ++op) offsets_[op] += strides_[op][axis];
      if (++index_[axis] < dims_[axis]) return;
      for (size_t op = 0; op < N; ++op) offsets_[op] -= strides_[op][axis] * dims_[axis];
      index_[axis] = 0;
    }
  }
  const std::array<int64_t, N>& offsets() const { return offsets_; }

 private:
  const std::vector<int64_t>& dims_;
  const std::array<std::vector<int64_t>, N>& strides_;
  std::vector<int64_t> index_;
  std::array<int64_t, N> offsets_{};
};

// out[result index] = sum over the summed labels of the product of the operands' elements.
// The innermost summed label runs as a plain strided loop; the rest walk the nest.
template <typename T, typename Acc, size_t N>
void AccumulateProducts(const std::array<const T*, N>& data, LoopNest<N> loops, T* out) {
  const int64_t count = Product(loops.result_dims);
  int64_t inner = 1;
  std::array<int64_t, N> inner_strides{};
  if (!loops.summed_dims.empty()) {
    inner = loops.summed_dims.back();
    loops.summed_dims.pop_back();
    for (size_t op = 0; op < N; ++op) {
      inner_strides[op] = loops.summed_strides[op].back();
      loops.summed_strides[op].pop_back();
    }
  }
  const int64_t outer = Product(loops.summed_dims);
  if (outer * inner == 0) {  // an empty sum, or no result at all
    std::fill(out, out + count, T(0));
    return;
  }
  data_movement::ParallelChunks(count, count * outer * inner, [&](int64_t begin, int64_t end) {
    StridedWalk<N> result(loops.result_dims, loops.result_strides);
    StridedWalk<N> summed(loops.summed_dims, loops.summed_strides);
    result.Seek(begin);
    for (int64_t position = begin; position < end; ++position, result.Next()) {
      Acc total = 0;
      summed.Seek(0);
      for (int64_t step = 0; step < outer; ++step, summed.Next()) {
        std::array<const T*, N> base;
        for (size_t op = 0; op < N; ++op) base[op] = data[op] + result.offsets()[op] + summed.offsets()[op];
        for (int64_t i = 0; i < inner; ++i) {
          Acc product = static_cast<Acc>(base[0][i * inner_strides[0]]);
          for (size_t op = 1; op < N; ++op) product *= static_cast<Acc>(base[op][i * inner_strides[op]]);
          total += product;
        }
      }
      out[position] = static_cast<T>(total);
    }
  });
}

// Calls fn(T{}, Acc{}) for the compute type `dtype`: the element type and its accumulator.
template <typename Fn>
void DispatchComputeType(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat: fn(float{}, double{}); return;
    case DataType::kDouble: fn(double{}, double{}); return;
    case DataType::kInt8: fn(int8_t{}, int8_t{}); return;
    case DataType::kInt16: fn(int16_t{}, int16_t{}); return;
    case DataType::kInt32: fn(int32_t{}, int32_t{}); return;
    case DataType::kInt64: fn(int64_t{}, int64_t{}); return;
    case DataType::kUint8: fn(uint8_t{}, uint8_t{}); return;
    case DataType::kUint16: fn(uint16_t{}, uint16_t{}); return;
    case DataType::kUint32: fn(uint32_t{}, uint32_t{}); return;
    case DataType::kUint64: fn(uint64_t{}, uint64_t{}); return;
    default: FUSIONOPT_CHECK(false, "Einsum computes in " + std::string(NameOf(dtype)) + " only after staging");
  }
}

// The sum of products of `operands` (all of one dtype) as a fresh tensor labelled `result`.
template <size_t N>
Operand SumOfProducts(const std::array<const Operand*, N>& operands, const std::vector<int>& result,
                      const Workspace& workspace) {
  LoopNest<N> loops;
  loops.result_dims = workspace.SizesOf(result);
  std::vector<int> summed;
  for (const Operand* operand : operands) {
    for (int label : Without(PresentLabels(*operand, workspace), result)) {
      if (std::find(summed.begin(), summed.end(), label) == summed.end()) summed.push_back(label);
    }
  }
  loops.summed_dims = workspace.SizesOf(summed);
  for (size_t op = 0; op < N; ++op) {
    loops.result_strides[op] = LabelStrides(*operands[op], result);
    loops.summed_strides[op] = LabelStrides(*operands[op], summed);
  }
  const DataType dtype = operands[0]->tensor.dtype();
  Operand out{workspace.allocator->Allocate(dtype, loops.result_dims), result};
  DispatchComputeType(dtype, [&](auto element, auto accumulator) {
    using T = decltype(element);
    std::array<const T*, N> data;
    for (size_t op = 0; op < N; ++op) data[op] = operands[op]->tensor.template data<T>();
    AccumulateProducts<T, decltype(accumulator), N>(data, std::move(loops), out.tensor.template data<T>());
  });
  return out;
}

}  // namespace

std::vector<int64_t> Workspace::SizesOf(const std::vector<int>& labels) const {
  std::vector<int64_t> dims;
  for (int label : labels) dims.push_back(sizes[static_cast<size_t>(label)]);
  return dims;
}

std::vector<int> PresentLabels(const Operand& operand, const Workspace& workspace) {
  std::vector<int> present;
  for (size_t axis = 0; axis < operand.labels.size(); ++axis) {
    const int label = operand.labels[axis];
    const bool holds_values = operand.tensor.dim(axis) == workspace.sizes[static_cast<size_t>(label)];
    if (holds_values && std::find(present.begin(), present.end(), label) == present.end()) present.push_back(label);
  }
  return present;
}

bool IsLaidOutAs(const Operand& operand, const std::vector<int>& target, const Workspace& workspace) {
  const std::vector<int64_t> dims = workspace.SizesOf(target);
  if (Product(dims) != operand.tensor.NumElements()) return false;
  const std::vector<int64_t> strides = LabelStrides(operand, target);
  const std::vector<int64_t> contiguous = ContiguousStrides(dims);
  for (size_t axis = 0; axis < dims.size(); ++axis) {
    if (dims[axis] > 1 && strides[axis] != contiguous[axis]) return false;
  }
  return true;
}

Operand Project(const Operand& operand, const std::vector<int>& target, const Workspace& workspace) {
  const std::vector<int64_t> dims = workspace.SizesOf(target);
  if (IsLaidOutAs(operand, target, workspace)) return {operand.tensor.Reshaped(dims), target};
  if (!Without(PresentLabels(operand, workspace), target).empty()) {
    return SumOfProducts<1>({&operand}, target, workspace);
  }
  // Nothing to sum: a strided copy (a permutation, a diagonal, a broadcast).
  Operand out{workspace.allocator->Allocate(operand.tensor.dtype(), dims), target};
  data_movement::StridedLayout layout{dims, ContiguousStrides(dims), LabelStrides(operand, target)};
  data_movement::CopyStrided(out.tensor.raw(), operand.tensor.raw(), ByteSizeOf(operand.tensor.dtype(), 1),
                             std::move(layout));
  return out;
}

Operand ContractDirectly(const Operand& a, const Operand& b, const std::vector<int>& keep,
                         const Workspace& workspace) {
  return SumOfProducts<2>({&a, &b}, keep, workspace);
}

bool IsComputeType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat: case DataType::kDouble:
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
      return true;
    default:
      return false;
  }
}

}  // namespace fusionopt::cpu::einsum
