// lower-for-ort: see lower_for_ort.h for the rewrites and their limits.
#include "passes/lower_for_ort.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "passes/eliminate_dead_code.h"
#include "passes/fold_rewrites.h"
#include "passes/inline_call.h"
#include "patterns/attention.h"
#include "patterns/composite.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::passes {
namespace {

// What one fused call became, or why it stays: exactly one of the two is set.
struct Outcome {
  std::string written;
  std::string kept_because;
  std::string absorbed;  // a fused call before this one that the written kernel took in
};

Outcome Written(std::string op, std::string absorbed = {}) { return {std::move(op), {}, std::move(absorbed)}; }
Outcome Kept(std::string reason) { return {{}, std::move(reason), {}}; }

Attribute IntAttribute(std::string name, int64_t value) {
  Attribute attribute;
  attribute.name = std::move(name);
  attribute.kind = AttributeKind::kInt;
  attribute.i = value;
  return attribute;
}

Attribute FloatAttribute(std::string name, double value) {
  Attribute attribute;
  attribute.name = std::move(name);
  attribute.kind = AttributeKind::kFloat;
  attribute.f = static_cast<float>(value);
  return attribute;
}

bool IsFloat32(const Value* value) { return value != nullptr && value->dtype() == DataType::kFloat; }

// The graph value a body operand stands for at `call`: the call's argument, or the body's own
// constant as a new initializer.
Value* ArgumentFor(Graph& graph, const Node& call, int input, const TensorPtr& constant, const std::string& stem) {
  if (input >= 0) return call.input(static_cast<size_t>(input));
  if (constant != nullptr) return AddInitializer(graph, stem, constant);
  return nullptr;
}

// Dims two values provably share: equal known sizes or the same symbol.
bool SameDim(const Dim& a, const Dim& b) { return (a.is_known() || a.is_symbolic()) && a == b; }

std::optional<Dim> DimOf(const Value* value, size_t axis) {
  if (value == nullptr || !value->shape() || value->shape()->size() <= axis) return std::nullopt;
  return (*value->shape())[axis];
}

std::optional<std::vector<int64_t>> Int64Constant(const Value* value) {
  if (value == nullptr) return std::nullopt;
  TensorPtr constant = ConstantValueOf(*value, /*initializers_overridable=*/false);
  if (constant == nullptr || constant->dtype() != DataType::kInt64) return std::nullopt;
  std::span<const int64_t> values = constant->values<int64_t>();
  return std::vector<int64_t>(values.begin(), values.end());
}

// The known trailing entries of a Reshape target part: its constants; or, for a target read at
// run time, the call's argument when it is a constant, or the constant tail of the Concat that
// computes it (exporters concatenate Shape dims with the constant [H], [D]).
std::vector<int64_t> KnownTail(const AttentionShapePart& part, const Node& call) {
  if (part.kind == ShapePartMatch::Kind::kConstant) return part.constant;
  if (part.kind != ShapePartMatch::Kind::kValues || part.input < 0) return {};
  const Value* argument = call.input(static_cast<size_t>(part.input));
  if (std::optional<std::vector<int64_t>> whole = Int64Constant(argument)) return *whole;
  const Node* concat = argument != nullptr ? argument->producer() : nullptr;
  if (concat == nullptr || concat->op_type() != "Concat" || !concat->domain().empty()) return {};
  std::vector<int64_t> tail;
  for (auto input = concat->inputs().rbegin(); input != concat->inputs().rend(); ++input) {
    std::optional<std::vector<int64_t>> values = Int64Constant(*input);
    if (!values) break;
    tail.insert(tail.begin(), values->begin(), values->end());
  }
  return tail;
}

// The trailing [H, D] of a head split's target where it is known; H may be -1 (inferred from
// the width by Reshape, as the dynamo exporter writes it).
std::optional<std::pair<int64_t, int64_t>> HeadsAndSize(const AttentionReshape& split, const Node& call) {
  std::vector<int64_t> trailing;
  for (auto part = split.parts.rbegin(); part != split.parts.rend() && trailing.size() < 2; ++part) {
    std::vector<int64_t> tail = KnownTail(*part, call);
    trailing.insert(trailing.begin(), tail.begin(), tail.end());
    const bool whole = part->kind == ShapePartMatch::Kind::kConstant ||
                       (part->input >= 0 && Int64Constant(call.input(static_cast<size_t>(part->input))).has_value());
    if (!whole) break;  // only partly known: the parts before it do not line up with the dims
  }
  if (trailing.size() < 2) return std::nullopt;
  const int64_t heads = trailing[trailing.size() - 2], size = trailing.back();
  if ((heads <= 0 && heads != -1) || size <= 0) return std::nullopt;
  return std::make_pair(heads, size);
}

// Why MultiHeadAttention cannot take this operand as [B,S,H·D] (empty when it can).
std::string WhyNotBsd(const AttentionOperand& operand, const char* which) {
  const std::string name(which);
  if (operand.layout != HeadLayout::kSplitHeads || !operand.split) return name + " is not split into heads inside the group";
  if (operand.rotary) return name + " has rotary embedding (MultiHeadAttention has none)";
  if (operand.repeat) return name + " is repeated for grouped-query attention";
  return {};
}

class AttentionLowering {
 public:
  // `biases`: the additive bias already written for a boolean mask, shared by every layer
  // that reads the same condition.
  AttentionLowering(Model& model, Graph& graph, Node& call, const FusedAttention& attention,
                    std::map<Value*, Value*>& biases)
      : model_(model), graph_(graph), call_(call), attention_(attention), biases_(biases) {}

