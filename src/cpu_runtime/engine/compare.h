// Output comparison with explicit tolerances, Polygraphy-style: besides pass/fail it reports
// the smallest tolerance that would have passed, so a user can tell noise from a bug.
#pragma once

#include <map>
#include <string>

#include "cpu_runtime/engine/rt_tensor.h"

namespace fusionopt::cpu {

// An output of a quantized model moves by whole quantization steps where two correct engines
// round one value on either side of a boundary: there `quantization_steps` steps of the output's
// quantization are allowed besides atol and rtol. `step` holds the size of one step per output
// name (verify/quantization_steps.h fills it from the reference model): a positive size, or a
// negative entry for "an 8-bit step of the reference output's range". Outputs absent from it get
// rtol and atol alone, as every output of a float model does.
struct Tolerance {
  Tolerance() = default;
  // Positional, as most callers state only rtol and atol.
  Tolerance(double relative, double absolute, double steps = 2)
      : rtol(relative), atol(absolute), quantization_steps(steps) {}

  double rtol = 1e-4;
  double atol = 1e-5;
  double quantization_steps = 2;
  std::map<std::string, double> step;

  // The absolute allowance besides atol for output `name` against its reference `expected`.
  double QuantizationAllowance(const std::string& name, const RtTensor& expected) const;
  // "rtol 1e-4, atol 1e-5" and, where steps apply, ", 2 quantization steps".
  std::string Describe() const;
};

struct Comparison {
  bool same_shape = true;
  bool same_dtype = true;
  bool passed = true;         // |a - b| <= atol + rtol * |b| everywhere (NaN == NaN)
  double max_abs_error = 0;   // over all elements
  double max_rel_error = 0;   // |a - b| / |b| where b != 0
  double required_atol = 0;   // smallest atol that passes with the given rtol
  double required_rtol = 0;   // smallest rtol that passes with the given atol
  int64_t mismatches = 0;
  int64_t first_mismatch = -1;
};

// `actual` against `expected` (the reference is the second argument: rel errors divide by it);
// `name`, the output's, selects its quantization allowance.
Comparison Compare(const RtTensor& actual, const RtTensor& expected, const Tolerance& tolerance,
                   const std::string& name = {});

}  // namespace fusionopt::cpu
