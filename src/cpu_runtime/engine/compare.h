// Output comparison with explicit tolerances, Polygraphy-style: besides pass/fail it reports
// the smallest tolerance that would have passed, so a user can tell noise from a bug.
#pragma once

#include <string>

#include "cpu_runtime/engine/rt_tensor.h"

namespace fusionopt::cpu {

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
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

// `actual` against `expected` (the reference is the second argument: rel errors divide by it).
Comparison Compare(const RtTensor& actual, const RtTensor& expected, const Tolerance& tolerance);

}  // namespace fusionopt::cpu
