// The attention matcher (attention.h): the core from the Softmax outwards, then the
// operands' head splits, the combined Split and the head merge where the graph allows them.
#include "patterns/attention.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "ir/constant_value.h"
#include "patterns/matcher_support.h"
#include "ir/permutation.h"

namespace fusionopt {
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

enum class Role { kQuery, kKey, kValue };

const char* RoleName(Role role) {
  switch (role) {
    case Role::kQuery: return "query";
    case Role::kKey: return "key";
    case Role::kValue: return "value";
  }
  return "";
}

AttentionSearch NearMiss(const WhyNot& reason) {
  AttentionSearch search;
  search.near_miss = reason.Prefixed("attention");
  return search;
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

// The reason `value` cannot be a core intermediate read by `reader` alone; empty when it can.
WhyNot CoreIntermediateProblem(const Value* value, const Node* reader) {
  if (value->is_graph_output()) return "a graph output is inside the pattern";
  for (const Use& use : value->uses()) {
    if (use.node != reader) return "an intermediate is read outside the pattern";
  }
  return {};
}

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

// The target entries `parts` spell, one per dim, when each part's length is known: constants
// by value, a dim by nullopt. Nullopt when a part's length is not known.
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

// The target `shape` of `reader` (a Reshape or Expand): absorbed with the chain that computes it
// when nothing else reads the chain, else read as values at run time.
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

struct OperandSearch {
  AttentionOperandMatch operand;
  WhyNot near_miss;
};

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

OperandSearch WalkOperand(Value* operand, Node& reader, Role role, bool key_transposed_by_core, bool views,
                          int64_t opset) {
  return OperandWalker(operand, reader, role, key_transposed_by_core, views, opset).Walk();
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

namespace {

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

  // Checks the shapes allow: 4-D scores, the softmax over their last axis, a mask that does
  // not widen them.
  if (match.score_matmul != nullptr) {
    const Value* product = match.score_matmul->output(0);
    const bool split_heads = match.q.layout == HeadLayout::kSplitHeads || match.k.layout == HeadLayout::kSplitHeads;
    int64_t rank = split_heads ? 4 : (product->shape() ? static_cast<int64_t>(product->shape()->size()) : -1);
    if (rank >= 0 && rank != 4) return NearMiss("the scores are not 4-D [B,H,Sq,Sk]");
    if (rank == 4 && NormalizedAxis(match.softmax_axis, rank) != rank - 1) {
      return NearMiss("the softmax is not over the last axis");
    }
    if (match.mask != nullptr && !MayBroadcastWithoutWidening(match.mask, product)) {
      return NearMiss("the mask does not broadcast to the scores");
    }
    if (match.bias != nullptr && !MayBroadcastWithoutWidening(match.bias, product)) {
      return NearMiss("the score bias does not broadcast to the scores");
    }
  } else {
    for (size_t i = 0; i < 3; ++i) {
      const auto& shape = match.attention_op->input(i)->shape();
      if (shape && shape->size() != 4) return NearMiss("the Attention node's operands are not 4-D");
    }
  }

  CollectMembers(match);
  ReadHeads(match);
  std::unordered_set<const Node*> members(match.nodes.begin(), match.nodes.end());
  for (const Node* member : match.nodes) {
    for (const Value* output : member->outputs()) {
      if (output == nullptr || output == match.output) continue;
      if (output->is_graph_output()) return NearMiss("a graph output is inside the pattern");
      for (const Use& use : output->uses()) {
        if (members.count(use.node)) continue;
        if (!IsDefaultOp(use.node, "Shape")) return NearMiss("an intermediate is read outside the pattern");
        if (std::find(match.outside_shape_reads.begin(), match.outside_shape_reads.end(), use.node) ==
            match.outside_shape_reads.end()) {
          match.outside_shape_reads.push_back(use.node);
        }
      }
    }
  }
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
