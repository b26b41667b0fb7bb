// The attention matcher's walk of Q, K and V from the core outwards (match_internal.h's
// WalkOperand): the transposes, scales and head split each exporter writes, a rotary, a
// grouped-query repeat, or a chain of layout ops read as a strided view.
#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

#include "ir/constant_value.h"
#include "ir/permutation.h"
#include "patterns/attention/match_internal.h"
#include "patterns/matcher_support.h"

namespace fusionopt::attention_match {
namespace {

using composite::ProducerOp;
using composite::SoleReader;

using Perm = std::vector<int64_t>;
const Perm kIdentity = {0, 1, 2, 3};
const Perm kSplitPerm = {0, 2, 1, 3};     // [B,S,H,D] -> [B,H,S,D], and back for the merge
const Perm kKeySplitPerm = {0, 2, 3, 1};  // [B,S,H,D] -> [B,H,D,S]
const Perm kSwapLast = {0, 1, 3, 2};      // [B,H,S,D] -> [B,H,D,S]
// Sequence first, as nn.MultiheadAttention lays out heads: [S,B,H,D] -> [B,H,S,D] ([B,H,D,S]).
const Perm kSeqFirstSplitPerm = {1, 2, 0, 3};
const Perm kSeqFirstKeySplitPerm = {1, 2, 3, 0};

const char* RoleName(Role role) {
  switch (role) {
    case Role::kQuery: return "query";
    case Role::kKey: return "key";
    case Role::kValue: return "value";
  }
  return "";
}

std::string PermText(const Perm& perm) {
  std::string text = "[";
  for (size_t i = 0; i < perm.size(); ++i) text += (i ? ", " : "") + std::to_string(perm[i]);
  return text + "]";
}

// Every reader of `value` is `reader` or a Shape node, and it is no graph output: `value` may
// be computed inside a pattern that `reader` belongs to (the Shape reads are the caller's).
bool ReadOnlyByOrShapes(const Value* value, const Node* reader) {
  if (value == nullptr || value->is_graph_output()) return false;
  return std::all_of(value->uses().begin(), value->uses().end(),
                     [&](const Use& use) { return use.node == reader || IsDefaultOp(use.node, "Shape"); });
}

// Both are permutations of the same size (WalkOperand checks every step).
Perm Compose(const Perm& first, const Perm& then) {
  Perm out(then.size());
  for (size_t i = 0; i < then.size(); ++i) out[i] = first[static_cast<size_t>(then[i])];
  return out;
}

// Every reader of `value` is one of `readers` or a Shape node, and it is no graph output.
bool ReadOnlyWithin(const Value* value, const std::unordered_set<const Node*>& readers) {
  if (value == nullptr || value->is_graph_output()) return false;
  return std::all_of(value->uses().begin(), value->uses().end(),
                     [&](const Use& use) { return readers.count(use.node) || IsDefaultOp(use.node, "Shape"); });
}

// Walks an operand from the core outwards. `value` is what the next step reads; `readers` the
// nodes of the pattern that read it (the core, or the last step taken).
class OperandWalker {
 public:
  OperandWalker(Value* operand, Node& reader, Role role, bool key_transposed_by_core, bool views, int64_t opset)
      : views_(views), initial_(operand), value_(operand), readers_{&reader}, role_(role), key_transposed_(key_transposed_by_core),
        opset_(opset) {
    out_.layout = role == Role::kKey && key_transposed_ ? HeadLayout::kHeadsFirstTransposed : HeadLayout::kHeadsFirst;
    out_.source = operand;
  }

