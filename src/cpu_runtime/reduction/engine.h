// The reduce-over-axes engine: for every output element j of a ReducePlan, combines
// map(x, j) over the input elements that reduce into j.
//
// Two walks cover every plan. Rows (inner == 1): each output is the reduction of contiguous
// runs, read with independent lanes so the compiler can vectorize without reassociating
// floating-point operations. Columns (inner > 1): a tile of contiguous outputs accumulates
// run after run of contiguous input, also vectorizable. The combination order depends only on
// the shape, never on the number of threads, so results are reproducible across --threads.
#pragma once

#include <omp.h>

#include <algorithm>
#include <vector>

#include "cpu_runtime/reduction/common.h"
#include "cpu_runtime/reduction/plan.h"

namespace fusionopt::cpu::reduction {

constexpr int64_t kLanes = 16;        // independent accumulators per row
constexpr int64_t kBlock = 4096;      // long runs are reduced in blocks combined in order
constexpr int64_t kInnerTile = 256;   // outputs per task in the column walk

template <typename T, typename Acc, typename RowMap, typename Combine>
Acc ReduceBlock(const T* x, int64_t n, Acc identity, const RowMap& map, const Combine& combine) {
  Acc lanes[kLanes];
  std::fill(lanes, lanes + kLanes, identity);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    // Without the hint the compiler keeps a conditional combine (max, min) scalar.
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = combine(lanes[l], map(x[i + l]));
  }
  for (int64_t l = 0; i + l < n; ++l) lanes[l] = combine(lanes[l], map(x[i + l]));
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
    for (int64_t l = 0; l < width; ++l) lanes[l] = combine(lanes[l], lanes[l + width]);
  }
  return lanes[0];
}

template <typename T, typename Acc, typename RowMap, typename Combine>
Acc ReduceRun(const T* x, int64_t n, Acc identity, const RowMap& map, const Combine& combine) {
  Acc total = identity;
  for (int64_t start = 0; start < n; start += kBlock) {
    total = combine(total, ReduceBlock(x + start, std::min(kBlock, n - start), identity, map, combine));
  }
  return total;
}

template <typename T, typename Acc, typename Map, typename Combine>
void ReduceRows(const ReducePlan& plan, const T* input, Acc identity, const Map& map, const Combine& combine,
                Acc* acc) {
  const int64_t blocks = (plan.run + kBlock - 1) / kBlock;
  const bool parallel = plan.input_size() >= kParallelMinElements;
  if (parallel && plan.segments() == 1 && blocks > 1 && plan.outer < omp_get_max_threads()) {
    // Few long rows: each row's blocks are the parallel tasks, combined in order afterwards —
    // the same order ReduceRun uses, so the result does not depend on which path ran.
    std::vector<Acc> partial(static_cast<size_t>(plan.outer * blocks));
#pragma omp parallel for schedule(static)
    for (int64_t task = 0; task < plan.outer * blocks; ++task) {
      const int64_t row = task / blocks;
      const int64_t start = (task % blocks) * kBlock;
      auto row_map = [&](T x) { return map(x, row); };
      partial[task] = ReduceBlock(input + plan.RowOffset(row) + start, std::min(kBlock, plan.run - start), identity,
                                  row_map, combine);
    }
    for (int64_t row = 0; row < plan.outer; ++row) {
      Acc total = identity;
      for (int64_t b = 0; b < blocks; ++b) total = combine(total, partial[row * blocks + b]);
      acc[row] = combine(identity, total);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t row = 0; row < plan.outer; ++row) {
    const T* base = input + plan.RowOffset(row);
    auto row_map = [&](T x) { return map(x, row); };
    Acc total = identity;
    for (int64_t segment : plan.segment_offsets) {
      total = combine(total, ReduceRun(base + segment, plan.run, identity, row_map, combine));
    }
    acc[row] = total;
  }
}

template <typename T, typename Acc, typename Map, typename Combine>
void ReduceColumns(const ReducePlan& plan, const T* input, Acc identity, const Map& map, const Combine& combine,
                   Acc* acc) {
  const int64_t tiles = (plan.inner + kInnerTile - 1) / kInnerTile;
#pragma omp parallel for schedule(static) if (plan.input_size() >= kParallelMinElements)
  for (int64_t task = 0; task < plan.outer * tiles; ++task) {
    const int64_t row = task / tiles;
    const int64_t start = (task % tiles) * kInnerTile;
    const int64_t width = std::min(kInnerTile, plan.inner - start);
    const int64_t first = row * plan.inner + start;  // output index of the tile's first element
    Acc* out = acc + first;
    std::fill(out, out + width, identity);
    const T* base = input + plan.RowOffset(row) + start;
    for (int64_t segment : plan.segment_offsets) {
      for (int64_t k = 0; k < plan.run; ++k) {
        const T* src = base + segment + k * plan.inner;
        for (int64_t i = 0; i < width; ++i) out[i] = combine(out[i], map(src[i], first + i));
      }
    }
  }
}

// acc[j] = combine over the elements x reducing into output j of map(x, j), starting from
// `identity` (which is also the result of reducing nothing). `acc` has plan.output_size()
// entries and may alias nothing the map reads.
template <typename T, typename Acc, typename Map, typename Combine>
void ReduceToAcc(const ReducePlan& plan, const T* input, Acc identity, const Map& map, const Combine& combine,
                 Acc* acc) {
  if (plan.output_size() == 0) return;
  if (plan.inner == 1) {
    ReduceRows(plan, input, identity, map, combine, acc);
  } else {
    ReduceColumns(plan, input, identity, map, combine, acc);
  }
}

}  // namespace fusionopt::cpu::reduction
