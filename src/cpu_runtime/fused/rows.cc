// Row kernels for recognised composites (patterns/composite/composite.h) over the last axis: LayerNorm
// and RMSNorm with an optional residual-add prologue (whose sum may be a second output), and
// Softmax of a scaled input with an additive or Where mask.
//
// Each row is loaded once into a small buffer that stays in L1 — prologue applied on the way
// in — and every later step (statistics, normalization, exponentials) reads that buffer, so
// memory is read and written once per element. Rows run in parallel.
//
// Numerics follow the op-by-op run: values are rounded to the element type wherever the body
// stores an intermediate in it (the residual sum, the scaled and masked logits), and computed
// in float (double for double tensors) in between. Row sums run in lanes of the compute type
// over blocks of 256 elements, the blocks added in double; norm statistics take the mean first
// and then squared deviations from it, which cannot cancel the way E[x²] - E[x]² can.
#include <cmath>
#include <functional>
#include <optional>

#include "cpu_runtime/fused/body.h"
#include "cpu_runtime/reduction/common.h"
#include "cpu_runtime/reduction/engine.h"
#include "cpu_runtime/reduction/math.h"
#include "ir/broadcast.h"
#include "patterns/composite/composite.h"

namespace fusionopt::cpu {
namespace {

using reduction::AccOf;
using reduction::Elem;
using reduction::LoadElements;
using reduction::RoundElements;
using reduction::StoreElements;

// The dims the present `operands` broadcast to (ir/broadcast.h).
std::optional<std::vector<int64_t>> Broadcast(const std::vector<const RtTensor*>& operands) {
  std::vector<std::vector<int64_t>> shapes;
  for (const RtTensor* operand : operands) {
    if (operand != nullptr) shapes.push_back(operand->dims());
  }
  return BroadcastDims(shapes);
}

// Where an operand's elements are for each row of an output it broadcasts to (numpy rules):
// the offset of the row's first element, and the stride along the row (1, or 0 when the
// operand repeats one value along it).
class RowOperand {
 public:
  RowOperand() = default;
  RowOperand(const RtTensor* tensor, const std::vector<int64_t>& out_dims) : tensor_(tensor) {
    if (tensor == nullptr) return;
    const size_t rank = out_dims.size();
    std::vector<int64_t> strides(rank, 0);
    int64_t stride = 1;
    for (size_t i = tensor->rank(); i-- > 0;) {
      strides[rank - tensor->rank() + i] = tensor->dim(i) == 1 ? 0 : stride;
      stride *= tensor->dim(i);
    }
    inner_stride_ = strides[rank - 1];
    outer_dims_.assign(out_dims.begin(), out_dims.end() - 1);
    outer_strides_.assign(strides.begin(), strides.end() - 1);
  }

  bool present() const { return tensor_ != nullptr; }
  int64_t inner_stride() const { return inner_stride_; }
  bool same_for_every_row() const {
    return std::all_of(outer_strides_.begin(), outer_strides_.end(), [](int64_t s) { return s == 0; });
  }
  int64_t Offset(int64_t row) const {
    int64_t offset = 0;
    for (size_t axis = outer_dims_.size(); axis-- > 0;) {
      offset += (row % outer_dims_[axis]) * outer_strides_[axis];
      row /= outer_dims_[axis];
    }
    return offset;
  }
  template <typename T>
  const T* row(int64_t index) const {
    return reinterpret_cast<const T*>(tensor_->raw()) + Offset(index);
  }