  OperandSearch Walk() {
    if (role_ != Role::kValue) PeelScales();
    Value* scaled = value_;
    const AttentionOperandMatch with_scales = out_;
    OperandSearch staged = Staged();
    const AttentionOperandMatch& found = staged.operand;
    // A source the head-split forms stop at although a layout op computes it: only transposes
    // (or nothing) were taken, and the rest of the chain is other layout ops.
    const bool stops_at_layout = !staged.near_miss && !found.split && !found.rotary && !found.repeat &&
                                 found.split_output < 0 && found.source != nullptr && IsLayoutStep(found.source->producer());
    // A near miss of the head-split forms (a perm or target that is not a head split) stands:
    // a view would take a chain the matcher found malformed.
    if (views_ && stops_at_layout) {
      // What the head-split forms do not describe may still be a chain of layout ops the
      // kernel reads through (torchvision's packed in-projection, unflattened and gathered).
      OperandSearch view = View(scaled, with_scales);
      if (!view.near_miss && !view.operand.view.empty()) return view;
    }
    // A rotary's source may itself be a layout op (GPT-NeoX's packed query_key_value split into
    // Q, K and V along the features): the chain beneath the rotary is a view too, ending at the
    // heads-first [B,H,S,D] value the rotary turns.
    const bool rotary_over_layout = !staged.near_miss && found.rotary && !found.repeat && !found.split &&
                                    found.split_output < 0 && found.layout == HeadLayout::kHeadsFirst &&
                                    found.source != nullptr && IsLayoutStep(found.source->producer());
    if (views_ && rotary_over_layout) {
      OperandSearch view = View(found.source, found);
      if (!view.near_miss && !view.operand.view.empty()) return view;
    }
    // Or the heads are split by the Transpose under the rotary, of a value a layout op computes
    // (Falcon's [B,S,H+2,D] projection split into Q, K and V along the heads): the view starts
    // at what the rotary turns, those transposes its first steps.
    const bool rotary_over_split_layout = !staged.near_miss && found.rotary && !found.repeat && !found.split &&
                                          found.split_output < 0 && found.layout == HeadLayout::kSplitHeads &&
                                          found.source != nullptr && IsLayoutStep(found.source->producer());
    if (views_ && rotary_over_split_layout) {
      AttentionOperandMatch base = found;
      base.layout = HeadLayout::kHeadsFirst;
      base.transposes.erase(base.transposes.begin(),
                            base.transposes.begin() + static_cast<std::ptrdiff_t>(rotary_inner_transposes_));
      OperandSearch view = View(rotary_input_, base);
      if (!view.near_miss && !view.operand.view.empty()) return view;
    }
    return staged;
  }

 private:
  OperandSearch Staged() {
    std::vector<Node*> outer = Transposes();
    const bool repeated = role_ != Role::kQuery && ReadRepeat();
    std::vector<Node*> middle = repeated ? Transposes() : std::vector<Node*>{};
    const bool rotated = role_ != Role::kValue && ReadRotary();
    if (!repeated && !rotated) return Layout(outer, {});
    if (!rotated) return Layout(middle, outer);  // source → transposes → repeat → transposes → core
    rotary_input_ = value_;
    std::vector<Node*> inner = Transposes();
    rotary_inner_transposes_ = inner.size();
    return Layout(inner, Concatenated(outer, middle));
  }

  static bool IsLayoutStep(const Node* node) {
    if (node == nullptr || node->inputs().empty() || node->input(0) == nullptr) return false;
    // Each output of a Split is a slice of its input along the axis: a view, its sizes read at
    // run time as a Reshape's target is.
    if (IsDefaultOp(node, "Split")) return node->outputs().size() > 1;
    if (node->outputs().size() != 1) return false;
    if (IsDefaultOp(node, "Transpose")) {
      std::optional<std::vector<int64_t>> perm = node->GetInts("perm");
      return perm.has_value() && IsPermutation(*perm);
    }
    if (IsDefaultOp(node, "Reshape")) return node->inputs().size() == 2;
    if (IsDefaultOp(node, "Squeeze") || IsDefaultOp(node, "Unsqueeze")) {
      return node->GetInts("axes").has_value() || (node->inputs().size() == 2 && ConstantInts(node->input(1), InitializerRule::kFeedsOverride));
    }
    if (IsDefaultOp(node, "Gather")) {
      TensorPtr index = node->inputs().size() == 2 ? ConstantValueOf(*node->input(1), InitializerRule::kFeedsOverride) : nullptr;
      return index != nullptr && index->dims().empty() && index->AsInt64s().has_value();
    }
    return false;
  }

