// lower-for-ort: see lower_for_ort.h for the rewrites and their limits.
#include "passes/conversion/ort/lower_for_ort.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "ir/op_class.h"
#include "passes/cleanup/eliminate_dead_code.h"
#include "passes/util/inline_call.h"
#include "passes/conversion/ort/support.h"
#include "patterns/attention/attention.h"
#include "patterns/composite/composite.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::passes {
namespace {

using namespace ort_lowering;

// A constant 1-D bias Add read only by the GELU's ops: its other operand, and the bias.
std::optional<std::pair<Value*, Value*>> BiasOperands(const Value& x, const std::vector<Node*>& gelu_nodes) {
  Node* add = x.producer();
  if (add == nullptr || add->op_type() != "Add" || !IsDefaultDomain(*add) || x.is_graph_output()) return std::nullopt;
  for (const Use& use : x.uses()) {
    if (std::find(gelu_nodes.begin(), gelu_nodes.end(), use.node) == gelu_nodes.end()) return std::nullopt;
  }
  for (int bias_index : {1, 0}) {
    Value* bias = add->input(static_cast<size_t>(bias_index));
    Value* other = add->input(static_cast<size_t>(1 - bias_index));
    if (bias == nullptr || other == nullptr || bias->initializer() == nullptr || !bias->shape() || bias->shape()->size() != 1) continue;
    const std::optional<Dim> last = other->shape() && !other->shape()->empty() ? std::optional(other->shape()->back()) : std::nullopt;
    if (last && SameDim(*last, (*bias->shape())[0])) return std::make_pair(other, bias);
  }
  return std::nullopt;
}

// The activation with an ORT kernel that `node` anchors, if any: a GELU (an Erf or Tanh of a
// decomposed one, or a Gelu op), or a QuickGELU's Sigmoid (a swish whose alpha is not 1; ORT
// fuses plain SiLU itself).
std::optional<CompositeMatch> ActivationAt(Node& node, int64_t opset) {
  const std::string& op = node.op_type();
  if (op != "Erf" && op != "Tanh" && op != "Gelu" && op != "Sigmoid") return std::nullopt;
  CompositeSearch search = MatchCompositeAt(node, opset);
  if (!search.match) return std::nullopt;
  const CompositeMatch& match = *search.match;
  if (match.kind == CompositeKind::kGelu || (match.kind == CompositeKind::kSilu && match.alpha != 1.0)) return match;
  return std::nullopt;
}

// The GELU or QuickGELU among `members` (inlined ops of one group), written as ORT's kernel: the
// op written, or why none is (there is none, or it does not qualify).
Decided<std::string> LowerActivationAmong(Graph& graph, const std::vector<Node*>& members, int64_t opset,
                                          OrtProvider provider) {
  const WhyNot not_kernel_float = "its GELU or QuickGELU is not float32 or float16";
  for (Node* member : members) {
    std::optional<CompositeMatch> found = ActivationAt(*member, opset);
    if (!found) continue;
    const CompositeMatch& gelu = *found;
    if (!IsKernelFloat(gelu.x) || gelu.output == nullptr || gelu.output->dtype() != gelu.x->dtype()) return not_kernel_float;
    const bool quick = gelu.kind == CompositeKind::kSilu;
    const bool tanh = gelu.gelu_form == GeluForm::kTanh;
    std::optional<std::pair<Value*, Value*>> biased =
        quick ? std::nullopt : BiasOperands(*gelu.x, gelu.nodes);  // QuickGelu takes no bias
    std::string op = quick ? "QuickGelu" : tanh ? "FastGelu" : biased ? "BiasGelu" : "Gelu";
    if (WhyNot why = WhyNotActivationKernel(provider, op, gelu.x->dtype())) return why;
    std::vector<Value*> inputs = biased ? std::vector<Value*>{biased->first, biased->second} : std::vector<Value*>{gelu.x};
    Node* lowered = graph.CreateNode(op, kOrtDomain, inputs, {nullptr},
                                     graph.UniqueNodeName(gelu.nodes.front()->name() + "/" + op));
    if (quick) lowered->SetAttribute(Attribute::Float("alpha", static_cast<float>(gelu.alpha)));
    graph.MoveBefore(lowered, gelu.output->producer());
    graph.TransferProducer(gelu.output, lowered, 0);
    std::vector<Node*> replaced = gelu.nodes;
    if (biased) replaced.push_back(gelu.x->producer());
    // Readers before what they read: the last in graph order goes first.
    std::sort(replaced.begin(), replaced.end(),
              [&](const Node* a, const Node* b) { return graph.OrderKey(a) > graph.OrderKey(b); });
    for (Node* node : replaced) graph.RemoveNode(node);
    return std::string(kOrtDomain) + "::" + op;
  }
  return not_kernel_float;
}

// Whether the body holds a GELU or QuickGELU (the matcher needs no types, so the untyped body
// will do).
bool HasOrtActivation(const Function& function) {
  const int64_t opset = function.OpsetFor("").value_or(0);
  return std::any_of(function.body->nodes().begin(), function.body->nodes().end(),
                     [&](const auto& node) { return ActivationAt(*node, opset).has_value(); });
}

// A group inlined for its GELU, lowered once the inlined values are typed.
struct InlinedGelu {
  std::string node, function;
  std::vector<Node*> members, constants;
  int64_t opset = 0;
};

Outcome LowerCall(Model& model, Graph& graph, Node& call, SharedValues& shared_values, TrialModels& trials,
                  std::vector<InlinedGelu>& gelus, const OrtLoweringOptions& options) {
  const Function* function = model.FindFunction(call.domain(), call.op_type());
  if (function == nullptr || function->body == nullptr) return Kept("no function body");
  if (std::optional<FusedAttention> attention = RecognizeAttention(*function)) {
    return LowerAttention(model, graph, call, *attention, shared_values, trials, options);
  }
  if (std::optional<FusedComposite> composite = RecognizeComposite(*function)) {
    if (composite->cast_back_to != 0) return Kept("a norm between float32 Casts: ORT inlines it and fuses that form itself");
    if (composite->kind == CompositeKind::kLayerNorm || composite->kind == CompositeKind::kRmsNorm) {
      return LowerNorm(model, graph, call, *composite, options.provider);
    }
  }
  if (!HasOrtActivation(*function)) return Kept("ORT has no kernel for this group (it inlines the function)");
  InlinedGelu gelu{call.name(), std::string(kFusionDomain) + "::" + call.op_type(), {}, {}, function->OpsetFor("").value_or(0)};
  InlinedCall inlined = InlineCall(graph, call, *function);
  if (!inlined.done()) return Kept("its body does not map back onto the nodes it replaced");
  gelu.members = std::move(inlined.members);
  gelu.constants = std::move(inlined.constants);
  gelus.push_back(std::move(gelu));
  return {};  // decided after the inlined values are typed
}

}  // namespace

