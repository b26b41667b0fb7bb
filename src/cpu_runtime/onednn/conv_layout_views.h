// Ops that do not care how their operands lie — elementwise programs, reductions, Concat — on
// activations in convolution layouts (rt_tensor.h), without a reorder.
//
// A tensor in a convolution layout is the row-major tensor of its physical dims: channels last
// (N, C, S...) -> (N, S..., C); blocked by b (N, C, S...) -> (N, C/b, S..., b). An elementwise
// op over such operands is the same op over those views, with any row-major operand the layout
// leaves in place — one whose C is 1, or whose spatial extent is 1 (a per-channel scale, an SE
// block's [N, C, 1, 1] gate, a scalar) — read through the physical dims as it lies. A
// reduction is the same reduction over the mapped axes, a Concat the same join on the mapped
// axis. The result, read back through the layout, is in that layout again — or row-major,
// where its shape makes the two one layout.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cpu_runtime/engine/allocator.h"
#include "cpu_runtime/engine/rt_tensor.h"

namespace fusionopt::cpu::layouts {

// Logical (N, C, S...) dims -> the physical dims of `layout` (a channel count of 1 stands for
// itself in a blocked layout), and back.
std::vector<int64_t> PhysicalDims(const std::vector<int64_t>& logical, Layout layout);
std::vector<int64_t> LogicalDims(const std::vector<int64_t>& physical, Layout layout);
// The physical axes a (normalized) logical axis of a rank-`rank` tensor spans: one, or the
// block index and the lane for the channels of a blocked layout.
std::vector<int64_t> PhysicalAxes(int64_t axis, int64_t rank, Layout layout);
// Whether (N, C, S...) dims lie the same row-major and channels-last (C is 1, or every
// spatial dim is); blocked layouts also need whole blocks then (C is 1 or a multiple of b).
bool SameInBothLayouts(const std::vector<int64_t>& logical, Layout layout = Layout::kChannelsLast);

// The row-major view of a tensor in a convolution layout over its physical dims (storage shared).
RtTensor PhysicalView(const RtTensor& tensor);
// `physical`, a row-major result over the physical dims of `layout`, as the logical tensor it
// is: in `layout`, or row-major where SameInBothLayouts.
RtTensor FromPhysical(RtTensor physical, Layout layout);

// Views of `operands` for an elementwise op when at least one is in a convolution layout and
// each is either in that one layout at one common rank or a row-major tensor the layout
// leaves in place (right-aligned to that rank, as broadcasting aligns it); nullopt otherwise.
std::optional<std::vector<RtTensor>> ElementwiseViews(const std::vector<const RtTensor*>& operands);

// What a layout-agnostic kernel reads: `operands` repointed at their views (`layout` is then
// the operands' convolution layout and results come out over its physical dims), or at
// row-major copies of those in convolution layouts (also when `views_allowed` is false: a
// result dtype a reorder cannot take).
struct Prepared {
  std::vector<RtTensor> held;
  Layout layout = Layout::kRowMajor;
  bool physical() const { return layout != Layout::kRowMajor; }
};
Prepared PrepareOperands(std::vector<const RtTensor*>& operands, Allocator& allocator, bool views_allowed = true);
// A result computed over the physical dims of `layout` (row-major: over the logical dims, as
// it stays) as the logical tensor, left in `layout` only when `keep_layout` (the executor lets
// the kernel hand such a layout on).
RtTensor FinishResult(RtTensor result, Layout layout, bool keep_layout, Allocator& allocator);

}  // namespace fusionopt::cpu::layouts
