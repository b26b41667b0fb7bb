// Concat and Split: every row of the outer dims (those before the axis) is a run of
// contiguous blocks, one per input (Concat) or output (Split), so both are row-wise memcpy.
#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/onednn/conv_layout_views.h"
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"
#include "ir/legacy_opsets.h"

namespace fusionopt::cpu::data_movement {
namespace {

// The bytes of one outer row of each part, and where each starts inside the joined row.
struct RowBlocks {
  std::vector<size_t> bytes;
  std::vector<size_t> offsets;
  size_t row_bytes = 0;
};

RowBlocks BlocksOf(const std::vector<int64_t>& sizes_on_axis, int64_t inner, size_t element_size) {
  RowBlocks blocks;
  for (int64_t size : sizes_on_axis) {
    blocks.offsets.push_back(blocks.row_bytes);
    blocks.bytes.push_back(static_cast<size_t>(size * inner) * element_size);
    blocks.row_bytes += blocks.bytes.back();
  }
  return blocks;
}

// Copies joined[row] <-> parts[i][row] for all rows; `to_joined` picks the direction.
void CopyBlocks(uint8_t* joined, const std::vector<uint8_t*>& parts, const RowBlocks& blocks, int64_t rows,
                bool to_joined, int64_t elements) {
  if (rows == 1) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i] == nullptr) continue;
      uint8_t* whole = joined + blocks.offsets[i];
      to_joined ? ParallelMemcpy(whole, parts[i], blocks.bytes[i]) : ParallelMemcpy(parts[i], whole, blocks.bytes[i]);
    }
    return;
  }
  ParallelChunks(rows, elements, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      uint8_t* whole = joined + static_cast<size_t>(row) * blocks.row_bytes;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i] == nullptr) continue;
        uint8_t* part = parts[i] + static_cast<size_t>(row) * blocks.bytes[i];
        if (to_joined) {
          std::memcpy(whole + blocks.offsets[i], part, blocks.bytes[i]);
        } else {
          std::memcpy(part, whole + blocks.offsets[i], blocks.bytes[i]);
        }
      }
    }
  });
}

class ConcatKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    if (info.node.inputs().empty()) return info.Error("Concat needs at least one input");
    const Attribute* axis = info.node.FindAttribute("axis");
    if (info.opset < 4 && axis == nullptr) {
      axis_ = 1;  // Concat-1's default; the attribute is required from Concat-4 on
      return Status::Ok();
    }
    if (axis == nullptr || axis->kind != AttributeKind::kInt) return info.Error("the axis attribute is required");
    axis_ = axis->i;
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& first = *context.input(0);
    int64_t rank = static_cast<int64_t>(first.rank());
    if (axis_ < -rank || axis_ >= rank) {
      return InvalidModel("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(rank));
    }
    size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    for (size_t i = 0; i < context.num_inputs(); ++i) {
      const RtTensor* input = context.input(i);
      if (input == nullptr) return InvalidModel("input " + std::to_string(i) + " is missing");
      FUSIONOPT_RETURN_IF_ERROR(CheckMatches(first, *input, axis, i));
    }
    // Parts in one convolution layout join over their physical dims on the axis the logical
    // one went to (a blocked layout's channels: the block index, its lanes alike in every
    // part), where the other physical dims agree.
    std::vector<const RtTensor*> parts = context.inputs;
    layouts::Prepared prepared = layouts::PrepareOperands(parts, *context.allocator, onednn::TakesConvLayouts(first.dtype()));
    if (prepared.physical()) {
      const std::vector<int64_t> mapped = layouts::PhysicalAxes(static_cast<int64_t>(axis), rank, prepared.layout);
      if (JoinableOn(parts, static_cast<size_t>(mapped[0]))) {
        axis = static_cast<size_t>(mapped[0]);
      } else {
        parts = context.inputs;
        prepared = layouts::PrepareOperands(parts, *context.allocator, /*views_allowed=*/false);
      }
    }
    RtTensor& out = context.outputs[0];
    FUSIONOPT_RETURN_IF_ERROR(Join(parts, axis, *context.allocator, out));
    out = layouts::FinishResult(std::move(out), prepared.layout, context.conv_layout_output, *context.allocator);
    return Status::Ok();
  }

  // Parts in convolution layouts are joined in place where they can be (conv_layout_views.h).
  bool ReadsConvLayouts() const override { return true; }

 private:
  static bool JoinableOn(const std::vector<const RtTensor*>& parts, size_t axis) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!CheckMatches(*parts[0], *parts[i], axis, i).ok()) return false;
    }
    return true;
  }

  static Status Join(const std::vector<const RtTensor*>& inputs, size_t axis, Allocator& allocator, RtTensor& out) {
    std::vector<int64_t> sizes;
    for (const RtTensor* input : inputs) sizes.push_back(input->dim(axis));
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(inputs[0]->dtype()));
    std::vector<int64_t> dims = inputs[0]->dims();
    dims[axis] = 0;
    for (int64_t size : sizes) dims[axis] += size;
    out = allocator.Allocate(inputs[0]->dtype(), dims);
    std::vector<uint8_t*> parts;
    for (const RtTensor* input : inputs) parts.push_back(input->raw());
    RowBlocks blocks = BlocksOf(sizes, Product(dims, axis + 1), element_size);
    CopyBlocks(out.raw(), parts, blocks, Product(dims, 0, axis), /*to_joined=*/true, out.NumElements());
    return Status::Ok();
  }

  static Status CheckMatches(const RtTensor& first, const RtTensor& input, size_t axis, size_t index) {
    bool same = input.dtype() == first.dtype() && input.rank() == first.rank();
    for (size_t k = 0; same && k < first.rank(); ++k) same = k == axis || input.dim(k) == first.dim(k);
    if (same) return Status::Ok();
    return InvalidModel("input " + std::to_string(index) + " " + std::string(NameOf(input.dtype())) +
                        DimsToString(input.dims()) + " cannot be concatenated with " +
                        std::string(NameOf(first.dtype())) + DimsToString(first.dims()) + " on axis " +
                        std::to_string(axis));
  }

  int64_t axis_ = 0;
};

class SplitKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    FUSIONOPT_RETURN_IF_ERROR(CheckLegacyNode(info.node, info.opset));  // Split-1's second input
    axis_ = info.node.GetInt("axis", 0);
    present_ = PresentOutputs(info.node);
    if (present_.empty()) return info.Error("Split needs at least one output");
    if (info.opset < 13) {
      split_ = info.node.GetInts("split");
    } else if (info.node.input(1) != nullptr) {
      split_ = ConstantInputInts(info, 1);
      split_at_run_time_ = !split_.has_value();
    }
    if (info.opset >= 18 && info.node.FindAttribute("num_outputs") != nullptr) {
      num_outputs_ = info.node.GetInt("num_outputs", 0);
      if (split_ || split_at_run_time_) return info.Error("split and num_outputs cannot both be given");
      if (*num_outputs_ != static_cast<int64_t>(present_.size())) {
        return info.Error("num_outputs " + std::to_string(*num_outputs_) + " differs from the " +
                          std::to_string(present_.size()) + " outputs");
      }
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    int64_t rank = static_cast<int64_t>(data.rank());
    if (axis_ < -rank || axis_ >= rank) {
      return InvalidModel("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(rank));
    }
    size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, SplitSizes(context, data.dim(axis)));
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    if (Product(data.dims(), 0, axis) == 1) {
      // One row before the axis: each part is a contiguous slice of the input, so a view.
      MakeSliceViews(data, axis, sizes, element_size, context);
      return Status::Ok();
    }
    std::vector<uint8_t*> parts;
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<int64_t> dims = data.dims();
      dims[axis] = sizes[i];
      parts.push_back(present_[i] ? context.Output(i, data.dtype(), dims).raw() : nullptr);
    }
    RowBlocks blocks = BlocksOf(sizes, Product(data.dims(), axis + 1), element_size);
    CopyBlocks(data.raw(), parts, blocks, Product(data.dims(), 0, axis), /*to_joined=*/false, data.NumElements());
    return Status::Ok();
  }

 private:
  Result<std::vector<int64_t>> SplitSizes(const KernelContext& context, int64_t dim) const {
    const int64_t parts = static_cast<int64_t>(present_.size());
    std::vector<int64_t> sizes;
    if (split_at_run_time_) {
      FUSIONOPT_ASSIGN_OR_RETURN(sizes, ReadInts(*context.input(1), "split"));
    } else if (split_) {
      sizes = *split_;
    } else {
      // num_outputs (opset 18) rounds the chunk up and leaves the last one smaller; before
      // that an equal split has to divide evenly.
      int64_t chunk = num_outputs_ ? (dim + parts - 1) / parts : dim / parts;
      if (!num_outputs_ && dim % parts != 0) {
        return InvalidModel("dim " + std::to_string(dim) + " cannot be split into " + std::to_string(parts) +
                            " equal parts");
      }
      sizes.assign(static_cast<size_t>(parts), chunk);
      sizes.back() = dim - chunk * (parts - 1);
    }
    int64_t total = 0;
    for (int64_t size : sizes) {
      if (size < 0) return InvalidModel("split sizes " + DimsToString(sizes) + " have a negative entry");
      total += size;
    }
    if (static_cast<int64_t>(sizes.size()) != parts || total != dim) {
      return InvalidModel("split sizes " + DimsToString(sizes) + " do not split dim " + std::to_string(dim) +
                          " into " + std::to_string(parts) + " outputs");
    }
    return sizes;
  }

  void MakeSliceViews(const RtTensor& data, size_t axis, const std::vector<int64_t>& sizes, size_t element_size,
                      KernelContext& context) const {
    const int64_t inner = Product(data.dims(), axis + 1);
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (present_[i]) {
        std::vector<int64_t> dims = data.dims();
        dims[axis] = sizes[i];
        const size_t byte_offset = static_cast<size_t>(offset * inner) * element_size;
        context.outputs[i] = RtTensor(data.dtype(), std::move(dims),
                                      std::shared_ptr<uint8_t>(data.storage(), data.raw() + byte_offset));
      }
      offset += sizes[i];
    }
    context.launched = false;
  }

  int64_t axis_ = 0;
  std::vector<bool> present_;
  std::optional<std::vector<int64_t>> split_;
  bool split_at_run_time_ = false;
  std::optional<int64_t> num_outputs_;
};

}  // namespace

void RegisterConcatSplitKernels(KernelRegistry& registry) {
  registry.Register("", "Concat", 1, kAnyOpset, MakeWithInputs<ConcatKernel>(kAllInputs));
  registry.Register("", "Split", 1, kAnyOpset, MakeWithInputs<SplitKernel>(1));
}

}  // namespace fusionopt::cpu::data_movement
