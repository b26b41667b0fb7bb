#include "cpu_runtime/onednn/conv_layout_views.h"

#include "cpu_runtime/onednn/common.h"
#include "ir/status.h"

namespace fusionopt::cpu::layouts {
namespace {

int64_t BlockOf(Layout layout) {
  return layout == Layout::kBlocked8 ? 8 : layout == Layout::kBlocked16 ? 16 : 0;
}

}  // namespace

std::vector<int64_t> PhysicalDims(const std::vector<int64_t>& logical, Layout layout) {
  FUSIONOPT_CHECK(logical.size() >= 3 && layout != Layout::kRowMajor, "convolution layouts have spatial axes");
  const int64_t channels = logical[1];
  std::vector<int64_t> physical = {logical[0]};
  if (layout == Layout::kChannelsLast) {
    physical.insert(physical.end(), logical.begin() + 2, logical.end());
    physical.push_back(channels);
    return physical;
  }
  const int64_t block = channels == 1 ? 1 : BlockOf(layout);
  FUSIONOPT_CHECK(channels % block == 0, "blocked layouts hold whole blocks");
  physical.push_back(channels / block);
  physical.insert(physical.end(), logical.begin() + 2, logical.end());
  physical.push_back(block);
  return physical;
}

std::vector<int64_t> LogicalDims(const std::vector<int64_t>& physical, Layout layout) {
  FUSIONOPT_CHECK(physical.size() >= 3 && layout != Layout::kRowMajor, "convolution layouts have spatial axes");
  if (layout == Layout::kChannelsLast) {
    std::vector<int64_t> logical = {physical[0], physical.back()};
    logical.insert(logical.end(), physical.begin() + 1, physical.end() - 1);
    return logical;
  }
  std::vector<int64_t> logical = {physical[0], physical[1] * physical.back()};
  logical.insert(logical.end(), physical.begin() + 2, physical.end() - 1);
  return logical;
}

std::vector<int64_t> PhysicalAxes(int64_t axis, int64_t rank, Layout layout) {
  if (axis == 0) return {0};
  if (layout == Layout::kChannelsLast) return {axis == 1 ? rank - 1 : axis - 1};
  return axis == 1 ? std::vector<int64_t>{1, rank} : std::vector<int64_t>{axis};
}

bool SameInBothLayouts(const std::vector<int64_t>& logical, Layout layout) {
  if (logical.size() < 3 || logical[1] == 1) return true;
  for (size_t axis = 2; axis < logical.size(); ++axis) {
    if (logical[axis] != 1) return false;
  }
  const int64_t block = BlockOf(layout);
  return block == 0 || logical[1] % block == 0;
}

RtTensor PhysicalView(const RtTensor& tensor) {
  FUSIONOPT_CHECK(!tensor.row_major(), "a physical view is of a tensor in a convolution layout");
  return RtTensor(tensor.dtype(), PhysicalDims(tensor.dims(), tensor.layout()), tensor.storage());
}

RtTensor FromPhysical(RtTensor physical, Layout layout) {
  RtTensor logical(physical.dtype(), LogicalDims(physical.dims(), layout), physical.storage());
  if (!SameInBothLayouts(logical.dims(), layout)) logical.set_layout(layout);
  return logical;
}

std::optional<std::vector<RtTensor>> ElementwiseViews(const std::vector<const RtTensor*>& operands) {
  size_t rank = 0;
  Layout layout = Layout::kRowMajor;
  for (const RtTensor* operand : operands) {
    if (operand->row_major()) continue;
    if (rank != 0 && (operand->rank() != rank || operand->layout() != layout)) return std::nullopt;
    rank = operand->rank();
    layout = operand->layout();
  }
  if (rank == 0) return std::nullopt;
  std::vector<RtTensor> views;
  for (const RtTensor* operand : operands) {
    if (!operand->row_major()) {
      views.push_back(PhysicalView(*operand));
      continue;
    }
    if (operand->rank() > rank) return std::nullopt;
    std::vector<int64_t> aligned(rank - operand->rank(), 1);
    aligned.insert(aligned.end(), operand->dims().begin(), operand->dims().end());
    if (!SameInBothLayouts(aligned, layout)) return std::nullopt;
    views.emplace_back(operand->dtype(), PhysicalDims(aligned, layout), operand->storage());
  }
  return views;
}

Prepared PrepareOperands(std::vector<const RtTensor*>& operands, Allocator& allocator, bool views_allowed) {
  Prepared prepared;
  prepared.held.reserve(operands.size());  // no reallocation: `operands` points into it
  std::optional<std::vector<RtTensor>> views = views_allowed ? ElementwiseViews(operands) : std::nullopt;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (views) {
      if (!operands[i]->row_major()) prepared.layout = operands[i]->layout();
      prepared.held.push_back((*views)[i]);
    } else if (!operands[i]->row_major()) {
      prepared.held.push_back(onednn::RowMajor(*operands[i], allocator));
    } else {
      continue;
    }
    operands[i] = &prepared.held.back();
  }
  return prepared;
}

RtTensor FinishResult(RtTensor result, Layout layout, bool keep_layout, Allocator& allocator) {
  if (layout == Layout::kRowMajor) return result;
  RtTensor logical = FromPhysical(std::move(result), layout);
  return keep_layout ? logical : onednn::RowMajor(logical, allocator);
}

}  // namespace fusionopt::cpu::layouts
