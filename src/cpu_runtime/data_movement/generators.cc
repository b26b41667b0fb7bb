// Ops that write mostly constant data: ConstantOfShape, Range, EyeLike, OneHot, Trilu.
#include <cmath>
#include <type_traits>

#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"

namespace fusionopt::cpu::data_movement {
namespace {

class ConstantOfShapeKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    const Attribute* value = info.node.FindAttribute("value");
    if (value == nullptr) {
      dtype_ = DataType::kFloat;
      value_.assign(sizeof(float), 0);
      return Status::Ok();
    }
    if (value->kind != AttributeKind::kTensor || !value->t || value->t->NumElements() != 1) {
      return info.Error("value must be a tensor of one element");
    }
    dtype_ = value->t->dtype();
    Result<size_t> element_size = ElementBytes(dtype_);
    if (!element_size.ok()) return info.Error(element_size.status().message());
    value_.assign(value->t->bytes().begin(), value->t->bytes().end());
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInts(*context.input(0), "the shape"));
    for (int64_t dim : dims) {
      if (dim < 0) return InvalidModel("the shape " + DimsToString(dims) + " has a negative dim");
    }
    RtTensor& out = context.Output(0, dtype_, dims);
    FillElements(out.raw(), out.NumElements(), value_.data(), value_.size());
    return Status::Ok();
  }

 private:
  DataType dtype_ = DataType::kFloat;
  std::vector<uint8_t> value_;
};

template <typename T>
int64_t RangeCount(T start, T limit, T delta) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::max<int64_t>(0, static_cast<int64_t>(std::ceil((static_cast<double>(limit) - start) / delta)));
  } else {
    __int128 span = static_cast<__int128>(limit) - start;
    __int128 count = span / delta + ((span % delta != 0) && ((span > 0) == (delta > 0)) ? 1 : 0);
    return count > 0 ? static_cast<int64_t>(count) : 0;
  }
}

class RangeKernel : public Kernel {
 public:
  Status Init(const KernelInfo&) { return Status::Ok(); }
  Status Compute(KernelContext& context) override {
    const RtTensor& start = *context.input(0);
    DataType dtype = start.dtype();
    for (size_t i = 1; i < 3; ++i) {
      if (context.input(i)->dtype() != dtype) return InvalidModel("start, limit and delta must share a dtype");
    }
    switch (dtype) {
      case DataType::kFloat: return Fill<float>(context);
      case DataType::kDouble: return Fill<double>(context);
      case DataType::kInt16: return Fill<int16_t>(context);
      case DataType::kInt32: return Fill<int32_t>(context);
      case DataType::kInt64: return Fill<int64_t>(context);
      default: return Unsupported("Range on " + std::string(NameOf(dtype)) + " is not supported");
    }
  }

 private:
  template <typename T>
  Status Fill(KernelContext& context) {
    for (size_t i = 0; i < 3; ++i) {
      if (context.input(i)->NumElements() != 1) return InvalidModel("start, limit and delta must be scalars");
    }
    T start = context.input(0)->data<T>()[0];
    T limit = context.input(1)->data<T>()[0];
    T delta = context.input(2)->data<T>()[0];
    if (delta == 0) return InvalidModel("delta is 0");
    int64_t count = RangeCount(start, limit, delta);
    T* out = context.Output(0, context.input(0)->dtype(), {count}).template data<T>();
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    return Status::Ok();
  }
};

class EyeLikeKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    k_ = info.node.GetInt("k", 0);
    if (const Attribute* dtype = info.node.FindAttribute("dtype")) {
      if (dtype->kind != AttributeKind::kInt || !IsKnownDataType(static_cast<int32_t>(dtype->i))) {
        return info.Error("dtype is not a known data type");
      }
      dtype_ = static_cast<DataType>(dtype->i);
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& input = *context.input(0);
    if (input.rank() != 2) return InvalidModel("the input must be 2-D, not " + DimsToString(input.dims()));
    DataType dtype = dtype_ == DataType::kUndefined ? input.dtype() : dtype_;
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<uint8_t> one, EncodeScalar(dtype, 1.0));
    RtTensor& out = context.Output(0, dtype, input.dims());
    std::memset(out.raw(), 0, out.nbytes());
    const int64_t rows = input.dim(0), cols = input.dim(1);
    for (int64_t row = std::max<int64_t>(0, -k_); row < rows && row + k_ < cols; ++row) {
      std::memcpy(out.raw() + (row * cols + row + k_) * one.size(), one.data(), one.size());
    }
    return Status::Ok();
  }

 private:
  int64_t k_ = 0;
  DataType dtype_ = DataType::kUndefined;
};

class OneHotKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", -1);
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& indices = *context.input(0);
    const RtTensor& depth_tensor = *context.input(1);
    const RtTensor& values = *context.input(2);
    if (depth_tensor.NumElements() != 1) return InvalidModel("depth must have one element");
    if (values.NumElements() != 2) return InvalidModel("values must hold [off, on]");
    const int64_t depth = static_cast<int64_t>(depth_tensor.ValueAsDouble(0));
    if (depth < 1) return InvalidModel("depth " + std::to_string(depth) + " must be positive");
    const int64_t rank = static_cast<int64_t>(indices.rank()) + 1;
    if (axis_ < -rank || axis_ >= rank) {
      return InvalidModel("axis " + std::to_string(axis_) + " is out of range for output rank " +
                          std::to_string(rank));
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(values.dtype()));
    std::vector<int64_t> dims = indices.dims();
    dims.insert(dims.begin() + axis, depth);
    RtTensor& out = context.Output(0, values.dtype(), dims);
    FillElements(out.raw(), out.NumElements(), values.raw(), element_size);
    // Float indices are truncated, as a cast to int64 would.
    std::vector<int64_t> positions = IsInteger(indices.dtype()) ? indices.ToInt64s() : std::vector<int64_t>();
    const int64_t inner = Product(indices.dims(), axis);
    const int64_t outer_count = inner == 0 ? 0 : indices.NumElements() / inner;
    const uint8_t* on = values.raw() + element_size;
    for (int64_t outer = 0, i = 0; outer < outer_count; ++outer) {
      for (int64_t rest = 0; rest < inner; ++rest, ++i) {
        int64_t index = positions.empty() ? static_cast<int64_t>(indices.ValueAsDouble(i)) : positions[i];
        if (index < 0) index += depth;
        if (index < 0 || index >= depth) continue;
        std::memcpy(out.raw() + ((outer * depth + index) * inner + rest) * element_size, on, element_size);
      }
    }
    return Status::Ok();
  }

 private:
  int64_t axis_ = -1;
};

class TriluKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    upper_ = info.node.GetInt("upper", 1) != 0;
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    if (data.rank() < 2) return InvalidModel("the input must have rank >= 2, not " + DimsToString(data.dims()));
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    int64_t k = 0;
    if (context.has_input(1)) {
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadInts(*context.input(1), "k"));
      if (values.size() != 1) return InvalidModel("k must be a scalar");
      k = values[0];
    }
    const int64_t rows = data.dim(data.rank() - 2), cols = data.dim(data.rank() - 1);
    const size_t row_bytes = static_cast<size_t>(cols) * element_size;
    RtTensor& out = context.Output(0, data.dtype(), data.dims());
    const int64_t total_rows = data.NumElements() / std::max<int64_t>(cols, 1);
    ParallelChunks(cols == 0 ? 0 : total_rows, data.NumElements(), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        // The kept columns of row i: j >= i + k (upper) or j <= i + k (lower). Saturate so a
        // huge k cannot overflow.
        int64_t diagonal = std::clamp<int64_t>(k, -cols - rows, cols + rows) + r % rows;
        int64_t keep_begin = upper_ ? std::clamp<int64_t>(diagonal, 0, cols) : 0;
        int64_t keep_end = upper_ ? cols : std::clamp<int64_t>(diagonal + 1, 0, cols);
        uint8_t* out_row = out.raw() + r * row_bytes;
        const uint8_t* in_row = data.raw() + r * row_bytes;
        std::memset(out_row, 0, row_bytes);
        if (keep_end > keep_begin) {
          std::memcpy(out_row + keep_begin * element_size, in_row + keep_begin * element_size,
                      static_cast<size_t>(keep_end - keep_begin) * element_size);
        }
      }
    });
    return Status::Ok();
  }

 private:
  bool upper_ = true;
};

}  // namespace

void RegisterGeneratorKernels(KernelRegistry& registry) {
  registry.Register("", "ConstantOfShape", 9, kAnyOpset, MakeWithInputs<ConstantOfShapeKernel>(1));
  registry.Register("", "Range", 11, kAnyOpset, MakeWithInputs<RangeKernel>(3));
  registry.Register("", "EyeLike", 9, kAnyOpset, MakeWithInputs<EyeLikeKernel>(1));
  registry.Register("", "OneHot", 9, kAnyOpset, MakeWithInputs<OneHotKernel>(3));
  registry.Register("", "Trilu", 14, kAnyOpset, MakeWithInputs<TriluKernel>(1));
}

}  // namespace fusionopt::cpu::data_movement
