#include "passes/util/shape_facts.h"

#include "ir/op_class.h"

namespace fusionopt::passes {

bool ProvablySameDim(const Dim& a, const Dim& b) {
  if (a.is_known() && b.is_known()) return a.value == b.value;
  return a.is_symbolic() && b.is_symbolic() && a.symbol == b.symbol;
}

bool ProvablySameShape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!ProvablySameDim(a[i], b[i])) return false;
  }
  return true;
}

bool ProvablySameShape(const Value& a, const Value& b) {
  const Shape* left = KnownRankShape(a);
  const Shape* right = KnownRankShape(b);
  return left != nullptr && right != nullptr && ProvablySameShape(*left, *right);
}

bool ProvablyBroadcastsTo(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    bool stretched = from[i].is_known() && from[i].value == 1;
    if (!stretched && !ProvablySameDim(from[i], to[offset + i])) return false;
  }
  return true;
}

const Shape* KnownRankShape(const Value& value) {
  if (!value.type().is_tensor() || !value.shape()) return nullptr;
  return &*value.shape();
}

RuntimeShapes::RuntimeShapes(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    if (node->outputs().size() != 1 || node->output(0) == nullptr) continue;
    bool elementwise = ClassifyOp(*node) == OpClass::kElementwise;
    if (!elementwise && !(node->op_type() == "Identity" && ClassifyOp(*node) == OpClass::kView)) continue;
    // CastLike's second input gives only a type; every other input broadcasts into the output.
    std::vector<const Value*> operands;
    for (const Value* input : node->inputs()) {
      if (input != nullptr) operands.push_back(input);
      if (node->op_type() == "CastLike") break;
    }
    for (const Value* candidate : operands) {
      bool absorbs_others = true;
      for (const Value* other : operands) {
        if (other != candidate && !BroadcastsTo(*other, *candidate)) absorbs_others = false;
      }
      if (absorbs_others) {
        same_as_[node->output(0)] = candidate;
        break;
      }
    }
  }
}

const Value* RuntimeShapes::Root(const Value* value) const {
  for (auto it = same_as_.find(value); it != same_as_.end(); it = same_as_.find(value)) value = it->second;
  return value;
}

bool RuntimeShapes::Same(const Value& a, const Value& b) const {
  const Shape* left = KnownRankShape(a);
  const Shape* right = KnownRankShape(b);
  if (left != nullptr && right != nullptr && ProvablySameShape(*left, *right)) return true;
  return Root(&a) == Root(&b);
}

bool RuntimeShapes::BroadcastsTo(const Value& from, const Value& to) const {
  const Shape* source = KnownRankShape(from);
  const Shape* target = KnownRankShape(to);
  if (source != nullptr && target != nullptr && ProvablyBroadcastsTo(*source, *target)) return true;
  return Root(&from) == Root(&to);
}

std::optional<std::vector<int64_t>> ReshapeOperand(const Shape& input, const Shape& target) {
  std::vector<int64_t> operand;
  int copied = 0;
  int inferred = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    const Dim& dim = target[i];
    if (dim.is_known()) {
      if (dim.value == 0) return std::nullopt;
      operand.push_back(dim.value);
    } else if (dim.is_symbolic() && i < input.size() && input[i] == dim) {
      operand.push_back(0);
      ++copied;
    } else {
      operand.push_back(-1);
      ++inferred;
    }
  }
  // -1 is the element count over the other dims: certain only when they are known sizes.
  if (inferred > 1 || (inferred == 1 && copied > 0)) return std::nullopt;
  return operand;
}

}  // namespace fusionopt::passes