  // The layout ops under `top`, down to the first other op: every intermediate must be read
  // only by the pattern (the match's final check; another operand may share the chain).
  // `base` (its scales, and a rotary with its transposes) read through the layout ops under `top`.
  OperandSearch View(Value* top, const AttentionOperandMatch& base) {
    OperandSearch search;
    AttentionOperandMatch operand = base;
    operand.layout = HeadLayout::kView;
    Value* value = top;
    std::vector<ViewStepMatch> steps;  // core side first
    while (IsLayoutStep(value->producer()) && steps.size() < 32) {
      Node* node = value->producer();
      ViewStepMatch step;
      step.node = node;
      step.output = value->producer_output_index();
      if (IsDefaultOp(node, "Reshape")) step.reshape = ReadReshape(*node, opset_);
      steps.push_back(std::move(step));
      value = node->input(0);
    }
    std::reverse(steps.begin(), steps.end());
    operand.view = std::move(steps);
    operand.source = value;
    search.operand = std::move(operand);
    return search;
  }

  static std::vector<Node*> Concatenated(std::vector<Node*> a, const std::vector<Node*>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  bool Inside() const { return ReadOnlyWithin(value_, readers_); }

  void Step(Node* node, Value* next) {
    readers_ = {node};
    value_ = next;
  }

  // Mul / Div by constant scalars under the core (sdpa scales Q and K by √scale each).
  void PeelScales() {
    while (Node* node = value_->producer()) {
      const bool mul = IsDefaultOp(node, "Mul"), div = IsDefaultOp(node, "Div");
      if ((!mul && !div) || node->inputs().size() != 2 || !Inside()) return;
      int operand = -1;
      std::optional<double> constant;
      if ((constant = ConstantScalar(node->input(1), InitializerRule::kFeedsOverride))) {
        operand = 0;
      } else if (mul && (constant = ConstantScalar(node->input(0), InitializerRule::kFeedsOverride))) {
        operand = 1;
      }
      if (operand < 0 || *constant == 0) return;
      out_.scales.push_back(node);
      out_.prescale *= div ? 1.0 / *constant : *constant;
      Step(node, node->input(static_cast<size_t>(operand)));
    }
  }

  // Transposes read only inside, core side first; value_ is left beneath the last one.
  std::vector<Node*> Transposes() {
    std::vector<Node*> found;
    while (Node* transpose = ProducerOp(value_, "Transpose")) {
      if (!Inside()) break;
      found.push_back(transpose);
      Step(transpose, transpose->input(0));
    }
    return found;
  }

  // Reshape(Expand(Unsqueeze(x, [2]), [B,Hkv,n,S,D]), [B,Hkv·n,S,D]).
  bool ReadRepeat() {
    Node* reshape = ProducerOp(value_, "Reshape");
    if (reshape == nullptr || reshape->inputs().size() != 2 || !Inside()) return false;
    Node* expand = ProducerOp(reshape->input(0), "Expand");
    if (expand == nullptr || expand->inputs().size() != 2 || !ReadOnlyWithin(reshape->input(0), {reshape})) return false;
    Node* unsqueeze = ProducerOp(expand->input(0), "Unsqueeze");
    if (unsqueeze == nullptr || !ReadOnlyWithin(expand->input(0), {expand})) return false;
    std::optional<std::vector<int64_t>> axes = unsqueeze->GetInts("axes");
    if (!axes && unsqueeze->inputs().size() == 2) axes = ConstantInts(unsqueeze->input(1), InitializerRule::kFeedsOverride);
    if (axes != std::optional<std::vector<int64_t>>(std::vector<int64_t>{2})) return false;
    RepeatMatch repeat;
    repeat.unsqueeze = unsqueeze;
    repeat.expand = expand;
    repeat.reshape = reshape;
    repeat.expand_shape = ReadTarget(*expand->input(1), *expand);
    repeat.reshape_shape = ReadReshape(*reshape, opset_);
    // [B,Hkv,n,S,D]: n may be read at run time (a target computed outside), never 0 or less.
    auto entries = Entries(repeat.expand_shape.parts);
    if (entries && (entries->size() != 5 || (*entries)[2].value_or(1) <= 0)) return false;
    if (entries) repeat.repeats = (*entries)[2].value_or(0);
    out_.repeat = std::move(repeat);
    Step(unsqueeze, unsqueeze->input(0));
    return true;
  }

  // x₁ or x₂ of `x`: a Slice of the last axis from `start` to `end` (steps 1), as constants.
  static std::optional<std::pair<int64_t, int64_t>> SliceOfLast(const Node* slice, const Value* x) {
    if (!IsDefaultOp(slice, "Slice") || slice->input(0) != x || slice->inputs().size() < 4) return std::nullopt;
    auto starts = ConstantInts(slice->input(1), InitializerRule::kFeedsOverride), ends = ConstantInts(slice->input(2), InitializerRule::kFeedsOverride), axes = ConstantInts(slice->input(3), InitializerRule::kFeedsOverride);
    if (!starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 || axes->size() != 1) return std::nullopt;
    if ((*axes)[0] != -1 && (*axes)[0] != 3) return std::nullopt;
    if (slice->inputs().size() >= 5 && slice->input(4) != nullptr &&
        ConstantInts(slice->input(4), InitializerRule::kFeedsOverride) != std::optional<std::vector<int64_t>>(std::vector<int64_t>{1})) {
      return std::nullopt;
    }
    return std::pair{(*starts)[0], (*ends)[0]};
  }

  // rotate_half(x) = Concat(Neg(x₂), x₁): x and the split point (0 when a Split's sizes are
  // read at run time: then in `sizes`), added to `nodes`.
  static std::optional<std::pair<Value*, int64_t>> RotateHalf(const Value* rotated, std::vector<Node*>& nodes,
                                                              Value*& sizes) {
    Node* concat = ProducerOp(rotated, "Concat");
    if (concat == nullptr || concat->inputs().size() != 2) return std::nullopt;
    const int64_t axis = concat->GetInt("axis", 0);
    if (axis != -1 && axis != 3) return std::nullopt;
    Node* neg = ProducerOp(concat->input(0), "Neg");
    if (neg == nullptr) return std::nullopt;
    Node* second = neg->input(0)->producer();
    Node* first = concat->input(1)->producer();
    if (second == nullptr || first == nullptr) return std::nullopt;
    if (IsDefaultOp(first, "Split") && first == second) {  // x₁, x₂ = Split(x) {axis: last}, two halves
      const int64_t split_axis = first->GetInt("axis", 0);
      if ((split_axis != -1 && split_axis != 3) || first->outputs().size() != 2 ||
          concat->input(1) != first->output(0) || neg->input(0) != first->output(1)) {
        return std::nullopt;
      }
      int64_t half = 0;
      if (first->inputs().size() == 2 && first->input(1) != nullptr) {
        auto constant = ConstantInts(first->input(1), InitializerRule::kFeedsOverride);
        if (!constant) {
          sizes = first->input(1);  // a runtime checks they are two halves
        } else if (constant->size() != 2 || (*constant)[0] != (*constant)[1] || (*constant)[0] <= 0) {
          return std::nullopt;
        } else {
          half = (*constant)[0];
        }
      } else if (first->GetInt("num_outputs", 2) != 2) {
        return std::nullopt;
      }
      nodes.insert(nodes.end(), {concat, neg, first});
      return std::pair{first->input(0), half};
    }
    const auto x1 = SliceOfLast(first, first->input(0));
    const auto x2 = SliceOfLast(second, first->input(0));
    // x₁ = x[..., 0:h], x₂ = x[..., h:] (any end at or past D: exporters write INT64_MAX).
    if (!x1 || !x2 || x1->first != 0 || x1->second <= 0 || x2->first != x1->second || x2->second < 2 * x1->second) {
      return std::nullopt;
    }
    nodes.insert(nodes.end(), {concat, neg, first, second});
    return std::pair{first->input(0), x1->second};
  }

  // x[..., start::2] over the last axis of the 4-D x: start, or nullopt.
  static std::optional<int64_t> EverySecondOfLast(const Node* slice, const Value* x) {
    if (!IsDefaultOp(slice, "Slice") || slice->input(0) != x || slice->inputs().size() < 5) return std::nullopt;
    auto starts = ConstantInts(slice->input(1), InitializerRule::kFeedsOverride), ends = ConstantInts(slice->input(2), InitializerRule::kFeedsOverride);
    auto axes = ConstantInts(slice->input(3), InitializerRule::kFeedsOverride), steps = ConstantInts(slice->input(4), InitializerRule::kFeedsOverride);
    if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
        steps != std::optional<std::vector<int64_t>>(std::vector<int64_t>{2}) || ((*axes)[0] != -1 && (*axes)[0] != 3)) {
      return std::nullopt;
    }
    // To the end: past a known last dim, or (a body knows no shapes) as exporters write it.
    const Shape* shape = x->shape() ? &*x->shape() : nullptr;
    const bool known = shape != nullptr && shape->size() == 4 && (*shape)[3].is_known();
    const bool to_the_end = known ? (*ends)[0] >= (*shape)[3].value : (*ends)[0] >= std::numeric_limits<int32_t>::max();
    if (!to_the_end || ((*starts)[0] != 0 && (*starts)[0] != 1)) return std::nullopt;
    return (*starts)[0];
  }

