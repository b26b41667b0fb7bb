// ReducePlan: how a reduction over a set of axes walks its input, decided once per shape.
//
// Dims of size 1 are dropped and neighbouring dims that are both kept or both reduced are
// merged, so every reduction reads as  input[outer rows][reduced elements][inner]  where
// `inner` is the trailing run of kept dims, contiguous in input and output. In the common case
// (the last axis, or one contiguous run of axes) a row's reduced elements are one run of
// `run` elements `inner` apart; otherwise they are several such runs ("segments") whose start
// offsets are precomputed — an odometer walk, with no transpose.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/status.h"

namespace fusionopt::cpu::reduction {

struct ReducePlan {
  std::vector<int64_t> output_dims;  // the op's output shape (keepdims applied)
  int64_t outer = 1;                 // output rows
  int64_t inner = 1;                 // contiguous kept elements per row, in input and output
  int64_t run = 1;                   // reduced elements per segment, `inner` apart in the input
  std::vector<int64_t> segment_offsets{0};  // start of each segment relative to its row
  // The rows as an odometer over the kept dims before `inner`, with their input strides.
  std::vector<int64_t> outer_dims;
  std::vector<int64_t> outer_strides;

  int64_t segments() const { return static_cast<int64_t>(segment_offsets.size()); }
  int64_t reduced() const { return run * segments(); }  // input elements per output element
  int64_t output_size() const { return outer * inner; }
  int64_t input_size() const { return output_size() * reduced(); }
  // Input offset of the first element of output row `row`.
  int64_t RowOffset(int64_t row) const;
};

// Validates reduction axes against `rank` ([-rank, rank-1], no repeats) and returns them
// non-negative and sorted.
Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank);

// The plan for reducing `dims` over `axes` (normalized: sorted, in range, unique). Empty
// `axes` reduces nothing: each output element is its own one-element reduction.
ReducePlan PlanReduction(const std::vector<int64_t>& dims, const std::vector<int64_t>& axes, bool keepdims);

}  // namespace fusionopt::cpu::reduction
