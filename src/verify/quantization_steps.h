// How far the outputs of a quantized model may move between two correct engines (issue 43):
// wherever a value lies on a rounding boundary, one engine's last-bit float difference is a
// whole quantization step in the other's, and such steps carry to the outputs. The fail-safe
// check, `verify` and `bench` allow cpu::Tolerance::quantization_steps of them besides rtol and
// atol; an error that big in a float model's output would be a bug, so float models get none.
#pragma once

#include <map>
#include <string>

#include "cpu_runtime/engine/compare.h"
#include "ir/graph.h"

namespace fusionopt::verify {

// The size of one step of each output of `model`, when it has ops that round activations at
// run time (QuantizeLinear, DynamicQuantizeLinear, the QLinear ops, QGemm, DynamicQuantizeMatMul):
//   an integer output such an op writes (a quantized tensor)                1
//   another integer output (indices, ids)                                   none: exact
//   a float output a DequantizeLinear writes with a constant scalar scale   that scale
//   any other float output                                                  -1: an 8-bit step of
//                                                                           the reference's range
// Empty for a model without them: weight-only quantization (DequantizeLinear of constants,
// MatMulNBits) rounds no activation, so its outputs keep the plain tolerance.
std::map<std::string, double> QuantizationSteps(const Model& model);

// `tolerance` with the steps of `reference`'s outputs.
cpu::Tolerance ForReference(cpu::Tolerance tolerance, const Model& reference);

}  // namespace fusionopt::verify