  // rotate_every_two(x) = flatten(stack((−x[..., 1::2], x[..., ::2]), −1)) as GPT-J writes it:
  // Reshape(Concat(Unsqueeze(Neg(odd), −1), Unsqueeze(even, −1)) {axis: −1}) back to x's shape.
  // x, its nodes added to `nodes`.
  static Value* RotateEveryTwo(const Value* rotated, std::vector<Node*>& nodes) {
    Node* flatten = ProducerOp(rotated, "Reshape");
    Node* stack = flatten != nullptr ? ProducerOp(flatten->input(0), "Concat") : nullptr;
    if (stack == nullptr || stack->inputs().size() != 2 || (stack->GetInt("axis", 0) != -1 && stack->GetInt("axis", 0) != 4)) {
      return nullptr;
    }
    Node* pair[2] = {ProducerOp(stack->input(0), "Unsqueeze"), ProducerOp(stack->input(1), "Unsqueeze")};
    for (Node* unsqueeze : pair) {
      if (unsqueeze == nullptr || UnsqueezedAtLast(*unsqueeze) == nullptr) return nullptr;
    }
    Node* neg = ProducerOp(pair[0]->input(0), "Neg");
    Node* odd = neg != nullptr ? neg->input(0)->producer() : nullptr;
    Node* even = pair[1]->input(0)->producer();
    if (odd == nullptr || even == nullptr) return nullptr;
    Value* x = even->input(0);
    if (EverySecondOfLast(even, x) != std::optional<int64_t>(0) || EverySecondOfLast(odd, x) != std::optional<int64_t>(1)) {
      return nullptr;
    }
    // The flatten gives x's own shape back (the pairs side by side): proven where shapes are
    // known, and checked each run by the kernels (the target is the form's `pair_flatten`).
    if (rotated->shape() && x->shape() && *rotated->shape() != *x->shape()) return nullptr;
    if (flatten->inputs().size() != 2) return nullptr;
    nodes.insert(nodes.end(), {flatten, stack, pair[0], pair[1], neg, odd, even});
    return x;
  }

