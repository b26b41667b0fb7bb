// Semantics of each elementwise instruction on one tile of registers.
//
// This file compiles three times: as itself for the baseline ISA, through
// elementwise/ops_avx2.cc with FUSIONOPT_EW_AVX2 for 8 float lanes (2.7x faster on the
// tanh GELU), and through elementwise/ops_avx512.cc with FUSIONOPT_EW_AVX512 for 16 (GCC's
// default for AVX-512 targets is 256-bit vectors; this build asks for 512). The target pragma
// starts after the includes, so the headers' inline functions stay baseline code — the linker
// can never hand a baseline caller an AVX2 copy of one — and everything defined below has
// internal linkage except the one entry point it names.
//
// Results must not depend on the instruction set (constant folding runs these ops, and the
// optimized model must not change with the host): no build lets GCC contract a·b + c on its
// own, and where a fused multiply-add pays (the exponential's polynomial) it is written as
// FusedMultiplyAdd, exactly rounded everywhere — one instruction in the wide builds (both
// target FMA; elementwise/lanes.cc picks them only on CPUs that have it), a libm call in the
// baseline build, which runs only on CPUs without AVX2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_runtime/elementwise/internal.h"

#if defined(FUSIONOPT_EW_AVX2)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define FUSIONOPT_EW_EXECUTE ExecuteAvx2
#elif defined(FUSIONOPT_EW_AVX512)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,prefer-vector-width=512")
#define FUSIONOPT_EW_EXECUTE ExecuteAvx512
#else
#define FUSIONOPT_EW_EXECUTE ExecuteBaseline
#endif

