// Gather, GatherElements, GatherND. Indices are validated (and negative ones normalised) in
// one pass before any copy, so a bad index is an error rather than a stray read; the copy
// itself is then a memcpy per gathered block (Gather, GatherND) or a typed element loop.
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"

namespace fusionopt::cpu::data_movement {
namespace {

// Copies blocks of `block` elements: dst block i comes from src at source_offsets[i] (elements).
void GatherBlocks(uint8_t* dst, const uint8_t* src, const std::vector<int64_t>& source_offsets, int64_t block,
                  size_t element_size) {
  const int64_t count = static_cast<int64_t>(source_offsets.size());
  DispatchByElementSize(element_size, [&](auto tag) {
    using T = decltype(tag);
    T* out = reinterpret_cast<T*>(dst);
    const T* in = reinterpret_cast<const T*>(src);
    ParallelChunks(count, count * block, [&](int64_t begin, int64_t end) {
      if (block == 1) {
        for (int64_t i = begin; i < end; ++i) out[i] = in[source_offsets[i]];
        return;
      }
      for (int64_t i = begin; i < end; ++i) {
        std::memcpy(out + i * block, in + source_offsets[i], static_cast<size_t>(block) * sizeof(T));
      }
    });
  });
}

class GatherKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", 0);
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    const RtTensor& indices = *context.input(1);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_ASSIGN_OR_RETURN(size_t axis, CheckedAxis(axis_, data.rank()));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> positions, NormalizedIndices(indices, data.dim(axis)));
    std::vector<int64_t> dims(data.dims().begin(), data.dims().begin() + axis);
    dims.insert(dims.end(), indices.dims().begin(), indices.dims().end());
    dims.insert(dims.end(), data.dims().begin() + axis + 1, data.dims().end());
    const int64_t outer = Product(data.dims(), 0, axis);
    const int64_t inner = Product(data.dims(), axis + 1);
    const int64_t axis_stride = inner * data.dim(axis);
    std::vector<int64_t> offsets;
    offsets.reserve(static_cast<size_t>(outer) * positions.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t position : positions) offsets.push_back(o * axis_stride + position * inner);
    }
    RtTensor& out = context.Output(0, data.dtype(), dims);
    GatherBlocks(out.raw(), data.raw(), offsets, inner, element_size);
    return Status::Ok();
  }

 private:
  int64_t axis_ = 0;
};

class GatherElementsKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", 0);
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    const RtTensor& indices = *context.input(1);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_ASSIGN_OR_RETURN(size_t axis, CheckedAxis(axis_, data.rank()));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> positions, ElementOffsetsAlongAxis(indices, data.dims(), axis));
    RtTensor& out = context.Output(0, data.dtype(), indices.dims());
    GatherBlocks(out.raw(), data.raw(), positions, 1, element_size);
    return Status::Ok();
  }

 private:
  int64_t axis_ = 0;
};

class GatherNDKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    batch_dims_ = info.opset >= 12 ? info.node.GetInt("batch_dims", 0) : 0;
    if (batch_dims_ < 0) return info.Error("batch_dims must not be negative");
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    const RtTensor& indices = *context.input(1);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_RETURN_IF_ERROR(CheckShapes(data, indices));
    const size_t b = static_cast<size_t>(batch_dims_);
    const size_t m = static_cast<size_t>(indices.dims().back());
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> tuples, ReadInts(indices, "indices"));
    std::vector<int64_t> data_strides = ContiguousStrides(data.dims());
    const int64_t batch_stride = Product(data.dims(), b);
    const int64_t count = static_cast<int64_t>(tuples.size() / std::max<size_t>(m, 1));
    const int64_t per_batch = count / std::max<int64_t>(Product(data.dims(), 0, b), 1);
    std::vector<int64_t> offsets(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      int64_t offset = (per_batch == 0 ? 0 : i / per_batch) * batch_stride;
      for (size_t j = 0; j < m; ++j) {
        int64_t dim = data.dim(b + j);
        int64_t index = tuples[i * m + j];
        if (index < -dim || index >= dim) {
          return InvalidModel("index " + std::to_string(index) + " is out of range for a dim of size " +
                              std::to_string(dim));
        }
        offset += (index < 0 ? index + dim : index) * data_strides[b + j];
      }
      offsets[i] = offset;
    }
    std::vector<int64_t> dims(indices.dims().begin(), indices.dims().end() - 1);
    dims.insert(dims.end(), data.dims().begin() + b + m, data.dims().end());
    RtTensor& out = context.Output(0, data.dtype(), dims);
    GatherBlocks(out.raw(), data.raw(), offsets, Product(data.dims(), b + m), element_size);
    return Status::Ok();
  }

 private:
  Status CheckShapes(const RtTensor& data, const RtTensor& indices) const {
    const size_t b = static_cast<size_t>(batch_dims_);
    if (indices.rank() < 1 || data.rank() < 1) return InvalidModel("data and indices must have rank >= 1");
    if (b >= std::min(data.rank(), indices.rank())) return InvalidModel("batch_dims is not below both ranks");
    int64_t m = indices.dims().back();
    if (m < 1 || m > static_cast<int64_t>(data.rank() - b)) {
      return InvalidModel("the index tuples have " + std::to_string(m) + " entries for data " +
                          DimsToString(data.dims()));
    }
    for (size_t k = 0; k < b; ++k) {
      if (data.dim(k) != indices.dim(k)) return InvalidModel("the batch dims of data and indices differ");
    }
    return Status::Ok();
  }

  int64_t batch_dims_ = 0;
};

}  // namespace

void RegisterGatherKernels(KernelRegistry& registry) {
  registry.Register("", "Gather", 1, kAnyOpset, MakeWithInputs<GatherKernel>(2));
  registry.Register("", "GatherElements", 11, kAnyOpset, MakeWithInputs<GatherElementsKernel>(2));
  registry.Register("", "GatherND", 11, kAnyOpset, MakeWithInputs<GatherNDKernel>(2));
}

}  // namespace fusionopt::cpu::data_movement
