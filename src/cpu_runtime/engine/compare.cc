#include "cpu_runtime/engine/compare.h"

#include <algorithm>
#include <cmath>

namespace fusionopt::cpu {

Comparison Compare(const RtTensor& actual, const RtTensor& expected, const Tolerance& tolerance) {
  Comparison result;
  result.same_dtype = actual.dtype() == expected.dtype();
  result.same_shape = actual.dims() == expected.dims();
  if (!result.same_dtype || !result.same_shape) {
    result.passed = false;
    return result;
  }
  int64_t count = actual.NumElements();
  for (int64_t i = 0; i < count; ++i) {
    double a = actual.ValueAsDouble(i), b = expected.ValueAsDouble(i);
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) {
        ++result.mismatches;
        if (result.first_mismatch < 0) result.first_mismatch = i;
        result.max_abs_error = INFINITY;
      }
      continue;
    }
    if (a == b) continue;  // also equal infinities
    double error = std::abs(a - b);
    result.max_abs_error = std::max(result.max_abs_error, error);
    if (b != 0) result.max_rel_error = std::max(result.max_rel_error, error / std::abs(b));
    result.required_atol = std::max(result.required_atol, error - tolerance.rtol * std::abs(b));
    result.required_rtol = std::max(result.required_rtol,
                                    b != 0 ? (error - tolerance.atol) / std::abs(b) : (error > tolerance.atol ? INFINITY : 0));
    if (!(error <= tolerance.atol + tolerance.rtol * std::abs(b))) {
      ++result.mismatches;
      if (result.first_mismatch < 0) result.first_mismatch = i;
    }
  }
  result.passed = result.mismatches == 0;
  return result;
}

}  // namespace fusionopt::cpu
