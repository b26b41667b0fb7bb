// Shared pieces of the row-reduction kernel family (DESIGN.md §5, family 2): how each element
// type is computed, dtype dispatch, the parallelism threshold, and the family's internal
// registration functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_runtime/engine/kernel.h"
#include "ir/float16.h"

namespace fusionopt::cpu::reduction {

// float16, bfloat16 and bool storage, told apart by type so templates convert each correctly.
struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};
struct Bool {
  uint8_t value;
};

// How an element type is computed: the accumulator type, conversions both ways, and the
// identities of max/min (what ONNX returns for a reduction over an empty set). Narrow floats
// compute in float; integers accumulate in int64 so sums and products wrap only once, on
// the final store, exactly as the element type's own arithmetic would.
template <typename T>
struct Elem;

template <typename F>
struct FloatElem {
  using Acc = F;
  static Acc Load(F value) { return value; }
  static F Store(Acc value) { return value; }
  static Acc Lowest() { return -std::numeric_limits<Acc>::infinity(); }
  static Acc Highest() { return std::numeric_limits<Acc>::infinity(); }
};
template <>
struct Elem<float> : FloatElem<float> {};
template <>
struct Elem<double> : FloatElem<double> {};

template <>
struct Elem<Half> {
  using Acc = float;
  static Acc Load(Half value) { return HalfToFloat(value.bits); }
  static Half Store(Acc value) { return Half{FloatToHalf(value)}; }
  static Acc Lowest() { return -std::numeric_limits<Acc>::infinity(); }
  static Acc Highest() { return std::numeric_limits<Acc>::infinity(); }
};

template <>
struct Elem<BFloat> {
  using Acc = float;
  static Acc Load(BFloat value) { return BFloat16ToFloat(value.bits); }
  static BFloat Store(Acc value) { return BFloat{FloatToBFloat16(value)}; }
  static Acc Lowest() { return -std::numeric_limits<Acc>::infinity(); }
  static Acc Highest() { return std::numeric_limits<Acc>::infinity(); }
};

template <typename I>
struct IntElem {
  using Acc = int64_t;
  static Acc Load(I value) { return static_cast<Acc>(value); }
  static I Store(Acc value) { return static_cast<I>(value); }
  static Acc Lowest() { return std::numeric_limits<I>::lowest(); }
  static Acc Highest() { return std::numeric_limits<I>::max(); }
};
template <>
struct Elem<int64_t> : IntElem<int64_t> {};
template <>
struct Elem<int32_t> : IntElem<int32_t> {};
template <>
struct Elem<int8_t> : IntElem<int8_t> {};
template <>
struct Elem<uint8_t> : IntElem<uint8_t> {};

template <>
struct Elem<Bool> {
  using Acc = int64_t;
  static Acc Load(Bool value) { return value.value != 0; }
  static Bool Store(Acc value) { return Bool{static_cast<uint8_t>(value != 0)}; }
  static Acc Lowest() { return 0; }
  static Acc Highest() { return 1; }
};

template <typename T>
using AccOf = typename Elem<T>::Acc;

// Whole runs between the storage and the compute type: the 16-bit floats through the bulk
// conversions (ir/float16.h: F16C for half), which per-element Load/Store calls cannot use,
// every other type element by element.
template <typename T>
void LoadElements(const T* in, AccOf<T>* out, int64_t n) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat>) {
    SixteenBitToFloatN(std::is_same_v<T, BFloat>, reinterpret_cast<const uint16_t*>(in), out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Elem<T>::Load(in[i]);
  }
}
template <typename T>
void StoreElements(const AccOf<T>* in, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat>) {
    FloatToSixteenBitN(std::is_same_v<T, BFloat>, in, reinterpret_cast<uint16_t*>(out), n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Elem<T>::Store(in[i]);
  }
}
// Each value as the storage type would keep it (a no-op where they are the same type).
template <typename T>
void RoundElements(AccOf<T>* values, int64_t n) {
  if constexpr (std::is_same_v<T, Half>) {
    RoundThroughHalfN(values, n);
  } else if constexpr (!std::is_same_v<T, AccOf<T>>) {
    for (int64_t i = 0; i < n; ++i) values[i] = Elem<T>::Load(Elem<T>::Store(values[i]));
  }
}

template <typename A>
bool IsNan(A value) {
  if constexpr (std::is_floating_point_v<A>) {
    return value != value;  // not std::isnan: this form vectorizes
  } else {
    return false;
  }
}

