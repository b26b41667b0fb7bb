// Which elementwise nodes the CPU elementwise engine can evaluate inside a fused body
// (src/cpu_runtime/elementwise.h, the op table in kernels_elementwise.cc): a fused group must
// hold only those, or the fused kernel could not be compiled and would fall back to running
// the body op by op — a fusion that costs instead of saving.
//
// The rules mirror the engine: registers are float (float, float16, bfloat16), double, int64
// (every integer type) or bool; logical ops take bool, bitwise ops and integer Mod take
// integers, arithmetic takes anything but bool, transcendental functions and activations take
// floating point. Legacy op versions (opset < 7: broadcasting along an `axis`) never qualify.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace fusionopt::passes {

// Whether the engine holds values of `dtype` in registers.
bool EngineComputes(DataType dtype);

// Why the engine cannot evaluate `node` (an elementwise op of the default domain) under the
// model's default-domain `opset`, as a short stable reason; empty when it can.
std::string WhyEngineCannotEvaluate(const Node& node, int64_t opset);

}  // namespace fusionopt::passes
