// lower-for-ort, rotary embedding and grouped-query repeats around MultiHeadAttention: a Q or K
// rotated inside the attention group is rotated before the kernel by ORT's RotaryEmbedding, and a
// K or V repeated for grouped-query attention is repeated on its [B,S,Hkv·D] form; see
// lower_for_ort.h for the rewrite and its limits.
#include <string>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/conversion/ort/support.h"

namespace fusionopt::passes::ort_lowering {
namespace {

// A step of the walk from a rotary table towards the values it is computed from: a value of the
// main graph, or of the body of `function` called by `call`.
struct Place {
  const Value* value = nullptr;
  const Node* call = nullptr;
  const Function* function = nullptr;
  std::optional<int64_t> rank;  // the value's rank where the walk knows it
};

bool IsScalarConstant(const Value* value, InitializerRule initializers) {
  return ConstantScalar(value, initializers).has_value();
}

// The place `place.value` is computed at: into a fused call's body for its result, out to the
// call's argument for a body's formal input. Returns the place itself when it is neither.
Place Resolve(const Model& model, Place place) {
  if (place.function != nullptr) {
    const auto& formals = place.function->body->inputs();
    for (size_t i = 0; i < formals.size(); ++i) {
      if (formals[i] == place.value && i < place.call->inputs().size()) return {place.call->input(i), nullptr, nullptr, place.rank};
    }
    return place;
  }
  const Node* producer = place.value->producer();
  if (producer == nullptr || producer->domain() != kFusionDomain) return place;
  const Function* function = model.FindFunction(producer->domain(), producer->op_type());
  if (function == nullptr || function->body == nullptr) return place;
  const auto& outputs = function->body->outputs();
  const size_t index = static_cast<size_t>(place.value->producer_output_index());
  if (index >= outputs.size()) return place;
  return {outputs[index], producer, function, place.rank};
}

// The Unsqueeze's axes, when it keeps the last axis of its `rank`-D result where it was: every
// axis constant and not that last one (the rank must be known to tell).
std::optional<size_t> AxesKeepingLast(const Node& unsqueeze, std::optional<int64_t> rank, InitializerRule initializers) {
  std::optional<std::vector<int64_t>> axes = unsqueeze.GetInts("axes");
  if (!axes && unsqueeze.inputs().size() > 1) axes = ConstantInts(unsqueeze.input(1), initializers);
  if (!axes || !rank) return std::nullopt;
  for (int64_t axis : *axes) {
    const int64_t normalized = axis < 0 ? axis + *rank : axis;
    if (normalized < 0 || normalized >= *rank - 1) return std::nullopt;
  }
  return axes->size();
}

}  // namespace

bool HalvesProvablyEqual(const Model& model, const Value* table) {
  if (table == nullptr || !table->shape()) return false;
  Place place{table, nullptr, nullptr, static_cast<int64_t>(table->shape()->size())};
  const InitializerRule initializers = InitializerRuleOf(model);
  for (int step = 0; step < 16; ++step) {
    place = Resolve(model, place);
    const Node* node = place.value->producer();
    if (node == nullptr || !IsDefaultDomain(*node)) return false;
    const std::string& op = node->op_type();
    if (op == "Concat") {
      const int64_t axis = node->GetInt("axis", 0);
      const bool last = axis == -1 || (place.rank && axis == *place.rank - 1);
      return last && node->inputs().size() == 2 && node->input(0) == node->input(1) && node->input(0) != nullptr;
    }
    const Value* next = nullptr;
    if (op == "Cos" || op == "Sin" || op == "Cast" || op == "Neg" || op == "Identity") {
      next = node->input(0);
    } else if (op == "Mul" || op == "Div" || op == "Add" || op == "Sub") {
      // x op c keeps equal halves equal; c op x too (a scalar on either side).
      if (IsScalarConstant(node->input(1), initializers)) next = node->input(0);
      else if (IsScalarConstant(node->input(0), initializers)) next = node->input(1);
    } else if (op == "Unsqueeze") {
      std::optional<size_t> added = AxesKeepingLast(*node, place.rank, initializers);
      if (!added) return false;
      next = node->input(0);
      place.rank = *place.rank - static_cast<int64_t>(*added);
    }
    if (next == nullptr) return false;
    place.value = next;
  }
  return false;
}

WhyNot WhyNotRotaryEmbedding(const Model& model, const Value* cos, const Value* sin, const Value* operand, int64_t width) {
  for (const Value* table : {cos, sin}) {
    if (table == nullptr || table->dtype() != operand->dtype()) return "the rotary tables are not of Q's type";
    if (!table->shape() || table->shape()->size() != 4 || !(*table->shape())[0].is_known() || (*table->shape())[0].value != 1 ||
        !(*table->shape())[1].is_known() || (*table->shape())[1].value != 1 || !(*table->shape())[3].is_known() ||
        (*table->shape())[3].value != width) {
      return "the rotary tables are not [1,1,S,W] for the W features turned (one row of positions shared by the batch)";
    }
    if (!HalvesProvablyEqual(model, table)) return "the rotary tables' halves are not provably equal (Cos or Sin of Concat(f, f))";
  }
  return {};
}

// The [S, W/2] cache RotaryEmbedding reads: the first half of a [1,1,S,W] table's rows.
Value* CacheFrom(Graph& graph, Node& before, Value* table, int64_t head_size, SharedValues& shared) {
  Value*& cache = shared[{table, "rotary cache"}];
  if (cache != nullptr) return cache;
  const std::string stem = table->name() + "_rotary";
  auto step = [&](const char* op, std::vector<Value*> inputs) {
    return WriteOpBefore(graph, before, op, inputs, stem + "_" + op, table->dtype())->output(0);
  };
  Value* half = step("Slice", {table, AddInt64Initializer(graph, stem + "_starts", {0}),
                               AddInt64Initializer(graph, stem + "_ends", {head_size / 2}),
                               AddInt64Initializer(graph, stem + "_axes", {3})});
  cache = step("Reshape", {half, AddInt64Initializer(graph, stem + "_shape", {-1, head_size / 2})});
  cache->type().shape = Shape{(*table->shape())[2], Dim::Known(head_size / 2)};
  return cache;
}

Value* WriteRotaryEmbedding(Graph& graph, Node& before, Value* operand, int64_t heads, Value* cos, Value* sin,
                            RotaryWidths widths, SharedValues& shared) {
  Value*& offset = shared[{nullptr, "rotary position offset"}];
  if (offset == nullptr) offset = AddInt64Initializer(graph, "rotary_position_offset", {0});
  Value* cos_cache = CacheFrom(graph, before, cos, widths.turned, shared);
  Value* sin_cache = CacheFrom(graph, before, sin, widths.turned, shared);
  Value* rotated = graph.CreateValue(graph.UniqueName(operand->name() + "_rotated"));
  rotated->type() = operand->type();
  Node* node = graph.CreateNode("RotaryEmbedding", kOrtDomain, {operand, offset, cos_cache, sin_cache}, {rotated},
                                graph.UniqueNodeName(before.name() + "/RotaryEmbedding"));
  node->SetAttribute(Attribute::Int("num_heads", heads));
  node->SetAttribute(Attribute::Int("interleaved", 0));
  if (widths.turned < widths.head) node->SetAttribute(Attribute::Int("rotary_embedding_dim", widths.turned));
  graph.MoveBefore(node, &before);
  return rotated;
}

Value* WriteHeadRepeat(Graph& graph, Node& before, Value* operand, int64_t kv_heads, int64_t repeats, int64_t head_size) {
  const std::string stem = before.name() + "_" + operand->name() + "_repeat";
  auto step = [&](const char* op, std::vector<Value*> inputs) {
    return WriteOpBefore(graph, before, op, inputs, stem + "_" + op, operand->dtype())->output(0);
  };
  // [B,S,Hkv·D] → [B,S,Hkv,1,D] → [B,S,Hkv,n,D] → [B,S,Hkv·n·D]: head h reads K/V head h / n,
  // as transformers' repeat_kv orders them.
  Value* split = step("Reshape", {operand, AddInt64Initializer(graph, stem + "_split", {0, 0, kv_heads, 1, head_size})});
  Value* repeated = step("Expand", {split, AddInt64Initializer(graph, stem + "_times", {1, 1, 1, repeats, 1})});
  Value* merged = step("Reshape", {repeated, AddInt64Initializer(graph, stem + "_merge", {0, 0, kv_heads * repeats * head_size})});
  merged->type().shape = Shape{(*operand->shape())[0], (*operand->shape())[1], Dim::Known(kv_heads * repeats * head_size)};
  return merged;
}

}  // namespace fusionopt::passes::ort_lowering