  // Unsqueeze(v) of one new last axis (of the 5-D result): v, or null.
  static Value* UnsqueezedAtLast(const Node& unsqueeze) {
    std::optional<std::vector<int64_t>> axes = unsqueeze.GetInts("axes");
    if (!axes && unsqueeze.inputs().size() == 2) axes = ConstantInts(unsqueeze.input(1), InitializerRule::kFeedsOverride);
    if (!axes || axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != 4)) return nullptr;
    return unsqueeze.input(0);
  }

  // Add(Mul(x, cos), Mul(rotate_half(x), sin)) in any operand order, or RotaryEmbedding(x, cos, sin).
  bool ReadRotary() {
    Node* producer = value_->producer();
    if (producer == nullptr || !Inside()) return false;
    if (IsDefaultOp(producer, "RotaryEmbedding")) return ReadRotaryOp(*producer);
    if (IsDefaultOp(producer, "Concat")) return ReadPartialRotary(*producer);
    return ReadRotaryForm(producer);
  }

  // Concat(rotary(x₁), x₂) {axis: last} with x₁, x₂ = Split(x, [r, D − r]) {axis: last}: the
  // rotary form on the first r features, the others passed through (x₂ read by the Concat
  // alone, the prefix only by the form). A rotary over any other slice is no such form.
  bool ReadPartialRotary(Node& concat) {
    if (concat.inputs().size() != 2 || !LastAxis(concat.GetInt("axis", 0))) return false;
    Node* split = ProducerOp(concat.input(1), "Split");
    if (split == nullptr || split->outputs().size() != 2 || split->output(1) != concat.input(1) ||
        !LastAxis(split->GetInt("axis", 0)) || !ReadOnlyWithin(split->output(1), {&concat})) {
      return false;
    }
    // Sizes known before the run must turn a positive, even prefix; others are checked each run.
    std::optional<std::vector<int64_t>> sizes =
        split->inputs().size() == 2 && split->input(1) != nullptr ? ConstantInts(split->input(1), InitializerRule::kFeedsOverride) : split->GetInts("split");
    if (sizes && (sizes->size() != 2 || (*sizes)[0] <= 0 || (*sizes)[0] % 2 != 0 || (*sizes)[1] < 0)) return false;
    Value* const operand = value_;
    const std::unordered_set<const Node*> readers = readers_;
    Step(&concat, concat.input(0));
    Node* form = value_->producer();
    if (form == nullptr || !Inside() || !ReadRotaryForm(form) || value_ != split->output(0)) {
      value_ = operand;
      readers_ = readers;
      out_.rotary.reset();
      return false;
    }
    out_.rotary->part_concat = &concat;
    out_.rotary->part_split = split;
    Step(split, split->input(0));
    return true;
  }

