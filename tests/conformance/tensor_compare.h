// Comparing a computed tensor with the expected one of an ONNX node test.
#pragma once

#include <optional>
#include <string>

#include "cpu_runtime/engine/compare.h"
#include "cpu_runtime/engine/rt_tensor.h"

namespace fusionopt::conformance {

using cpu::Tolerance;

// ONNX's own backend suite compares node tests with rtol 1e-3, atol 1e-5 (looser in rtol
// than `verify`'s default, as its expected outputs come from numpy in float64).
inline const Tolerance kNodeTestTolerance{1e-3, 1e-5, /*steps=*/0};

// nullopt when `actual` matches `expected`: same dtype and dims; floating-point values within
// atol + rtol·|expected| (NaN matches NaN, an infinity only the same infinity; float16 and
// bfloat16 compared after widening to float); every other dtype bit-exact. Otherwise a
// one-line description: the first differing index (flat and per axis), both values and how
// many elements differ.
std::optional<std::string> CompareTensors(const cpu::RtTensor& expected, const cpu::RtTensor& actual,
                                          const Tolerance& tolerance);

}  // namespace fusionopt::conformance
