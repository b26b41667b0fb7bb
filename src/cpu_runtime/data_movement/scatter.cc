// ScatterElements (and its opset 9-10 name Scatter) and ScatterND: the output starts as a
// copy of the data, then updates are applied in index order — sequentially, because
// duplicate indices must accumulate (reductions) or let the last one win (none).
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"

namespace fusionopt::cpu::data_movement {
namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> ParseReduction(const KernelInfo& info) {
  std::string name = info.node.GetString("reduction", "none");
  if (name == "none") return Reduction::kNone;
  if (info.opset >= 16 && name == "add") return Reduction::kAdd;
  if (info.opset >= 16 && name == "mul") return Reduction::kMul;
  if (info.opset >= 18 && name == "max") return Reduction::kMax;
  if (info.opset >= 18 && name == "min") return Reduction::kMin;
  return info.Error("unknown reduction '" + name + "' at opset " + std::to_string(info.opset));
}

template <typename T>
T Combine(T current, T update, Reduction reduction) {
  switch (reduction) {
    case Reduction::kAdd: return static_cast<T>(current + update);
    case Reduction::kMul: return static_cast<T>(current * update);
    case Reduction::kMax: return std::max(current, update);
    case Reduction::kMin: return std::min(current, update);
    case Reduction::kNone: return update;
  }
  return update;
}

// Applies `count` updates element-wise to dst: dst[i] = combine(dst[i], src[i]).
using ApplyFn = void (*)(uint8_t* dst, const uint8_t* src, int64_t count, size_t element_size, Reduction reduction);

template <typename T>
void ApplyTyped(uint8_t* dst, const uint8_t* src, int64_t count, size_t, Reduction reduction) {
  T* out = reinterpret_cast<T*>(dst);
  const T* in = reinterpret_cast<const T*>(src);
  for (int64_t i = 0; i < count; ++i) out[i] = Combine(out[i], in[i], reduction);
}

template <float (*kToFloat)(uint16_t), uint16_t (*kFromFloat)(float)>
void ApplyHalf(uint8_t* dst, const uint8_t* src, int64_t count, size_t, Reduction reduction) {
  uint16_t* out = reinterpret_cast<uint16_t*>(dst);
  const uint16_t* in = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < count; ++i) out[i] = kFromFloat(Combine(kToFloat(out[i]), kToFloat(in[i]), reduction));
}

// Without a reduction an update is a plain copy, whatever the dtype.
void ApplyCopy(uint8_t* dst, const uint8_t* src, int64_t count, size_t element_size, Reduction) {
  std::memcpy(dst, src, static_cast<size_t>(count) * element_size);
}

Result<ApplyFn> UpdaterFor(DataType dtype, Reduction reduction) {
  if (reduction == Reduction::kNone) return ApplyCopy;
  ApplyFn fn = nullptr;
  switch (dtype) {
    case DataType::kFloat: fn = ApplyTyped<float>; break;
    case DataType::kDouble: fn = ApplyTyped<double>; break;
    case DataType::kFloat16: fn = ApplyHalf<HalfToFloat, FloatToHalf>; break;
    case DataType::kBFloat16: fn = ApplyHalf<BFloat16ToFloat, FloatToBFloat16>; break;
    case DataType::kInt8: fn = ApplyTyped<int8_t>; break;
    case DataType::kInt16: fn = ApplyTyped<int16_t>; break;
    case DataType::kInt32: fn = ApplyTyped<int32_t>; break;
    case DataType::kInt64: fn = ApplyTyped<int64_t>; break;
    case DataType::kUint8: fn = ApplyTyped<uint8_t>; break;
    case DataType::kUint16: fn = ApplyTyped<uint16_t>; break;
    case DataType::kUint32: fn = ApplyTyped<uint32_t>; break;
    case DataType::kUint64: fn = ApplyTyped<uint64_t>; break;
    default: return Unsupported("scatter reductions on " + std::string(NameOf(dtype)) + " are not supported");
  }
  return fn;
}

