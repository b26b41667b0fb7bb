// ResolveReshape: Reshape's target at concrete sizes, the one rule the CPU runtime's Reshape and
// the attention layout planner share — 0 copies a dim unless allowzero, one -1 is inferred, the
// element count must match — and every way a target is no valid one.
#include <catch2/catch.hpp>

#include "ir/reshape_target.h"

using namespace fusionopt;

namespace {

std::vector<int64_t> Resolved(const std::vector<int64_t>& input, const std::vector<int64_t>& target, bool allow_zero = false) {
  Result<std::vector<int64_t>> resolved = ResolveReshape(input, target, allow_zero);
  INFO((resolved.ok() ? std::string() : resolved.status().message()));
  REQUIRE(resolved.ok());
  return resolved.value();
}

std::string Why(const std::vector<int64_t>& input, const std::vector<int64_t>& target, bool allow_zero = false) {
  Result<std::vector<int64_t>> resolved = ResolveReshape(input, target, allow_zero);
  REQUIRE_FALSE(resolved.ok());
  CHECK(resolved.status().code() == ErrorCode::kInvalidModel);
  return resolved.status().message();
}

}  // namespace

TEST_CASE("ResolveReshape: 0 copies a dim, one -1 takes the rest", "[ir]") {
  CHECK(Resolved({2, 3, 4}, {0, -1}) == std::vector<int64_t>{2, 12});
  CHECK(Resolved({2, 3, 4}, {0, 0, 2, 2}) == std::vector<int64_t>{2, 3, 2, 2});
  CHECK(Resolved({2, 3, 4}, {24}) == std::vector<int64_t>{24});
  // allowzero: a 0 is a 0 (an empty tensor keeps its count).
  CHECK(Resolved({0, 3}, {0, 5}, true) == std::vector<int64_t>{0, 5});
  // Without it a 0 copies: [3, 0] asks for 3 × 3 elements of none.
  CHECK(Why({0, 3}, {3, 0}) == "cannot reshape [0,3] to [3,0]");
}

TEST_CASE("ResolveReshape: targets no Reshape accepts", "[ir]") {
  CHECK(Why({2, 3}, {0, 0, 0}) == "shape entry 2 is 0 but the input has rank 2");
  CHECK(Why({2, 3}, {-1, -1}) == "the shape has more than one -1");
  CHECK(Why({2, 3}, {-2, 3}) == "the shape has the invalid entry -2");
  CHECK(Why({2, 3}, {0, -1}, true) == "allowzero forbids a 0 beside a -1");
  CHECK(Why({2, 3}, {4, -1}) == "cannot reshape [2,3] to [4,-1]");
  CHECK(Why({2, 3}, {5}) == "cannot reshape [2,3] to [5]");
  CHECK(Why({2, 3}, {int64_t{1} << 40, int64_t{1} << 40}) == "the shape [1099511627776,1099511627776] is too large");
}
