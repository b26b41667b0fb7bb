#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// quantize-concat-inputs (O1): a QuantizeLinear after a Concat quantizes each input instead,
// and the Concat joins the 8-bit values.
inline constexpr std::string_view kQuantizeConcatInputsRewrite = R"rewrite(
  %a = DequantizeLinear(%qa, %sa, %za)                 %a = DequantizeLinear(%qa, %sa, %za)
  %b = DequantizeLinear(%qb, %s, %z)                   %ra = QuantizeLinear(%a, %s, %z)
  %c = Concat(%a, %b, %x) {axis: 1}            →       %rx = QuantizeLinear(%x, %s, %z)
  %y = QuantizeLinear(%c, %s, %z)                      %y = Concat(%ra, %qb, %rx) {axis: 1}
)rewrite";
//
// Exact: a per-tensor QuantizeLinear maps each element alone, so quantizing the joined tensor
// and joining the quantized pieces give the same bytes. An input dequantized with the
// QuantizeLinear's own parameters is its 8-bit value (the round trip is exact, as
// drop-qdq-around-data-movement argues), and the DequantizeLinear goes where nothing else reads
// it. The other inputs get a QuantizeLinear each: a DequantizeLinear's becomes a requantization
// that fuse-elementwise merges into the program producing the input (with an 8-bit input, a
// 256-entry table). YOLOv8's C2f blocks join activations of different scales this way: the
// Concat then moves bytes instead of floats, and the convolution after it reads them without
// quantizing.
//
// Conditions: the QuantizeLinear's scale and zero point constants a feed cannot replace, per
// tensor; the Concat's result read by the QuantizeLinear alone and no graph output; at least one
// input a DequantizeLinear's (a quantized model's join, not a float model's). Runs after
// drop-qdq-around-data-movement, which takes Concats whose every input shares the parameters.
// Left out under --runtime ort, whose QDQ selectors run DQ → Concat → Q as one QLinearConcat.
class QuantizeConcatInputs : public Pass {
 public:
  std::string_view rewrite() const override { return kQuantizeConcatInputsRewrite; }
  std::string_view name() const override { return "quantize-concat-inputs"; }
  std::string_view summary() const override {
    return "quantize a Concat's inputs instead of its result, so it joins 8-bit values";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