// max/min that propagate NaN, as numpy's maximum.reduce does (and so the ONNX references).
// `|` rather than `||`: without a branch the compiler vectorizes the reduction loop.
template <typename A>
A MaxOf(A a, A b) {
  return ((b > a) | IsNan(b)) ? b : a;
}
template <typename A>
A MinOf(A a, A b) {
  return ((b < a) | IsNan(b)) ? b : a;
}

struct TakeMax {
  template <typename A>
  A operator()(A a, A b) const {
    return MaxOf(a, b);
  }
};
struct TakeMin {
  template <typename A>
  A operator()(A a, A b) const {
    return MinOf(a, b);
  }
};

// Whether `value` at a later index replaces `best` in an ArgMax (kMax) / ArgMin scan. Ties
// keep the first index unless `select_last`; a NaN wins like numpy's argmax (the first NaN,
// or the last with `select_last`).
template <bool kMax, typename A>
bool Improves(A value, A best, bool select_last) {
  if (IsNan(value)) return !IsNan(best) || select_last;
  if (IsNan(best)) return false;
  if (select_last) return kMax ? value >= best : value <= best;
  return kMax ? value > best : value < best;
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Element-type families a kernel accepts, combined as a bit set.
enum TypeSet : unsigned {
  kFloatTypes = 1,     // float, double, float16, bfloat16
  kWideIntTypes = 2,   // int32, int64
  kNarrowIntTypes = 4, // int8, uint8
  kBoolType = 8,
};

// Whether `dtype` is one of the element-type families in `accepted`.
bool Accepts(DataType dtype, unsigned accepted);
Status UnsupportedType(DataType dtype);

// Calls body(TypeTag<T>{}) with the storage type of `dtype`, instantiating the body only for
// the families in kAccepted; Unsupported for any other dtype.
template <unsigned kAccepted, typename Body>
Status DispatchType(DataType dtype, Body&& body) {
  if constexpr ((kAccepted & kFloatTypes) != 0) {
    if (dtype == DataType::kFloat) return body(TypeTag<float>{});
    if (dtype == DataType::kDouble) return body(TypeTag<double>{});
    if (dtype == DataType::kFloat16) return body(TypeTag<Half>{});
    if (dtype == DataType::kBFloat16) return body(TypeTag<BFloat>{});
  }
  if constexpr ((kAccepted & kWideIntTypes) != 0) {
    if (dtype == DataType::kInt32) return body(TypeTag<int32_t>{});
    if (dtype == DataType::kInt64) return body(TypeTag<int64_t>{});
  }
  if constexpr ((kAccepted & kNarrowIntTypes) != 0) {
    if (dtype == DataType::kInt8) return body(TypeTag<int8_t>{});
    if (dtype == DataType::kUint8) return body(TypeTag<uint8_t>{});
  }
  if constexpr ((kAccepted & kBoolType) != 0) {
    if (dtype == DataType::kBool) return body(TypeTag<Bool>{});
  }
  return UnsupportedType(dtype);
}

// Rejects at prepare time an input whose declared dtype the kernel cannot compute.
Status CheckDeclaredType(const KernelInfo& info, size_t input, unsigned accepted);
// The input's rank when the model declares it.
std::optional<int64_t> DeclaredRank(const KernelInfo& info, size_t input);
// Rejects at prepare time an `axis` outside the rank the model declares for input 0.
Status CheckAxisAgainstDeclaredRank(const KernelInfo& info, int64_t axis);

template <typename T>
const T* DataOf(const RtTensor& tensor) {
  return reinterpret_cast<const T*>(tensor.raw());
}
template <typename T>
T* MutableDataOf(RtTensor& tensor) {
  return reinterpret_cast<T*>(tensor.raw());
}

// Below this many elements a kernel runs on one thread: a parallel region costs microseconds.
constexpr int64_t kParallelMinElements = int64_t{1} << 15;

// Product of dims[begin, end).
int64_t ProductOf(const std::vector<int64_t>& dims, size_t begin, size_t end);

void RegisterReduceKernels(KernelRegistry& registry);         // reduction/kernels.cc
void RegisterArgReduceKernels(KernelRegistry& registry);      // reduction/arg.cc
void RegisterSoftmaxKernels(KernelRegistry& registry);        // reduction/softmax.cc
void RegisterNormalizationKernels(KernelRegistry& registry);  // reduction/norm.cc

}  // namespace fusionopt::cpu::reduction