  Outcome Run() {
    if (std::string why = WhyNot(); !why.empty()) return Kept(why);
    if (projection_ != nullptr) return WriteAttentionWithProjection();
    std::vector<Value*> inputs = {query_, key_, value_, nullptr, nullptr};
    if (mask_ != nullptr) inputs.push_back(mask_);
    const std::string name = graph_.UniqueNodeName(call_.name() + "/MultiHeadAttention");
    Node* lowered = graph_.CreateNode("MultiHeadAttention", kOrtDomain, inputs, {nullptr}, name);
    lowered->SetAttribute(IntAttribute("num_heads", heads_));
    lowered->SetAttribute(FloatAttribute("scale", scale_));
    graph_.MoveBefore(lowered, &call_);
    Value* result = call_.output(static_cast<size_t>(attention_.result_output));
    if (merge_target_ == nullptr) {
      graph_.TransferProducer(result, lowered, 0);
    } else {  // the group merged the heads straight to [B·S, H·D] (GPT-2's Conv1D reads 2-D)
      Value* context = graph_.CreateValue(graph_.UniqueName(call_.name() + "_context"));
      context->type().dtype = DataType::kFloat;
      context->type().shape = Shape{*DimOf(query_, 0), *DimOf(query_, 1), *DimOf(query_, 2)};
      graph_.TransferProducer(context, lowered, 0);
      Node* reshape = graph_.CreateNode("Reshape", "", {context, merge_target_}, {nullptr},
                                        graph_.UniqueNodeName(call_.name() + "/merge"));
      graph_.MoveBefore(reshape, &call_);
      graph_.TransferProducer(result, reshape, 0);
    }
    graph_.RemoveNode(&call_);
    return Written(std::string(kOrtDomain) + "::MultiHeadAttention");
  }

 private:
  std::string WhyNot() {
    if (attention_.op) return "the core is a standard Attention node";
    if (call_.outputs().size() != 1) return "the group has more than one result";
    if (!IsFloat32(call_.output(0))) return "not float32 (ORT's CPU MultiHeadAttention)";
    for (auto [operand, which] : {std::pair{&attention_.q, "Q"}, {&attention_.k, "K"}, {&attention_.v, "V"}}) {
      if (std::string why = WhyNotBsd(*operand, which); !why.empty()) return why;
    }
    if (attention_.merge_perm != std::vector<int64_t>{0, 2, 1, 3} || !attention_.merge) {
      return "the heads are not merged back to [B,S,H*D] inside the group";
    }
    if (attention_.softmax_axis != -1 && attention_.softmax_axis != 3) return "the softmax is not over the keys";
    if (std::string why = ResolveOperands(); !why.empty()) return why;
    if (std::string why = ResolveMerge(); !why.empty()) return why;
    if (std::string why = ResolveHeads(); !why.empty()) return why;
    FindProjection();
    if (std::string why = ResolveMask(); !why.empty()) return why;
    scale_ = attention_.q.prescale * attention_.k.prescale;
    if (attention_.scale) scale_ *= attention_.scale_divides ? 1.0 / *attention_.scale : *attention_.scale;
    if (!std::isfinite(scale_) || scale_ == 0) return "the scale is not a finite non-zero number";
    return {};
  }

