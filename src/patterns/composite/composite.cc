#include "patterns/composite/composite.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "ir/constant_value.h"
#include "patterns/matcher_support.h"

namespace fusionopt {
namespace composite {

Node* ProducerOp(const Value* value, std::string_view op_type) {
  if (value == nullptr) return nullptr;
  Node* producer = value->producer();
  return IsDefaultOp(producer, op_type) ? producer : nullptr;
}

bool Near(double value, double expected) { return Near(value, expected, DataType::kFloat); }

bool Near(double value, double expected, DataType stored_as) {
  const double tolerance = stored_as == DataType::kFloat16    ? std::ldexp(1.0, -11)
                           : stored_as == DataType::kBFloat16 ? std::ldexp(1.0, -8)
                                                              : kConstantTolerance;
  return std::isfinite(value) && std::abs(value - expected) <= tolerance * std::abs(expected);
}

bool IsScalarConstantNear(const Value* value, double expected) {
  std::optional<double> constant = ConstantScalar(value, InitializerRule::kFeedsOverride);
  return constant.has_value() && Near(*constant, expected);
}

Value* OtherOperand(const Node& node, const Value* value) {
  if (node.inputs().size() != 2) return nullptr;
  if (node.input(0) == value) return node.input(1);
  if (node.input(1) == value) return node.input(0);
  return nullptr;
}

Node* ReaderOp(const Value* value, std::string_view op_type) {
  if (value == nullptr) return nullptr;
  for (const Use& use : value->uses()) {
    if (IsDefaultOp(use.node, op_type)) return use.node;
  }
  return nullptr;
}

Node* SoleReader(const Value* value) {
  if (value == nullptr || value->uses().size() != 1 || value->is_graph_output()) return nullptr;
  return value->uses().front().node;
}

CompositeSearch NearMiss(CompositeKind kind, const WhyNot& reason) {
  CompositeSearch search;
  search.near_miss = reason.Prefixed(NameOf(kind));
  return search;
}

CompositeSearch Checked(CompositeMatch match) {
  std::unordered_set<const Node*> members(match.nodes.begin(), match.nodes.end());
  for (const Value* operand : {match.x, match.residual, match.gamma, match.beta, match.mask, match.condition}) {
    if (operand != nullptr && members.count(operand->producer())) {
      return NearMiss(match.kind, "an operand is computed inside the pattern");
    }
  }
  for (const Node* member : match.nodes) {
    for (const Value* output : member->outputs()) {
      if (output == nullptr || output == match.output || output == match.residual_sum) continue;
      if (output->is_graph_output()) return NearMiss(match.kind, "a graph output is inside the pattern");
      for (const Use& use : output->uses()) {
        if (!members.count(use.node)) return NearMiss(match.kind, "an intermediate is read outside the pattern");
      }
    }
  }
  CompositeSearch search;
  search.match = std::move(match);
  return search;
}

int BodyInputIndex(const Graph& body, const Value* value) {
  const auto& inputs = body.inputs();
  auto it = std::find(inputs.begin(), inputs.end(), value);
  return it == inputs.end() ? -1 : static_cast<int>(it - inputs.begin());
}

std::optional<CompositeOperand> BodyOperandOf(const Graph& body, const Value* value) {
  CompositeOperand operand;
  if (value == nullptr) return operand;
  operand.input = BodyInputIndex(body, value);
  if (operand.input >= 0) return operand;
  if (value->producer() != nullptr && IsDefaultOp(value->producer(), "Constant")) {
    operand.constant = ConstantNodeValue(*value->producer());
    if (operand.constant != nullptr) return operand;
  }
  return std::nullopt;
}

bool BodyIsExactly(const Graph& body, const std::vector<Node*>& members) {
  std::unordered_set<const Node*> member_set(members.begin(), members.end());
  for (const auto& node : body.nodes()) {
    if (member_set.count(node.get())) continue;
    if (!IsDefaultOp(node.get(), "Constant")) return false;
    for (const Value* output : node->outputs()) {
      if (output == nullptr) continue;
      if (output->is_graph_output()) return false;
      for (const Use& use : output->uses()) {
        if (!member_set.count(use.node)) return false;
      }
    }
  }
  return true;
}

}  // namespace composite

namespace {


std::optional<FusedComposite> Describe(const Graph& body, const CompositeMatch& match) {
  if (!composite::BodyIsExactly(body, match.nodes)) return std::nullopt;
  FusedComposite described;
  described.kind = match.kind;
  described.standard_op = match.standard_op;
  described.result_output = -1;
  const auto& outputs = body.outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == match.output) {
      described.result_output = static_cast<int>(i);
    } else if (outputs[i] != nullptr && outputs[i] == match.residual_sum) {
      described.residual_sum_output = static_cast<int>(i);
    } else {
      return std::nullopt;
    }
  }
  if (described.result_output < 0) return std::nullopt;