  static bool LastAxis(int64_t axis) { return axis == -1 || axis == 3; }

  // Add(Mul(x, cos), Mul(rotate_half(x), sin)) ending at `producer`.
  bool ReadRotaryForm(Node* producer) {
    if (!IsDefaultOp(producer, "Add") || producer->inputs().size() != 2) return false;
    for (int order = 0; order < 2; ++order) {
      Node* direct = ProducerOp(producer->input(static_cast<size_t>(order)), "Mul");
      Node* turned = ProducerOp(producer->input(static_cast<size_t>(1 - order)), "Mul");
      if (direct == nullptr || turned == nullptr || direct == turned || direct->inputs().size() != 2 ||
          turned->inputs().size() != 2) {
        continue;
      }
      for (int side = 0; side < 2; ++side) {
        std::vector<Node*> nodes = {producer, direct, turned};
        Value* sizes = nullptr;
        auto half = RotateHalf(turned->input(static_cast<size_t>(side)), nodes, sizes);
        bool interleaved = false;
        if (!half) {
          if (Value* pairs = RotateEveryTwo(turned->input(static_cast<size_t>(side)), nodes)) {
            half = std::pair<Value*, int64_t>{pairs, 0};
            interleaved = true;
          }
        }
        if (!half) continue;
        Value* x = half->first;
        const int x_side = direct->input(0) == x ? 0 : direct->input(1) == x ? 1 : -1;
        if (x_side < 0) continue;
        RotaryMatch rotary;
        rotary.cos = direct->input(static_cast<size_t>(1 - x_side));
        rotary.sin = turned->input(static_cast<size_t>(1 - side));
        rotary.half = half->second;
        rotary.split_sizes = sizes;
        rotary.interleaved = interleaved;
        if (interleaved) rotary.pair_flatten = ProducerOp(turned->input(static_cast<size_t>(side)), "Reshape");
        rotary.nodes = nodes;
        if (!RotaryIsClosed(rotary, x)) continue;
        out_.rotary = std::move(rotary);
        value_ = x;
        readers_ = {};
        for (Node* node : out_.rotary->nodes) {
          if (std::find(node->inputs().begin(), node->inputs().end(), x) != node->inputs().end()) readers_.insert(node);
        }
        return true;
      }
    }
    return false;
  }