namespace fusionopt::cpu::ew {
namespace {

template <typename T, typename F>
void Unary(T* dst, const T* a, int n, F f) {
  for (int i = 0; i < n; ++i) dst[i] = f(a[i]);
}

template <typename T, typename F>
void Binary(T* dst, const T* a, const T* b, int n, F f) {
  for (int i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <typename T, typename F>
void Compare(uint8_t* dst, const T* a, const T* b, int n, F f) {
  for (int i = 0; i < n; ++i) dst[i] = f(a[i], b[i]) ? 1 : 0;
}

template <typename T, typename F>
void Predicate(uint8_t* dst, const T* a, int n, F f) {
  for (int i = 0; i < n; ++i) dst[i] = f(a[i]) ? 1 : 0;
}

// erf for float lanes without a libm call, so the loop vectorizes: erf(x) = x·P(x²)/Q(x²) on
// |x| < 3.9 (beyond, erf is 1 to within 4e-8), a rational fit made for this runtime by weighted
// least squares on [0, 4]. Relative error ≤ 3.6e-7 (≤ 6 ulp) against the exact erf over
// [-5, 5] in float32 arithmetic; NaN stays NaN, ±inf gives ±1.
inline float ErfFloat(float x) {
  const float a = std::min(std::abs(x), 4.0f);  // NaN passes through std::min's comparison
  const float t = a * a;
  const float p = ((((((-1.315933659e-08f * t + 4.677675134e-06f) * t + 3.793275894e-04f) * t + 3.847176602e-03f) * t +
                     5.430542396e-02f) * t + 1.851597120e-01f) * t + 1.128379169e+00f);
  const float q = (((((6.304576248e-05f * t + 1.306713746e-03f) * t + 1.545610750e-02f) * t + 1.139353858e-01f) * t +
                    4.974269342e-01f) * t + 1.0f);
  // From 3.9 on the exact erf is within 4e-8 of 1.
  const float r = std::min(a * p / q, 1.0f);  // computed unconditionally: the select vectorizes
  return std::copysign(a >= 3.9f ? 1.0f : r, x);
}

// a·b + c rounded once. The builtin, not std::fma: <cmath>'s inline wrapper is baseline code
// (it precedes the target pragma), which a wide-build loop cannot inline and so calls.
inline float FusedMultiplyAdd(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

// e^x for float lanes without a libm call, so loops over it vectorize: x = n·ln2 + r with
// |r| ≤ ln2/2 (ln2 split Cody–Waite style), e^r by its Taylor series to r^7 (truncation below
// 6e-9 relative) in fused multiply-adds, 2^n written into the exponent bits. Within 2 ulp of
// the exact value from e^-87 (1.6e-38) to ln(FLT_MAX); above that +inf, below it 0 (no
// subnormal results, and the last values above FLT_MIN flush too); NaN stays NaN. Every
// branch is computed and selected, which is what lets the loop vectorize, and the selects are
// few: the instruction count bounds its speed (0.37 ns an element on an AVX-512 core, against
// 0.66 with separate multiplies and adds and a select per special case).
inline float ExpFloat(float x) {
  constexpr float kHigh = 88.7228391f;  // ln(FLT_MAX)
  constexpr float kLow = -87.3365447f;  // ln(FLT_MIN): n = -126 there, whose scale below is 0
  const float clamped = std::min(std::max(x, kLow), kHigh);  // NaN passes through both
  const float rounding = 12582912.0f;                         // 1.5·2^23: adding it rounds to an integer
  const float shifted = FusedMultiplyAdd(clamped, 1.44269504f, rounding);  // 1.5·2^23 + n: n in the low bits
  const float n = shifted - rounding;
  const float r = FusedMultiplyAdd(n, 2.12194440e-4f, FusedMultiplyAdd(n, -0.693359375f, clamped));
  // Written out: a loop over the coefficients keeps GCC from vectorizing the caller.
  float p = FusedMultiplyAdd(1.0f / 5040, r, 1.0f / 720);
  p = FusedMultiplyAdd(p, r, 1.0f / 120);
  p = FusedMultiplyAdd(p, r, 1.0f / 24);
  p = FusedMultiplyAdd(p, r, 1.0f / 6);
  p = FusedMultiplyAdd(p, r, 0.5f);
  p = FusedMultiplyAdd(p, r, 1.0f);
  p = FusedMultiplyAdd(p, r, 1.0f);
  // 2^(n-1)·2 covers n in [-125, 128] without a special case for 2^128; n = -126 gives 0. The
  // integer n is read from `shifted`'s bits, in unsigned arithmetic: a float-to-int conversion
  // would be undefined for NaN, and guarding it cost a quarter of the function. A NaN's bits
  // make some scale; p is NaN, and so is the product.
  uint32_t shifted_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  const uint32_t bits = (shifted_bits - 0x4B400000u + 126u) << 23;
  float half_scale;
  std::memcpy(&half_scale, &bits, sizeof half_scale);
  const float result = p * half_scale * 2.0f;
  return x > kHigh ? HUGE_VALF : result;
}

// 1 / (1 + e^-x) on float lanes through ExpFloat (within 4 ulp); at the other widths through
// libm, split by sign so exp never overflows.
template <typename T>
T Sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return 1.0f / (1.0f + ExpFloat(-x));
  } else {
    return x >= 0 ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
  }
}

// GELU's tanh form 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³), computed as the equal
// x·sigmoid(2u) on float lanes (no cancellation: the sigmoid multiplies x).
template <typename T>
T GeluTanh(T x) {
  const T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  if constexpr (std::is_same_v<T, float>) {
    return x / (1.0f + ExpFloat(-2.0f * u));
  } else {
    return T(0.5) * x * (T(1) + std::tanh(u));
  }
}

// x·sigmoid(αx), as x / (1 + e^(-αx)) on float lanes: one division, no sigmoid register.
template <typename T>
T Swish(T x, T alpha) {
  if constexpr (std::is_same_v<T, float>) {
    return x / (1.0f + ExpFloat(-alpha * x));
  } else {
    return x * Sigmoid(alpha * x);
  }
}

template <typename T>
T Erf(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return ErfFloat(x);
  } else {
    return std::erf(x);
  }
}

// Float ops, shared by float and double lanes.
template <typename T>
bool FloatUnary(const Instr& in, T* d, const T* a, int n) {
  const T alpha = static_cast<T>(in.alpha), beta = static_cast<T>(in.beta);
  switch (in.op) {
    case Op::kReciprocal: Unary(d, a, n, [](T x) { return T(1) / x; }); return true;
    case Op::kFloor: Unary(d, a, n, [](T x) { return std::floor(x); }); return true;
    case Op::kCeil: Unary(d, a, n, [](T x) { return std::ceil(x); }); return true;
    case Op::kRound: Unary(d, a, n, [](T x) { return std::nearbyint(x); }); return true;
    case Op::kSqrt: Unary(d, a, n, [](T x) { return std::sqrt(x); }); return true;
    case Op::kExp: Unary(d, a, n, [](T x) { return std::exp(x); }); return true;
    case Op::kLog: Unary(d, a, n, [](T x) { return std::log(x); }); return true;
    case Op::kErf: Unary(d, a, n, [](T x) { return Erf(x); }); return true;
    case Op::kSin: Unary(d, a, n, [](T x) { return std::sin(x); }); return true;
    case Op::kCos: Unary(d, a, n, [](T x) { return std::cos(x); }); return true;
    case Op::kTan: Unary(d, a, n, [](T x) { return std::tan(x); }); return true;
    case Op::kAsin: Unary(d, a, n, [](T x) { return std::asin(x); }); return true;
    case Op::kAcos: Unary(d, a, n, [](T x) { return std::acos(x); }); return true;
    case Op::kAtan: Unary(d, a, n, [](T x) { return std::atan(x); }); return true;
    case Op::kSinh: Unary(d, a, n, [](T x) { return std::sinh(x); }); return true;
    case Op::kCosh: Unary(d, a, n, [](T x) { return std::cosh(x); }); return true;
    case Op::kTanh: Unary(d, a, n, [](T x) { return std::tanh(x); }); return true;
    case Op::kAsinh: Unary(d, a, n, [](T x) { return std::asinh(x); }); return true;
    case Op::kAcosh: Unary(d, a, n, [](T x) { return std::acosh(x); }); return true;
    case Op::kAtanh: Unary(d, a, n, [](T x) { return std::atanh(x); }); return true;
    case Op::kSigmoid: Unary(d, a, n, [](T x) { return Sigmoid(x); }); return true;
    case Op::kSoftplus:
      Unary(d, a, n, [](T x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); });
      return true;
    case Op::kSoftsign: Unary(d, a, n, [](T x) { return x / (T(1) + std::abs(x)); }); return true;
    case Op::kMish:
      Unary(d, a, n, [](T x) {
        T softplus = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
        return x * std::tanh(softplus);
      });
      return true;
    case Op::kGeluErf:
      Unary(d, a, n, [](T x) { return T(0.5) * x * (T(1) + Erf(x * T(0.70710678118654752440))); });
      return true;
    case Op::kGeluTanh: Unary(d, a, n, [](T x) { return GeluTanh(x); }); return true;
    case Op::kSwish: Unary(d, a, n, [alpha](T x) { return Swish(x, alpha); }); return true;
    case Op::kLeakyRelu: Unary(d, a, n, [alpha](T x) { return x < 0 ? alpha * x : x; }); return true;
    case Op::kElu: Unary(d, a, n, [alpha](T x) { return x < 0 ? alpha * (std::exp(x) - T(1)) : x; }); return true;
    case Op::kSelu:  // alpha, gamma = beta
      Unary(d, a, n, [alpha, beta](T x) { return x <= 0 ? beta * (alpha * std::exp(x) - alpha) : beta * x; });
      return true;
    case Op::kCelu:
      Unary(d, a, n, [alpha](T x) { return std::max(T(0), x) + std::min(T(0), alpha * (std::exp(x / alpha) - T(1))); });
      return true;
    case Op::kThresholdedRelu: Unary(d, a, n, [alpha](T x) { return x > alpha ? x : T(0); }); return true;
    case Op::kHardSigmoid:
      Unary(d, a, n, [alpha, beta](T x) { return std::max(T(0), std::min(T(1), alpha * x + beta)); });
      return true;
    case Op::kHardSwish:
      Unary(d, a, n, [](T x) { return x * std::max(T(0), std::min(T(1), x / T(6) + T(0.5))); });
      return true;
    case Op::kShrink:  // lambd = alpha, bias = beta
      Unary(d, a, n, [alpha, beta](T x) { return x < -alpha ? x + beta : (x > alpha ? x - beta : T(0)); });
      return true;
    default: return false;
  }
}

template <typename T>
bool NumericUnary(const Instr& in, T* d, const T* a, int n) {
  switch (in.op) {
    case Op::kNeg: Unary(d, a, n, [](T x) { return static_cast<T>(-x); }); return true;
    case Op::kAbs: Unary(d, a, n, [](T x) { return x < 0 ? static_cast<T>(-x) : x; }); return true;
    case Op::kSign: Unary(d, a, n, [](T x) { return static_cast<T>((x > 0) - (x < 0)); }); return true;
    case Op::kRelu: Unary(d, a, n, [](T x) { return x < 0 ? T(0) : x; }); return true;  // NaN stays NaN
    default: return false;
  }
}

template <typename T>
bool NumericBinary(const Instr& in, T* d, const T* a, const T* b, int n) {
  switch (in.op) {
    case Op::kAdd: Binary(d, a, b, n, [](T x, T y) { return static_cast<T>(x + y); }); return true;
    case Op::kSub: Binary(d, a, b, n, [](T x, T y) { return static_cast<T>(x - y); }); return true;
    case Op::kMul: Binary(d, a, b, n, [](T x, T y) { return static_cast<T>(x * y); }); return true;
    case Op::kMax:
      Binary(d, a, b, n, [](T x, T y) { return (x != x || y != y) ? x + y : (x > y ? x : y); });
      return true;
    case Op::kMin:
      Binary(d, a, b, n, [](T x, T y) { return (x != x || y != y) ? x + y : (x < y ? x : y); });
      return true;
    case Op::kPRelu: Binary(d, a, b, n, [](T x, T slope) { return x < 0 ? static_cast<T>(slope * x) : x; }); return true;
    default: return false;
  }
}

template <typename T>
bool FloatBinary(const Instr& in, T* d, const T* a, const T* b, int n) {
  switch (in.op) {
    case Op::kDiv: Binary(d, a, b, n, [](T x, T y) { return x / y; }); return true;
    case Op::kPow:
      // Squaring (LayerNorm's variance) is the common case: x * x is what a correctly rounded
      // pow returns for y == 2, at a fraction of the cost.
      Binary(d, a, b, n, [](T x, T y) { return y == T(2) ? x * x : std::pow(x, y); });
      return true;
    case Op::kModFloat: Binary(d, a, b, n, [](T x, T y) { return std::fmod(x, y); }); return true;
    default: return false;
  }
}

bool IntegerBinary(const Instr& in, int64_t* d, const int64_t* a, const int64_t* b, int n) {
  switch (in.op) {
    case Op::kDiv: Binary(d, a, b, n, [](int64_t x, int64_t y) { return y == 0 ? 0 : x / y; }); return true;
    case Op::kPow:
      Binary(d, a, b, n, [](int64_t x, int64_t y) {
        if (y < 0) return x == 1 ? int64_t{1} : (x == -1 ? ((y & 1) ? int64_t{-1} : int64_t{1}) : int64_t{0});
        // Squaring keeps a hostile exponent (2^62) to 62 steps; products wrap like int64.
        uint64_t result = 1, base = static_cast<uint64_t>(x);
        for (uint64_t e = static_cast<uint64_t>(y); e != 0; e >>= 1) {
          if (e & 1) result *= base;
          base *= base;
        }
        return static_cast<int64_t>(result);
      });
      return true;
    case Op::kModInteger:  // sign follows the divisor, like Python's %
      Binary(d, a, b, n, [](int64_t x, int64_t y) {
        if (y == 0) return int64_t{0};
        int64_t r = x % y;
        return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
      });
      return true;
    case Op::kModFloat:  // fmod=1 on integers: sign follows the dividend
      Binary(d, a, b, n, [](int64_t x, int64_t y) { return y == 0 ? 0 : x % y; });
      return true;
    case Op::kBitShiftLeft:
      Binary(d, a, b, n, [](int64_t x, int64_t y) {
        return y >= 64 ? int64_t{0} : static_cast<int64_t>(static_cast<uint64_t>(x) << y);
      });
      return true;
    case Op::kBitShiftRight:
      Binary(d, a, b, n, [](int64_t x, int64_t y) {
        return y >= 64 ? int64_t{0} : static_cast<int64_t>(static_cast<uint64_t>(x) >> y);
      });
      return true;
    case Op::kBitwiseAnd: Binary(d, a, b, n, [](int64_t x, int64_t y) { return x & y; }); return true;
    case Op::kBitwiseOr: Binary(d, a, b, n, [](int64_t x, int64_t y) { return x | y; }); return true;
    case Op::kBitwiseXor: Binary(d, a, b, n, [](int64_t x, int64_t y) { return x ^ y; }); return true;
    default: return false;
  }
}

template <typename T>
bool Comparison(const Instr& in, uint8_t* d, const T* a, const T* b, int n) {
  switch (in.op) {
    case Op::kEqual: Compare(d, a, b, n, [](T x, T y) { return x == y; }); return true;
    case Op::kLess: Compare(d, a, b, n, [](T x, T y) { return x < y; }); return true;
    case Op::kLessOrEqual: Compare(d, a, b, n, [](T x, T y) { return x <= y; }); return true;
    case Op::kGreater: Compare(d, a, b, n, [](T x, T y) { return x > y; }); return true;
    case Op::kGreaterOrEqual: Compare(d, a, b, n, [](T x, T y) { return x >= y; }); return true;
    default: return false;
  }
}

template <typename T>
bool FloatPredicate(const Instr& in, uint8_t* d, const T* a, int n) {
  switch (in.op) {
    case Op::kIsNaN: Predicate(d, a, n, [](T x) { return std::isnan(x); }); return true;
    case Op::kIsInf: Predicate(d, a, n, [](T x) { return std::isinf(x); }); return true;
    case Op::kIsInfPositive: Predicate(d, a, n, [](T x) { return std::isinf(x) && x > 0; }); return true;
    case Op::kIsInfNegative: Predicate(d, a, n, [](T x) { return std::isinf(x) && x < 0; }); return true;
    default: return false;
  }
}

bool Logical(const Instr& in, uint8_t* d, const uint8_t* a, const uint8_t* b, int n) {
  switch (in.op) {
    case Op::kAnd: Binary(d, a, b, n, [](uint8_t x, uint8_t y) -> uint8_t { return x && y; }); return true;
    case Op::kOr: Binary(d, a, b, n, [](uint8_t x, uint8_t y) -> uint8_t { return x || y; }); return true;
    case Op::kXor: Binary(d, a, b, n, [](uint8_t x, uint8_t y) -> uint8_t { return (x != 0) != (y != 0); }); return true;
    case Op::kNot: Unary(d, a, n, [](uint8_t x) -> uint8_t { return !x; }); return true;
    default: return false;
  }
}

template <typename T>
void Select(T* d, const uint8_t* cond, const T* x, const T* y, int n) {
  for (int i = 0; i < n; ++i) d[i] = cond[i] ? x[i] : y[i];
}

template <typename T>
void ClipValues(T* d, const T* x, const T* lo, const T* hi, int n) {
  for (int i = 0; i < n; ++i) {
    T v = x[i] < lo[i] ? lo[i] : x[i];
    d[i] = v > hi[i] ? hi[i] : v;
  }
}

void QuantizeValues(float* d, const float* x, const float* scale, const float* zero_point, float lo, float hi,
                    int n) {
  for (int i = 0; i < n; ++i) {
    const float v = std::nearbyint(x[i] / scale[i]) + zero_point[i];
    // max(lo, v) in this order sends NaN to lo.
    d[i] = std::min(std::max(lo, v), hi);
  }
}

template <typename From, typename To>
void ConvertValues(To* d, const From* a, int n) {
  for (int i = 0; i < n; ++i) d[i] = static_cast<To>(a[i]);
}

template <typename From>
void ConvertFrom(Lane to, void* d, const From* a, int n) {
  switch (to) {
    case Lane::kF32: ConvertValues(static_cast<float*>(d), a, n); break;
    case Lane::kF64: ConvertValues(static_cast<double*>(d), a, n); break;
    case Lane::kI64: ConvertValues(static_cast<int64_t*>(d), a, n); break;
    case Lane::kBool:
      for (int i = 0; i < n; ++i) static_cast<uint8_t*>(d)[i] = a[i] != From(0);
      break;
  }
}

void Convert(const TileRegisters& regs, const Instr& in, int n) {
  Lane from = regs.lane(in.a), to = regs.lane(in.dst);
  void* d = regs.ptr(in.dst);
  switch (from) {
    case Lane::kF32: ConvertFrom(to, d, regs.at<float>(in.a), n); break;
    case Lane::kF64: ConvertFrom(to, d, regs.at<double>(in.a), n); break;
    case Lane::kI64: ConvertFrom(to, d, regs.at<int64_t>(in.a), n); break;
    case Lane::kBool: ConvertFrom(to, d, regs.at<uint8_t>(in.a), n); break;
  }
  RoundToStorage(regs.dtype(in.dst), d, n);
}

template <typename T>
bool ExecuteTyped(const TileRegisters& regs, const Instr& in, int n) {
  T* d = regs.at<T>(in.dst);
  const T* a = regs.at<T>(in.a);
  if (in.b < 0) {
    if (NumericUnary(in, d, a, n)) return true;
    if constexpr (std::is_floating_point_v<T>) return FloatUnary(in, d, a, n);
    if constexpr (std::is_same_v<T, int64_t>) {
      if (in.op == Op::kBitwiseNot) { Unary(d, a, n, [](int64_t x) { return ~x; }); return true; }
    }
    return false;
  }
  const T* b = regs.at<T>(in.b);
  if (NumericBinary(in, d, a, b, n)) return true;
  if constexpr (std::is_floating_point_v<T>) return FloatBinary(in, d, a, b, n);
  if constexpr (std::is_same_v<T, int64_t>) return IntegerBinary(in, d, a, b, n);
  return false;
}

template <typename T>
bool ExecuteToBool(const TileRegisters& regs, const Instr& in, int n) {
  uint8_t* d = regs.at<uint8_t>(in.dst);
  if (in.b >= 0) return Comparison(in, d, regs.at<T>(in.a), regs.at<T>(in.b), n);
  if constexpr (std::is_floating_point_v<T>) return FloatPredicate(in, d, regs.at<T>(in.a), n);
  return false;
}

template <typename T>
void ExecuteSelectOrClip(const TileRegisters& regs, const Instr& in, int n) {
  if (in.op == Op::kWhere) {
    Select(regs.at<T>(in.dst), regs.at<uint8_t>(in.a), regs.at<T>(in.b), regs.at<T>(in.c), n);
  } else {
    ClipValues(regs.at<T>(in.dst), regs.at<T>(in.a), regs.at<T>(in.b), regs.at<T>(in.c), n);
  }
}

template <typename F>
bool DispatchLane(Lane lane, F&& f) {
  switch (lane) {
    case Lane::kF32: return f(float{});
    case Lane::kF64: return f(double{});
    case Lane::kI64: return f(int64_t{});
    case Lane::kBool: return f(uint8_t{});
  }
  return false;
}

void Fill(const TileRegisters& regs, const Instr& in, int n) {
  void* d = regs.ptr(in.dst);
  switch (regs.lane(in.dst)) {
    case Lane::kF32: std::fill_n(static_cast<float*>(d), n, static_cast<float>(in.value)); break;
    case Lane::kF64: std::fill_n(static_cast<double*>(d), n, in.value); break;
    case Lane::kI64: std::fill_n(static_cast<int64_t*>(d), n, static_cast<int64_t>(in.value)); break;
    case Lane::kBool: std::fill_n(static_cast<uint8_t*>(d), n, in.value != 0.0); break;
  }
  RoundToStorage(regs.dtype(in.dst), d, n);
}

void LookUp(const TileRegisters& regs, const Instr& in, int n) {
  const int64_t* index = regs.at<int64_t>(in.a);
  DispatchLane(regs.lane(in.dst), [&](auto tag) {
    using T = decltype(tag);
    T* d = regs.at<T>(in.dst);
    const T* table = static_cast<const T*>(in.table);
    for (int i = 0; i < n; ++i) d[i] = table[static_cast<uint8_t>(index[i])];
    return true;
  });
}

}  // namespace

