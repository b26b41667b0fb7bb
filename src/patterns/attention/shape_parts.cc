// The attention matcher's reader of Reshape and Expand targets (attention.h's ShapeParts, and
// match_internal.h's Entries, ReadTarget and ReadReshape): a constant, or the exporters' Concat of
// Shape dims, Slices of a Shape and constants.
#include <unordered_set>

#include "ir/constant_value.h"
#include "patterns/attention/match_internal.h"
#include "patterns/matcher_support.h"

namespace fusionopt {
namespace {

using composite::ProducerOp;

// Unsqueeze(x, [0]) in either opset's spelling: the unsqueezed value, or null.
Value* UnsqueezedAtZero(const Node& unsqueeze) {
  std::optional<std::vector<int64_t>> axes = unsqueeze.GetInts("axes");
  if (!axes && unsqueeze.inputs().size() == 2) axes = ConstantInts(unsqueeze.input(1), InitializerRule::kFeedsOverride);
  if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return nullptr;
  return unsqueeze.input(0);
}

// Gather(Shape(v), i) with a one-element constant index: v and i, added to `chain`.
std::optional<ShapePartMatch> DimOfShape(const Value* gathered, std::vector<Node*>& chain) {
  Node* gather = ProducerOp(gathered, "Gather");
  if (gather == nullptr || gather->GetInt("axis", 0) != 0 || gather->inputs().size() != 2) return std::nullopt;
  std::optional<std::vector<int64_t>> index = ConstantInts(gather->input(1), InitializerRule::kFeedsOverride);
  Node* shape = ProducerOp(gather->input(0), "Shape");
  if (!index || index->size() != 1 || shape == nullptr || shape->input(0) == nullptr) return std::nullopt;
  if (shape->FindAttribute("start") != nullptr || shape->FindAttribute("end") != nullptr) return std::nullopt;
  chain.push_back(shape);
  chain.push_back(gather);
  ShapePartMatch part;
  part.kind = ShapePartMatch::Kind::kDimOf;
  part.value = shape->input(0);
  part.axis = index->front();
  return part;
}

// Shape(v) {start: i, end: i + 1} (opset 15; the dynamo exporter's form): v and i, added to
// `chain`.
std::optional<ShapePartMatch> DimOfSlicedShape(Value* value, std::vector<Node*>& chain) {
  Node* shape = ProducerOp(value, "Shape");
  if (shape == nullptr || shape->input(0) == nullptr || shape->FindAttribute("start") == nullptr) return std::nullopt;
  const int64_t start = shape->GetInt("start", 0);
  const Attribute* end = shape->FindAttribute("end");
  // start -1 with end 0 is an empty slice, not the last dim.
  if (end == nullptr || shape->GetInt("end", 0) != start + 1 || start == -1) return std::nullopt;
  chain.push_back(shape);
  ShapePartMatch part;
  part.kind = ShapePartMatch::Kind::kDimOf;
  part.value = shape->input(0);
  part.axis = start;
  return part;
}

int64_t OpsetAllowZero(const Node& reshape, int64_t opset) {
  return opset >= 14 ? reshape.GetInt("allowzero", 0) : 0;
}

}  // namespace

std::optional<std::vector<ShapePartMatch>> ShapeParts(Value& shape, std::vector<Node*>* chain) {
  std::vector<ShapePartMatch> parts;
  if (std::optional<std::vector<int64_t>> constant = ConstantInts(&shape, InitializerRule::kFeedsOverride)) {
    ShapePartMatch part;
    part.constant = *constant;
    return std::vector<ShapePartMatch>{part};
  }
  Node* concat = ProducerOp(&shape, "Concat");
  if (concat == nullptr || (concat->GetInt("axis", 0) != 0 && concat->GetInt("axis", 0) != -1)) return std::nullopt;
  std::vector<Node*> nodes;
  for (Value* input : concat->inputs()) {
    if (std::optional<std::vector<int64_t>> constant = ConstantInts(input, InitializerRule::kFeedsOverride)) {
      ShapePartMatch part;
      part.constant = *constant;
      parts.push_back(part);
      continue;
    }
    if (std::optional<ShapePartMatch> dim = DimOfSlicedShape(input, nodes)) {
      parts.push_back(*dim);
      continue;
    }
    Node* unsqueeze = ProducerOp(input, "Unsqueeze");
    Value* gathered = unsqueeze != nullptr ? UnsqueezedAtZero(*unsqueeze) : input;
    std::optional<ShapePartMatch> dim = gathered != nullptr ? DimOfShape(gathered, nodes) : std::nullopt;
    if (!dim) {
      ShapePartMatch part;
      part.kind = ShapePartMatch::Kind::kValues;
      part.value = input;
      parts.push_back(part);
      continue;
    }
    // The Gather's index is a scalar under an Unsqueeze, a one-element list without one.
    const Node* gather = nodes.back();
    const TensorPtr index = ConstantValueOf(*gather->input(1), InitializerRule::kFeedsOverride);
    if ((unsqueeze != nullptr) != (index->dims().empty())) return std::nullopt;
    if (unsqueeze != nullptr) nodes.push_back(unsqueeze);
    parts.push_back(*dim);
  }
  nodes.push_back(concat);
  if (chain != nullptr) {
    std::unordered_set<const Node*> seen;
    for (Node* node : nodes) {
      if (seen.insert(node).second) chain->push_back(node);
    }
  }
  return parts;
}

namespace attention_match {

std::optional<std::vector<std::optional<int64_t>>> Entries(const std::vector<ShapePartMatch>& parts) {
  std::vector<std::optional<int64_t>> entries;
  for (const ShapePartMatch& part : parts) {
    switch (part.kind) {
      case ShapePartMatch::Kind::kConstant:
        entries.insert(entries.end(), part.constant.begin(), part.constant.end());
        break;
      case ShapePartMatch::Kind::kDimOf: entries.push_back(std::nullopt); break;
      case ShapePartMatch::Kind::kValues: {
        const auto& shape = part.value->shape();
        if (!shape || shape->size() != 1 || !(*shape)[0].is_known()) return std::nullopt;
        entries.insert(entries.end(), static_cast<size_t>((*shape)[0].value), std::nullopt);
        break;
      }
    }
  }
  return entries;
}

HeadReshapeMatch ReadTarget(Value& shape, const Node& reader) {
  HeadReshapeMatch match;
  std::vector<Node*> chain;
  std::optional<std::vector<ShapePartMatch>> parts = ShapeParts(shape, &chain);
  std::unordered_set<const Node*> inside(chain.begin(), chain.end());
  inside.insert(&reader);
  bool absorbable = parts.has_value();
  for (const Node* node : chain) {
    for (const Value* output : node->outputs()) {
      if (output == nullptr) continue;
      absorbable = absorbable && !output->is_graph_output();
      for (const Use& use : output->uses()) absorbable = absorbable && inside.count(use.node);
    }
  }
  if (absorbable) {
    match.parts = std::move(*parts);
    match.chain = std::move(chain);
  } else {
    ShapePartMatch values;
    values.kind = ShapePartMatch::Kind::kValues;
    values.value = &shape;
    match.parts = {values};
  }
  return match;
}

HeadReshapeMatch ReadReshape(Node& reshape, int64_t opset) {
  HeadReshapeMatch match = ReadTarget(*reshape.input(1), reshape);
  match.reshape = &reshape;
  match.allow_zero = OpsetAllowZero(reshape, opset) != 0;
  return match;
}

}  // namespace attention_match
}  // namespace fusionopt
