// fuse-attention (O3): its rewrite, conditions and limits are in fuse_attention.h.
#include "passes/fusion/attention/fuse_attention.h"

#include <algorithm>
#include <unordered_set>
#include <variant>

#include "patterns/attention/attention.h"
#include "ir/constant_value.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"
#include "passes/util/shape_facts.h"

namespace fusionopt::passes {
namespace {

// Where a dim of a value inside the pattern can be read outside it: one dim of an outside
// value, or a constant.
struct DimSource {
  Value* value = nullptr;
  int64_t axis = 0;
  std::optional<int64_t> constant;

  bool operator==(const DimSource& other) const {
    return value == other.value && axis == other.axis && constant == other.constant;
  }
};

std::optional<int64_t> RankOf(const Value& value) {
  if (!value.shape()) return std::nullopt;
  return static_cast<int64_t>(value.shape()->size());
}

// Proves dims of the pattern's values equal to dims of values outside it.
class DimProver {
 public:
  explicit DimProver(const AttentionMatch& match) : match_(match), members_(match.nodes.begin(), match.nodes.end()) {}

  std::optional<DimSource> Resolve(Value* value, int64_t axis, int depth = 0) const {
    std::optional<int64_t> rank = RankOf(*value);
    if (axis < 0 && rank) axis += *rank;
    if (axis < 0 || (rank && axis >= *rank) || depth > 16) return std::nullopt;
    Node* producer = value->producer();
    if (producer == nullptr || !members_.count(producer)) return DimSource{value, axis, std::nullopt};
    if (producer->op_type() == "Transpose") {
      std::optional<std::vector<int64_t>> perm = producer->GetInts("perm");
      if (!perm || axis >= static_cast<int64_t>(perm->size())) return std::nullopt;
      return Resolve(producer->input(0), (*perm)[static_cast<size_t>(axis)], depth + 1);
    }
    if (producer == match_.split) {
      std::optional<int64_t> input_rank = RankOf(*producer->input(0));
      int64_t split_axis = match_.split_axis < 0 && input_rank ? match_.split_axis + *input_rank : match_.split_axis;
      if (split_axis < 0 || axis == split_axis) return std::nullopt;
      return Resolve(producer->input(0), axis, depth + 1);
    }
    if (producer->op_type() == "Reshape") return ResolveReshape(*producer, axis, depth);
    // A scale, and the rotary embedding (its Add, or the op), keep the dims of the operand.
    if (Value* operand = ShapeKeepingOperand(*producer)) return Resolve(operand, axis, depth + 1);
    if (producer == match_.context_matmul || producer == match_.attention_op) return ResolveContext(axis, depth);
    return std::nullopt;  // the scores: a mask may widen any of their dims
  }

 private:
  // The context [B,H,Sq,Dv]: Dv is V's; B, H and Sq are Q's unless the mask or score bias may
  // widen them (a dim that is not provably 1 or that same dim).
  std::optional<DimSource> ResolveContext(int64_t axis, int depth) const {
    const Node* core = match_.attention_op != nullptr ? match_.attention_op : match_.context_matmul;
    if (axis == 3) return Resolve(core->input(match_.attention_op != nullptr ? 2 : 1), 3, depth + 1);
    Value* q = match_.attention_op != nullptr ? match_.attention_op->input(0) : match_.score_matmul->input(0);
    const auto& query = q->shape();
    if (!query || query->size() != 4) return std::nullopt;
    if (axis < 2) {  // K and V broadcast with Q over batch and heads: they must provably agree
      const Node* scores = match_.attention_op != nullptr ? match_.attention_op : match_.score_matmul;
      for (const Value* other : {scores->input(1), core->input(match_.attention_op != nullptr ? 2 : 1)}) {
        const auto& shape = other->shape();
        if (!shape || shape->size() != 4 || !ProvablySameDim((*shape)[static_cast<size_t>(axis)], (*query)[static_cast<size_t>(axis)])) {
          return std::nullopt;
        }
      }
    }
    for (const Value* term : {match_.mask, match_.bias}) {
      if (term == nullptr) continue;
      const auto& shape = term->shape();
      if (!shape) return std::nullopt;
      const int64_t offset = 4 - static_cast<int64_t>(shape->size());
      if (axis >= offset) {
        const Dim& dim = (*shape)[static_cast<size_t>(axis - offset)];
        if (!(dim.is_known() && dim.value == 1) && !ProvablySameDim(dim, (*query)[static_cast<size_t>(axis)])) {
          return std::nullopt;
        }
      }
    }
    return Resolve(q, axis, depth + 1);
  }

