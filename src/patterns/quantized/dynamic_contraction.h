// The dynamically quantized contraction: what onnxruntime's quantize_dynamic writes for every
// MatMul and Conv with constant weights (DESIGN.md §5, 6). The fusion pass takes it as the head
// of a contraction chain (fuse-contraction-epilogues) and the runtime recognises it in the
// outlined body: one matcher for both, reading constants through a ConstantOf.
//
//   %xq, %xs, %xz = DynamicQuantizeLinear(%x)          a member when the unit alone reads it
//   %s   = Mul(%xs, %ws)                               %ws a float constant: a scalar, or one
//                                                      value per output column (MatMul) or
//                                                      channel (Conv, [C,1,..,1])
//   %acc = MatMulInteger(%xq, %wq, %xz, %wz)           %wq constant int8/uint8 (a matrix), %wz
//        | ConvInteger(%xq, %wq, %xz, %wz)             a constant (or omitted)
//   %f   = Cast(%acc, to = FLOAT)
//   %y   = Mul(%f, %s)                                 either operand order, in both Muls
//
// y = xs · ws[n] · Σ (xq - xz)(wq - wz[n]): a kernel computes the int32 accumulator exactly and
// scales it once; the ops' float multiply rounds the same product in two steps (xs·ws, then
// ·acc), so the two agree to one float rounding. Where the DynamicQuantizeLinear is shared
// (several contractions of one activation), it stays outside and the unit reads %xq, %xs, %xz.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/why_not.h"
#include "patterns/quantized/contraction.h"

namespace fusionopt::quantized {

struct DynamicContraction {
  const Node* quantize = nullptr;     // the DynamicQuantizeLinear, when a member; else null
  const Node* scales = nullptr;       // Mul(%xs, %ws)
  const Node* contraction = nullptr;  // MatMulInteger or ConvInteger
  const Node* cast = nullptr;
  const Node* rescale = nullptr;      // Mul(%f, %s): the unit's float output
  const Value* x_quantized = nullptr;    // %xq, %xs, %xz as the contraction and the scales read them
  const Value* x_scale = nullptr;
  const Value* x_zero = nullptr;
  TensorPtr weights;                  // %wq
  TensorPtr weight_scale;             // %ws
  TensorPtr weight_zero;              // %wz, null when omitted

  const Value* output() const { return rescale->output(0); }
  bool is_conv() const { return contraction->op_type() == "ConvInteger"; }
  std::vector<const Node*> Nodes() const;  // every member, in dataflow order
};

// The unit around `contraction` (MatMulInteger or ConvInteger of the default domain), or why
// not. In a graph, every value inside the unit must be read by its next member alone and be no
// graph output (the DynamicQuantizeLinear joins only when all three of its outputs are read by
// the unit alone).
Decided<DynamicContraction> MatchDynamicContraction(const Node& contraction, const ConstantOf& constant_of);

}  // namespace fusionopt::quantized
