// Regression tests for bugs found by the fuzzers and the ASan + UBSan build (docs/robustness.md,
// "Fuzzing and sanitizers"). Use-after-free findings have no portable unit-level symptom: their
// reproducers are in tests/fuzz/regressions/, replayed under the sanitizers by ctest.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "cpu_runtime/engine/rt_tensor.h"
#include "ir/tensor.h"

using namespace fusionopt;

namespace {

cpu::RtTensor Wrap(Tensor tensor) { return cpu::RtTensor::WrapConstant(std::make_shared<const Tensor>(std::move(tensor))); }

}  // namespace

TEST_CASE("ToInt64s saturates floats beyond int64 instead of undefined conversion", "[fuzz_findings]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto values = Wrap(Tensor::FromValues<float>(DataType::kFloat, {5}, {1e30f, -1e30f, nan, 3.7f, -2.5f})).ToInt64s();
  REQUIRE(values == std::vector<int64_t>{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 0,
                                         3, -2});
}

TEST_CASE("ToInt64s copies int64 exactly, INT64_MAX included", "[fuzz_findings]") {
  const int64_t max = std::numeric_limits<int64_t>::max();
  auto values = Wrap(Tensor::FromValues<int64_t>(DataType::kInt64, {3}, {max, -5, max - 1})).ToInt64s();
  REQUIRE(values == std::vector<int64_t>{max, -5, max - 1});
}

TEST_CASE("ToInt64s of an empty tensor reads no storage", "[fuzz_findings]") {
  REQUIRE(Wrap(Tensor::FromValues<int64_t>(DataType::kInt64, {0}, {})).ToInt64s().empty());
  REQUIRE(Wrap(Tensor::FromValues<float>(DataType::kFloat, {2, 0}, {})).ToInt64s().empty());
}
