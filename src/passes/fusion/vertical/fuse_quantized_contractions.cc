// fuse-quantized-contractions (O2): its rewrite, conditions and limits are in fuse_quantized_contractions.h.
#include "passes/fusion/vertical/fuse_quantized_contractions.h"

#include <algorithm>
#include <unordered_set>

#include "ir/op_class.h"
#include "passes/util/outline.h"
#include "passes/util/reader_copy.h"
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
  const Value* output = dequantize.output(0);
  if (output->uses().size() == 1 && !output->is_graph_output()) return &dequantize;
  return CopyForReader(graph, dequantize, reader);
}

// Every contraction's unit, matched on the graph as it is; the others reported where they read a
// dequantized operand.
std::vector<QuantizedContraction> MatchUnits(const std::vector<Node*>& contractions,
                                             const quantized::ConstantOf& constant_of, PassContext& context) {
  std::vector<QuantizedContraction> units;
  for (Node* contraction : contractions) {
    Decided<QuantizedContraction> unit = quantized::MatchQuantizedContraction(*contraction, constant_of);
    if (unit) {
      units.push_back(std::move(*unit));
      continue;
    }
    const Value* input = contraction->input(0);
    if (input != nullptr && input->producer() != nullptr && quantized::IsDequantizeLinear(*input->producer())) {
      context.Rejected(*contraction, unit.why_not().Prefixed("quantized contraction"));
    }
  }
  return units;
}

// Units are matched on the graph as it is, so two may claim one node: ResNet's block end
// Add(DQ(Q(conv2)), DQ(Q(downsample))) is the residual step of both. The first in graph order
// keeps it; a later unit that reaches a taken step ends before it, at the round trip's
// QuantizeLinear where that one is free (the other unit then reads that value as its residual),
// and is dropped otherwise. The operands' DequantizeLinears may be shared: each unit gets a copy.
std::vector<QuantizedContraction> ResolveOverlaps(std::vector<QuantizedContraction> units) {
  std::unordered_set<const Node*> taken;
  std::vector<QuantizedContraction> resolved;
  for (QuantizedContraction& unit : units) {
    bool keep = !taken.count(unit.contraction);
    for (size_t i = 0; keep && i < unit.steps.size(); ++i) {
      const quantized::EpilogueStep& step = unit.steps[i];
      if (!taken.count(step.node) && (step.dequantize == nullptr || !taken.count(step.dequantize))) continue;
      keep = step.kind == quantized::EpilogueStep::Kind::kRoundTrip && !taken.count(step.node);
      if (keep) {
        unit.output = step.node;
        unit.steps.resize(i);
      }
      break;
    }
    if (!keep || taken.count(unit.output)) continue;
    for (const Node* node : unit.Nodes()) {
      if (node != unit.input && node != unit.weights) taken.insert(node);
    }
    resolved.push_back(std::move(unit));
  }
  return resolved;
}

// A DequantizeLinear whose readers would all take it into their own kernel for free (elementwise
// ops fuse it into their program, and read the 8-bit values): the unit is better ending quantized.
bool ReadersFuseIt(const Node& dequantize) {
  const Value& output = *dequantize.output(0);
  if (output.is_graph_output() || output.uses().empty()) return false;
  return std::all_of(output.uses().begin(), output.uses().end(),
                     [](const Use& use) { return ClassifyOp(*use.node) == OpClass::kElementwise; });
}

// A QuantizeLinear whose producer is elementwise: the producer's program takes it and hands on
// 8-bit values (a table lookup where it reads one 8-bit input), a quarter of the float bytes.
bool ProducerFusesIt(const Node& quantize) {
  const Value* input = quantize.input(0);
  const Node* producer = input != nullptr ? input->producer() : nullptr;
  return producer != nullptr && ClassifyOp(*producer) == OpClass::kElementwise;
}

// Each unit's float ends where no other unit claims them: the QuantizeLinear before its input
// (unless it ends another unit, or an elementwise producer would take it anyway) and the
// DequantizeLinear after its output (unless another unit reads it as its input or residual, or
// elementwise readers would take it anyway). Either saves a kernel of its own.
void TakeFloatEnds(std::vector<QuantizedContraction>& units, const quantized::ConstantOf& constant_of) {
  std::unordered_set<const Node*> unit_inputs, unit_outputs;
  for (const QuantizedContraction& unit : units) {
    unit_inputs.insert(unit.input);
    if (const quantized::EpilogueStep* residual = unit.residual()) unit_inputs.insert(residual->dequantize);
    unit_outputs.insert(unit.output);
  }
  for (QuantizedContraction& unit : units) {
    const Node* leading = quantized::LeadingQuantize(unit, constant_of);
    if (leading != nullptr && !unit_outputs.count(leading) && !ProducerFusesIt(*leading)) unit.input_quantize = leading;
    const Node* trailing = quantized::TrailingDequantize(unit, constant_of);
    if (trailing != nullptr && !unit_inputs.count(trailing) && !ReadersFuseIt(*trailing)) unit.output_dequantize = trailing;
  }
}

}  // namespace

Result<bool> FuseQuantizedContractions::RunOnGraph(Graph& graph, PassContext& context) {
  const quantized::ConstantOf constant_of = quantized::GraphConstantsOf(context.model());
  std::vector<Node*> contractions;
  for (const auto& node : graph.nodes()) {
    if (IsContraction(*node)) contractions.push_back(node.get());
  }
  std::vector<QuantizedContraction> units = ResolveOverlaps(MatchUnits(contractions, constant_of, context));
  TakeFloatEnds(units, constant_of);
  bool changed = false;
  for (const QuantizedContraction& unit : units) {
    const std::string name = FunctionName(unit);
    std::vector<Node*> members;
    for (const Node* member : unit.Nodes()) members.push_back(const_cast<Node*>(member));
    if (!context.JudgeFusion(members).apply()) continue;
    Node* contraction = const_cast<Node*>(unit.contraction);
    // The operands' dequantizations become the unit's own before it is outlined (a shared one
    // would make the group write it for its other readers); a refused unit gives them back.
    std::vector<std::pair<Node*, Node*>> copies;  // (copy, original)
    auto own = [&](const Node* dequantize, Node& reader) {
      Node* original = const_cast<Node*>(dequantize);
      Node* copy = OwnDequantize(graph, *original, reader);
      if (copy != original) copies.emplace_back(copy, original);
      std::replace(members.begin(), members.end(), original, copy);
    };
    own(unit.input, *contraction);
    own(unit.weights, *contraction);
    if (const quantized::EpilogueStep* residual = unit.residual()) own(residual->dequantize, *const_cast<Node*>(residual->node));
    if (WhyNot why = WhyNotOutlinable(members)) {
      for (auto& [copy, original] : copies) {
        graph.ReplaceAllUses(copy->output(0), original->output(0));
        graph.RemoveNode(copy);
      }
      context.Rejected(*contraction, why.Prefixed("quantized contraction"));
      continue;
    }
    changed = true;
    FusionGroup group{members, "quantized_contraction", name};
    group.copy_scalar_constants = false;
    OutlineGroup(graph, group, context);
  }
  return changed;
}

}  // namespace fusionopt::passes