  // Every intermediate of the rotary form is read only inside it.
  static bool RotaryIsClosed(const RotaryMatch& rotary, const Value* x) {
    std::unordered_set<const Node*> inside(rotary.nodes.begin(), rotary.nodes.end());
    for (const Node* node : rotary.nodes) {
      if (node == rotary.nodes.front()) continue;  // the Add: its output is what the walk read
      for (const Value* output : node->outputs()) {
        if (output != nullptr && output != x && !ReadOnlyWithin(output, inside)) return false;
      }
    }
    return true;
  }

  bool ReadRotaryOp(Node& op) {
    // 4-D x, caches [B,S,D/2] without position ids, the whole head rotated.
    if (op.inputs().size() != 3 || op.GetInt("rotary_embedding_dim", 0) != 0) return false;
    RotaryMatch rotary;
    rotary.nodes = {&op};
    rotary.cos = op.input(1);
    rotary.sin = op.input(2);
    rotary.op = true;
    rotary.interleaved = op.GetInt("interleaved", 0) != 0;
    out_.rotary = std::move(rotary);
    Step(&op, op.input(0));
    return true;
  }

  // The layout the transposes make. Both lists are core side first: `inner` between the source
  // and the rotary / repeat (all of them when there is neither), `outer` between those and the
  // core, which must leave the heads-first layout as the core reads it.
  OperandSearch Layout(const std::vector<Node*>& inner, const std::vector<Node*>& outer) {
    OperandSearch search;
    std::optional<Perm> inner_perm = Composed(inner), outer_perm = Composed(outer);
    if (!inner_perm || !outer_perm) return Unmatched(search);
    const bool staged = out_.rotary || out_.repeat;
    const bool key = role_ == Role::kKey && key_transposed_;
    if (staged) {
      const Perm& wanted = key ? kSwapLast : kIdentity;
      // The rotary turns the [B,S,H,D] value right under the head split (GPT-J): the kernels
      // turn each element by its position and feature, which the Transpose does not change.
      const Perm& split_after = key ? kKeySplitPerm : kSplitPerm;
      if (*outer_perm == split_after && inner.empty() && !outer.empty() && out_.rotary && !out_.repeat) {
        out_.rotary->before_heads = true;
        out_.transposes.assign(outer.rbegin(), outer.rend());  // source side first
        return SplitHeads(search, nullptr);
      }
      if (*outer_perm != wanted) {
        search.near_miss = std::string(RoleName(role_)) + ": transpose perm " + PermText(*outer_perm) +
                           " between the rotary embedding or repeat and the product is not " + PermText(wanted);
        return search;
      }
    }
    std::vector<Node*> transposes = Concatenated(outer, inner);
    std::reverse(transposes.begin(), transposes.end());  // source side first
    out_.transposes = transposes;
    const Perm& split_perm = key && !staged ? kKeySplitPerm : kSplitPerm;
    if (!inner.empty() && *inner_perm == split_perm) return SplitHeads(search, inner.back());
    if (staged ? *inner_perm == kIdentity : (key && !inner.empty() && *inner_perm == kSwapLast)) {
      out_.layout = HeadLayout::kHeadsFirst;
      out_.source = value_;
      return Finish(search);
    }
    if (!staged && inner.empty()) {  // read as it is (scales aside)
      out_.source = value_;
      return Finish(search);
    }
    // Heads split sequence first: no head-split form describes them, but the chain of layout ops
    // they end is a view the kernel reads through (Walk takes it from here).
    const Perm& seq_first = key ? kSeqFirstKeySplitPerm : kSeqFirstSplitPerm;
    if (!staged && views_ && *inner_perm == seq_first && IsLayoutStep(value_->producer())) {
      out_.source = value_;
      return Finish(search);
    }
    search.near_miss = std::string(RoleName(role_)) + ": transpose perm " + PermText(*inner_perm) +
                       " is not the head split's " + PermText(split_perm);
    return search;
  }

