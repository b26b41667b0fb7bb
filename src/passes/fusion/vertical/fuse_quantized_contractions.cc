// fuse-quantized-contractions (O2): its rewrite, conditions and limits are in fuse_quantized_contractions.h.
#include "passes/fusion/vertical/fuse_quantized_contractions.h"

#include <algorithm>
#include <unordered_set>

#include "ir/constant_value.h"
#include "passes/util/outline.h"
#include "patterns/quantized/contraction.h"

namespace fusionopt::passes {
namespace {

using quantized::QuantizedContraction;

bool IsContraction(const Node& node) {
  return IsDefaultDomain(node) && (node.op_type() == "Conv" || node.op_type() == "MatMul" || node.op_type() == "Gemm");
}

// "FusedQConvRelu", "FusedQMatMulAddGelu": the contraction and its activations.
std::string FunctionName(const QuantizedContraction& unit) {
  std::string name = "FusedQ" + unit.contraction->op_type();
  if (unit.bias_add != nullptr) name += "Add";
  for (const quantized::EpilogueStep& step : unit.steps) {
    if (step.kind == quantized::EpilogueStep::Kind::kActivation) name += step.node->op_type();
  }
  return name;
}

// `dequantize`'s output read by `reader` alone: `dequantize` itself, or a copy of it that only
// `reader` reads (the original keeps its other readers).
Node* OwnDequantize(Graph& graph, Node& dequantize, Node& reader) {
  Value* output = dequantize.output(0);
  if (output->uses().size() == 1 && !output->is_graph_output()) return &dequantize;
  Value* copy = graph.CreateValue(graph.UniqueName(output->name()));
  copy->type() = output->type();
  Node* clone = graph.CreateNode(dequantize.op_type(), dequantize.domain(), dequantize.inputs(), {copy},
                                 UniqueNodeName(graph, dequantize.name().empty() ? "DequantizeLinear" : dequantize.name()));
  for (const Attribute& attribute : dequantize.attributes()) clone->SetAttribute(attribute.CopyWithoutGraphs());
  graph.MoveBefore(clone, &reader);
  for (size_t i = 0; i < reader.inputs().size(); ++i) {
    if (reader.input(i) == output) reader.ReplaceInput(static_cast<int>(i), copy);
  }
  return clone;
}

}  // namespace

Result<bool> FuseQuantizedContractions::RunOnGraph(Graph& graph, PassContext& context) {
  const InitializerRule rule = InitializerRuleOf(context.model());
  const quantized::ConstantOf constant_of = [rule](const Value* value) -> TensorPtr {
    return value != nullptr ? ConstantValueOf(*value, rule) : nullptr;
  };
  std::vector<Node*> contractions;
  for (const auto& node : graph.nodes()) {
    if (IsContraction(*node)) contractions.push_back(node.get());
  }
  bool changed = false;
  for (Node* contraction : contractions) {
    Decided<QuantizedContraction> unit = quantized::MatchQuantizedContraction(*contraction, constant_of);
    if (!unit) {
      // Worth a report only where the contraction reads a dequantized operand.
      const Value* input = contraction->input(0);
      if (input != nullptr && input->producer() != nullptr && quantized::IsDequantizeLinear(*input->producer())) {
        context.Rejected(*contraction, unit.why_not().Prefixed("quantized contraction"));
      }
      continue;
    }
    const std::string name = FunctionName(*unit);
    std::vector<Node*> members;
    for (const Node* member : unit->Nodes()) members.push_back(const_cast<Node*>(member));
    if (!context.JudgeFusion(members).apply()) continue;
    // The operands' dequantizations become the unit's own before it is outlined.
    Node& input = *OwnDequantize(graph, *const_cast<Node*>(unit->input), *contraction);
    Node& weights = *OwnDequantize(graph, *const_cast<Node*>(unit->weights), *contraction);
    members[0] = &input;
    members[1] = &weights;
    if (const quantized::EpilogueStep* residual = unit->residual()) {
      Node& own = *OwnDequantize(graph, *const_cast<Node*>(residual->dequantize), *const_cast<Node*>(residual->node));
      std::replace(members.begin(), members.end(), const_cast<Node*>(residual->dequantize), &own);
    }
    changed = true;
    if (WhyNot why = WhyNotOutlinable(members)) {
      context.Rejected(*contraction, why.Prefixed("quantized contraction"));
      continue;
    }
    FusionGroup group{members, "quantized_contraction", name};
    group.copy_scalar_constants = false;
    OutlineGroup(graph, group, context);
  }
  return changed;
}

}  // namespace fusionopt::passes
