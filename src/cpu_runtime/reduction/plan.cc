#include <algorithm>

#include "cpu_runtime/reduction/common.h"
#include "cpu_runtime/reduction/plan.h"

namespace fusionopt::cpu::reduction {

int64_t ReducePlan::RowOffset(int64_t row) const {
  if (outer_dims.size() == 1) return row * outer_strides[0];  // contiguous axes: no division
  int64_t offset = 0;
  for (size_t i = outer_dims.size(); i-- > 0;) {
    offset += (row % outer_dims[i]) * outer_strides[i];
    row /= outer_dims[i];
  }
  return offset;
}

Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> normalized;
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) {
      return InvalidModel("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    }
    normalized.push_back(axis < 0 ? axis + rank : axis);
  }
  std::sort(normalized.begin(), normalized.end());
  if (std::adjacent_find(normalized.begin(), normalized.end()) != normalized.end()) {
    return InvalidModel("axes name the same axis twice");
  }
  return normalized;
}

namespace {

struct DimGroup {
  int64_t size;
  bool reduced;
};

// Drops size-1 dims (they change no offset) and merges neighbours of the same kind.
std::vector<DimGroup> CoalesceDims(const std::vector<int64_t>& dims, const std::vector<int64_t>& axes) {
  std::vector<DimGroup> groups;
  for (size_t i = 0; i < dims.size(); ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i));
    if (dims[i] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced) {
      groups.back().size *= dims[i];
    } else {
      groups.push_back({dims[i], reduced});
    }
  }
  return groups;
}

// Offsets of every combination of the reduced groups except the last (an odometer).
std::vector<int64_t> SegmentOffsets(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<int64_t> offsets{0};
  for (size_t g = 0; g < sizes.size(); ++g) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * sizes[g]);
    for (int64_t base : offsets) {
      for (int64_t k = 0; k < sizes[g]; ++k) next.push_back(base + k * strides[g]);
    }
    offsets = std::move(next);
  }
  return offsets;
}

}  // namespace

ReducePlan PlanReduction(const std::vector<int64_t>& dims, const std::vector<int64_t>& axes, bool keepdims) {
  ReducePlan plan;
  for (size_t i = 0; i < dims.size(); ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i));
    if (!reduced) {
      plan.output_dims.push_back(dims[i]);
    } else if (keepdims) {
      plan.output_dims.push_back(1);
    }
  }
  std::vector<DimGroup> groups = CoalesceDims(dims, axes);
  if (!groups.empty() && !groups.back().reduced) {
    plan.inner = groups.back().size;
    groups.pop_back();
  }
  // Input strides of the remaining groups; the last one (if any) is reduced, `inner` apart.
  std::vector<int64_t> strides(groups.size());
  int64_t stride = plan.inner;
  for (size_t g = groups.size(); g-- > 0;) {
    strides[g] = stride;
    stride *= groups[g].size;
  }
  std::vector<int64_t> segment_sizes, segment_strides;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].reduced) {
      plan.outer_dims.push_back(groups[g].size);
      plan.outer_strides.push_back(strides[g]);
      plan.outer *= groups[g].size;
    } else if (g + 1 == groups.size()) {
      plan.run = groups[g].size;
    } else {
      segment_sizes.push_back(groups[g].size);
      segment_strides.push_back(strides[g]);
    }
  }
  if (std::find(segment_sizes.begin(), segment_sizes.end(), 0) != segment_sizes.end()) {
    plan.run = 0;  // an empty reduced dim: every output is the reduction of nothing
  } else {
    plan.segment_offsets = SegmentOffsets(segment_sizes, segment_strides);
  }
  return plan;
}

int64_t ProductOf(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t product = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) product *= dims[i];
  return product;
}

std::optional<int64_t> DeclaredRank(const KernelInfo& info, size_t input) {
  const Value* value = info.node.input(input);
  if (value == nullptr || !value->shape()) return std::nullopt;
  return static_cast<int64_t>(value->shape()->size());
}

Status CheckAxisAgainstDeclaredRank(const KernelInfo& info, int64_t axis) {
  std::optional<int64_t> rank = DeclaredRank(info, 0);
  if (rank && (axis < -*rank || axis >= *rank)) {
    return info.Error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(*rank));
  }
  return Status::Ok();
}

Status CheckDeclaredType(const KernelInfo& info, size_t input, unsigned accepted) {
  const Value* value = info.node.input(input);
  if (value == nullptr || value->dtype() == DataType::kUndefined) return Status::Ok();
  if (Accepts(value->dtype(), accepted)) return Status::Ok();
  return UnsupportedType(value->dtype()).WithContext(info.Describe());
}

bool Accepts(DataType dtype, unsigned accepted) {
  switch (dtype) {
    case DataType::kFloat: case DataType::kDouble: case DataType::kFloat16: case DataType::kBFloat16:
      return (accepted & kFloatTypes) != 0;
    case DataType::kInt32: case DataType::kInt64: return (accepted & kWideIntTypes) != 0;
    case DataType::kInt8: case DataType::kUint8: return (accepted & kNarrowIntTypes) != 0;
    case DataType::kBool: return (accepted & kBoolType) != 0;
    default: return false;
  }
}

Status UnsupportedType(DataType dtype) {
  return Unsupported("element type " + std::string(NameOf(dtype)) + " is not supported by this kernel");
}

}  // namespace fusionopt::cpu::reduction
