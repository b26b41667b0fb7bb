// The attention matcher (attention.h): the core from the Softmax outwards, then the
// operands' head splits, the combined Split and the head merge where the graph allows them.
#include "patterns/attention/attention.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "ir/constant_value.h"
#include "ir/permutation.h"
#include "patterns/attention/match_internal.h"
#include "patterns/matcher_support.h"

namespace fusionopt {
namespace {

using namespace attention_match;
using composite::ProducerOp;
using composite::SoleReader;

AttentionSearch NearMiss(const WhyNot& reason) {
  AttentionSearch search;
  search.near_miss = reason.Prefixed("attention");
  return search;
}

// The reason `value` cannot be a core intermediate read by `reader` alone; empty when it can.
WhyNot CoreIntermediateProblem(const Value* value, const Node* reader) {
  if (value->is_graph_output()) return "a graph output is inside the pattern";
  for (const Use& use : value->uses()) {
    if (use.node != reader) return "an intermediate is read outside the pattern";
  }
  return {};
}

// The MatMul computing Q·Kᵀ behind `value`: the MatMul itself, or a Mul/Div with it as the
// scaled operand; null when `value` is neither.
Node* ScoresMatMul(const Value* value) {
  if (Node* matmul = ProducerOp(value, "MatMul")) return matmul;
  if (Node* mul = ProducerOp(value, "Mul"); mul != nullptr && mul->inputs().size() == 2) {
    for (const Value* input : mul->inputs()) {
      if (Node* matmul = ProducerOp(input, "MatMul")) return matmul;
    }
  }
  if (Node* div = ProducerOp(value, "Div"); div != nullptr && div->inputs().size() == 2) {
    return ProducerOp(div->input(0), "MatMul");
  }
  return nullptr;
}

// A constant boolean [1,..,1,N,M] buffer with ones exactly on and below the diagonal, reached
// from `condition` through Slices.
bool SlicedFromLowerTriangle(const Value* condition) {
  const Value* value = condition;
  while (Node* slice = ProducerOp(value, "Slice")) value = slice->input(0);
  TensorPtr buffer = value == nullptr ? nullptr : ConstantValueOf(*value, InitializerRule::kFeedsOverride);
  if (buffer == nullptr || buffer->dtype() != DataType::kBool || buffer->dims().size() < 2) return false;
  const auto& dims = buffer->dims();
  const int64_t rows = dims[dims.size() - 2], columns = dims.back();
  int64_t area = 0;  // an empty tensor's other dims may be anything
  if (__builtin_mul_overflow(rows, columns, &area) || area != buffer->NumElements()) return false;  // leading dims are all 1
  std::span<const uint8_t> bits = buffer->values<uint8_t>();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < columns; ++j) {
      if ((bits[static_cast<size_t>(i * columns + j)] != 0) != (j <= i)) return false;
    }
  }
  return true;
}

// Whether a tensor of shape `from` may broadcast to `to` without widening it: only a provable
// widening (a longer rank, or known sizes that differ where `from`'s is not 1) says no.
bool MayBroadcastWithoutWidening(const Value* from, const Value* to) {
  if (from == nullptr || to == nullptr || !from->shape() || !to->shape()) return true;
  const Shape& source = *from->shape();
  const Shape& target = *to->shape();
  if (source.size() > target.size()) return false;
  const size_t offset = target.size() - source.size();
  for (size_t i = 0; i < source.size(); ++i) {
    const Dim& dim = source[i];
    const Dim& wanted = target[offset + i];
    if (dim.is_known() && dim.value != 1 && wanted.is_known() && wanted.value != dim.value) return false;
  }
  return true;
}