 private:
  const RtTensor* tensor_ = nullptr;
  std::vector<int64_t> outer_dims_;
  std::vector<int64_t> outer_strides_;
  int64_t inner_stride_ = 0;
};

template <typename T, typename Acc>
void LoadRow(const RowOperand& operand, int64_t row, int64_t n, Acc* out) {
  const T* values = operand.row<T>(row);
  if (operand.inner_stride() == 0) {
    std::fill(out, out + n, static_cast<Acc>(Elem<T>::Load(values[0])));
    return;
  }
  if constexpr (std::is_same_v<Acc, AccOf<T>>) {
    LoadElements(values, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Acc>(Elem<T>::Load(values[i]));
  }
}

// `value` as the element type would store it: what an op-by-op run keeps between ops.
template <typename T>
AccOf<T> Rounded(AccOf<T> value) {
  if constexpr (std::is_same_v<T, AccOf<T>>) {
    return value;
  } else {
    return Elem<T>::Load(Elem<T>::Store(value));
  }
}

// Sum of map(values[i]): lanes of the compute type within blocks of a few hundred elements (at
// float's vector width), the blocks added in double, so the error does not grow with the row.
template <typename Acc, typename Map>
double BlockedSum(const Acc* values, int64_t n, const Map& map) {
  constexpr int64_t kSumBlock = 256;
  double total = 0.0;
  for (int64_t start = 0; start < n; start += kSumBlock) {
    total += reduction::ReduceBlock(values + start, std::min(kSumBlock, n - start), Acc(0), map, std::plus<Acc>());
  }
  return total;
}

template <typename Acc>
double Sum(const Acc* values, int64_t n) {
  return BlockedSum(values, n, [](Acc v) { return v; });
}

bool IsFloatType(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kDouble || dtype == DataType::kFloat16 ||
         dtype == DataType::kBFloat16;
}

// The body's operands as tensors: the call's arguments, or constants the body holds.
class CompositeOperands {
 public:
  explicit CompositeOperands(const FusedComposite& composite) {
    for (const CompositeOperand* operand : {&composite.x, &composite.residual, &composite.gamma, &composite.beta,
                                            &composite.mask, &composite.condition}) {
      constants_.push_back(operand->constant ? RtTensor::WrapConstant(operand->constant) : RtTensor());
    }
  }
  // `slot` is the operand's position in the constructor's list.
  const RtTensor* Get(const CompositeOperand& operand, size_t slot, const KernelContext& context) const {
    if (operand.input >= 0) return context.input(static_cast<size_t>(operand.input));
    return operand.constant ? &constants_[slot] : nullptr;
  }

 private:
  std::vector<RtTensor> constants_;
};

enum Slot : size_t { kX, kResidual, kGamma, kBeta, kMask, kCondition };

// ---------------------------------------------------------------- LayerNorm, RMSNorm

class FusedNormKernel final : public FusedBodyKernel {
 public:
  explicit FusedNormKernel(FusedComposite composite) : composite_(std::move(composite)), operands_(composite_) {}

  Result<int> Compute(KernelContext& context) override {
    const RtTensor* x = operands_.Get(composite_.x, kX, context);
    const RtTensor* residual = operands_.Get(composite_.residual, kResidual, context);
    const RtTensor* gamma = operands_.Get(composite_.gamma, kGamma, context);
    const RtTensor* beta = operands_.Get(composite_.beta, kBeta, context);
    const DataType dtype = x->dtype();
    for (const RtTensor* operand : {residual, gamma, beta}) {
      if (operand != nullptr && operand->dtype() != dtype) return 0;
    }
    // Between float32 Casts: the row is computed in float32 and written in x's type, which is
    // what the Casts do only when they cast back to that type.
    if (composite_.cast_back_to != 0 && composite_.cast_back_to != static_cast<int64_t>(dtype)) return 0;
    if (!IsFloatType(dtype)) return 0;
    std::optional<std::vector<int64_t>> sum_dims = Broadcast({x, residual});
    if (!sum_dims || sum_dims->empty()) return 0;
    const int64_t rank = static_cast<int64_t>(sum_dims->size());
    if (NormalizedAxis(composite_.axis, rank) != rank - 1) return 0;
    RtTensor sum_shape(dtype, *sum_dims, nullptr);  // dims only, for broadcasting
    std::optional<std::vector<int64_t>> out_dims = Broadcast({&sum_shape, gamma, beta});
    if (!out_dims || out_dims->back() != sum_dims->back()) return 0;
    const bool writes_sum = composite_.residual_sum_output >= 0 &&
                            static_cast<size_t>(composite_.residual_sum_output) < context.outputs.size();
    if (writes_sum && *out_dims != *sum_dims) return 0;

    Rows rows;
    rows.n = out_dims->back();
    rows.count = 1;
    for (size_t axis = 0; axis + 1 < out_dims->size(); ++axis) rows.count *= (*out_dims)[axis];
    rows.x = RowOperand(x, *out_dims);
    rows.residual = RowOperand(residual, *out_dims);
    rows.gamma = RowOperand(gamma, *out_dims);
    rows.beta = RowOperand(beta, *out_dims);
    RtTensor& y = context.Output(static_cast<size_t>(composite_.result_output), dtype, *out_dims);
    rows.y = y.raw();
    if (writes_sum) {
      rows.sum = context.Output(static_cast<size_t>(composite_.residual_sum_output), dtype, *sum_dims).raw();
    }
    if (y.NumElements() == 0) return 1;
    const bool centered = composite_.kind == CompositeKind::kLayerNorm;
    FUSIONOPT_RETURN_IF_ERROR(reduction::DispatchType<reduction::kFloatTypes>(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (centered) {
        Normalize<T, true>(rows);
      } else {
        Normalize<T, false>(rows);
      }
      return Status::Ok();
    }));
    return 1;
  }

 private:
  struct Rows {
    int64_t count = 0, n = 0;
    RowOperand x, residual, gamma, beta;
    uint8_t* y = nullptr;
    uint8_t* sum = nullptr;  // the residual sum, when written
  };

  // A row of gamma or beta: the same for every row (expanded once), or loaded per row.
  template <typename T>
  struct Affine {
    const RowOperand& operand;
    std::vector<AccOf<T>> shared;
    Affine(const RowOperand& of, AccOf<T> absent, int64_t n) : operand(of) {
      if (!operand.present()) {
        shared.assign(static_cast<size_t>(n), absent);
      } else if (operand.same_for_every_row()) {
        shared.resize(static_cast<size_t>(n));
        LoadRow<T>(operand, 0, n, shared.data());
      }
    }
    const AccOf<T>* Row(int64_t row, int64_t n, std::vector<AccOf<T>>& scratch) const {
      if (!shared.empty() || n == 0) return shared.data();
      scratch.resize(static_cast<size_t>(n));
      LoadRow<T>(operand, row, n, scratch.data());
      return scratch.data();
    }
  };

  template <typename T, bool kCentered>
  void Normalize(const Rows& rows) const {
    using Acc = AccOf<T>;
    const int64_t n = rows.n;
    const Affine<T> gamma(rows.gamma, Acc(1), n), beta(rows.beta, Acc(0), n);
    const double epsilon = composite_.epsilon;
#pragma omp parallel if (rows.count * n >= reduction::kParallelMinElements)
    {
      // A contiguous row already in the compute type is read where it is.
      const bool in_place = std::is_same_v<T, Acc> && !rows.residual.present() && rows.x.inner_stride() == 1;
      std::vector<Acc> buffer(in_place ? 0 : static_cast<size_t>(n)), other, gamma_row, beta_row;
      if (rows.residual.present()) other.resize(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows.count; ++row) {
        const Acc* values = in_place ? reinterpret_cast<const Acc*>(rows.x.row<T>(row)) : buffer.data();
        if (!in_place) LoadRow<T>(rows.x, row, n, buffer.data());
        if (rows.residual.present()) {
          LoadRow<T>(rows.residual, row, n, other.data());
          for (int64_t i = 0; i < n; ++i) buffer[i] = buffer[i] + other[i];
          RoundElements<T>(buffer.data(), n);
          if (rows.sum != nullptr) StoreElements(buffer.data(), reinterpret_cast<T*>(rows.sum) + row * n, n);
        }
        const double mean = kCentered ? Sum(values, n) / static_cast<double>(n) : 0.0;
        const Acc shift = static_cast<Acc>(mean);
        // Deviations from the mean rounded to the compute type: the unfused Sub's values.
        const double variance =
            BlockedSum(values, n, [shift](Acc v) { return (v - shift) * (v - shift); }) / static_cast<double>(n);
        const Acc inv_std = static_cast<Acc>(1.0 / std::sqrt(variance + epsilon));
        const Acc* g = gamma.Row(row, n, gamma_row);
        const Acc* b = beta.Row(row, n, beta_row);
        T* y = reinterpret_cast<T*>(rows.y) + row * n;
        if constexpr (std::is_same_v<T, Acc>) {
          for (int64_t i = 0; i < n; ++i) y[i] = (values[i] - shift) * inv_std * g[i] + b[i];
        } else {  // `values` is the buffer: normalized in place, then stored in bulk
          for (int64_t i = 0; i < n; ++i) buffer[i] = (buffer[i] - shift) * inv_std * g[i] + b[i];
          StoreElements(buffer.data(), y, n);
        }
      }
    }
  }

  FusedComposite composite_;
  CompositeOperands operands_;
};

// ---------------------------------------------------------------- Softmax

class FusedSoftmaxKernel final : public FusedBodyKernel {
 public:
  explicit FusedSoftmaxKernel(FusedComposite composite) : composite_(std::move(composite)), operands_(composite_) {}

