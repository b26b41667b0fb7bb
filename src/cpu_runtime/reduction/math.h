// exp of max-shifted values, vectorized: the inner loop of Softmax and LogSoftmax.
//
// The compiler cannot vectorize std::exp (no vector libm without -ffast-math), and a scalar
// call per element made Softmax several times slower than a reduction over the same bytes.
// The arguments here are x - max(row) <= 0 (or NaN), which keeps the float routine simple:
// exp(r + n ln2) = 2^n exp(r) with |r| <= ln2 / 2, exp(r) by its degree-7 Taylor polynomial
// (truncation error below 6e-9: results within about one ulp of the exact value), and 2^n
// built in the exponent bits. Arguments below -87 (including -inf) give 0; NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>

namespace fusionopt::cpu::reduction {

// out[i] = exp(in[i] - shift) where in[i] <= shift (or NaN); `in` may be `out`. Runs on the
// active vector instruction set (engine/vector_isa.h: SSE2, AVX2 or AVX-512) with the same
// operations (no FMA) on each, so results do not depend on the machine.
void ExpShifted(const float* in, float shift, float* out, int64_t n);

inline void ExpShifted(const double* in, double shift, double* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp(in[i] - shift);
}

template <typename F>
void ExpNonPositiveInPlace(F* values, int64_t n) {
  ExpShifted(values, F(0), values, n);
}

}  // namespace fusionopt::cpu::reduction