// The head merge after `context`: Transpose [0,2,1,3] then a Reshape to [B,Sq,H·D], both read
// only inside, optionally after a Reshape of the context to its own shape [B,-1,Sq,Dv] (the
// TorchScript exporter's sdpa); false (nothing set) when the graph does not have it that way.
bool ReadMerge(AttentionMatch& match, int64_t opset) {
  Value* context = match.output;
  std::optional<HeadReshapeMatch> view;
  Node* first = nullptr;
  for (const Use& use : context->uses()) {
    if (IsDefaultOp(use.node, "Reshape") && use.input_index == 0 && use.node->inputs().size() == 2) first = use.node;
  }
  if (first != nullptr && !context->is_graph_output()) {
    view = ReadReshape(*first, opset);
    std::unordered_set<const Node*> readers(view->chain.begin(), view->chain.end());
    readers.insert(first);
    for (const Use& use : context->uses()) {
      if (!readers.count(use.node)) return false;
    }
    if (auto entries = Entries(view->parts); entries && entries->size() != 4) return false;
    context = first->output(0);
  }
  Node* transpose = SoleReader(context);
  std::optional<std::vector<int64_t>> perm = IsDefaultOp(transpose, "Transpose") ? transpose->GetInts("perm") : std::nullopt;
  // [0,2,1,3] as exporters merge heads, or any perm that keeps the features innermost
  // (torchvision's [2,0,1,3] to [S,B,H,D]): the kernel writes the context in that order.
  if (!perm || perm->size() != 4 || !IsPermutation(*perm) || (*perm)[3] != 3) return false;
  Value* transposed = transpose->output(0);
  Node* reshape = nullptr;
  for (const Use& use : transposed->uses()) {
    if (IsDefaultOp(use.node, "Reshape") && use.input_index == 0) reshape = use.node;
  }
  if (reshape == nullptr || transposed->is_graph_output() || reshape->inputs().size() != 2) return false;
  HeadReshapeMatch merge = ReadReshape(*reshape, opset);
  std::unordered_set<const Node*> readers(merge.chain.begin(), merge.chain.end());
  readers.insert(reshape);
  for (const Use& use : transposed->uses()) {
    if (!readers.count(use.node)) return false;
  }
  match.merge_view = std::move(view);
  match.merge_perm = *perm;
  match.merge_transpose = transpose;
  match.merge = std::move(merge);
  return true;
}

// The Split of a combined projection that Q, K and V (all split heads) come from, when every
// output of it feeds one of them and is read only inside (Shape reads aside).
void ReadSplit(AttentionMatch& match) {
  AttentionOperandMatch* operands[] = {&match.q, &match.k, &match.v};
  Node* split = nullptr;
  for (AttentionOperandMatch* operand : operands) {
    if (operand->layout != HeadLayout::kSplitHeads || !operand->split) return;
    Node* producer = ProducerOp(operand->source, "Split");
    if (producer == nullptr || (split != nullptr && producer != split)) return;
    split = producer;
  }
  for (Value* output : split->outputs()) {
    if (output == nullptr || output->is_graph_output()) return;
    const AttentionOperandMatch* reader = nullptr;
    for (AttentionOperandMatch* operand : operands) {
      if (operand->source == output) reader = operand;
    }
    if (reader == nullptr) {
      if (!output->uses().empty()) return;
      continue;
    }
    const Node* head = reader->split->reshape;
    // Two operands reading one output would need the output twice: not the combined form.
    int sources = 0;
    for (AttentionOperandMatch* operand : operands) sources += operand->source == output;
    if (sources != 1) return;
    std::unordered_set<const Node*> chain;
    for (AttentionOperandMatch* operand : operands) {
      if (operand->split) chain.insert(operand->split->chain.begin(), operand->split->chain.end());
    }
    for (const Use& use : output->uses()) {
      if (use.node != head && !chain.count(use.node) && !IsDefaultOp(use.node, "Shape")) return;
    }
  }
  match.split = split;
  match.combined = split->input(0);
  match.split_axis = split->GetInt("axis", 0);
  for (AttentionOperandMatch* operand : operands) {
    operand->split_output = operand->source->producer_output_index();
  }
}

// The Split's axis may be the last of its input: -1, or the last of a known rank (a body's
// inputs may be untyped: a kernel checks each run).
bool SplitAlongLast(const AttentionMatch& match) {
  if (match.split_axis == -1) return true;
  const auto& shape = match.combined->shape();
  return !shape || static_cast<int64_t>(shape->size()) == match.split_axis + 1;
}