  // Attention(x, W, b[, , , bias]): the projection's MatMul and bias Add and the attention in
  // one kernel, which packs W once when ORT creates the session.
  Outcome WriteAttentionWithProjection() {
    const std::string absorbed = projection_->name();
    std::vector<Value*> inputs = {projection_x_, projection_w_, projection_b_};
    if (mask_ != nullptr) inputs.insert(inputs.end(), {nullptr, nullptr, mask_});
    Node* lowered = graph_.CreateNode("Attention", kOrtDomain, inputs, {nullptr},
                                      graph_.UniqueNodeName(call_.name() + "/Attention"));
    lowered->SetAttribute(IntAttribute("num_heads", heads_));
    lowered->SetAttribute(FloatAttribute("scale", scale_));
    graph_.MoveBefore(lowered, &call_);
    Value* result = call_.output(static_cast<size_t>(attention_.result_output));
    if (merge_target_ == nullptr) {
      graph_.TransferProducer(result, lowered, 0);
    } else {
      Value* context = graph_.CreateValue(graph_.UniqueName(call_.name() + "_context"));
      context->type().dtype = DataType::kFloat;
      context->type().shape = Shape{*DimOf(projection_x_, 0), *DimOf(projection_x_, 1), *DimOf(query_, 2)};
      graph_.TransferProducer(context, lowered, 0);
      Node* reshape = graph_.CreateNode("Reshape", "", {context, merge_target_}, {nullptr},
                                        graph_.UniqueNodeName(call_.name() + "/merge"));
      graph_.MoveBefore(reshape, &call_);
      graph_.TransferProducer(result, reshape, 0);
    }
    graph_.RemoveNode(&call_);  // the Split written for Q, K and V, and the projection, are left unread
    return Written(std::string(kOrtDomain) + "::Attention", absorbed);
  }

  // The combined Q, K, V projection as ORT's Attention takes it: an ai.fusionopt call whose
  // body is MatMul(x, W) + b, W a [D_in, 3·H·D] and b a [3·H·D] initializer, read by nothing
  // but this attention, split into equal Q, K, V in that order.
  void FindProjection() {
    if (!attention_.combined || attention_.split_outputs != 3 || attention_.q.split_output != 0 ||
        attention_.k.split_output != 1 || attention_.v.split_output != 2) {
      return;
    }
    Value* combined = call_.input(static_cast<size_t>(attention_.combined_input));
    Node* producer = combined->producer();
    if (producer == nullptr || producer->domain() != kFusionDomain || combined->is_graph_output()) return;
    for (const Use& use : combined->uses()) {
      if (use.node != &call_ && use.node != split_) return;
    }
    const Function* function = model_.FindFunction(producer->domain(), producer->op_type());
    if (function == nullptr || function->body == nullptr || function->body->num_nodes() != 2) return;
    const Node& matmul = *function->body->nodes().front();
    const Node& add = *function->body->nodes().back();
    if (matmul.op_type() != "MatMul" || add.op_type() != "Add" || !matmul.domain().empty() || !add.domain().empty()) return;
    auto formal = [&](const Value* value) {
      const auto& inputs = function->body->inputs();
      auto it = std::find(inputs.begin(), inputs.end(), value);
      return it == inputs.end() ? nullptr : producer->input(static_cast<size_t>(it - inputs.begin()));
    };
    const Value* product = matmul.output(0);
    const Value* bias_formal = add.input(0) == product ? add.input(1) : add.input(1) == product ? add.input(0) : nullptr;
    Value* x = formal(matmul.input(0));
    Value* w = formal(matmul.input(1));
    Value* b = bias_formal != nullptr ? formal(bias_formal) : nullptr;
    const int64_t width = 3 * heads_ * (DimOf(query_, 2) ? DimOf(query_, 2)->value / heads_ : 0);
    if (!IsFloat32(x) || !x->shape() || x->shape()->size() != 3 || w == nullptr || b == nullptr) return;
    if (w->initializer() == nullptr || b->initializer() == nullptr || w->initializer()->dims().size() != 2 ||
        w->initializer()->dims()[1] != width || b->initializer()->dims() != std::vector<int64_t>{width}) {
      return;
    }
    if (!SameDim(*DimOf(key_, 2), *DimOf(query_, 2)) || !SameDim(*DimOf(value_, 2), *DimOf(query_, 2))) return;
    projection_ = producer;
    projection_x_ = x;
    projection_w_ = w;
    projection_b_ = b;
  }