  Value* ShapeKeepingOperand(const Node& node) const {
    for (const AttentionOperandMatch* operand : {&match_.q, &match_.k, &match_.v}) {
      if (std::find(operand->scales.begin(), operand->scales.end(), &node) != operand->scales.end()) {
        return ScaledOperand(node);
      }
      if (operand->rotary && !operand->rotary->nodes.empty() && operand->rotary->nodes.front() == &node) {
        return operand->rotary->op ? node.input(0) : RotatedOperand(*operand);
      }
      if (operand->rotary && operand->rotary->part_concat == &node) return operand->rotary->part_split->input(0);
    }
    return nullptr;
  }

  // The scale's non-constant operand.
  static Value* ScaledOperand(const Node& scale) {
    return ConstantValueOf(*scale.input(1), InitializerRule::kFeedsOverride) != nullptr ? scale.input(0) : scale.input(1);
  }

  // The rotated operand x: the value every rotary form reads that its own nodes do not compute.
  static Value* RotatedOperand(const AttentionOperandMatch& operand) {
    const auto& nodes = operand.rotary->nodes;
    std::unordered_set<const Value*> computed;
    for (const Node* node : nodes) computed.insert(node->outputs().begin(), node->outputs().end());
    const Node* direct = nodes[1];  // Mul(x, cos)
    for (Value* input : direct->inputs()) {
      if (input != operand.rotary->cos && !computed.count(input)) return input;
    }
    return nullptr;
  }

  const HeadReshapeMatch* ReshapeMatch(const Node& reshape) const {
    for (const AttentionOperandMatch* operand : {&match_.q, &match_.k, &match_.v}) {
      if (operand->split && operand->split->reshape == &reshape) return &*operand->split;
      if (operand->repeat && operand->repeat->reshape == &reshape) return &operand->repeat->reshape_shape;
      for (const ViewStepMatch& step : operand->view) {
        if (step.node == &reshape && step.reshape) return &*step.reshape;
      }
    }
    return match_.merge && match_.merge->reshape == &reshape ? &*match_.merge : nullptr;
  }

  std::optional<DimSource> ResolveReshape(Node& reshape, int64_t axis, int depth) const {
    const HeadReshapeMatch* match = ReshapeMatch(reshape);
    if (match == nullptr) return std::nullopt;
    int64_t position = 0;
    for (const ShapePartMatch& part : match->parts) {
      if (part.kind == ShapePartMatch::Kind::kValues) return std::nullopt;
      const int64_t length = part.kind == ShapePartMatch::Kind::kConstant ? static_cast<int64_t>(part.constant.size()) : 1;
      if (axis >= position + length) {
        position += length;
        continue;
      }
      // An entry 0 copies the input's dim unless allowzero; -1 is inferred from the others.
      std::optional<DimSource> copied;
      auto input_dim = [&] {
        if (!copied) copied = Resolve(reshape.input(0), axis, depth + 1);
        return copied;
      };
      if (part.kind == ShapePartMatch::Kind::kConstant) {
        const int64_t entry = part.constant[static_cast<size_t>(axis - position)];
        if (entry > 0 || (entry == 0 && match->allow_zero)) return DimSource{nullptr, 0, entry};
        return entry == 0 ? input_dim() : std::nullopt;
      }
      std::optional<DimSource> read = Resolve(part.value, part.axis, depth + 1);
      // The value read is the dim unless it is 0 and copies the input's instead: then both
      // must be one and the same dim.
      if (!read || match->allow_zero || (read->constant && *read->constant > 0)) return read;
      return input_dim() == read ? read : std::nullopt;
    }
    return std::nullopt;
  }