void CollectMembers(AttentionMatch& match) {
  std::vector<Node*> nodes;
  for (Node* core : {match.score_matmul, match.softmax, match.guard_test, match.guard, match.context_matmul,
                     match.attention_op, match.scale_node, match.score_cast, match.bias_node, match.mask_node,
                     match.probability_cast}) {
    if (core != nullptr) nodes.push_back(core);
  }
  for (const AttentionOperandMatch* operand : {&match.q, &match.k, &match.v}) {
    nodes.insert(nodes.end(), operand->scales.begin(), operand->scales.end());
    nodes.insert(nodes.end(), operand->transposes.begin(), operand->transposes.end());
    if (operand->split) {
      nodes.push_back(operand->split->reshape);
      nodes.insert(nodes.end(), operand->split->chain.begin(), operand->split->chain.end());
    }
    if (const auto& rotary = operand->rotary) {
      nodes.insert(nodes.end(), rotary->nodes.begin(), rotary->nodes.end());
      if (rotary->part_concat != nullptr) nodes.insert(nodes.end(), {rotary->part_concat, rotary->part_split});
    }
    for (const ViewStepMatch& step : operand->view) {
      nodes.push_back(step.node);
      if (step.reshape) nodes.insert(nodes.end(), step.reshape->chain.begin(), step.reshape->chain.end());
    }
    if (const auto& repeat = operand->repeat) {
      nodes.insert(nodes.end(), {repeat->unsqueeze, repeat->expand, repeat->reshape});
      nodes.insert(nodes.end(), repeat->expand_shape.chain.begin(), repeat->expand_shape.chain.end());
      nodes.insert(nodes.end(), repeat->reshape_shape.chain.begin(), repeat->reshape_shape.chain.end());
    }
  }
  if (match.split) nodes.push_back(match.split);
  if (match.merge_view) {
    nodes.push_back(match.merge_view->reshape);
    nodes.insert(nodes.end(), match.merge_view->chain.begin(), match.merge_view->chain.end());
  }
  if (match.merge) {
    nodes.push_back(match.merge_transpose);
    nodes.push_back(match.merge->reshape);
    nodes.insert(nodes.end(), match.merge->chain.begin(), match.merge->chain.end());
  }
  std::unordered_set<const Node*> seen;
  for (Node* node : nodes) {
    if (seen.insert(node).second) match.nodes.push_back(node);
  }
}

// Heads and head size from a head split's constant target, else from the inferred shape of
// the score product's first operand [B,H,Sq,D].
void ReadHeads(AttentionMatch& match) {
  for (const AttentionOperandMatch* operand : {&match.q, &match.k, &match.v}) {
    if (!operand->split) continue;
    auto entries = Entries(operand->split->parts);
    if (entries && entries->size() == 4 && (*entries)[2].value_or(0) > 0 && (*entries)[3].value_or(0) > 0) {
      match.heads = *(*entries)[2];
      match.head_size = *(*entries)[3];
      return;
    }
  }
  const Node* core = match.score_matmul != nullptr ? match.score_matmul : match.attention_op;
  const auto& shape = core->input(0)->shape();
  if (shape && shape->size() == 4 && (*shape)[1].is_known() && (*shape)[3].is_known()) {
    match.heads = (*shape)[1].value;
    match.head_size = (*shape)[3].value;
  }
}

// Where(IsNaN(p), 0, p) reading the softmax's `probabilities` (the dynamo exporter's guard of
// rows without a finite softmax): the Where, with its IsNaN in `test`; null when absent.
Node* ReadGuard(Value* probabilities, Node*& test) {
  test = nullptr;
  Node* is_nan = nullptr;
  Node* where = nullptr;
  for (const Use& use : probabilities->uses()) {
    if (IsDefaultOp(use.node, "IsNaN")) is_nan = use.node;
    if (IsDefaultOp(use.node, "Where") && use.input_index == 2) where = use.node;
  }
  if (is_nan == nullptr || where == nullptr || probabilities->uses().size() != 2 || where->inputs().size() != 3 ||
      where->input(0) != is_nan->output(0) || !SoleReader(is_nan->output(0)) ||
      !composite::IsScalarConstantNear(where->input(1), 0.0)) {
    return nullptr;
  }
  test = is_nan;
  return where;
}

// A Cast to float32 of 16-bit scores (MPT's upcast for the softmax): the kernel's scores are
// float32 already, so it changes nothing but the rounding of Q·Kᵀ, which the kernel never rounds.
Node* FloatCast(const Value* value) {
  Node* cast = ProducerOp(value, "Cast");
  return cast != nullptr && cast->GetInt("to", 0) == static_cast<int64_t>(DataType::kFloat) ? cast : nullptr;
}

// Q·Kᵀ [scaled] under `value`, through a FloatCast.
Node* CastScores(const Value* value) {
  if (Node* cast = FloatCast(value)) value = cast->input(0);
  return ScoresMatMul(value);
}

