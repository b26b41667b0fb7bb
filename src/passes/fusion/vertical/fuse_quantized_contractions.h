#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fuse-quantized-contractions (O2): a QDQ contraction unit becomes one ai.fusionopt node that
// both runtimes run as one integer kernel (patterns/quantized/contraction.h states the unit).
inline constexpr std::string_view kFuseQuantizedContractionsRewrite = R"rewrite(
  %x = DequantizeLinear(%xq, %xs, %xz)
  %w = DequantizeLinear(%wq, %ws, %wz)            (%wq int8 initializer, per channel)
  %b = DequantizeLinear(%bq, %bs, %bz)            (%bq int32 initializer)
  %c = Conv(%x, %w, %b)                            →   %y = ai.fusionopt::FusedQConvRelu(%xq, %wq, %ws, %wz, %bq, %bs, %bz)
  %r = Relu(%c)
  %y = QuantizeLinear(%r, %ys, %yz)
)rewrite";
//   Q(DQ(Q(Conv(DQ(%xq), DQ(%wq)))) + DQ(%rq))        →   FusedQConv(%xq, %wq, %rq, ...)  (a residual)
//   QuantizeLinear(MatMul(DQ(%aq), DQ(%wq)) + DQ(%bq))   →   FusedQMatMulAdd
//   QuantizeLinear(Gemm(DQ(%aq), DQ(%wq), %b) {transB})   →   FusedQGemm
//
// The unit runs from the dequantization of its operands to the QuantizeLinear that ends it,
// through activations and the round trips Q → DQ a model holds between them (each kept: the
// kernel rounds there as the model does). Every quantization parameter must be a constant the
// feeds cannot replace, the activation and output quantized per tensor to 8 bits, the weights
// an 8-bit initializer quantized per tensor or per output channel, and every value inside read
// by the next member only. A DequantizeLinear of %xq, %wq or a residual that other nodes read
// too is copied, so each unit has its own (the copy costs nothing: it is inside a kernel).
//
// Float ends: a unit also takes the QuantizeLinear that makes %xq from a float value (ResNet's
// first convolution, a Gemm after the pooled features) unless it ends another unit, and the
// DequantizeLinear of %y unless it starts another unit or only elementwise ops read it (they take
// it into their program and read 8 bits): the kernel then quantizes its input itself or writes
// the round trip's float values, and each saves a kernel (patterns/quantized/contraction.h,
// LeadingQuantize and TrailingDequantize). Units are matched on the graph as it is, then the ends
// given out, then each outlined.
//
// Numbers: the kernel sums (xq - xz)(wq - wz) exactly in int32 where the ops sum dequantized
// floats, and scales by xs·ws[n] once: an output may differ from the op-by-op run by a step of
// the output's quantization where a value lies on a rounding boundary — what onnxruntime's own
// QDQ fusion into QLinearConv does.
//
// Runs first at O2, before fuse-contraction-epilogues could take the contraction as a float
// one. Limits: blocked (4-bit) weights, 16-bit types, a second residual and ConvTranspose are
// not matched; --runtime ort keeps the units (its QDQ transformers fuse them).
class FuseQuantizedContractions : public Pass {
 public:
  std::string_view rewrite() const override { return kFuseQuantizedContractionsRewrite; }
  std::string_view name() const override { return "fuse-quantized-contractions"; }
  std::string_view summary() const override {
    return "fuse DQ → Conv/MatMul/Gemm → bias → activation → Q into one integer kernel";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
