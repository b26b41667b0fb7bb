// Slice, Expand and Tile: each output is a strided view of its input (negative strides for
// reversed slices, zero strides for broadcast and repeated axes), materialised by the
// strided-copy engine, which turns contiguous inner runs into memcpy.
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"
#include "ir/broadcast.h"

namespace fusionopt::cpu::data_movement {
namespace {

struct SliceRange {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

// Clamps start/end the way ONNX defines for `dim` (negative values count from the end;
// out-of-range values, INT64_MAX included, clamp to the edges; never overflows).
SliceRange ClampSlice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  SliceRange range{0, step, 0};
  if (dim == 0) return range;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    range.count = end > start ? 1 + (end - start - 1) / step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    range.count = start > end ? 1 + (start - end - 1) / -step : 0;
  }
  range.start = start;
  return range;
}

class SliceKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    from_inputs_ = info.opset >= 10;
    if (!from_inputs_) {
      starts_ = info.node.GetInts("starts");
      ends_ = info.node.GetInts("ends");
      axes_ = info.node.GetInts("axes");
      if (!starts_ || !ends_) return info.Error("starts and ends are required");
    } else if (info.node.input(1) == nullptr || info.node.input(2) == nullptr) {
      return info.Error("starts and ends are required");
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<SliceRange> ranges, Ranges(context, data.dims()));
    std::vector<int64_t> in_strides = ContiguousStrides(data.dims());
    StridedLayout layout;
    int64_t offset = 0;
    for (size_t k = 0; k < data.rank(); ++k) {
      layout.dims.push_back(ranges[k].count);
      layout.src_strides.push_back(in_strides[k] * ranges[k].step);
      offset += ranges[k].start * in_strides[k];
    }
    layout.dst_strides = ContiguousStrides(layout.dims);
    RtTensor& out = context.Output(0, data.dtype(), layout.dims);
    CopyStrided(out.raw(), data.raw() + offset * static_cast<int64_t>(element_size), element_size, std::move(layout));
    return Status::Ok();
  }

 private:
  Result<std::vector<int64_t>> Argument(const KernelContext& context, size_t input, const char* name,
                                        const std::optional<std::vector<int64_t>>& attribute) const {
    if (!from_inputs_) return attribute ? *attribute : std::vector<int64_t>();
    if (!context.has_input(input)) return std::vector<int64_t>();
    return ReadInts(*context.input(input), name);
  }

  Result<std::vector<SliceRange>> Ranges(const KernelContext& context, const std::vector<int64_t>& dims) const {
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> starts, Argument(context, 1, "starts", starts_));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> ends, Argument(context, 2, "ends", ends_));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, Argument(context, 3, "axes", axes_));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> steps, Argument(context, 4, "steps", std::nullopt));
    const size_t count = starts.size();
    if (axes.empty()) {
      for (size_t i = 0; i < count; ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (steps.empty()) steps.assign(count, 1);
    if (ends.size() != count || axes.size() != count || steps.size() != count) {
      return InvalidModel("starts, ends, axes and steps have different lengths");
    }
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> normalized,
                               NormalizeAxes(axes, static_cast<int64_t>(dims.size()), "axis"));
    std::vector<SliceRange> ranges;
    for (int64_t dim : dims) ranges.push_back({0, 1, dim});
    for (size_t i = 0; i < count; ++i) {
      if (steps[i] == 0) return InvalidModel("a slice step is 0");
      int64_t axis = normalized[i];
      ranges[axis] = ClampSlice(starts[i], ends[i], steps[i], dims[axis]);
    }
    return ranges;
  }

  bool from_inputs_ = true;
  std::optional<std::vector<int64_t>> starts_, ends_, axes_;
};

class ExpandKernel : public Kernel {
 public:
  Status Init(const KernelInfo&) { return Status::Ok(); }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*context.input(1), "the shape"));
    std::optional<std::vector<int64_t>> dims = BroadcastDims({data.dims(), shape});
    if (std::any_of(shape.begin(), shape.end(), [](int64_t dim) { return dim < 0; })) dims.reset();
    if (!dims) return InvalidModel("cannot expand " + DimsToString(data.dims()) + " to " + DimsToString(shape));
    std::vector<int64_t> in_strides = ContiguousStrides(data.dims());
    StridedLayout layout{*dims, ContiguousStrides(*dims), std::vector<int64_t>(dims->size(), 0)};
    size_t lead = dims->size() - data.rank();
    for (size_t k = 0; k < data.rank(); ++k) {
      if (data.dim(k) != 1) layout.src_strides[lead + k] = in_strides[k];
    }
    RtTensor& out = context.Output(0, data.dtype(), *dims);
    CopyStrided(out.raw(), data.raw(), element_size, std::move(layout));
    return Status::Ok();
  }
};

class TileKernel : public Kernel {
 public:
  Status Init(const KernelInfo&) { return Status::Ok(); }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ReadInts(*context.input(1), "repeats"));
    if (repeats.size() != data.rank()) {
      return InvalidModel("repeats " + DimsToString(repeats) + " do not match the input rank " +
                          std::to_string(data.rank()));
    }
    // Output axis k is (repeat, dim): the repeat axis reads the input with stride 0.
    std::vector<int64_t> in_strides = ContiguousStrides(data.dims());
    StridedLayout layout;
    std::vector<int64_t> out_dims;
    for (size_t k = 0; k < data.rank(); ++k) {
      if (repeats[k] < 0) return InvalidModel("repeats " + DimsToString(repeats) + " has a negative entry");
      layout.dims.insert(layout.dims.end(), {repeats[k], data.dim(k)});
      layout.src_strides.insert(layout.src_strides.end(), {0, in_strides[k]});
      out_dims.push_back(repeats[k] * data.dim(k));
    }
    layout.dst_strides = ContiguousStrides(layout.dims);
    RtTensor& out = context.Output(0, data.dtype(), out_dims);
    CopyStrided(out.raw(), data.raw(), element_size, std::move(layout));
    return Status::Ok();
  }
};

}  // namespace

void RegisterSliceKernels(KernelRegistry& registry) {
  registry.Register("", "Slice", 1, kAnyOpset, MakeWithInputs<SliceKernel>(1));
  registry.Register("", "Expand", 8, kAnyOpset, MakeWithInputs<ExpandKernel>(2));
  registry.Register("", "Tile", 6, kAnyOpset, MakeWithInputs<TileKernel>(2));
}

}  // namespace fusionopt::cpu::data_movement
