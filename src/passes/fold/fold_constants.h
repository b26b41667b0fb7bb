#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fold-constants (O1): evaluates at optimize time what every inference would compute alike.
inline constexpr std::string_view kFoldConstantsRewrite = R"rewrite(
  %w = ConstantOfShape(%shape)   (%shape an initializer)     →  init float[64,3,3,3] %w = [...]
  %t = Transpose(%w0) {perm}     (%w0 an initializer)        →  init float[...] %t = [...]
  %s = Shape(%x)                 (%x: float[1,3,8,8])        →  init int64[4] %s = [1, 3, 8, 8]
  %d = Gather(Shape(%x), 2)      (%x: float[N,S,64])         →  init int64[] %d = [64]
)rewrite";
// A node folds when every input is a constant — an initializer callers cannot override, a
// Constant node, or a value this sweep already folded, so chains fold in one sweep in graph
// order — or when it reads only the static part of a shape: Shape, Size, and a Gather or
// one-axis Slice of selected dims from a Shape, where inference knows those dims (the BERT-style model's shape
// arithmetic stays where its dims are symbolic). The results are initializers under the same
// names, computed by the CPU runtime's own kernel for the node (constant_evaluation.h), so
// they hold exactly the bits inference would have produced. Operands and producers nothing
// reads any more go.
//
// "Callers cannot override": an initializer that is also a graph input is a default a caller
// may replace from IR version 4 on, so it is not a constant there; below IR 4 every
// initializer had to be listed as an input and is a constant (onnxruntime's and our runtime's
// rule) — the light model-zoo models are IR 3.
//
// Never folded, each reported with its reason: DequantizeLinear of more than
// `max-dequantize-elements` (default 1) elements (a quantized weight's storage form, which the
// integer kernels read; folded it would be float, four times the size — a dequantized scalar
// such as GELU's 0.5 folds, so the program around it reads only 8-bit inputs), random and other impure ops, ops with
// subgraphs, ops the CPU runtime cannot run, string tensors, nodes writing a graph output (an
// initializer cannot stand for a graph output of the same graph without an Identity node, so
// the node stays), results whose shape inference does not know statically (their size cannot
// be bounded before they are computed), and results larger than the `max-bytes` option unless
// no larger than the node's constant inputs — so Expand/Tile/ConstantOfShape/Range never
// bloat the model.
//
// After a sweep that folded something, shape inference runs again and the pass sweeps again
// (at most kMaxSweeps times) in case a folded constant made more shapes static. The main graph
// is swept before its subgraphs, which then see its constants folded already.
class FoldConstants : public Pass {
 public:
  std::string_view rewrite() const override { return kFoldConstantsRewrite; }
  std::string_view name() const override { return "fold-constants"; }
  std::string_view summary() const override {
    return "evaluate all-constant subgraphs and static Shape/Size at optimize time into initializers";
  }
  std::vector<PassOptionInfo> options() const override;
  Result<bool> Run(Model& model, PassContext& context) override;
};

}  // namespace fusionopt::passes