Status CheckUpdates(const RtTensor& data, const RtTensor& updates, const std::vector<int64_t>& expected_dims) {
  if (updates.dtype() != data.dtype()) return InvalidModel("updates and data have different dtypes");
  if (updates.dims() != expected_dims) {
    return InvalidModel("updates " + DimsToString(updates.dims()) + " should have shape " +
                        DimsToString(expected_dims));
  }
  return Status::Ok();
}

class ScatterElementsKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", 0);
    FUSIONOPT_ASSIGN_OR_RETURN(reduction_, ParseReduction(info));
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    const RtTensor& indices = *context.input(1);
    const RtTensor& updates = *context.input(2);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_ASSIGN_OR_RETURN(size_t axis, CheckedAxis(axis_, data.rank()));
    FUSIONOPT_RETURN_IF_ERROR(CheckUpdates(data, updates, indices.dims()));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, ElementOffsetsAlongAxis(indices, data.dims(), axis));
    FUSIONOPT_ASSIGN_OR_RETURN(ApplyFn apply, UpdaterFor(data.dtype(), reduction_));
    RtTensor& out = context.Output(0, data.dtype(), data.dims());
    ParallelMemcpy(out.raw(), data.raw(), data.nbytes());
    for (size_t i = 0; i < offsets.size(); ++i) {
      apply(out.raw() + offsets[i] * element_size, updates.raw() + i * element_size, 1, element_size, reduction_);
    }
    return Status::Ok();
  }

 private:
  int64_t axis_ = 0;
  Reduction reduction_ = Reduction::kNone;
};

class ScatterNDKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    FUSIONOPT_ASSIGN_OR_RETURN(reduction_, ParseReduction(info));
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    const RtTensor& indices = *context.input(1);
    const RtTensor& updates = *context.input(2);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    if (indices.rank() < 1) return InvalidModel("indices must have rank >= 1");
    const int64_t m = indices.dims().back();
    if (m < 1 || m > static_cast<int64_t>(data.rank())) {
      return InvalidModel("the index tuples have " + std::to_string(m) + " entries for data " +
                          DimsToString(data.dims()));
    }
    std::vector<int64_t> expected(indices.dims().begin(), indices.dims().end() - 1);
    expected.insert(expected.end(), data.dims().begin() + m, data.dims().end());
    FUSIONOPT_RETURN_IF_ERROR(CheckUpdates(data, updates, expected));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> tuples, ReadInts(indices, "indices"));
    FUSIONOPT_ASSIGN_OR_RETURN(ApplyFn apply, UpdaterFor(data.dtype(), reduction_));
    const std::vector<int64_t> strides = ContiguousStrides(data.dims());
    const int64_t slice = Product(data.dims(), static_cast<size_t>(m));
    const size_t count = tuples.size() / static_cast<size_t>(m);
    std::vector<int64_t> offsets(count, 0);
    for (size_t i = 0; i < count; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        int64_t dim = data.dim(j);
        int64_t index = tuples[i * m + j];
        if (index < -dim || index >= dim) {
          return InvalidModel("index " + std::to_string(index) + " is out of range for a dim of size " +
                              std::to_string(dim));
        }
        offsets[i] += (index < 0 ? index + dim : index) * strides[j];
      }
    }
    RtTensor& out = context.Output(0, data.dtype(), data.dims());
    ParallelMemcpy(out.raw(), data.raw(), data.nbytes());
    for (size_t i = 0; i < count; ++i) {
      apply(out.raw() + offsets[i] * element_size, updates.raw() + i * slice * element_size, slice, element_size,
            reduction_);
    }
    return Status::Ok();
  }

 private:
  Reduction reduction_ = Reduction::kNone;
};

}  // namespace

void RegisterScatterKernels(KernelRegistry& registry) {
  registry.Register("", "Scatter", 9, 10, MakeWithInputs<ScatterElementsKernel>(3));
  registry.Register("", "ScatterElements", 11, kAnyOpset, MakeWithInputs<ScatterElementsKernel>(3));
  registry.Register("", "ScatterND", 11, kAnyOpset, MakeWithInputs<ScatterNDKernel>(3));
}

}  // namespace fusionopt::cpu::data_movement