  // MultiHeadAttention writes [B,S,H·D]. A group whose merge reshapes to another shape (rank 2
  // here) gets a Reshape to the target it computed, which must then be one value or constants.
  std::string ResolveMerge() {
    const Value* result = call_.output(static_cast<size_t>(attention_.result_output));
    if (result->shape() && result->shape()->size() == 3) return {};
    if (!result->shape() || result->shape()->size() != 2) return "the merged context's rank is unknown or not 2 or 3";
    const std::vector<AttentionShapePart>& parts = attention_.merge->parts;
    if (parts.size() == 1 && parts[0].kind == ShapePartMatch::Kind::kValues && parts[0].input >= 0) {
      merge_target_ = call_.input(static_cast<size_t>(parts[0].input));
      return {};
    }
    std::vector<int64_t> constant;
    for (const AttentionShapePart& part : parts) {
      if (part.kind != ShapePartMatch::Kind::kConstant) return "the merge's target is computed inside the group";
      constant.insert(constant.end(), part.constant.begin(), part.constant.end());
    }
    merge_target_ = AddInitializer(graph_, call_.name() + "_merge_shape",
                                   std::make_shared<const Tensor>(Tensor::FromValues<int64_t>(
                                       DataType::kInt64, {static_cast<int64_t>(constant.size())}, constant)));
    return {};
  }

  // H from the head split's target: written there, or (written as -1) the operand's width over
  // the head size. Q, K and V must agree.
  std::string ResolveHeads() {
    std::optional<int64_t> agreed;
    for (auto [operand, value] : {std::pair{&attention_.q, query_}, {&attention_.k, key_}, {&attention_.v, value_}}) {
      std::optional<std::pair<int64_t, int64_t>> split = HeadsAndSize(*operand->split, call_);
      if (!split) return "the head size is not a constant of the head split";
      int64_t heads = split->first;
      const std::optional<Dim> width = DimOf(value, 2);
      if (heads == -1) {
        if (!width || !width->is_known() || width->value % split->second != 0) return "the heads are neither written nor implied by a known width";
        heads = width->value / split->second;
      } else if (width && width->is_known() && width->value != heads * split->second) {
        return "the head split does not cover the operand's width";
      }
      if (agreed && *agreed != heads) return "Q, K and V differ in heads";
      agreed = heads;
    }
    heads_ = *agreed;
    return {};
  }

  // Q, K and V as [B,S,H·D] graph values: the call's arguments, or a Split of the combined
  // projection written before the call.
  std::string ResolveOperands() {
    if (!attention_.combined) {
      query_ = call_.input(static_cast<size_t>(attention_.q.input));
      key_ = call_.input(static_cast<size_t>(attention_.k.input));
      value_ = call_.input(static_cast<size_t>(attention_.v.input));
    } else if (std::string why = SplitCombined(); !why.empty()) {
      return why;
    }
    for (const Value* operand : {query_, key_, value_}) {
      if (!IsFloat32(operand)) return "Q, K or V is not float32";
      if (!operand->shape() || operand->shape()->size() != 3) return "Q, K or V is not a rank-3 [B,S,H*D] value";
    }
    return {};
  }

  std::string SplitCombined() {
    Value* combined = call_.input(static_cast<size_t>(attention_.combined_input));
    if (combined == nullptr || !combined->shape() || combined->shape()->size() != 3) return "the combined projection is not rank 3";
    if (attention_.split_axis != -1 && attention_.split_axis != 2) return "the combined projection is not split on its last axis";
    const int64_t opset = model_.OpsetFor("").value_or(0);
    std::optional<std::vector<int64_t>> sizes;
    Value* sizes_argument = attention_.split_sizes.input >= 0 ? call_.input(static_cast<size_t>(attention_.split_sizes.input)) : nullptr;
    if (attention_.split_sizes.present()) {
      sizes = attention_.split_sizes.constant != nullptr
                  ? std::optional(std::vector<int64_t>(attention_.split_sizes.constant->values<int64_t>().begin(),
                                                       attention_.split_sizes.constant->values<int64_t>().end()))
                  : Int64Constant(sizes_argument);
    } else if (!attention_.split_attribute.empty()) {
      sizes = attention_.split_attribute;
    } else if (const Dim width = (*combined->shape())[2]; width.is_known() && attention_.split_outputs > 0 &&
                                                          width.value % attention_.split_outputs == 0) {
      sizes = std::vector<int64_t>(static_cast<size_t>(attention_.split_outputs), width.value / attention_.split_outputs);
    }
    if (!sizes || static_cast<int>(sizes->size()) != attention_.split_outputs) return "the Split's sizes are not constants";
    std::vector<Value*> inputs = {combined};
    if (opset >= 13) {
      inputs.push_back(sizes_argument != nullptr && Int64Constant(sizes_argument)
                           ? sizes_argument
                           : AddInitializer(graph_, call_.name() + "_split_sizes",
                                            std::make_shared<const Tensor>(Tensor::FromValues<int64_t>(
                                                DataType::kInt64, {static_cast<int64_t>(sizes->size())}, *sizes))));
    }
    std::vector<Value*> pieces;
    for (int i = 0; i < attention_.split_outputs; ++i) {
      Value* piece = graph_.CreateValue(graph_.UniqueName(call_.name() + "_qkv"));
      piece->type().dtype = combined->dtype();
      Shape shape = *combined->shape();
      shape[2] = Dim::Known((*sizes)[static_cast<size_t>(i)]);
      piece->type().shape = shape;
      pieces.push_back(piece);
    }
    Node* split = graph_.CreateNode("Split", "", inputs, pieces, graph_.UniqueNodeName(call_.name() + "/Split"));
    split_ = split;
    split->SetAttribute(IntAttribute("axis", -1));
    if (opset < 13) {
      Attribute attribute;
      attribute.name = "split";
      attribute.kind = AttributeKind::kInts;
      attribute.ints = *sizes;
      split->SetAttribute(std::move(attribute));
    }
    graph_.MoveBefore(split, &call_);
    query_ = pieces.at(static_cast<size_t>(attention_.q.split_output));
    key_ = pieces.at(static_cast<size_t>(attention_.k.split_output));
    value_ = pieces.at(static_cast<size_t>(attention_.v.split_output));
    return {};
  }