  const AttentionMatch& match_;
  std::unordered_set<const Node*> members_;
};

// A Gather(Shape(x), i) outside the pattern, x inside, and the dim it reads.
struct ShapeRead {
  Node* gather = nullptr;
  int64_t index = 0;
  DimSource source;
};

// Every outside Shape read of the pattern's values, each proven from outside values, or the
// reason one cannot be.
Decided<std::vector<ShapeRead>> PlanShapeReads(const AttentionMatch& match) {
  DimProver prover(match);
  std::vector<ShapeRead> reads;
  for (Node* shape : match.outside_shape_reads) {
    const Value* dims = shape->output(0);
    if (shape->FindAttribute("start") != nullptr || shape->FindAttribute("end") != nullptr || dims == nullptr ||
        dims->is_graph_output()) {
      return WhyNot("a Shape of an intermediate is read outside the pattern");
    }
    for (const Use& use : dims->uses()) {
      Node* gather = use.node;
      TensorPtr index = gather->op_type() == "Gather" && IsDefaultDomain(*gather) && use.input_index == 0 &&
                                gather->GetInt("axis", 0) == 0 && gather->inputs().size() == 2
                            ? ConstantValueOf(*gather->input(1), InitializerRule::kFeedsOverride)
                            : nullptr;
      std::optional<std::vector<int64_t>> indices = index ? index->AsInt64s() : std::nullopt;
      if (!indices || indices->size() != 1 || gather->output(0) == nullptr || gather->output(0)->is_graph_output()) {
        return WhyNot("a Shape of an intermediate is read outside the pattern other than by one dim");
      }
      std::optional<DimSource> source = prover.Resolve(shape->input(0), indices->front());
      if (!source) return WhyNot("a dim of an intermediate is read outside and is not provably an input's");
      reads.push_back(ShapeRead{gather, indices->front(), *source});
    }
  }
  return reads;
}

TensorPtr Int64Tensor(const std::vector<int64_t>& dims, int64_t value) {
  return std::make_shared<const Tensor>(Tensor::FromValues(DataType::kInt64, dims, std::vector<int64_t>{value}));
}

// Rewires each read to its outside source (a Shape of that value, or a constant) and removes
// the Shape nodes nothing reads any more.
void RewireShapeReads(Graph& graph, const std::vector<ShapeRead>& reads, const std::vector<Node*>& shapes) {
  for (const ShapeRead& read : reads) {
    Node& gather = *read.gather;
    const std::vector<int64_t> index_dims = ConstantValueOf(*gather.input(1), InitializerRule::kFeedsOverride)->dims();
    if (read.source.constant) {
      Value* result = gather.output(0);
      ReplaceByInitializer(graph, *result, Int64Tensor(index_dims, *read.source.constant));
      graph.RemoveNode(&gather);
      continue;
    }
    Value* dims = graph.CreateValue(graph.UniqueName(read.source.value->name() + "_shape"));
    Node* shape = graph.CreateNode("Shape", "", {read.source.value}, {dims}, UniqueNodeName(graph, gather.name() + "_shape"));
    graph.MoveBefore(shape, &gather);
    Value* old_index = gather.input(1);
    gather.ReplaceInput(0, dims);
    if (read.source.axis != read.index) {
      gather.ReplaceInput(1, AddInitializer(graph, gather.name() + "_index", Int64Tensor(index_dims, read.source.axis)));
      RemoveIfUnused({old_index});
    }
  }
  std::vector<Value*> unread;
  for (Node* shape : shapes) unread.push_back(shape->output(0));
  RemoveIfUnused(unread);
}

// Why the match's dtypes rule it out, or "".
WhyNot DtypeProblem(const AttentionMatch& match) {
  std::vector<const Value*> floats = {match.q.source, match.k.source, match.v.source};
  if (match.mask_kind == AttentionMaskKind::kAdditive) floats.push_back(match.mask);
  if (match.bias != nullptr) floats.push_back(match.bias);
  for (const AttentionOperandMatch* operand : {&match.q, &match.k}) {
    if (operand->rotary) floats.insert(floats.end(), {operand->rotary->cos, operand->rotary->sin});
  }
  for (const Value* value : floats) {
    if (value->dtype() != DataType::kFloat && value->dtype() != DataType::kFloat16 &&
        value->dtype() != DataType::kBFloat16) {
      return "attention: only float32, float16 and bfloat16 attention is fused";
    }
  }
  if (match.q.source->dtype() != match.k.source->dtype() || match.q.source->dtype() != match.v.source->dtype()) {
    return "attention: Q, K and V differ in dtype";
  }
  if (match.mask_kind == AttentionMaskKind::kBoolean && match.mask->dtype() != DataType::kBool) {
    return "attention: the Where condition is not boolean";
  }
  return {};
}

void CountForms(const AttentionMatch& match, PassContext& context) {
  context.Count("attention");
  if (match.split != nullptr) context.Count("combined_qkv");
  if (match.q.layout == HeadLayout::kSplitHeads) context.Count("head_splits");
  if (match.merge) context.Count("head_merges");
  if (match.q.rotary || match.k.rotary) context.Count("rotary");
  if (match.k.repeat || match.v.repeat) context.Count("repeated_kv");
  if (match.guard != nullptr) context.Count("nan_guards");
  if (match.attention_op != nullptr) context.Count("attention_ops");
  if (match.q.layout == HeadLayout::kView || match.k.layout == HeadLayout::kView || match.v.layout == HeadLayout::kView) {
    context.Count("layout_views");
  }
  switch (match.mask_kind) {
    case AttentionMaskKind::kNone: context.Count("unmasked"); break;
    case AttentionMaskKind::kAdditive: context.Count("additive_masks"); break;
    case AttentionMaskKind::kBoolean: context.Count(match.causal ? "causal_masks" : "boolean_masks"); break;
  }
}

}  // namespace

Result<bool> FuseAttention::RunOnGraph(Graph& graph, PassContext& context) {
  std::optional<int64_t> opset = context.model().OpsetFor("");
  if (!opset) return false;
  std::vector<Node*> anchors;
  for (const auto& node : graph.nodes()) {
    if ((node->op_type() == "Softmax" || node->op_type() == "Attention") &&
        IsDefaultDomain(*node)) {
      anchors.push_back(node.get());
    }
  }
  // A Softmax is a member of its own match only; outlining and rewiring remove no other
  // anchor, but a removed node's address may be reused, so anchors are checked first.
  std::unordered_set<const Node*> removed;
  bool changed = false;
  for (Node* anchor : anchors) {
    if (removed.count(anchor)) continue;
    AttentionSearch search = MatchAttentionAt(*anchor, *opset);
    if (search.near_miss) context.Rejected(*anchor, search.near_miss);
    if (!search.match) continue;
    AttentionMatch& match = *search.match;
    if (WhyNot problem = DtypeProblem(match)) {
      context.Rejected(*anchor, problem);
      continue;
    }
    Decided<std::vector<ShapeRead>> plan = PlanShapeReads(match);
    if (!plan) {
      context.Rejected(*anchor, plan.why_not().Prefixed("attention"));
      continue;
    }
    if (!context.JudgeFusion(match.nodes).apply()) continue;
    const std::vector<ShapeRead>& reads = *plan;
    if (!reads.empty()) {
      RewireShapeReads(graph, reads, match.outside_shape_reads);
      context.Count("shape_reads_rewired", static_cast<int64_t>(reads.size()));
      changed = true;
    }
    if (WhyNot why = WhyNotOutlinable(match.nodes)) {
      context.Rejected(*anchor, why.Prefixed("attention"));
      continue;
    }
    // A body the runtimes do not recognise as attention (a form the match takes but the
    // description cannot express, such as rotary tables held as constants inside it) would be
    // an ai.fusionopt node run op by op: no faster, and counted as fused.
    if (!RecognizeAttention(*OutlinedBody(match.nodes), *opset)) {
      context.Rejected(*anchor, "attention: the outlined body would not be recognised as attention (run op by op)");
      continue;
    }
    // The constants the members read: the body holds the scalar ones itself now.
    removed.insert(match.nodes.begin(), match.nodes.end());
    std::vector<Value*> read;
    for (const Node* member : match.nodes) {
      for (Value* input : member->inputs()) {
        if (input != nullptr && !removed.count(input->producer())) read.push_back(input);
      }
    }
    OutlineGroup(graph, FusionGroup{match.nodes, "attention", "FusedAttention"}, context);
    RemoveIfUnused(read);
    CountForms(match, context);
    changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