  Result<int> Compute(KernelContext& context) override {
    const RtTensor* x = operands_.Get(composite_.x, kX, context);
    const RtTensor* mask = operands_.Get(composite_.mask, kMask, context);
    const RtTensor* condition = operands_.Get(composite_.condition, kCondition, context);
    const DataType dtype = x->dtype();
    if (!IsFloatType(dtype) || (mask != nullptr && mask->dtype() != dtype)) return 0;
    if (condition != nullptr && (condition->dtype() != DataType::kBool || !composite_.fill)) return 0;
    std::optional<std::vector<int64_t>> dims = Broadcast({x, mask, condition});
    if (!dims || dims->empty()) return 0;
    const int64_t rank = static_cast<int64_t>(dims->size());
    if (NormalizedAxis(composite_.axis, rank) != rank - 1) return 0;

    Rows rows;
    rows.n = dims->back();
    rows.count = 1;
    for (size_t axis = 0; axis + 1 < dims->size(); ++axis) rows.count *= (*dims)[axis];
    rows.x = RowOperand(x, *dims);
    rows.mask = RowOperand(mask, *dims);
    rows.condition = RowOperand(condition, *dims);
    RtTensor& y = context.Output(static_cast<size_t>(composite_.result_output), dtype, *dims);
    rows.y = y.raw();
    if (y.NumElements() == 0) return 1;
    FUSIONOPT_RETURN_IF_ERROR(reduction::DispatchType<reduction::kFloatTypes>(dtype, [&](auto tag) {
      Normalize<typename decltype(tag)::type>(rows);
      return Status::Ok();
    }));
    return 1;
  }