  // MultiHeadAttention's attention_bias must be [B|1, H|1, Sq, Sk] exactly (ORT refuses a
  // mask that broadcasts over the queries), so the last two dims are proven equal to Q's and
  // K's sequence dims.
  std::string ResolveMask() {
    if (attention_.mask_kind == AttentionMaskKind::kNone) return {};
    mask_ = ArgumentFor(graph_, call_, attention_.mask.input, attention_.mask.constant, call_.name() + "_mask");
    if (mask_ == nullptr || !mask_->shape() || mask_->shape()->size() != 4) return "the mask is not rank 4";
    if (attention_.mask_kind == AttentionMaskKind::kBoolean) {
      if (std::string why = BiasFromCondition(); !why.empty()) return why;
    }
    if (!IsFloat32(mask_)) return "the additive mask is not float32";
    const std::optional<Dim> sq = DimOf(query_, 1), sk = DimOf(key_, 1);
    if (sq && sk && SameDim(*DimOf(mask_, 3), *sk) && *DimOf(mask_, 2) == Dim::Known(1) && !(*sq == Dim::Known(1))) {
      ExpandOverQueries();  // BERT's extended mask [B,1,1,Sk]
    }
    const std::optional<Dim> mq = DimOf(mask_, 2), mk = DimOf(mask_, 3);
    if (!sq || !sk || !SameDim(*mq, *sq) || !SameDim(*mk, *sk)) {
      return "the additive mask is not provably [., ., Sq, Sk] (ORT's attention_bias does not broadcast there)";
    }
    const Dim heads = (*mask_->shape())[1];
    if (!(heads.is_known() && (heads.value == 1 || heads.value == heads_))) return "the additive mask's head dim is not 1 or H";
    return {};
  }

  // A mask the scores broadcast over the queries, expanded once to [., ., Sq, Sk] (ORT's
  // attention_bias must have Sq rows): Expand(mask, Concat([1], [1], Shape(Q)[1:2], [1])),
  // written before the first layer that reads it and shared by the rest.
  void ExpandOverQueries() {
    if (Value* known = biases_[mask_]; known != nullptr) {
      mask_ = known;
      return;
    }
    auto ints = [&](std::vector<int64_t> values, const char* stem) {
      return AddInitializer(graph_, call_.name() + stem,
                            std::make_shared<const Tensor>(Tensor::FromValues<int64_t>(
                                DataType::kInt64, {static_cast<int64_t>(values.size())}, values)));
    };
    auto node = [&](const char* op, std::vector<Value*> inputs, const char* stem, DataType dtype, Shape shape) {
      Value* output = graph_.CreateValue(graph_.UniqueName(call_.name() + stem));
      output->type().dtype = dtype;
      output->type().shape = std::move(shape);
      Node* created = graph_.CreateNode(op, "", inputs, {output}, graph_.UniqueNodeName(call_.name() + "/" + stem));
      graph_.MoveBefore(created, &call_);
      return created;
    };
    // The rows from the projection's input when the Split goes away with it.
    Node* rows = node("Shape", {projection_ != nullptr ? projection_x_ : query_}, "_query_rows", DataType::kInt64,
                      {Dim::Known(1)});
    rows->SetAttribute(IntAttribute("start", 1));
    rows->SetAttribute(IntAttribute("end", 2));
    Node* target = node("Concat", {ints({1, 1}, "_ones"), rows->output(0), ints({1}, "_one")}, "_bias_shape",
                        DataType::kInt64, {Dim::Known(4)});
    target->SetAttribute(IntAttribute("axis", 0));
    Shape expanded = *mask_->shape();
    expanded[2] = *DimOf(query_, 1);
    Node* expand = node("Expand", {mask_, target->output(0)}, "_attention_bias", DataType::kFloat, expanded);
    biases_[mask_] = expand->output(0);
    mask_ = expand->output(0);
  }

