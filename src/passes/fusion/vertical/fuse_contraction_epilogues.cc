// fuse-contraction-epilogues (O2): its rewrite, conditions and limits are in fuse_contraction_epilogues.h.
#include "passes/fusion/vertical/fuse_contraction_epilogues.h"

#include <unordered_set>

#include "cpu_runtime/engine/kernel.h"
#include "ir/constant_value.h"
#include "ir/legacy_opsets.h"
#include "passes/fusion/util/epilogue_patterns.h"
#include "passes/util/outline.h"
#include "passes/util/shape_facts.h"
#include "patterns/quantized/dynamic_contraction.h"

namespace fusionopt::passes {
namespace {

// The head of a chain: a float contraction, or a dynamically quantized one (several nodes
// whose float output the integer kernel scales; patterns/quantized/dynamic_contraction.h).
struct Contraction {
  Node* node = nullptr;     // the contraction op
  std::vector<Node*> head;  // every node of the head, `node` among them
  Value* output = nullptr;  // the head's product, where the chain starts
  std::string name;         // in the function name: "Conv", "DynamicQMatMul"
  Shape shape;              // the output's
  size_t channel_axis = 0;
  bool integer = false;     // the integer kernel computes it: fewer post-ops (WhyNotIntegerStep)
};

bool IsFloatContraction(const Node& node) {
  return IsStandardOp(node, "Conv") || IsStandardOp(node, "Gemm") || IsStandardOp(node, "MatMul");
}

bool IsIntegerContraction(const Node& node) {
  return IsStandardOp(node, "MatMulInteger") || IsStandardOp(node, "ConvInteger");
}

bool OneDnnPostOpType(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

// The contraction, or why its epilogue cannot be fused.
WhyNot AnalyzeContraction(Node& node, Contraction& contraction) {
  Value* output = node.outputs().size() == 1 ? node.output(0) : nullptr;
  if (output == nullptr) return "not one output";
  if (!OneDnnPostOpType(output->dtype())) return "dtype not float, float16 or bfloat16";
  const Shape* shape = KnownRankShape(*output);
  if (shape == nullptr) return "output rank unknown";
  if (node.op_type() == "MatMul") {
    for (const Value* operand : node.inputs()) {
      const Shape* operand_shape = operand != nullptr ? KnownRankShape(*operand) : nullptr;
      if (operand_shape == nullptr || operand_shape->size() < 2) return "MatMul operand not known to be 2-D or more";
    }
  }
  if (node.op_type() == "Conv" && shape->size() < 3) return "Conv output rank below 3";
  if (shape->size() < 2) return "output rank below 2";
  contraction.node = &node;
  contraction.head = {&node};
  contraction.output = output;
  contraction.name = node.op_type();
  contraction.shape = *shape;
  contraction.channel_axis = node.op_type() == "Conv" ? 1 : shape->size() - 1;
  return {};
}

// The dynamically quantized head around `node` (MatMulInteger or ConvInteger), or why not.
WhyNot AnalyzeDynamicContraction(Node& node, Contraction& contraction) {
  const quantized::ConstantOf constant_of = [](const Value* value) -> TensorPtr {
    return value != nullptr ? ConstantValueOf(*value, InitializerRule::kFeedsOverride) : nullptr;
  };
  Decided<quantized::DynamicContraction> unit = quantized::MatchDynamicContraction(node, constant_of);
  if (!unit) return unit.why_not();
  Value* output = const_cast<Value*>(unit->output());
  const Shape* shape = KnownRankShape(*output);
  if (shape == nullptr || shape->size() < 2) return "output rank unknown or below 2";
  contraction.node = &node;
  for (const Node* member : unit->Nodes()) contraction.head.push_back(const_cast<Node*>(member));
  contraction.output = output;
  contraction.name = unit->is_conv() ? "DynamicQConv" : "DynamicQMatMul";
  contraction.shape = *shape;
  contraction.channel_axis = unit->is_conv() ? 1 : shape->size() - 1;
  contraction.integer = true;
  return {};
}

// Whether dims are 1 everywhere except the output's channel axis, which they cover with C.
bool PerChannel(const std::vector<int64_t>& dims, const Contraction& contraction) {
  const Dim& channels = contraction.shape[contraction.channel_axis];
  size_t rank = contraction.shape.size();
  if (!channels.is_known() || dims.size() > rank || contraction.channel_axis < rank - dims.size()) return false;
  size_t offset = rank - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t expected = offset + i == contraction.channel_axis ? channels.value : 1;
    if (dims[i] != expected) return false;
  }
  return true;
}

// The dims of `shape`, an unknown one as -1 (PerChannel reads only the known ones as sizes).
std::vector<int64_t> DimsUnknownAsMinusOne(const Shape& shape) {
  std::vector<int64_t> dims;
  for (const Dim& dim : shape) dims.push_back(dim.is_known() ? dim.value : -1);
  return dims;
}

// What follows a value: a step, or where and why the chain stops (no reason: nothing to fuse).
struct Next {
  std::optional<EpilogueStep> step;
  const Node* at = nullptr;
  WhyNot reason;  // empty where the chain simply ends
};

Next Stop(const Node* at, WhyNot reason) { return Next{std::nullopt, at, std::move(reason)}; }

bool IsPostOp(const Node& node) {
  static const char* kOps[] = {"Add", "Sum", "Mul", "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid",
                               "HardSwish", "Tanh", "Gelu"};
  for (const char* op : kOps) {
    if (IsStandardOp(node, op)) return true;
  }
  return false;
}

bool HasPostOpReader(const Node& node) {
  for (const Value* output : node.outputs()) {
    if (output == nullptr) continue;
    for (const Use& use : output->uses()) {
      if (IsPostOp(*use.node)) return true;
    }
  }
  return false;
}

Next BinaryStep(Node& reader, Value& value, const Contraction& contraction, const RuntimeShapes& shapes) {
  Value* operand = OtherOperand(reader, value);
  if (operand == nullptr) return Stop(&reader, "both operands are the chain's value");
  if (operand->dtype() != value.dtype()) return Stop(&reader, "operand dtype differs");
  bool full_shape = shapes.Same(*operand, value);
  if (TensorPtr constant = ConstantValueOf(*operand, InitializerRule::kFeedsOverride)) {
    bool scalar = constant->NumElements() == 1;
    if (!scalar && !full_shape && !PerChannel(constant->dims(), contraction)) {
      return Stop(&reader, "constant operand is neither scalar, per-channel nor full-shape");
    }
  } else if (!full_shape) {
    const Shape* operand_shape = KnownRankShape(*operand);
    bool channel_shaped = operand_shape != nullptr && PerChannel(DimsUnknownAsMinusOne(*operand_shape), contraction);
    return Stop(&reader, channel_shaped ? "bias is not a constant" : "operand is neither a constant nor of the output's shape");
  }
  return Next{EpilogueStep{{&reader}, reader.output(0), reader.op_type()}, nullptr, {}};
}

WhyNot WhyNotActivation(const Node& reader, int64_t opset) {
  const std::string& op = reader.op_type();
  // An op used before the opset that introduced it (HardSwish before 14, Gelu before 20).
  if (cpu::KernelRegistry::BuiltIn().Find(reader.domain(), op, opset) == nullptr) {
    return "no CPU kernel for " + op + " at opset " + std::to_string(opset);
  }
  if (op == "Gelu") {
    std::string approximate = reader.GetString("approximate", "none");
    if (approximate != "none" && approximate != "tanh") return "unknown Gelu approximation";
  }
  if (op == "Clip" && opset >= 11) {
    for (size_t i = 1; i < reader.inputs().size(); ++i) {
      const Value* bound = reader.input(i);
      if (bound == nullptr) continue;
      TensorPtr constant = ConstantValueOf(*bound, InitializerRule::kFeedsOverride);
      if (constant == nullptr || constant->NumElements() != 1) return "Clip bounds are not constant scalars";
    }
  }
  return {};
}

// What the chain may take after `value`: facts from before any rewrite, and the post-ops that
// earlier chains claimed (two contractions meeting at one Add: the first in graph order takes it).
struct ChainContext {
  const Contraction& contraction;
  const RuntimeShapes& shapes;
  const std::unordered_set<const Node*>& claimed;
  int64_t opset = 0;
};

Next NextStep(Value& value, const ChainContext& chain) {
  Node* only = SoleReader(value);
  if (only == nullptr) {
    if (auto pattern = MatchActivationPattern(value, chain.opset)) return Next{std::move(pattern), nullptr, {}};
    for (const Use& use : value.uses()) {
      if (IsPostOp(*use.node)) {
        return Stop(use.node, value.is_graph_output() ? "value is a graph output" : "value has several readers");
      }
    }
    return Stop(nullptr, {});
  }
  if (!IsPostOp(*only)) return Stop(nullptr, {});
  if (only->outputs().size() != 1 || only->output(0) == nullptr) return Stop(only, "not one output");
  if (only->op_type() == "Sum") {
    // Old exporters write residual adds as Sum; with two inputs (and broadcasting, opset 8)
    // it is an Add.
    if (only->inputs().size() != 2) return Stop(only, "Sum of other than two inputs");
    if (chain.opset < 8) return Stop(only, "Sum before opset 8");
  }
  if (only->op_type() == "Add" || only->op_type() == "Sum" || only->op_type() == "Mul") {
    return BinaryStep(*only, value, chain.contraction, chain.shapes);
  }
  if (only->input(0) != &value) return Stop(only, "the chain's value is not the activation's input");
  WhyNot why = WhyNotActivation(*only, chain.opset);
  if (why) return Stop(only, why);
  return Next{EpilogueStep{{only}, only->output(0), only->op_type()}, nullptr, {}};
}

// The contraction and its post-ops, step by step (steps[i] = the nodes step i added).
struct Chain {
  Contraction contraction;
  std::vector<std::vector<Node*>> steps;
  std::vector<std::string> names;
  Value* tail = nullptr;  // the value the next step reads
  int residuals = 0;      // steps that add a computed tensor
};

// A binary step's constant operand against `tail` (the value it extends), null otherwise.
TensorPtr StepConstant(const Node& node, const Value& tail) {
  const Value* operand = OtherOperand(node, tail);
  return operand != nullptr ? ConstantValueOf(*operand, InitializerRule::kFeedsOverride) : nullptr;
}

bool IsAddStep(const Node& node) { return IsStandardOp(node, "Add") || IsStandardOp(node, "Sum"); }

// The integer kernel's epilogue (quantized/integer_contraction.h) is a bias per output channel
// first, then eltwise steps and at most one residual of the output's shape; a step beyond that
// ends a dynamically quantized chain (a float contraction's kernel takes any binary addend).
WhyNot WhyNotIntegerStep(const EpilogueStep& step, const Chain& chain) {
  if (step.nodes.size() != 1) return {};  // a decomposed activation: one eltwise post-op
  const Node& node = *step.nodes.front();
  if (!IsAddStep(node) && !IsStandardOp(node, "Mul")) return {};  // an activation
  const TensorPtr constant = StepConstant(node, *chain.tail);
  if (constant != nullptr && constant->NumElements() == 1) return {};  // an eltwise linear step
  if (!IsAddStep(node)) return "integer kernel: a product with a tensor is no post-op of it";
  if (constant == nullptr) return chain.residuals > 0 ? "integer kernel: a second residual" : WhyNot();
  if (!chain.steps.empty()) return "integer kernel: a per-channel addend other than the bias right after the product";
  if (!PerChannel(constant->dims(), chain.contraction)) return "integer kernel: a constant addend not per channel";
  return {};
}

// Why `step` cannot extend the chain as it stands, or "".
WhyNot WhyNotAppend(const EpilogueStep& step, const Chain& chain, const ChainContext& context, int64_t max_post_ops) {
  for (const Node* node : step.nodes) {
    if (context.claimed.count(node)) return "post-op already in another contraction's chain";
  }
  Value& output = *chain.contraction.output;
  if (step.result->dtype() != output.dtype()) return "post-op changes the dtype";
  if (!context.shapes.Same(*step.result, output)) return "post-op changes the output's shape";
  if (static_cast<int64_t>(chain.steps.size()) == max_post_ops) return "epilogue would exceed max-post-ops";
  if (chain.contraction.integer) return WhyNotIntegerStep(step, chain);
  return {};
}

Chain FollowChain(const ChainContext& context, int64_t max_post_ops, PassContext& pass_context) {
  Chain chain{context.contraction, {}, {}, context.contraction.output, 0};
  while (true) {
    Next next = NextStep(*chain.tail, context);
    if (!next.step) {
      if (next.reason) pass_context.Rejected(*next.at, next.reason);
      break;
    }
    WhyNot why = WhyNotAppend(*next.step, chain, context, max_post_ops);
    if (why) {
      pass_context.Rejected(*next.step->nodes.back(), why);
      break;
    }
    const Node& first = *next.step->nodes.front();
    if (next.step->nodes.size() == 1 && IsAddStep(first) && StepConstant(first, *chain.tail) == nullptr) ++chain.residuals;
    chain.steps.push_back(next.step->nodes);
    chain.names.push_back(next.step->name);
    chain.tail = next.step->result;
  }
  return chain;
}

// Outlines the longest legal prefix of the chain; whether anything was fused.
// A dynamically quantized head is worth one kernel without any step: it is several ops.
bool FuseLongestLegalPrefix(Graph& graph, Chain chain, PassContext& context) {
  const Contraction& contraction = chain.contraction;
  const size_t fewest_steps = contraction.head.size() > 1 ? 0 : 1;
  while (chain.steps.size() >= fewest_steps) {
    std::vector<Node*> members = contraction.head;
    std::string name = "Fused" + contraction.name;
    for (size_t i = 0; i < chain.steps.size(); ++i) {
      members.insert(members.end(), chain.steps[i].begin(), chain.steps[i].end());
      name += chain.names[i];
    }
    WhyNot why = WhyNotOutlinable(members);
    // A prefix the cost model refuses is reported by JudgeFusion; a shorter one may still pay.
    if (!why && context.JudgeFusion(members).apply()) {
      OutlineGroup(graph, FusionGroup{members, "contraction_epilogue", name}, context);
      context.Count("post_ops_fused", static_cast<int64_t>(chain.steps.size()));
      return true;
    }
    if (why) context.Rejected(chain.steps.empty() ? *contraction.node : *chain.steps.back().front(), why);
    if (chain.steps.empty()) break;
    chain.steps.pop_back();
    chain.names.pop_back();
  }
  return false;
}

}  // namespace

std::vector<PassOptionInfo> FuseContractionEpilogues::options() const {
  return {{"max-post-ops", "8", "most post-ops (bias, residual, activation) after one contraction"}};
}

Result<bool> FuseContractionEpilogues::RunOnGraph(Graph& graph, PassContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t max_post_ops, context.IntOption("max-post-ops"));
  if (max_post_ops < 1) return UsageError("fuse-contraction-epilogues needs max-post-ops >= 1");
  int64_t opset = context.model().OpsetFor("").value_or(0);
  std::vector<Node*> contractions;
  for (const auto& node : graph.nodes()) {
    if (IsFloatContraction(*node) || IsIntegerContraction(*node)) contractions.push_back(node.get());
  }
  // Every chain is planned on the graph as it was (shape facts are a snapshot), then outlined.
  RuntimeShapes shapes(graph);
  std::unordered_set<const Node*> claimed;
  std::vector<Chain> chains;
  for (Node* node : contractions) {
    Contraction contraction;
    WhyNot why = opset < kFirstUnrestrictedOpset ? WhyNot("opset before 7")
                 : IsIntegerContraction(*node)   ? AnalyzeDynamicContraction(*node, contraction)
                                                 : AnalyzeContraction(*node, contraction);
    if (why) {
      // Worth a report only where a post-op was waiting, or the integer op left several kernels.
      if (IsIntegerContraction(*node) || HasPostOpReader(*node)) context.Rejected(*node, why);
      continue;
    }
    Chain chain = FollowChain(ChainContext{contraction, shapes, claimed, opset}, max_post_ops, context);
    if (chain.steps.empty() && contraction.head.size() == 1) continue;
    for (const auto& step : chain.steps) claimed.insert(step.begin(), step.end());
    chains.push_back(std::move(chain));
  }
  bool changed = false;
  for (Chain& chain : chains) {
    if (FuseLongestLegalPrefix(graph, std::move(chain), context)) changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