void FUSIONOPT_EW_EXECUTE(const TileRegisters& regs, const Instr& in, int n) {
  if (in.op == Op::kConvert) return Convert(regs, in, n);
  if (in.op == Op::kLookup) return LookUp(regs, in, n);
  if (in.op == Op::kFill) return Fill(regs, in, n);
  Lane dst = regs.lane(in.dst);
  if (in.op == Op::kQuantize) {
    QuantizeValues(regs.at<float>(in.dst), regs.at<float>(in.a), regs.at<float>(in.b), regs.at<float>(in.c), in.alpha,
                   in.beta, n);
  } else if (in.op == Op::kWhere || in.op == Op::kClip) {
    DispatchLane(dst, [&](auto tag) {
      ExecuteSelectOrClip<decltype(tag)>(regs, in, n);
      return true;
    });
  } else if (dst == Lane::kBool && regs.lane(in.a) != Lane::kBool) {
    bool done = DispatchLane(regs.lane(in.a), [&](auto tag) { return ExecuteToBool<decltype(tag)>(regs, in, n); });
    FUSIONOPT_CHECK(done, "instruction validated by the builder");
  } else if (dst == Lane::kBool) {
    bool done = Logical(in, regs.at<uint8_t>(in.dst), regs.at<uint8_t>(in.a),
                        in.b >= 0 ? regs.at<uint8_t>(in.b) : nullptr, n) ||
                Comparison(in, regs.at<uint8_t>(in.dst), regs.at<uint8_t>(in.a),
                           in.b >= 0 ? regs.at<uint8_t>(in.b) : regs.at<uint8_t>(in.a), n);
    FUSIONOPT_CHECK(done, "instruction validated by the builder");
  } else {
    bool done = DispatchLane(dst, [&](auto tag) {
      if constexpr (std::is_same_v<decltype(tag), uint8_t>) return false;
      else return ExecuteTyped<decltype(tag)>(regs, in, n);
    });
    FUSIONOPT_CHECK(done, "instruction validated by the builder");
  }
  RoundToStorage(regs.dtype(in.dst), regs.ptr(in.dst), n);
}