  // Where(cond, s, fill) before the softmax as s + Where(cond, 0, fill): the same wherever a
  // row keeps a key, and, because the fill is so negative that adding a score rounds back to it,
  // also on rows that mask every key (both give the uniform row). A fill that is -inf or
  // merely large (-1e4, older exports) would differ there, so it stays a function.
  std::string BiasFromCondition() {
    if (mask_->dtype() != DataType::kBool) return "the Where mask's condition is not boolean";
    if (!std::isfinite(attention_.fill) || attention_.fill > -1e30) {
      return "the Where mask's fill is not a finite float32 minimum (an additive bias would differ on fully masked rows)";
    }
    if (Value* known = biases_[mask_]; known != nullptr) {
      mask_ = known;
      return {};
    }
    auto scalar = [&](double value, const char* stem) {
      return AddInitializer(graph_, call_.name() + stem,
                            std::make_shared<const Tensor>(Tensor::FromValues<float>(DataType::kFloat, {}, {static_cast<float>(value)})));
    };
    Value* kept = scalar(0.0, "_kept"), *masked = scalar(attention_.fill, "_masked");
    Value* bias = graph_.CreateValue(graph_.UniqueName(call_.name() + "_attention_bias"));
    bias->type().dtype = DataType::kFloat;
    bias->type().shape = mask_->shape();
    std::vector<Value*> inputs = attention_.fill_when_true ? std::vector<Value*>{mask_, masked, kept}
                                                           : std::vector<Value*>{mask_, kept, masked};
    Node* where = graph_.CreateNode("Where", "", inputs, {bias}, graph_.UniqueNodeName(call_.name() + "/attention_bias"));
    // Right after the condition's producer (or first), so every layer reading it can use it.
    Node* producer = mask_->producer();
    Node* after = producer != nullptr ? graph_.NodeAfter(producer) : graph_.nodes().front().get();
    graph_.MoveBefore(where, after != nullptr ? after : &call_);
    biases_[mask_] = bias;
    mask_ = bias;
    return {};
  }