// The scores under a mask: Q·Kᵀ [scaled] [cast to float32], or that plus an additive bias (ALiBi).
bool MaskedScores(const Value* value) {
  if (CastScores(value) != nullptr) return true;
  Node* add = ProducerOp(value, "Add");
  return add != nullptr && add->inputs().size() == 2 &&
         (CastScores(add->input(0)) != nullptr) != (CastScores(add->input(1)) != nullptr);
}

// The mask the softmax reads `scores` through, when there is one: Add(scores, mask), or
// Where(condition, scores, fill) either way round; `scores` moves past it. A result ends the
// match: no attention (a mask over something other than scores) or a near miss.
std::optional<AttentionSearch> ReadMask(Value*& scores, AttentionMatch& match) {
  if (Node* add = ProducerOp(scores, "Add"); add != nullptr && add->inputs().size() == 2) {
    int scores_index = MaskedScores(add->input(0)) ? 0 : 1;
    if (!MaskedScores(add->input(scores_index))) return AttentionSearch{};
    match.mask_kind = AttentionMaskKind::kAdditive;
    match.mask_node = add;
    match.mask = add->input(1 - scores_index);
    scores = add->input(scores_index);
  } else if (Node* where = ProducerOp(scores, "Where"); where != nullptr && where->inputs().size() == 3) {
    int fill_index = MaskedScores(where->input(1)) ? 2 : 1;
    if (!MaskedScores(where->input(3 - fill_index))) return AttentionSearch{};
    std::optional<double> fill = ConstantScalar(where->input(fill_index), InitializerRule::kFeedsOverride);
    if (!fill) return NearMiss("the mask fill is not a constant scalar");
    match.mask_kind = AttentionMaskKind::kBoolean;
    match.mask_node = where;
    match.mask = where->input(0);
    match.fill = *fill;
    match.fill_when_true = fill_index == 1;
    match.causal = SlicedFromLowerTriangle(match.mask);
    scores = where->input(3 - fill_index);
  }
  return std::nullopt;
}

// Softmax(z) · V with z = [mask] over [bias] over [scale] over Q·Kᵀ: nullopt with the core's nodes set, or
// the search to return (a near miss, or nothing) when `softmax` is no attention core.
std::optional<AttentionSearch> MatchSoftmaxCore(Node& softmax, int64_t opset, AttentionMatch& match) {
  if (softmax.inputs().size() != 1 || softmax.output(0) == nullptr) return AttentionSearch{};
  match.softmax = &softmax;
  match.softmax_axis = softmax.GetInt("axis", opset >= 13 ? -1 : 1);
  Value* probabilities = softmax.output(0);
  match.guard = ReadGuard(probabilities, match.guard_test);
  Value* weights = match.guard != nullptr ? match.guard->output(0) : probabilities;
  // Float32 probabilities cast back to V's 16 bits for the product (the upcast's other half).
  if (weights->uses().size() == 1 && IsDefaultOp(weights->uses().front().node, "Cast") && !weights->is_graph_output()) {
    match.probability_cast = weights->uses().front().node;
    weights = match.probability_cast->output(0);
  }
  for (const Use& use : weights->uses()) {
    if (IsDefaultOp(use.node, "MatMul") && use.input_index == 0) match.context_matmul = use.node;
  }
  if (match.context_matmul == nullptr) return AttentionSearch{};

  // Softmax input: [mask] over [scale] over Q·Kᵀ.
  Value* scores = softmax.input(0);
  Node* reader = &softmax;
  if (std::optional<AttentionSearch> stop = ReadMask(scores, match)) return stop;
  if (match.mask_node != nullptr) {
    if (WhyNot problem = CoreIntermediateProblem(match.mask_node->output(0), &softmax)) {
      return NearMiss(problem);
    }
    reader = match.mask_node;
    if (CastScores(scores) == nullptr) {  // Add(s, bias): MaskedScores found one side the scores
      Node* add = scores->producer();
      const int scores_index = CastScores(add->input(0)) != nullptr ? 0 : 1;
      match.bias_node = add;
      match.bias = add->input(1 - scores_index);
      if (WhyNot problem = CoreIntermediateProblem(scores, reader)) return NearMiss(problem);
      reader = add;
      scores = add->input(scores_index);
    }
  }
  if (Node* cast = FloatCast(scores); cast != nullptr && ScoresMatMul(cast->input(0)) != nullptr) {
    if (WhyNot problem = CoreIntermediateProblem(scores, reader)) return NearMiss(problem);
    match.score_cast = cast;
    reader = cast;
    scores = cast->input(0);
  }
  match.score_matmul = ProducerOp(scores, "MatMul");
  if (match.score_matmul == nullptr) {
    Node* scale = scores->producer();
    match.score_matmul = ScoresMatMul(scores);
    if (match.score_matmul == nullptr) return AttentionSearch{};
    Value* product = match.score_matmul->output(0);
    Value* constant = scale->input(0) == product ? scale->input(1) : scale->input(0);
    match.scale = ConstantScalar(constant, InitializerRule::kFeedsOverride);
    if (!match.scale) return NearMiss("the scale is not a constant scalar");
    match.scale_divides = scale->op_type() == "Div";
    match.scale_node = scale;
    if (WhyNot problem = CoreIntermediateProblem(scores, reader)) return NearMiss(problem);
    reader = scale;
    scores = product;
  }
  if (match.score_matmul->inputs().size() != 2) return AttentionSearch{};
  if (WhyNot problem = CoreIntermediateProblem(scores, reader)) return NearMiss(problem);
  if (WhyNot problem = CoreIntermediateProblem(weights, match.context_matmul)) {
    return NearMiss(problem);
  }
  match.output = match.context_matmul->output(0);
  return std::nullopt;
}