  struct Slot {
    const Value* value;
    CompositeOperand* operand;
    CompositeRole role;
  };
  const Slot slots[] = {{match.x, &described.x, CompositeRole::kX},
                        {match.residual, &described.residual, CompositeRole::kResidual},
                        {match.gamma, &described.gamma, CompositeRole::kGamma},
                        {match.beta, &described.beta, CompositeRole::kBeta},
                        {match.mask, &described.mask, CompositeRole::kMask},
                        {match.condition, &described.condition, CompositeRole::kCondition}};
  std::vector<std::optional<CompositeRole>> roles(body.inputs().size());
  for (const Slot& slot : slots) {
    std::optional<CompositeOperand> operand = composite::BodyOperandOf(body, slot.value);
    if (!operand) return std::nullopt;
    *slot.operand = *operand;
    if (operand->input >= 0 && !roles[operand->input]) roles[operand->input] = slot.role;
  }
  if (described.x.input < 0) return std::nullopt;
  for (const auto& role : roles) {
    if (!role) return std::nullopt;  // an input the composite does not read
    described.input_roles.push_back(*role);
  }
  described.epsilon = match.epsilon;
  described.axis = match.axis;
  described.scale = match.scale;
  described.scale_divides = match.scale_divides;
  described.fill = match.fill;
  described.fill_when_true = match.fill_when_true;
  described.gelu_form = match.gelu_form;
  described.alpha = match.alpha;
  described.cast_back_to = match.cast_back_to;
  return described;
}

}  // namespace

std::string_view NameOf(CompositeKind kind) {
  switch (kind) {
    case CompositeKind::kLayerNorm: return "layernorm";
    case CompositeKind::kRmsNorm: return "rmsnorm";
    case CompositeKind::kSoftmax: return "softmax";
    case CompositeKind::kGelu: return "gelu";
    case CompositeKind::kSilu: return "silu";
  }
  return "unknown";
}

std::optional<int64_t> NormalizedAxis(int64_t axis, int64_t rank) {
  int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank) return std::nullopt;
  return normalized;
}

CompositeSearch MatchCompositeAt(Node& anchor, int64_t opset) {
  if (!IsDefaultDomain(anchor)) return {};
  const std::string& op = anchor.op_type();
  if (op == "Sqrt") return composite::MatchDecomposedNorm(anchor, opset);
  if (op == "LayerNormalization" || op == "RMSNormalization") return composite::MatchNormOp(anchor);
  if (op == "Softmax") return composite::MatchSoftmax(anchor, opset);
  if (op == "Erf") return composite::MatchErfGelu(anchor);
  if (op == "Tanh") return composite::MatchTanhGelu(anchor);
  if (op == "Gelu") return composite::MatchGeluOp(anchor);
  if (op == "Sigmoid") return composite::MatchSilu(anchor);
  return {};
}

std::optional<FusedComposite> RecognizeComposite(const Graph& body, int64_t opset) {
  for (const auto& node : body.nodes()) {
    if (IsDefaultOp(node.get(), "Constant")) continue;
    CompositeSearch search = MatchCompositeAt(*node, opset);
    if (!search.match) continue;
    if (auto described = Describe(body, *search.match)) return described;
  }
  return std::nullopt;
}

std::optional<FusedComposite> RecognizeComposite(const Function& function) {
  std::optional<int64_t> opset = function.OpsetFor("");
  if (!opset || function.body == nullptr) return std::nullopt;
  return RecognizeComposite(*function.body, *opset);
}

}  // namespace fusionopt
