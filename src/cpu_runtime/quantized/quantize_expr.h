// QuantizeLinear and DequantizeLinear as expressions of the elementwise engine — the one
// mapping the single-op kernels (quantized/quantize_linear.cc), the QLinear elementwise ops and
// fused bodies share — and the packed types the engine does not compute (4- and 2-bit
// integers, minifloats), which kernels unpack before and pack after the engine.
//
//   Quantize:   y = clamp(round_half_even(x / scale) + zero_point, lo, hi)   (kQuantize)
//               a minifloat: y = x / scale + zero_point, rounded when packed
//   Dequantize: y = float(int64(x) - int64(zero_point)) * scale             (exact difference)
#pragma once

#include <map>
#include <mutex>
#include <optional>

#include "cpu_runtime/elementwise/expr.h"
#include "cpu_runtime/engine/allocator.h"
#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

// The values an integer type quantizes to: [-128, 127] for int8, [0, 15] for uint4, ...
struct QuantRange {
  double lo = 0;
  double hi = 0;
};
std::optional<QuantRange> IntegerRange(DataType type);

// The type whose registers hold `type`'s values while the engine computes: `type` itself
// where the engine computes it, int8/uint8 for 4- and 2-bit integers, float for minifloats.
DataType ComputeStandIn(DataType type);
bool IsPacked(DataType type);  // ComputeStandIn(type) != type

// y = Quantize(x, scale[, zero_point]) into `target` (a type the engine computes: an 8- or
// 16-bit integer, or float for a minifloat target) saturating to `range` (integers only).
// The division runs in `precision` (QuantizeLinear-23's attribute, else the scale's type): a
// float16/bfloat16 precision rounds the quotient to it first. Operands: x, scale, zero point
// (-1 when omitted).
ExprBuilder QuantizeExpr(DataType target, std::optional<QuantRange> range, std::optional<DataType> precision);

// y = Dequantize(x, scale[, zero_point]) as `output` (float, float16 or bfloat16).
ExprBuilder DequantizeExpr(DataType output);

// The expression of a QuantizeLinear or DequantizeLinear node inside an elementwise program
// (a fused group): per tensor only — a per-axis or blocked scale needs the views the single-op
// kernel makes (quantize_linear.cc) — and into a type the engine computes (8- or 16-bit
// integers). An error names what stands in the way.
Result<ExprBuilder> LinearQuantizationExpr(const KernelInfo& info);

// Programs of one expression by the operands' types (and which are present), built once each:
// what a kernel keeps between runs.
class ExprPrograms {
 public:
  Result<const ew::Program*> Get(const std::vector<DataType>& dtypes, const std::vector<int>& registers,
                                 const ExprBuilder& expr, const std::string& label);

 private:
  std::mutex mutex_;
  std::map<std::vector<int>, ew::Program> programs_;
};

// `packed` (a 4- or 2-bit integer or minifloat tensor) as its stand-in type, in a fresh
// tensor; any other tensor is returned as it is.
RtTensor Unpacked(const RtTensor& packed, Allocator& allocator);
// Writes `stand_in` (ComputeStandIn(packed.dtype()) values of the same count) into `packed`;
// minifloats round to nearest even and overflow as FloatToMinifloat(saturate) says.
void Pack(const RtTensor& stand_in, RtTensor& packed, bool saturate);

}  // namespace fusionopt::cpu
