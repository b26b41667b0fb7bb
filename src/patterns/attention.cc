// The attention matcher (attention.h): the core from the Softmax outwards, then the
// operands' head splits, the combined Split and the head merge where the graph allows them.
#include "patterns/attention.h"

#include <algorithm>
#include <unordered_set>

#include "ir/constant_value.h"
#include "patterns/matcher_support.h"
#include "ir/permutation.h"

namespace fusionopt {
namespace {

using composite::IsOp;
using composite::ProducerOp;
using composite::ScalarConstant;
using composite::SoleReader;

using Perm = std::vector<int64_t>;
const Perm kIdentity = {0, 1, 2, 3};
const Perm kSplitPerm = {0, 2, 1, 3};     // [B,S,H,D] -> [B,H,S,D], and back for the merge
const Perm kKeySplitPerm = {0, 2, 3, 1};  // [B,S,H,D] -> [B,H,D,S]
const Perm kSwapLast = {0, 1, 3, 2};      // [B,H,S,D] -> [B,H,D,S]

enum class Role { kQuery, kKey, kValue };

const char* RoleName(Role role) {
  switch (role) {
    case Role::kQuery: return "query";
    case Role::kKey: return "key";
    case Role::kValue: return "value";
  }
  return "";
}

AttentionSearch NearMiss(const std::string& reason) {
  AttentionSearch search;
  search.near_miss = "attention: " + reason;
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
                     [&](const Use& use) { return use.node == reader || IsOp(use.node, "Shape"); });
}

// The reason `value` cannot be a core intermediate read by `reader` alone, or "".
std::string CoreIntermediateProblem(const Value* value, const Node* reader) {
  if (value->is_graph_output()) return "a graph output is inside the pattern";
  for (const Use& use : value->uses()) {
    if (use.node != reader) return "an intermediate is read outside the pattern";
  }
  return "";
}

std::optional<std::vector<int64_t>> ConstantInts(const Value* value) {
  if (value == nullptr) return std::nullopt;
  TensorPtr tensor = ConstantValueOf(*value, /*initializers_overridable=*/true);
  if (tensor == nullptr || tensor->dims().size() > 1) return std::nullopt;
  if (tensor->dtype() != DataType::kInt64 && tensor->dtype() != DataType::kInt32) return std::nullopt;
  return tensor->AsInt64s();
}

// Unsqueeze(x, [0]) in either opset's spelling: the unsqueezed value, or null.
Value* UnsqueezedAtZero(const Node& unsqueeze) {
  std::optional<std::vector<int64_t>> axes = unsqueeze.GetInts("axes");
  if (!axes && unsqueeze.inputs().size() == 2) axes = ConstantInts(unsqueeze.input(1));
  if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return nullptr;
  return unsqueeze.input(0);
}

// Gather(Shape(v), i) with a one-element constant index: v and i, added to `chain`.
std::optional<ShapePartMatch> DimOfShape(const Value* gathered, std::vector<Node*>& chain) {
  Node* gather = ProducerOp(gathered, "Gather");
  if (gather == nullptr || gather->GetInt("axis", 0) != 0 || gather->inputs().size() != 2) return std::nullopt;
  std::optional<std::vector<int64_t>> index = ConstantInts(gather->input(1));
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

// The Reshape with its target: absorbed with the chain that computes it when nothing else
// reads the chain, else read as values at run time.
HeadReshapeMatch ReadReshape(Node& reshape, int64_t opset) {
  HeadReshapeMatch match;
  match.reshape = &reshape;
  match.allow_zero = OpsetAllowZero(reshape, opset) != 0;
  std::vector<Node*> chain;
  std::optional<std::vector<ShapePartMatch>> parts = ShapeParts(*reshape.input(1), &chain);
  std::unordered_set<const Node*> inside(chain.begin(), chain.end());
  inside.insert(&reshape);
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
    values.value = reshape.input(1);
    match.parts = {values};
  }
  return match;
}

// Both are permutations of the same size (WalkOperand checks every step).
Perm Compose(const Perm& first, const Perm& then) {
  Perm out(then.size());
  for (size_t i = 0; i < then.size(); ++i) out[i] = first[static_cast<size_t>(then[i])];
  return out;
}

struct OperandSearch {
  AttentionOperandMatch operand;
  std::string near_miss;
};

// How `operand` (read by `reader`, a MatMul) reaches the pattern: through a head split whose
// transposes and Reshape are read only inside (Shape reads aside), or as it is.
OperandSearch WalkOperand(Value* operand, Node& reader, Role role, int64_t opset) {
  OperandSearch search;
  AttentionOperandMatch& out = search.operand;
  out.layout = role == Role::kKey ? HeadLayout::kHeadsFirstTransposed : HeadLayout::kHeadsFirst;
  out.source = operand;

  std::vector<Node*> transposes;  // reader side first
  Value* value = operand;
  const Node* next = &reader;
  bool inside = true;
  while (Node* transpose = ProducerOp(value, "Transpose")) {
    inside = inside && ReadOnlyByOrShapes(value, next);
    transposes.push_back(transpose);
    next = transpose;
    value = transpose->input(0);
  }
  if (transposes.empty() || !inside) return search;  // read as it is

  Perm perm = kIdentity;
  for (auto it = transposes.rbegin(); it != transposes.rend(); ++it) {
    std::optional<std::vector<int64_t>> step = (*it)->GetInts("perm");
    if (!step || step->size() != 4 || !IsPermutation(*step)) return search;  // not a 4-D head layout: read as it is
    perm = Compose(perm, *step);
  }
  const Perm& split_perm = role == Role::kKey ? kKeySplitPerm : kSplitPerm;
  std::reverse(transposes.begin(), transposes.end());
  if (perm == split_perm) {
    out.layout = HeadLayout::kSplitHeads;
    out.transposes = transposes;
    out.source = value;
    Node* reshape = ProducerOp(value, "Reshape");
    if (reshape != nullptr && reshape->inputs().size() == 2 && ReadOnlyByOrShapes(value, transposes.front())) {
      out.split = ReadReshape(*reshape, opset);
      out.source = reshape->input(0);
      auto entries = Entries(out.split->parts);
      if (entries && entries->size() != 4) {
        search.near_miss = std::string(RoleName(role)) + ": the head split's Reshape target is not 4-D";
      } else if (entries && (*entries)[2].value_or(0) > 0 && (*entries)[3].value_or(0) > 0 && out.source->shape() &&
                 !out.source->shape()->empty() && out.source->shape()->back().is_known()) {
        int64_t width = 0;  // hostile targets may overflow H * D
        if (__builtin_mul_overflow(*(*entries)[2], *(*entries)[3], &width) || out.source->shape()->back().value != width) {
          search.near_miss = std::string(RoleName(role)) + ": the head split's [H, D] do not make the width";
        }
      }
    }
    return search;
  }
  if (role == Role::kKey && perm == kSwapLast) {
    out.layout = HeadLayout::kHeadsFirst;
    out.transposes = transposes;
    out.source = value;
    return search;
  }
  search.near_miss = std::string(RoleName(role)) + ": transpose perm " + PermText(perm) + " is not the head split's " +
                     PermText(split_perm);
  return search;
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
  TensorPtr buffer = value == nullptr ? nullptr : ConstantValueOf(*value, /*initializers_overridable=*/true);
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
// only inside; false (nothing set) when the graph does not have it that way.
bool ReadMerge(AttentionMatch& match, int64_t opset) {
  Value* context = match.context_matmul->output(0);
  Node* transpose = SoleReader(context);
  if (!IsOp(transpose, "Transpose") || transpose->GetInts("perm") != std::optional<std::vector<int64_t>>(kSplitPerm)) {
    return false;
  }
  Value* transposed = transpose->output(0);
  Node* reshape = nullptr;
  for (const Use& use : transposed->uses()) {
    if (IsOp(use.node, "Reshape") && use.input_index == 0) reshape = use.node;
  }
  if (reshape == nullptr || transposed->is_graph_output() || reshape->inputs().size() != 2) return false;
  HeadReshapeMatch merge = ReadReshape(*reshape, opset);
  std::unordered_set<const Node*> readers(merge.chain.begin(), merge.chain.end());
  readers.insert(reshape);
  for (const Use& use : transposed->uses()) {
    if (!readers.count(use.node)) return false;
  }
  if (auto entries = Entries(merge.parts); entries && entries->size() != 3) return false;
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
      if (use.node != head && !chain.count(use.node) && !IsOp(use.node, "Shape")) return;
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
  std::vector<Node*> nodes = {match.score_matmul, match.softmax, match.context_matmul};
  if (match.scale_node) nodes.push_back(match.scale_node);
  if (match.mask_node) nodes.push_back(match.mask_node);
  for (const AttentionOperandMatch* operand : {&match.q, &match.k, &match.v}) {
    nodes.insert(nodes.end(), operand->transposes.begin(), operand->transposes.end());
    if (operand->split) {
      nodes.push_back(operand->split->reshape);
      nodes.insert(nodes.end(), operand->split->chain.begin(), operand->split->chain.end());
    }
  }
  if (match.split) nodes.push_back(match.split);
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
  const auto& shape = match.score_matmul->input(0)->shape();
  if (shape && shape->size() == 4 && (*shape)[1].is_known() && (*shape)[3].is_known()) {
    match.heads = (*shape)[1].value;
    match.head_size = (*shape)[3].value;
  }
}

}  // namespace

std::optional<std::vector<ShapePartMatch>> ShapeParts(Value& shape, std::vector<Node*>* chain) {
  std::vector<ShapePartMatch> parts;
  if (std::optional<std::vector<int64_t>> constant = ConstantInts(&shape)) {
    ShapePartMatch part;
    part.constant = *constant;
    return std::vector<ShapePartMatch>{part};
  }
  Node* concat = ProducerOp(&shape, "Concat");
  if (concat == nullptr || (concat->GetInt("axis", 0) != 0 && concat->GetInt("axis", 0) != -1)) return std::nullopt;
  std::vector<Node*> nodes;
  for (Value* input : concat->inputs()) {
    if (std::optional<std::vector<int64_t>> constant = ConstantInts(input)) {
      ShapePartMatch part;
      part.constant = *constant;
      parts.push_back(part);
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
    const TensorPtr index = ConstantValueOf(*gather->input(1), true);
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

AttentionSearch MatchAttentionAt(Node& softmax, int64_t opset) {
  if (!IsOp(&softmax, "Softmax") || softmax.inputs().size() != 1 || softmax.output(0) == nullptr) return {};
  AttentionMatch match;
  match.softmax = &softmax;
  match.softmax_axis = softmax.GetInt("axis", opset >= 13 ? -1 : 1);
  Value* probabilities = softmax.output(0);
  for (const Use& use : probabilities->uses()) {
    if (IsOp(use.node, "MatMul") && use.input_index == 0) match.context_matmul = use.node;
  }
  if (match.context_matmul == nullptr) return {};

  // Softmax input: [mask] over [scale] over Q·Kᵀ.
  Value* scores = softmax.input(0);
  Node* reader = &softmax;
  if (Node* add = ProducerOp(scores, "Add"); add != nullptr && add->inputs().size() == 2) {
    int scores_index = ScoresMatMul(add->input(0)) != nullptr ? 0 : 1;
    if (ScoresMatMul(add->input(scores_index)) == nullptr) return {};
    match.mask_kind = AttentionMaskKind::kAdditive;
    match.mask_node = add;
    match.mask = add->input(1 - scores_index);
    scores = add->input(scores_index);
  } else if (Node* where = ProducerOp(scores, "Where"); where != nullptr && where->inputs().size() == 3) {
    int fill_index = ScoresMatMul(where->input(1)) != nullptr ? 2 : 1;
    if (ScoresMatMul(where->input(3 - fill_index)) == nullptr) return {};
    std::optional<double> fill = ScalarConstant(where->input(fill_index));
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
    if (std::string problem = CoreIntermediateProblem(match.mask_node->output(0), &softmax); !problem.empty()) {
      return NearMiss(problem);
    }
    reader = match.mask_node;
  }
  match.score_matmul = ProducerOp(scores, "MatMul");
  if (match.score_matmul == nullptr) {
    Node* scale = scores->producer();
    match.score_matmul = ScoresMatMul(scores);
    if (match.score_matmul == nullptr) return {};
    Value* product = match.score_matmul->output(0);
    Value* constant = scale->input(0) == product ? scale->input(1) : scale->input(0);
    match.scale = ScalarConstant(constant);
    if (!match.scale) return NearMiss("the scale is not a constant scalar");
    match.scale_divides = scale->op_type() == "Div";
    match.scale_node = scale;
    if (std::string problem = CoreIntermediateProblem(scores, reader); !problem.empty()) return NearMiss(problem);
    reader = scale;
    scores = product;
  }
  if (match.score_matmul->inputs().size() != 2) return {};
  if (std::string problem = CoreIntermediateProblem(scores, reader); !problem.empty()) return NearMiss(problem);
  if (std::string problem = CoreIntermediateProblem(probabilities, match.context_matmul); !problem.empty()) {
    return NearMiss(problem);
  }

  // The operands and what surrounds the core.
  struct Walk {
    AttentionOperandMatch* operand;
    Value* value;
    Node* reader;
    Role role;
  };
  for (const Walk& walk : {Walk{&match.q, match.score_matmul->input(0), match.score_matmul, Role::kQuery},
                           Walk{&match.k, match.score_matmul->input(1), match.score_matmul, Role::kKey},
                           Walk{&match.v, match.context_matmul->input(1), match.context_matmul, Role::kValue}}) {
    if (walk.value == nullptr) return {};
    OperandSearch search = WalkOperand(walk.value, *walk.reader, walk.role, opset);
    if (!search.near_miss.empty()) return NearMiss(search.near_miss);
    *walk.operand = std::move(search.operand);
  }
  ReadSplit(match);
  if (match.split != nullptr && !SplitAlongLast(match)) {
    match.split = nullptr;
    match.combined = nullptr;
    for (AttentionOperandMatch* operand : {&match.q, &match.k, &match.v}) operand->split_output = -1;
  }
  match.output = match.context_matmul->output(0);
  if (ReadMerge(match, opset)) match.output = match.merge->reshape->output(0);

  // Checks the shapes allow: 4-D scores, the softmax over their last axis, a mask that does
  // not widen them.
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

  CollectMembers(match);
  ReadHeads(match);
  std::unordered_set<const Node*> members(match.nodes.begin(), match.nodes.end());
  for (const Node* member : match.nodes) {
    for (const Value* output : member->outputs()) {
      if (output == nullptr || output == match.output) continue;
      if (output->is_graph_output()) return NearMiss("a graph output is inside the pattern");
      for (const Use& use : output->uses()) {
        if (members.count(use.node)) continue;
        if (!IsOp(use.node, "Shape")) return NearMiss("an intermediate is read outside the pattern");
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

}  // namespace fusionopt
