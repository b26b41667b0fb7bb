// fold-scale-into-conv (O1): its rewrite, conditions and limits are in fold_scale_into_conv.h.
#include "passes/fold/fold_scale_into_conv.h"

#include "passes/fold/util/channel_affine.h"
#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

// The constant's value for each of `channels` output channels, or why it is not per-channel.
Decided<std::vector<double>> PerChannel(const ConstantOperand& constant, int64_t rank, int64_t channels) {
  const std::vector<int64_t>& dims = constant.dims;
  if (static_cast<int64_t>(dims.size()) > rank) return WhyNot("constant raises the output's rank");
  std::vector<int64_t> aligned(static_cast<size_t>(rank) - dims.size(), 1);
  aligned.insert(aligned.end(), dims.begin(), dims.end());
  for (size_t axis = 0; axis < aligned.size(); ++axis) {
    bool fits = aligned[axis] == 1 || (axis == 1 && aligned[axis] == channels);
    if (!fits) return WhyNot("constant is not per-channel");
  }
  std::vector<double> values = constant.Values();
  if (values.size() == 1) values.assign(static_cast<size_t>(channels), values.front());
  return values;
}

struct Step {
  WhyNot reason;  // why the reader did not fold; empty when it did or is not a candidate
  bool folded = false;
  bool added_node = false;
};

// Folds the single Mul/Add reading `contraction`'s output, if it qualifies.
Step FoldNextReader(Graph& graph, Node& contraction, const Model& model, int64_t max_bytes) {
  Value* output = contraction.output(0);
  if (output == nullptr || output->uses().empty()) return {};
  bool any_candidate = false;
  for (const Use& use : output->uses()) {
    const std::string& op = use.node->op_type();
    any_candidate = any_candidate || ((op == "Mul" || op == "Add") && IsDefaultDomain(*use.node));
  }
  if (!any_candidate) return {};
  Node& reader = *output->uses().front().node;
  if (!OnlyReadBy(*output, reader) || reader.graph() != &graph) {
    return {"contraction output has other readers or is a graph output"};
  }
  if (reader.inputs().size() != 2 || reader.output(0) == nullptr) return {"malformed Mul/Add"};
  if (model.OpsetFor(reader.domain()).value_or(0) < 7) return {"Mul/Add before opset 7"};
  int operand_index = output->uses().front().input_index == 0 ? 1 : 0;
  std::optional<ConstantOperand> constant = ReadConstantOperand(reader.input(operand_index), model);
  if (!constant) return {"non-constant operand"};
  Decided<AffineTarget> analysis = AnalyzeAffineTarget(contraction, model, /*allow_matmul=*/false);
  if (!analysis) return {analysis.why_not()};
  AffineTarget& target = *analysis;
  if (constant->dtype != target.weight.dtype) return {"operand dtype differs from the weights'"};
  Decided<std::vector<double>> values = PerChannel(*constant, target.output_rank, target.channels);
  if (!values) return {values.why_not()};
  ChannelAffine affine;
  if (reader.op_type() == "Mul") {
    affine.scale = *values;
    affine.shift.assign(affine.scale.size(), 0.0);
  } else {
    affine.shift = *values;
    affine.scale.assign(affine.shift.size(), 1.0);
  }
  if (WhyNot why = WhyNotFold(target, affine, max_bytes)) return {why};
  Step step;
  step.folded = true;
  step.added_node = FoldAffine(graph, target, affine, {&reader}, *reader.output(0));
  return step;
}

}  // namespace

std::vector<PassOptionInfo> FoldScaleIntoConv::options() const {
  return {{"max-bytes", std::to_string(kDefaultMaterializeBytes),
           "largest ConstantOfShape weight a per-channel scale may turn into an initializer"}};
}

Result<bool> FoldScaleIntoConv::RunOnGraph(Graph& graph, PassContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t max_bytes, context.IntOption("max-bytes"));
  std::vector<Node*> contractions;
  for (const auto& node : graph.nodes()) {
    const std::string& op = node->op_type();
    if (IsDefaultDomain(*node) && (op == "Conv" || op == "ConvTranspose" || op == "Gemm")) {
      contractions.push_back(node.get());
    }
  }
  bool changed = false;
  bool added_node = false;
  for (Node* contraction : contractions) {
    while (true) {
      Node* reader = contraction->output(0) != nullptr && !contraction->output(0)->uses().empty()
                         ? contraction->output(0)->uses().front().node
                         : nullptr;
      std::string reader_op = reader != nullptr ? reader->op_type() : "";
      Step step = FoldNextReader(graph, *contraction, context.model(), max_bytes);
      if (!step.folded) {
        if (step.reason) context.Rejected(*reader, step.reason);
        break;
      }
      // `reader` is gone now: the contraction computes its result.
      context.Matched();
      context.Count(reader_op == "Mul" ? "muls_folded" : "adds_folded");
      added_node = added_node || step.added_node;
      changed = true;
    }
  }
  if (added_node) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