#if !defined(FUSIONOPT_EW_AVX2) && !defined(FUSIONOPT_EW_AVX512)
bool Supports(Op op, Lane operand, Lane result) {
  // Must agree with what Execute implements for each lane; the builder calls it so that an
  // unsupported combination is an error at prepare time, never a failed check at run time.
  switch (op) {
    case Op::kConvert: case Op::kWhere: case Op::kClip: case Op::kFill: return true;
    case Op::kLookup: return operand == Lane::kI64;
    case Op::kQuantize: return operand == Lane::kF32 && result == Lane::kF32;
    case Op::kEqual: case Op::kLess: case Op::kLessOrEqual: case Op::kGreater: case Op::kGreaterOrEqual:
      return true;
    case Op::kAnd: case Op::kOr: case Op::kXor: case Op::kNot: return operand == Lane::kBool;
    case Op::kIsNaN: case Op::kIsInf: case Op::kIsInfPositive: case Op::kIsInfNegative:
      return operand == Lane::kF32 || operand == Lane::kF64;
    case Op::kNeg: case Op::kAbs: case Op::kSign: case Op::kRelu: case Op::kAdd: case Op::kSub:
    case Op::kMul: case Op::kMax: case Op::kMin: case Op::kPRelu: case Op::kDiv: case Op::kPow:
    case Op::kModFloat:
      return result != Lane::kBool;
    case Op::kModInteger: case Op::kBitShiftLeft: case Op::kBitShiftRight: case Op::kBitwiseAnd:
    case Op::kBitwiseOr: case Op::kBitwiseXor: case Op::kBitwiseNot:
      return result == Lane::kI64;
    default:  // transcendental and activation functions
      return result == Lane::kF32 || result == Lane::kF64;
  }
}

#endif  // the baseline build

}  // namespace fusionopt::cpu::ew

#if defined(FUSIONOPT_EW_AVX2) || defined(FUSIONOPT_EW_AVX512)
#pragma GCC pop_options
#endif