  Model& model_;
  Graph& graph_;
  Node& call_;
  const FusedAttention& attention_;
  std::map<Value*, Value*>& biases_;
  Value* query_ = nullptr;
  Value* key_ = nullptr;
  Value* value_ = nullptr;
  Value* mask_ = nullptr;
  Value* merge_target_ = nullptr;
  Node* split_ = nullptr;       // the Split written for a combined projection
  Node* projection_ = nullptr;  // the fused MatMul + bias that ORT's Attention takes in
  Value* projection_x_ = nullptr;
  Value* projection_w_ = nullptr;
  Value* projection_b_ = nullptr;
  int64_t heads_ = 0;
  double scale_ = 1.0;
};

// A norm with a residual prologue as ORT's Skip*Normalization: outputs y, mean, inv_std_var,
// and the residual sum (when the group returns it).
Outcome LowerSkipNorm(Graph& graph, Node& call, const FusedComposite& norm) {
  const bool layer = norm.kind == CompositeKind::kLayerNorm;
  if (norm.kind != CompositeKind::kLayerNorm && norm.kind != CompositeKind::kRmsNorm) return Kept("not a norm");
  if (!norm.residual.present()) return Kept("a norm without a residual (ORT fuses it from the inlined ops)");
  Value* x = ArgumentFor(graph, call, norm.x.input, norm.x.constant, call.name() + "_x");
  Value* skip = ArgumentFor(graph, call, norm.residual.input, norm.residual.constant, call.name() + "_skip");
  Value* gamma = ArgumentFor(graph, call, norm.gamma.input, norm.gamma.constant, call.name() + "_gamma");
  Value* beta = ArgumentFor(graph, call, norm.beta.input, norm.beta.constant, call.name() + "_beta");
  if (!IsFloat32(x) || !IsFloat32(skip) || gamma == nullptr) return Kept("not float32, or no gamma");
  if (!x->shape() || !skip->shape() || x->shape()->size() != 3 || *x->shape() != *skip->shape()) {
    return Kept("the input and the residual are not provably one [B,S,H] shape");
  }
  const std::optional<int64_t> axis = NormalizedAxis(norm.axis, 3);
  if (!axis || *axis != 2) return Kept("the norm is not over the last axis");
  if (!gamma->shape() || gamma->shape()->size() != 1 || (beta != nullptr && (!beta->shape() || beta->shape()->size() != 1))) {
    return Kept("gamma or beta is not 1-D");
  }
  std::vector<Value*> inputs = {x, skip, gamma};
  if (layer && beta != nullptr) inputs.push_back(beta);
  const std::string op = layer ? "SkipLayerNormalization" : "SkipSimplifiedLayerNormalization";
  std::vector<Value*> outputs(4, nullptr);
  Node* lowered = graph.CreateNode(op, kOrtDomain, inputs, outputs, graph.UniqueNodeName(call.name() + "/" + op));
  lowered->SetAttribute(FloatAttribute("epsilon", norm.epsilon));
  graph.MoveBefore(lowered, &call);
  graph.TransferProducer(call.output(static_cast<size_t>(norm.result_output)), lowered, 0);
  if (norm.residual_sum_output >= 0) {
    graph.TransferProducer(call.output(static_cast<size_t>(norm.residual_sum_output)), lowered, 3);
  }
  graph.RemoveNode(&call);
  return Written(std::string(kOrtDomain) + "::" + op);
}

// A constant 1-D bias Add read only by the GELU's ops: its other operand, and the bias.
std::optional<std::pair<Value*, Value*>> BiasOperands(const Value& x, const std::vector<Node*>& gelu_nodes) {
  Node* add = x.producer();
  if (add == nullptr || add->op_type() != "Add" || !add->domain().empty() || x.is_graph_output()) return std::nullopt;
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

// The GELU among `members` (inlined ops of one group), written as ORT's kernel; "" when there
// is none or it does not qualify.
std::string LowerGeluAmong(Graph& graph, const std::vector<Node*>& members, int64_t opset) {
  for (Node* member : members) {
    if (member->op_type() != "Erf" && member->op_type() != "Tanh" && member->op_type() != "Gelu") continue;
    CompositeSearch search = MatchCompositeAt(*member, opset);
    if (!search.match || search.match->kind != CompositeKind::kGelu) continue;
    const CompositeMatch& gelu = *search.match;
    if (!IsFloat32(gelu.x) || !IsFloat32(gelu.output)) return {};
    const bool tanh = gelu.gelu_form == GeluForm::kTanh;
    std::optional<std::pair<Value*, Value*>> biased = BiasOperands(*gelu.x, gelu.nodes);
    std::string op = tanh ? "FastGelu" : biased ? "BiasGelu" : "Gelu";
    std::vector<Value*> inputs = biased ? std::vector<Value*>{biased->first, biased->second} : std::vector<Value*>{gelu.x};
    Node* lowered = graph.CreateNode(op, kOrtDomain, inputs, {nullptr},
                                     graph.UniqueNodeName(gelu.nodes.front()->name() + "/" + op));
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
  return {};
}

// Whether the body holds a GELU (the matcher needs no types, so the untyped body will do).
bool HasGelu(const Function& function) {
  const int64_t opset = function.OpsetFor("").value_or(0);
  for (const auto& node : function.body->nodes()) {
    if (node->op_type() != "Erf" && node->op_type() != "Tanh" && node->op_type() != "Gelu") continue;
    CompositeSearch search = MatchCompositeAt(*node, opset);
    if (search.match && search.match->kind == CompositeKind::kGelu) return true;
  }
  return false;
}

// A group inlined for its GELU, lowered once the inlined values are typed.
struct InlinedGelu {
  std::string node, function;
  std::vector<Node*> members, constants;
  int64_t opset = 0;
};

Outcome LowerCall(Model& model, Graph& graph, Node& call, std::map<Value*, Value*>& attention_biases,
                  std::vector<InlinedGelu>& gelus) {
  const Function* function = model.FindFunction(call.domain(), call.op_type());
  if (function == nullptr || function->body == nullptr) return Kept("no function body");
  if (std::optional<FusedAttention> attention = RecognizeAttention(*function)) {
    return AttentionLowering(model, graph, call, *attention, attention_biases).Run();
  }
  if (std::optional<FusedComposite> composite = RecognizeComposite(*function)) {
    if (composite->kind == CompositeKind::kLayerNorm || composite->kind == CompositeKind::kRmsNorm) {
      return LowerSkipNorm(graph, call, *composite);
    }
  }
  if (!HasGelu(*function)) return Kept("ORT has no kernel for this group (it inlines the function)");
  InlinedGelu gelu{call.name(), std::string(kFusionDomain) + "::" + call.op_type(), {}, {}, function->OpsetFor("").value_or(0)};
  InlinedCall inlined = InlineCall(graph, call, *function);
  if (!inlined.done()) return Kept("its body does not map back onto the nodes it replaced");
  gelu.members = std::move(inlined.members);
  gelu.constants = std::move(inlined.constants);
  gelus.push_back(std::move(gelu));
  return {};  // decided after the inlined values are typed
}

// What a lowering wrote before a later check kept the group after all (a Split, an expanded
// mask, their initializers): the pipeline leaves no dead nodes, so every node and initializer
// nothing reads now is such a leftover.
void RemoveLeftovers(Graph& graph) {
  auto unread = [](const Value* value) { return value == nullptr || (value->uses().empty() && !value->is_graph_output()); };
  std::vector<Node*> order;
  for (const auto& node : graph.nodes()) order.push_back(node.get());
  for (auto node = order.rbegin(); node != order.rend(); ++node) {  // readers first
    if ((*node)->Subgraphs().empty() && std::all_of((*node)->outputs().begin(), (*node)->outputs().end(), unread)) {
      graph.RemoveNode(*node);
    }
  }
  std::vector<Value*> initializers = graph.initializers();
  for (Value* initializer : initializers) {
    if (unread(initializer) && !initializer->is_graph_input()) graph.RemoveInitializer(initializer);
  }
}

}  // namespace

Result<OrtLoweringReport> LowerForOrt(Model& model) {
  InferShapes(model);  // the lowering proves shapes equal; every value typed that can be
  Graph& graph = *model.graph;
  std::vector<Node*> calls;
  for (const auto& node : graph.nodes()) {
    if (node->domain() == kFusionDomain) calls.push_back(node.get());
  }
  OrtLoweringReport report;
  std::map<Value*, Value*> attention_biases;
  std::vector<InlinedGelu> gelus;
  for (Node* call : calls) {
    const std::string name = call->name(), function = std::string(kFusionDomain) + "::" + call->op_type();
    Outcome outcome = LowerCall(model, graph, *call, attention_biases, gelus);
    if (!outcome.absorbed.empty()) {
      std::erase_if(report.kept, [&](const OrtKeptGroup& kept) { return kept.node == outcome.absorbed; });
    }
    if (!outcome.written.empty()) {
      std::vector<std::string> absorbed;
      if (!outcome.absorbed.empty()) absorbed.push_back(outcome.absorbed);
      report.lowered.push_back({name, function, outcome.written, std::move(absorbed)});
    } else if (!outcome.kept_because.empty()) {
      report.kept.push_back({name, function, outcome.kept_because});
    }
  }
  if (!gelus.empty()) InferShapes(model);  // function bodies are untyped: so are the values inlining made
  for (const InlinedGelu& gelu : gelus) {
    std::string written = LowerGeluAmong(graph, gelu.members, gelu.opset);
    for (Node* constant : gelu.constants) {  // the scalars the GELU read, now read by nothing
      if (constant->output(0)->uses().empty() && !constant->output(0)->is_graph_output()) graph.RemoveNode(constant);
    }
    if (written.empty()) {
      report.kept.push_back({gelu.node, gelu.function, "inlined: its GELU is not float32"});
    } else {
      report.lowered.push_back({gelu.node, gelu.function, written, {}});
    }
  }
  RemoveLeftovers(graph);
  if (!report.lowered.empty() || !gelus.empty()) {
    RemoveUncalledFusedFunctions(model);
    if (!model.OpsetFor(kOrtDomain)) model.opsets.push_back(OpsetImport{kOrtDomain, 1, {}});
    FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
    InferShapes(model);
  }
  return report;
}

std::string OrtLoweringToJson(const OrtLoweringReport& report) {
  nlohmann::ordered_json lowered = nlohmann::ordered_json::array(), kept = nlohmann::ordered_json::array();
  for (const OrtLowering& one : report.lowered) {
    lowered.push_back({{"node", one.node}, {"function", one.function}, {"written", one.written}, {"absorbed", one.absorbed}});
  }
  for (const OrtKeptGroup& one : report.kept) {
    kept.push_back({{"node", one.node}, {"function", one.function}, {"reason", one.reason}});
  }
  return nlohmann::ordered_json{{"lowered", lowered}, {"kept", kept}}.dump();
}

}  // namespace fusionopt::passes