const std::vector<std::string>& PassesOrtRunsBetterWithout() {
  // ORT runs QOperator ops as its own kernels: their QDQ expansion only gives its QDQ
  // transformers units to rebuild, and the ones they do not rebuild run op by op. Its QDQ
  // selectors run DQ → Concat → Q as one QLinearConcat, which quantized inputs would hide.
  static const std::vector<std::string> passes = {"lower-batchnorm", "qoperator-to-qdq", "quantize-concat-inputs"};
  return passes;
}

const std::vector<OrtPassOption>& PassOptionsForOrt() {
  // ORT's QDQ transformers fuse a binary op only with a DequantizeLinear on each input.
  static const std::vector<OrtPassOption> options = {{"fuse-horizontal-contractions", "convolutions", "0"},
                                                     {"fold-constants", "max-dequantize-elements", "0"}};
  return options;
}

Result<OrtLoweringReport> LowerForOrt(Model& model, const OrtLoweringOptions& options) {
  InferShapes(model);  // the lowering proves shapes equal; every value typed that can be
  Graph& graph = *model.graph;
  std::vector<Node*> calls;
  for (const auto& node : graph.nodes()) {
    if (node->domain() == kFusionDomain) calls.push_back(node.get());
  }
  OrtLoweringReport report;
  SharedValues shared_values;
  TrialModels trials(model);  // copies made when an attention over open dims first needs them
  std::vector<InlinedGelu> gelus;
  auto record = [&report](const std::string& name, const std::string& function, const Outcome& outcome) {
    if (!outcome.absorbed.empty()) {
      std::erase_if(report.kept, [&](const OrtKeptGroup& kept) { return kept.node == outcome.absorbed; });
    }
    if (!outcome.written.empty()) {
      std::vector<std::string> absorbed;
      if (!outcome.absorbed.empty()) absorbed.push_back(outcome.absorbed);
      report.lowered.push_back({name, function, outcome.written, std::move(absorbed), outcome.because});
    } else if (outcome.kept_because) {
      report.kept.push_back({name, function, outcome.kept_because.reason()});
    }
  };
  for (Node* call : calls) {
    const std::string name = call->name(), function = std::string(kFusionDomain) + "::" + call->op_type();
    record(name, function, LowerCall(model, graph, *call, shared_values, trials, gelus, options));
  }
  // After the calls: the contraction a standard LayerNormalization takes in is one of them.
  std::vector<Node*> layer_norms;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == "LayerNormalization" && IsDefaultDomain(*node)) layer_norms.push_back(node.get());
  }
  for (Node* layer_norm : layer_norms) {
    const std::string name = layer_norm->name();
    record(name, "LayerNormalization", LowerStandardLayerNorm(model, graph, *layer_norm, options.provider));
  }
  if (!gelus.empty()) InferShapes(model);  // function bodies are untyped: so are the values inlining made
  for (const InlinedGelu& gelu : gelus) {
    Decided<std::string> written = LowerActivationAmong(graph, gelu.members, gelu.opset, options.provider);
    for (Node* constant : gelu.constants) {  // the scalars the activation read, now read by nothing
      if (constant->output(0)->uses().empty() && !constant->output(0)->is_graph_output()) graph.RemoveNode(constant);
    }
    if (!written) {
      report.kept.push_back({gelu.node, gelu.function, written.why_not().Prefixed("inlined").reason()});
    } else {
      report.lowered.push_back({gelu.node, gelu.function, *written, {}, {}});
    }
  }
  // What a lowering wrote before a later check kept the group after all (a Split, an expanded
  // mask, their initializers): the pipeline leaves no dead code, so all there is is such leftovers.
  RemoveDeadCode(graph);
  if (!report.lowered.empty() || !gelus.empty()) {
    RemoveUncalledFusedFunctions(model);
    if (!model.OpsetFor(kOrtDomain)) model.opsets.push_back(OpsetImport{kOrtDomain, 1, {}});
    FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
    InferShapes(model);
  }
  return report;
}