 private:
  struct Rows {
    int64_t count = 0, n = 0;
    RowOperand x, mask, condition;
    uint8_t* y = nullptr;
  };

  // The logits of one row as the body computes them: scaled, then masked.
  template <typename T>
  void Logits(const Rows& rows, int64_t row, AccOf<T>* z, std::vector<AccOf<T>>& mask) const {
    using Acc = AccOf<T>;
    const int64_t n = rows.n;
    LoadRow<T>(rows.x, row, n, z);
    if (composite_.scale) {
      const Acc scale = Rounded<T>(static_cast<Acc>(*composite_.scale));
      if (composite_.scale_divides) {
        for (int64_t i = 0; i < n; ++i) z[i] = z[i] / scale;
      } else {
        for (int64_t i = 0; i < n; ++i) z[i] = z[i] * scale;
      }
      RoundElements<T>(z, n);
    }
    if (rows.mask.present()) {
      mask.resize(static_cast<size_t>(n));
      LoadRow<T>(rows.mask, row, n, mask.data());
      for (int64_t i = 0; i < n; ++i) z[i] = z[i] + mask[i];
      RoundElements<T>(z, n);
    }
    if (rows.condition.present()) {
      const Acc fill = Rounded<T>(static_cast<Acc>(*composite_.fill));
      const uint8_t* condition = rows.condition.row<uint8_t>(row);
      const int64_t stride = rows.condition.inner_stride();
      for (int64_t i = 0; i < n; ++i) {
        if ((condition[i * stride] != 0) == composite_.fill_when_true) z[i] = fill;
      }
    }
  }

  template <typename T>
  void Normalize(const Rows& rows) const {
    using Acc = AccOf<T>;
    const int64_t n = rows.n;
#pragma omp parallel if (rows.count * n >= reduction::kParallelMinElements)
    {
      std::vector<Acc> buffer, mask;
      if constexpr (!std::is_same_v<T, Acc>) buffer.resize(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows.count; ++row) {
        T* y = reinterpret_cast<T*>(rows.y) + row * n;
        // The logits and their exponentials wait in the output row when it holds the compute type.
        Acc* z = nullptr;
        if constexpr (std::is_same_v<T, Acc>) {
          z = y;
        } else {
          z = buffer.data();
        }
        Logits<T>(rows, row, z, mask);
        const Acc max = reduction::ReduceRun(z, n, Elem<T>::Lowest(), [](Acc v) { return v; }, reduction::TakeMax());
        reduction::ExpShifted(z, max, z, n);
        const Acc inv_sum = static_cast<Acc>(1.0 / Sum(z, n));
        if constexpr (std::is_same_v<T, Acc>) {
          for (int64_t i = 0; i < n; ++i) y[i] = z[i] * inv_sum;
        } else {
          for (int64_t i = 0; i < n; ++i) z[i] = z[i] * inv_sum;
          StoreElements(z, y, n);
        }
      }
    }
  }

  FusedComposite composite_;
  CompositeOperands operands_;
};

}  // namespace

std::unique_ptr<FusedBodyKernel> CreateFusedRows(const FusedBodyInfo& info) {
  std::optional<FusedComposite> composite = RecognizeComposite(info.body, info.context.OpsetFor(""));
  if (!composite || static_cast<size_t>(composite->result_output) >= info.call.outputs().size()) return nullptr;
  const DataType declared = info.body.inputs()[static_cast<size_t>(composite->x.input)]->dtype();
  if (declared != DataType::kUndefined && !IsFloatType(declared)) return nullptr;
  switch (composite->kind) {
    case CompositeKind::kLayerNorm:
    case CompositeKind::kRmsNorm:
      return std::make_unique<FusedNormKernel>(std::move(*composite));
    case CompositeKind::kSoftmax:
      return std::make_unique<FusedSoftmaxKernel>(std::move(*composite));
    case CompositeKind::kGelu:
    case CompositeKind::kSilu:
      return nullptr;  // elementwise: one program (CreateFusedElementwise)
  }
  return nullptr;
}

}  // namespace fusionopt::cpu