// Attention(Q, K, V[, mask]) of opset 23 on 4-D operands, with no cache, no nonpad lengths and
// no output but Y read.
std::optional<AttentionSearch> MatchOpCore(Node& op, AttentionMatch& match) {
  const auto& inputs = op.inputs();
  if (inputs.size() < 3 || inputs[0] == nullptr || inputs[1] == nullptr || inputs[2] == nullptr) return AttentionSearch{};
  for (size_t i = 4; i < inputs.size(); ++i) {
    if (inputs[i] != nullptr) return NearMiss("the Attention node reads a key/value cache or sequence lengths");
  }
  for (size_t i = 1; i < op.outputs().size(); ++i) {
    const Value* output = op.output(i);
    if (output != nullptr && (!output->uses().empty() || output->is_graph_output())) {
      return NearMiss("the Attention node's cache or score outputs are read");
    }
  }
  if (op.FindAttribute("q_num_heads") != nullptr || op.FindAttribute("kv_num_heads") != nullptr) {
    return NearMiss("the Attention node splits heads itself (3-D operands)");
  }
  if (op.output(0) == nullptr) return AttentionSearch{};
  match.attention_op = &op;
  AttentionOpCore core;
  if (op.FindAttribute("scale") != nullptr) core.scale = op.GetFloat("scale", 1.0f);
  core.causal = op.GetInt("is_causal", 0) != 0;
  core.softcap = op.GetFloat("softcap", 0.0f);
  match.op = core;
  if (inputs.size() >= 4 && inputs[3] != nullptr) {
    match.mask = inputs[3];
    // A boolean mask marks the keys to attend: the others get -inf. Its dtype decides (a
    // runtime checks it each run).
    match.mask_kind = inputs[3]->dtype() == DataType::kBool ? AttentionMaskKind::kBoolean : AttentionMaskKind::kAdditive;
    match.fill = -std::numeric_limits<double>::infinity();
    match.fill_when_true = false;
  }
  match.output = op.output(0);
  return std::nullopt;
}


// What the shapes rule out: scores that are not 4-D, a softmax not over their last axis, a mask
// or score bias that would widen them; an Attention node's operands that are not 4-D.
WhyNot WhyNotShapes(const AttentionMatch& match) {
  if (match.score_matmul != nullptr) {
    const Value* product = match.score_matmul->output(0);
    const bool split_heads = match.q.layout == HeadLayout::kSplitHeads || match.k.layout == HeadLayout::kSplitHeads;
    int64_t rank = split_heads ? 4 : (product->shape() ? static_cast<int64_t>(product->shape()->size()) : -1);
    if (rank >= 0 && rank != 4) return "the scores are not 4-D [B,H,Sq,Sk]";
    if (rank == 4 && NormalizedAxis(match.softmax_axis, rank) != rank - 1) {
      return "the softmax is not over the last axis";
    }
    if (match.mask != nullptr && !MayBroadcastWithoutWidening(match.mask, product)) {
      return "the mask does not broadcast to the scores";
    }
    if (match.bias != nullptr && !MayBroadcastWithoutWidening(match.bias, product)) {
      return "the score bias does not broadcast to the scores";
    }
  } else {
    for (size_t i = 0; i < 3; ++i) {
      const auto& shape = match.attention_op->input(i)->shape();
      if (shape && shape->size() != 4) return "the Attention node's operands are not 4-D";
    }
  }
  return {};
}