Result<bool> LowerForOrtPass::Run(Model& model, PassContext& context) {
  const CostModel& costs = context.cost_model();
  const OrtLoweringOptions options{OrtProviderForTarget(costs.profile().name), costs.symbols()};
  const uint64_t revision = model.graph->revision();
  const size_t functions = model.functions.size(), opsets = model.opsets.size();
  FUSIONOPT_ASSIGN_OR_RETURN(OrtLoweringReport report, LowerForOrt(model, options));
  for (const OrtLowering& lowered : report.lowered) {
    context.Matched();
    context.Count(lowered.written);
  }
  for (const OrtKeptGroup& kept : report.kept) context.Rejected(kept.node, kept.reason);
  context.AddReportSection(std::string(kOrtLoweringSection), OrtLoweringToJson(report));
  return model.graph->revision() != revision || model.functions.size() != functions || model.opsets.size() != opsets;
}

std::string OrtLoweringToJson(const OrtLoweringReport& report) {
  nlohmann::ordered_json lowered = nlohmann::ordered_json::array(), kept = nlohmann::ordered_json::array();
  for (const OrtLowering& one : report.lowered) {
    nlohmann::ordered_json entry{{"node", one.node}, {"function", one.function}, {"written", one.written}, {"absorbed", one.absorbed}};
    if (!one.because.empty()) entry["because"] = one.because;
    lowered.push_back(std::move(entry));
  }
  for (const OrtKeptGroup& one : report.kept) {
    kept.push_back({{"node", one.node}, {"function", one.function}, {"reason", one.reason}});
  }
  return nlohmann::ordered_json{{"lowered", lowered}, {"kept", kept}}.dump();
}

}  // namespace fusionopt::passes
