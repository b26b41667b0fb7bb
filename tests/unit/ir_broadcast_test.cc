// BroadcastDims: numpy broadcasting of concrete dims, the one rule the CPU elementwise engine,
// the fused row kernels and the CUDA generator's families size their outputs by.
#include <catch2/catch.hpp>

#include "ir/broadcast.h"

using fusionopt::BroadcastDims;
using Dims = std::vector<int64_t>;

TEST_CASE("BroadcastDims aligns shapes on their last axis and stretches 1s", "[ir]") {
  CHECK(BroadcastDims({{2, 3, 4}, {4}}) == std::optional<Dims>(Dims{2, 3, 4}));
  CHECK(BroadcastDims({{2, 1, 4}, {3, 1}}) == std::optional<Dims>(Dims{2, 3, 4}));
  CHECK(BroadcastDims({{1}, {5, 1, 1}, {1, 7}}) == std::optional<Dims>(Dims{5, 1, 7}));
  CHECK(BroadcastDims({{0, 3}, {1, 3}}) == std::optional<Dims>(Dims{0, 3}));  // an empty axis stays empty
  CHECK(BroadcastDims({}) == std::optional<Dims>(Dims{}));
  CHECK(BroadcastDims({{}, {}}) == std::optional<Dims>(Dims{}));
}

TEST_CASE("BroadcastDims refuses dims that disagree", "[ir]") {
  CHECK_FALSE(BroadcastDims({{2, 3}, {3, 2}}).has_value());
  CHECK_FALSE(BroadcastDims({{4}, {2, 3}}).has_value());
  CHECK_FALSE(BroadcastDims({{0}, {2}}).has_value());  // 0 is no 1: it does not stretch
}