// Why the members cannot be one pattern (a graph output or an intermediate read outside it);
// the Shape nodes outside that read an intermediate go to `outside_shape_reads`.
WhyNot ReadOutsideShapeReads(AttentionMatch& match) {
  std::unordered_set<const Node*> members(match.nodes.begin(), match.nodes.end());
  for (const Node* member : match.nodes) {
    for (const Value* output : member->outputs()) {
      if (output == nullptr || output == match.output) continue;
      if (output->is_graph_output()) return "a graph output is inside the pattern";
      for (const Use& use : output->uses()) {
        if (members.count(use.node)) continue;
        if (!IsDefaultOp(use.node, "Shape")) return "an intermediate is read outside the pattern";
        if (std::find(match.outside_shape_reads.begin(), match.outside_shape_reads.end(), use.node) ==
            match.outside_shape_reads.end()) {
          match.outside_shape_reads.push_back(use.node);
        }
      }
    }
  }
  return {};
}

// The match with operands read through layout-op views where the head-split forms do not
// describe them (`views`), or without.
AttentionSearch MatchWith(Node& anchor, int64_t opset, bool views) {
  AttentionMatch match;
  std::optional<AttentionSearch> failed;
  if (IsDefaultOp(&anchor, "Softmax")) {
    failed = MatchSoftmaxCore(anchor, opset, match);
  } else if (IsDefaultOp(&anchor, "Attention") && opset >= 23) {
    failed = MatchOpCore(anchor, match);
  } else {
    return {};
  }
  if (failed) return std::move(*failed);

  // The operands and what surrounds the core.
  struct Walk {
    AttentionOperandMatch* operand;
    Value* value;
    Node* reader;
    Role role;
  };
  Node* score_reader = match.attention_op != nullptr ? match.attention_op : match.score_matmul;
  Node* value_reader = match.attention_op != nullptr ? match.attention_op : match.context_matmul;
  const size_t value_index = match.attention_op != nullptr ? 2 : 1;
  const bool key_transposed = match.attention_op == nullptr;
  for (const Walk& walk : {Walk{&match.q, score_reader->input(0), score_reader, Role::kQuery},
                           Walk{&match.k, score_reader->input(1), score_reader, Role::kKey},
                           Walk{&match.v, value_reader->input(value_index), value_reader, Role::kValue}}) {
    if (walk.value == nullptr) return {};
    OperandSearch search = WalkOperand(walk.value, *walk.reader, walk.role, key_transposed, views, opset);
    if (search.near_miss) return NearMiss(search.near_miss);
    *walk.operand = std::move(search.operand);
  }
  ReadSplit(match);
  if (match.split != nullptr && !SplitAlongLast(match)) {
    match.split = nullptr;
    match.combined = nullptr;
    for (AttentionOperandMatch* operand : {&match.q, &match.k, &match.v}) operand->split_output = -1;
  }
  if (ReadMerge(match, opset)) match.output = match.merge->reshape->output(0);

  if (WhyNot why = WhyNotShapes(match)) return NearMiss(why);
  CollectMembers(match);
  ReadHeads(match);
  if (WhyNot why = ReadOutsideShapeReads(match)) return NearMiss(why);
  AttentionSearch search;
  search.match = std::move(match);
  return search;
}

}  // namespace

AttentionSearch MatchAttentionAt(Node& anchor, int64_t opset) {
  AttentionSearch with_views = MatchWith(anchor, opset, /*views=*/true);
  if (with_views.match) return with_views;
  // A view that reaches into values read elsewhere fails the match: without views such an
  // operand is read as it is.
  AttentionSearch without = MatchWith(anchor, opset, /*views=*/false);
  return without.match || without.near_miss ? without : with_views;
}

}  // namespace fusionopt