  // The transposes are no 4-D head layout: the core reads its operand as it is.
  OperandSearch Unmatched(OperandSearch& search) {
    AttentionOperandMatch plain;
    plain.layout = role_ == Role::kKey && key_transposed_ ? HeadLayout::kHeadsFirstTransposed : HeadLayout::kHeadsFirst;
    plain.source = initial_;
    search.operand = plain;
    return search;
  }

  static std::optional<Perm> Composed(const std::vector<Node*>& core_side_first) {
    Perm perm = kIdentity;
    for (auto it = core_side_first.rbegin(); it != core_side_first.rend(); ++it) {
      std::optional<std::vector<int64_t>> step = (*it)->GetInts("perm");
      if (!step || step->size() != 4 || !IsPermutation(*step)) return std::nullopt;  // not a 4-D head layout
      perm = Compose(perm, *step);
    }
    return perm;
  }

  OperandSearch SplitHeads(OperandSearch& search, Node* first_transpose) {
    out_.layout = HeadLayout::kSplitHeads;
    out_.source = value_;
    Node* reshape = ProducerOp(value_, "Reshape");
    // Read by the first transpose, or (a rotary before the split) by the pattern's own nodes.
    const bool read_inside = first_transpose != nullptr ? ReadOnlyByOrShapes(value_, first_transpose) : Inside();
    if (reshape != nullptr && reshape->inputs().size() == 2 && read_inside) {
      out_.split = ReadReshape(*reshape, opset_);
      out_.source = reshape->input(0);
      auto entries = Entries(out_.split->parts);
      if (entries && entries->size() != 4) {
        search.near_miss = std::string(RoleName(role_)) + ": the head split's Reshape target is not 4-D";
      } else if (entries && (*entries)[2].value_or(0) > 0 && (*entries)[3].value_or(0) > 0 && out_.source->shape() &&
                 !out_.source->shape()->empty() && out_.source->shape()->back().is_known()) {
        int64_t width = 0;  // hostile targets may overflow H * D
        if (__builtin_mul_overflow(*(*entries)[2], *(*entries)[3], &width) || out_.source->shape()->back().value != width) {
          search.near_miss = std::string(RoleName(role_)) + ": the head split's [H, D] do not make the width";
        }
      }
    }
    search.operand = out_;
    return search;
  }

  OperandSearch Finish(OperandSearch& search) {
    search.operand = out_;
    return search;
  }

  AttentionOperandMatch out_;
  Value* rotary_input_ = nullptr;         // what the rotary turns, when there is one
  size_t rotary_inner_transposes_ = 0;    // the transposes between it and the source
  bool views_;
  Value* initial_;
  Value* value_;
  std::unordered_set<const Node*> readers_;
  Role role_;
  bool key_transposed_;
  int64_t opset_;
};

}  // namespace

OperandSearch WalkOperand(Value* operand, Node& reader, Role role, bool key_transposed_by_core, bool views,
                          int64_t opset) {
  return OperandWalker(operand, reader, role, key_transposed_by_core, views, opset).Walk();
}

}  // namespace fusionopt::attention_match
