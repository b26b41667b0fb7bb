#include "cpu_runtime/engine/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fusionopt::cpu {

double Tolerance::QuantizationAllowance(const std::string& name, const RtTensor& expected) const {
  auto it = step.find(name);
  if (it == step.end() || quantization_steps <= 0) return 0;
  if (it->second > 0) return quantization_steps * it->second;
  double low = INFINITY, high = -INFINITY;
  for (int64_t i = 0; i < expected.NumElements(); ++i) {
    const double value = expected.ValueAsDouble(i);
    if (!std::isfinite(value)) continue;
    low = std::min(low, value);
    high = std::max(high, value);
  }
  return high > low ? quantization_steps * (high - low) / 255.0 : 0;
}

namespace {

// 1e-4 rather than %g's 0.0001: how the options' defaults are written everywhere else.
std::string Short(double value) {
  char text[32];
  if (value != 0 && std::abs(value) < 1e-3) {
    std::snprintf(text, sizeof(text), "%.0e", value);
    std::string written = text;  // "1e-04"
    const size_t exponent = written.find("e-0");
    if (exponent != std::string::npos) written.erase(exponent + 2, 1);
    return written;
  }
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

}  // namespace

std::string Tolerance::Describe() const {
  char text[96];
  std::string described = "rtol " + Short(rtol) + ", atol " + Short(atol);
  if (!step.empty() && quantization_steps > 0) {
    std::snprintf(text, sizeof(text), ", %g quantization steps", quantization_steps);
    described += text;
  }
  return described;
}

Comparison Compare(const RtTensor& actual, const RtTensor& expected, const Tolerance& given, const std::string& name) {
  Tolerance tolerance = given;
  tolerance.atol += given.QuantizationAllowance(name, expected);
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
