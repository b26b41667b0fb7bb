#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// qoperator-to-qdq (O2, before the fusions): an operator of onnxruntime's QOperator format
// becomes the QDQ unit it stands for, so that the passes that fuse QDQ units (an integer
// convolution with its epilogue, an elementwise program, a 256-entry table) take it too.
inline constexpr std::string_view kQOperatorToQdqRewrite = R"rewrite(
  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %b)   →   %xd = DequantizeLinear(%x, %xs, %xz)
                                                                    %wd = DequantizeLinear(%w, %ws, %wz) {axis: 0}
                                                                    %bd = DequantizeLinear(%b, %bs) {axis: 0}   (%bs = xs·ws)
                                                                    %c = Conv(%xd, %wd, %bd)
                                                                    %y = QuantizeLinear(%c, %ys, %yz)
)rewrite";
//   QLinearMatMul(a, as, az, b, bs, bz, ys, yz)    →  Q(MatMul(DQ(a), DQ(b)))         (b's scale per column: axis 1)
//   com.microsoft QGemm(a, as, az, b, bs, bz, c, ys, yz) {alpha, transA, transB}
//                                                  →  Q(Gemm(DQ(a), DQ(b), DQ(c, alpha·as·bs)))  (no ys: the float Gemm)
//   com.microsoft QLinearAdd / QLinearMul(a, as, az, b, bs, bz, ys, yz)  →  Q(Add/Mul(DQ(a), DQ(b)))
//   com.microsoft QLinearSigmoid(x, xs, xz, ys, yz)                      →  Q(Sigmoid(DQ(x)))
//   com.microsoft QLinearLeakyRelu(x, xs, xz, ys, yz) {alpha}           →  Q(LeakyRelu(DQ(x)))
//
// Exact: each QOperator op is specified as (and onnxruntime's quantizer writes it for) the
// unit it replaces; the integer bias is dequantized by xs·ws, the scale its int32 values are
// in (ONNX's QLinearConv). The output keeps its name and readers.
//
// Conditions, each reported when not met: every scale and zero point a constant a feed cannot
// replace (the fused kernels read them at load time); for the contractions, constant weights
// (a QLinearMatMul of two activations stays: no integer kernel would take its expansion); a
// per-axis scale needs opset 13 (DequantizeLinear's axis); an omitted output zero point needs
// the output's type inferred. Left as they are, which the runtime runs as one kernel each:
// QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool and the other QOperator ops
// (data movement on quantized values is already their QDQ form's fused result).
class QOperatorToQdq : public Pass {
 public:
  std::string_view rewrite() const override { return kQOperatorToQdqRewrite; }
  std::string_view name() const override { return "qoperator-to-qdq"; }
  std::string_view summary() const override {
    return "rewrite QLinearConv, QLinearMatMul, QGemm, QLinearAdd/Mul/Sigmoid/LeakyRelu as the QDQ units the "
           "quantized fusions take";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
