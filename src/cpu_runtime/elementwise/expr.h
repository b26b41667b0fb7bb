// ONNX elementwise ops as expressions of the elementwise engine (elementwise/kernels.cc): the
// one mapping from an op and its attributes to engine instructions, shared by the kernel of a
// single op and the fused elementwise programs (fused/body.h), so both compute alike.
#pragma once

#include <functional>
#include <vector>

#include "cpu_runtime/elementwise/elementwise.h"
#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

// Builds the op's expression from the registers of its inputs (-1 for an omitted input) and
// returns the register of its result.
using ExprBuilder = std::function<Result<int>(ew::ProgramBuilder&, const std::vector<int>&)>;

// The expression of the elementwise op `info.node` at `info.opset`, checked against the
// rules of its opset (legacy_opsets.h); an error for ops that are not elementwise. CastLike
// gives an empty builder: its target type is the second operand's, known per run.
Result<ExprBuilder> ElementwiseExpr(const KernelInfo& info);

// Cast to `to` (nothing when the operand already has that type).
ExprBuilder CastExpr(DataType to);

}  // namespace fusionopt::cpu
