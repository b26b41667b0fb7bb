// merge-reshapes (O1): its rewrite, conditions and limits are in merge_reshapes.h.
#include "passes/layout/merge_reshapes.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ir/constant_value.h"
#include "ir/permutation.h"
#include "passes/util/bypass.h"
#include "passes/util/shape_facts.h"
#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

bool IsView(const Node& node) {
  const std::string& op = node.op_type();
  return IsDefaultDomain(node) && (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze");
}

bool IsTranspose(const Node& node) { return IsDefaultDomain(node) && node.op_type() == "Transpose"; }

// The node of `graph` computing `node`'s data input, when `node` alone reads it.
Node* SoleFeeder(const Graph& graph, const Node& node) {
  const Value* input = node.input(0);
  if (input == nullptr || input->producer() == nullptr || input->producer()->graph() != &graph) return nullptr;
  return OnlyReadBy(*input, node) && input->uses().front().input_index == 0 ? input->producer() : nullptr;
}

// perm, or its default (reversed dims) when the rank is known; nullopt when neither is.
std::optional<std::vector<int64_t>> PermOf(const Node& transpose) {
  if (const Attribute* perm = transpose.FindAttribute("perm")) {
    if (perm->kind != AttributeKind::kInts) return std::nullopt;
    return perm->ints;
  }
  const Value* input = transpose.input(0);
  if (input == nullptr || !input->shape()) return std::nullopt;
  std::vector<int64_t> reversed(input->shape()->size());
  for (size_t i = 0; i < reversed.size(); ++i) reversed[i] = static_cast<int64_t>(reversed.size() - 1 - i);
  return reversed;
}

// Transpose(Transpose(x, first), second) = Transpose(x, composed).
bool MergeTransposes(Graph& graph, Node& second, PassContext& context) {
  Node* first = SoleFeeder(graph, second);
  if (first == nullptr || !IsTranspose(*first) || first->input(0) == nullptr || second.output(0) == nullptr) {
    return false;
  }
  auto inner = PermOf(*first);
  auto outer = PermOf(second);
  if (!inner || !outer || inner->size() != outer->size() || !IsPermutation(*inner) || !IsPermutation(*outer)) {
    context.Rejected(second, "perm unknown or malformed");
    return false;
  }
  std::vector<int64_t> composed(outer->size());
  for (size_t i = 0; i < composed.size(); ++i) composed[i] = (*inner)[static_cast<size_t>((*outer)[i])];
  Value& input = *first->input(0);
  second.ReplaceInput(0, &input);
  graph.RemoveNode(first);
  second.SetAttribute(Attribute::Ints("perm", composed));
  context.Matched();
  context.Count("transposes_merged");
  bool identity = IsPermutation(composed) && std::is_sorted(composed.begin(), composed.end());
  if (identity && BypassChain(graph, {&second}, input, *second.output(0))) context.Count("identity_transposes_removed");
  return true;
}

// The views ending at `last`, producer first, each intermediate read only by the next view.
std::vector<Node*> ViewChainEndingAt(const Graph& graph, Node& last) {
  std::vector<Node*> chain = {&last};
  for (Node* feeder = SoleFeeder(graph, last); feeder != nullptr && IsView(*feeder);
       feeder = SoleFeeder(graph, *feeder)) {
    chain.insert(chain.begin(), feeder);
  }
  return chain;
}

// Axes of an Unsqueeze or Squeeze when constant: the attribute before opset 13, the input
// from 13 on.
std::optional<std::vector<int64_t>> ConstantAxes(const Node& node, int64_t opset, const Model& model) {
  if (opset < 13) return node.GetInts("axes");
  const Value* axes = node.input(1);
  TensorPtr tensor = axes != nullptr ? ConstantValueOf(*axes, InitializerRuleOf(model)) : nullptr;
  return tensor != nullptr ? tensor->AsInt64s() : std::nullopt;
}

// Marks `axes` (normalized against `rank`) in a vector of `rank` flags; nullopt when an axis
// is out of range or repeated.
std::optional<std::vector<bool>> AxisFlags(const std::vector<int64_t>& axes, size_t rank) {
  std::vector<bool> flags(rank, false);
  for (int64_t axis : axes) {
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank) || flags[static_cast<size_t>(axis)]) return std::nullopt;
    flags[static_cast<size_t>(axis)] = true;
  }
  return flags;
}

std::vector<int64_t> FlaggedPositions(const std::vector<bool>& flags) {
  std::vector<int64_t> positions;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i]) positions.push_back(static_cast<int64_t>(i));
  }
  return positions;
}

// Unsqueeze(Unsqueeze(x, a), b) = Unsqueeze(x, c): c lists the result's dims that some
// Unsqueeze of the chain inserted. Exact whatever the dims are.
std::optional<std::vector<int64_t>> MergedUnsqueezeAxes(const std::vector<Node*>& run, size_t rank, int64_t opset,
                                                        const Model& model) {
  std::vector<bool> inserted(rank, false);  // per dim of the current result
  for (const Node* node : run) {
    auto axes = ConstantAxes(*node, opset, model);
    auto fresh = axes ? AxisFlags(*axes, inserted.size() + axes->size()) : std::nullopt;
    if (!fresh) return std::nullopt;
    std::vector<bool> next;
    size_t older = 0;  // the next dim of the previous result
    for (bool is_fresh : *fresh) next.push_back(is_fresh ? true : inserted[older++]);
    inserted = std::move(next);
  }
  return FlaggedPositions(inserted);
}

// Squeeze(Squeeze(x, a), b) = Squeeze(x, c): c lists the input's dims some Squeeze removed.
std::optional<std::vector<int64_t>> MergedSqueezeAxes(const std::vector<Node*>& run, size_t rank, int64_t opset,
                                                      const Model& model) {
  std::vector<size_t> alive(rank);  // input dims still present, in order
  for (size_t i = 0; i < rank; ++i) alive[i] = i;
  std::vector<bool> removed(rank, false);
  for (const Node* node : run) {
    auto axes = ConstantAxes(*node, opset, model);
    auto gone = axes ? AxisFlags(*axes, alive.size()) : std::nullopt;
    if (!gone) return std::nullopt;
    std::vector<size_t> next;
    for (size_t i = 0; i < alive.size(); ++i) {
      if ((*gone)[i]) removed[alive[i]] = true;
      else next.push_back(alive[i]);
    }
    alive = std::move(next);
  }
  return FlaggedPositions(removed);
}

// `replacement` (new, empty output slot 0) now computes `output` from the first node's input:
// the views go, and the shape and axes operands nothing else reads go with them.
void ReplaceViews(Graph& graph, const std::vector<Node*>& views, Node& replacement, Value& output) {
  std::vector<Value*> operands;
  for (Node* node : views) {
    for (size_t i = 1; i < node->inputs().size(); ++i) {
      if (node->input(i) != nullptr && node->input(i)->graph() == &graph) operands.push_back(node->input(i));
    }
  }
  ReplaceChain(graph, replacement, 0, views, output);
  RemoveIfUnused(std::move(operands));
}

// A new int64 constant operand: an initializer, or before IR version 4 (where every
// initializer must also be a graph input) a Constant node.
Value* AddInts(Graph& graph, const Model& model, const std::string& base, const std::vector<int64_t>& values) {
  auto count = static_cast<int64_t>(values.size());
  auto tensor = std::make_shared<Tensor>(Tensor::FromValues<int64_t>(DataType::kInt64, {count}, values));
  if (model.ir_version >= 4) return AddInitializer(graph, base, std::move(tensor));
  Value* value = graph.CreateValue(graph.UniqueName(base));
  Node* constant = graph.CreateNode("Constant", "", {}, {value}, value->name());
  Attribute attribute;
  attribute.name = "value";
  attribute.kind = AttributeKind::kTensor;
  attribute.t = std::move(tensor);
  constant->SetAttribute(std::move(attribute));
  return value;
}

// The first position from which every view of `chain` is an Unsqueeze (or every one a
// Squeeze) like the last, with the merged axes; nullopt when no such run of two exists.
std::optional<std::pair<size_t, std::vector<int64_t>>> SameOpRun(const std::vector<Node*>& chain, int64_t opset,
                                                                 const Model& model) {
  const std::string& op = chain.back()->op_type();
  if (op != "Unsqueeze" && op != "Squeeze") return std::nullopt;
  size_t start = chain.size() - 1;
  while (start > 0 && chain[start - 1]->op_type() == op) --start;
  const Value& source = *chain[start]->input(0);
  if (chain.size() - start < 2 || !source.shape()) return std::nullopt;
  std::vector<Node*> run(chain.begin() + static_cast<std::ptrdiff_t>(start), chain.end());
  auto axes = op == "Unsqueeze" ? MergedUnsqueezeAxes(run, source.shape()->size(), opset, model)
                                : MergedSqueezeAxes(run, source.shape()->size(), opset, model);
  if (!axes) return std::nullopt;
  return std::make_pair(start, *axes);
}

// The first position from which Reshape can spell the chain's result from that view's input.
std::optional<std::pair<size_t, std::vector<int64_t>>> ReshapeRun(const std::vector<Node*>& chain, int64_t opset) {
  const Value& output = *chain.back()->output(0);
  if (opset < 5 || !output.shape()) return std::nullopt;
  for (size_t start = 0; start + 1 < chain.size(); ++start) {
    const Value& source = *chain[start]->input(0);
    if (!source.shape()) continue;
    if (auto operand = ReshapeOperand(*source.shape(), *output.shape())) return std::make_pair(start, *operand);
  }
  return std::nullopt;
}

bool MergeViewChain(Graph& graph, Node& last, PassContext& context) {
  std::vector<Node*> chain = ViewChainEndingAt(graph, last);
  if (chain.size() < 2 || chain.front()->input(0) == nullptr || last.output(0) == nullptr) return false;
  Value& output = *last.output(0);
  Value& input = *chain.front()->input(0);
  if (ProvablySameShape(input, output) && input.dtype() == output.dtype() &&
      BypassChain(graph, chain, input, output)) {
    context.Matched();
    context.Count("view_chains_removed");
    return true;
  }
  auto opset = context.model().OpsetFor("");
  if (!opset) return false;
  auto reshape = ReshapeRun(chain, *opset);
  auto same_op = SameOpRun(chain, *opset, context.model());
  // The longer merge; on a tie one Unsqueeze (Squeeze), which needs no shape to stay right.
  bool use_reshape = reshape && (!same_op || reshape->first < same_op->first);
  if (!use_reshape && !same_op) {
    context.Rejected(last, *opset < 5 ? "opset before 5 (Reshape has no shape input)" : "merged shape not expressible");
    return false;
  }
  size_t start = use_reshape ? reshape->first : same_op->first;
  Value& source = *chain[start]->input(0);
  std::vector<Node*> replaced(chain.begin() + static_cast<std::ptrdiff_t>(start), chain.end());
  Node* merged = nullptr;
  if (use_reshape) {
    Value* shape = AddInts(graph, context.model(), output.name() + "_shape", reshape->second);
    merged = graph.CreateNode("Reshape", "", {&source, shape}, {nullptr}, last.name());
  } else if (*opset >= 13) {
    Value* axes = AddInts(graph, context.model(), output.name() + "_axes", same_op->second);
    merged = graph.CreateNode(last.op_type(), "", {&source, axes}, {nullptr}, last.name());
  } else {
    merged = graph.CreateNode(last.op_type(), "", {&source}, {nullptr}, last.name());
    merged->SetAttribute(Attribute::Ints("axes", same_op->second));
  }
  ReplaceViews(graph, replaced, *merged, output);
  context.Matched();
  context.Count("views_merged", static_cast<int64_t>(replaced.size()));
  return true;
}

// Reshape(Transpose(Reshape(x, [M, x[k:]...]), p), [x[:k]..., permuted x[k:]]) with p[0] = 0 is
// Transpose(x, [0..k-1, k-1+p[1], ...]): the perm, when the inferred shapes prove it.
std::optional<std::vector<int64_t>> PermThroughMergedLeading(const Node& merge, const Node& transpose, const Node& split) {
  const Value* x = merge.input(0);
  if (x == nullptr || !x->shape() || !merge.output(0)->shape() || !split.output(0)->shape()) return std::nullopt;
  const Shape &in = *x->shape(), &merged = *merge.output(0)->shape(), &out = *split.output(0)->shape();
  auto perm = PermOf(transpose);
  const size_t n = in.size(), m = merged.size();
  if (m < 2 || m > n || out.size() != n || !perm || perm->size() != m || !IsPermutation(*perm) || (*perm)[0] != 0) {
    return std::nullopt;
  }
  const size_t k = n - m + 1;  // leading dims merged into one
  for (size_t i = 1; i < m; ++i) {
    if (!ProvablySameDim(merged[i], in[k - 1 + i])) return std::nullopt;
  }
  std::vector<int64_t> result;
  for (size_t i = 0; i < k; ++i) {
    if (!ProvablySameDim(out[i], in[i])) return std::nullopt;
    result.push_back(static_cast<int64_t>(i));
  }
  for (size_t i = 1; i < m; ++i) {
    const auto source = static_cast<size_t>(k - 1 + static_cast<size_t>((*perm)[i]));
    if (!ProvablySameDim(out[k - 1 + i], in[source])) return std::nullopt;
    result.push_back(static_cast<int64_t>(source));
  }
  return result;
}

// The Reshape → Transpose → Reshape ending at `split` as one Transpose (then merged with a
// Transpose before it).
bool MergeTransposeThroughReshapes(Graph& graph, Node& split, PassContext& context) {
  Node* transpose = SoleFeeder(graph, split);
  Node* merge = transpose != nullptr && IsTranspose(*transpose) ? SoleFeeder(graph, *transpose) : nullptr;
  if (!IsDefaultOp(&split, "Reshape") || !IsDefaultOp(merge, "Reshape") || split.output(0) == nullptr) return false;
  std::optional<std::vector<int64_t>> perm = PermThroughMergedLeading(*merge, *transpose, split);
  if (!perm) return false;
  Value& output = *split.output(0);
  Node* merged = graph.CreateNode("Transpose", "", {merge->input(0)}, {nullptr}, split.name());
  merged->SetAttribute(Attribute::Ints("perm", *perm));
  ReplaceViews(graph, {merge, transpose, &split}, *merged, output);
  context.Matched();
  context.Count("transposes_through_reshapes");
  MergeTransposes(graph, *merged, context);
  return true;
}

// The input axes each output dim of a Reshape from `in` to `out` is made of, when every output
// dim is provably the product of consecutive input dims (known sizes multiply; a symbol stands
// alone for the same symbol); nullopt otherwise. Input 1s may join any group.
std::optional<std::vector<std::vector<int64_t>>> ReshapeGroups(const Shape& in, const Shape& out) {
  std::vector<std::vector<int64_t>> groups(out.size());
  size_t next = 0;
  for (size_t j = 0; j < out.size(); ++j) {
    if (out[j].is_symbolic()) {
      while (next < in.size() && in[next].is_known() && in[next].value == 1) groups[j].push_back(static_cast<int64_t>(next++));
      if (next == in.size() || !ProvablySameDim(in[next], out[j])) return std::nullopt;
      groups[j].push_back(static_cast<int64_t>(next++));
      continue;
    }
    if (!out[j].is_known()) return std::nullopt;
    int64_t product = 1;
    while (product < out[j].value && next < in.size()) {
      if (!in[next].is_known() || in[next].value == 0) return std::nullopt;
      product *= in[next].value;
      groups[j].push_back(static_cast<int64_t>(next++));
    }
    if (product != out[j].value) return std::nullopt;
  }
  for (; next < in.size(); ++next) {
    if (groups.empty() || !in[next].is_known() || in[next].value != 1) return std::nullopt;
    groups.back().push_back(static_cast<int64_t>(next));
  }
  return groups;
}

// Transpose(Reshape(Transpose(x, inner)), outer) ending at `second`: each intermediate read by
// the next op alone, valid perms, and every shape on the way known.
struct TransposedView {
  Node* first = nullptr;
  Node* reshape = nullptr;
  std::vector<int64_t> inner, outer;
};

std::optional<TransposedView> TransposedViewEndingAt(const Graph& graph, Node& second) {
  Node* reshape = SoleFeeder(graph, second);
  Node* first = reshape != nullptr && IsDefaultOp(reshape, "Reshape") ? SoleFeeder(graph, *reshape) : nullptr;
  if (first == nullptr || !IsTranspose(*first) || first->input(0) == nullptr || second.output(0) == nullptr) {
    return std::nullopt;
  }
  const Value& x = *first->input(0);
  auto inner = PermOf(*first);
  auto outer = PermOf(second);
  const Value& viewed = *reshape->output(0);
  if (!inner || !outer || !IsPermutation(*inner) || !IsPermutation(*outer) || !x.shape() || !viewed.shape() ||
      !first->output(0)->shape() || !second.output(0)->shape() || inner->size() != x.shape()->size() ||
      outer->size() != viewed.shape()->size()) {
    return std::nullopt;
  }
  return TransposedView{first, reshape, *inner, *outer};
}

// Transpose(Reshape(Transpose(x, p1)), p2), where the Reshape only groups consecutive axes, as
// Reshape(Transpose(x, q)): p2 permutes the groups, so q moves their axes along and composes
// with p1 — the head merge after attention with the batch-first transpose that follows it.
bool MergeTransposeThroughGrouping(Graph& graph, Node& second, const Model& model, PassContext& context) {
  std::optional<TransposedView> chain = TransposedViewEndingAt(graph, second);
  if (!chain) return false;
  auto& [first, reshape, inner, outer] = *chain;
  const Value& x = *first->input(0);
  const Value& grouped = *reshape->output(0);
  auto groups = ReshapeGroups(*first->output(0)->shape(), *grouped.shape());
  if (!groups) return false;
  std::vector<int64_t> composed;
  for (int64_t group : outer) {
    for (int64_t axis : (*groups)[static_cast<size_t>(group)]) composed.push_back(inner[static_cast<size_t>(axis)]);
  }
  Shape transposed;
  for (int64_t axis : composed) transposed.push_back((*x.shape())[static_cast<size_t>(axis)]);
  auto target = ReshapeOperand(transposed, *second.output(0)->shape());
  if (!target) return false;
  Value& output = *second.output(0);
  Value* permuted = graph.CreateValue(graph.UniqueName(output.name() + "_transposed"));
  permuted->type().dtype = output.dtype();
  Node* transpose = graph.CreateNode("Transpose", "", {first->input(0)}, {permuted}, first->name());
  transpose->SetAttribute(Attribute::Ints("perm", composed));
  Node* merged = graph.CreateNode("Reshape", "", {permuted, AddInts(graph, model, output.name() + "_shape", *target)},
                                  {nullptr}, second.name());
  ReplaceViews(graph, {first, reshape, &second}, *merged, output);
  context.Matched();
  context.Count("transposes_through_groupings");
  MergeTransposes(graph, *transpose, context);
  return true;
}

// Transpose(Reshape(Transpose(x, p1)), p2), where the Reshape only splits axes into consecutive
// ones, as Transpose(Reshape(x), q): the split applies to x's axes before p1 moves them, so p1
// moves the split axes along and q composes it with p2 — a seq-first projection ([L,B,E], the
// batch-first transpose of nn.MultiheadAttention) split into heads.
bool MergeTransposeThroughSplitting(Graph& graph, Node& second, const Model& model, PassContext& context) {
  std::optional<TransposedView> chain = TransposedViewEndingAt(graph, second);
  if (!chain) return false;
  auto& [first, reshape, inner, outer] = *chain;
  const Value& x = *first->input(0);
  const Value& split = *reshape->output(0);
  // groups[j]: the split axes that transposed axis j became.
  auto groups = ReshapeGroups(*split.shape(), *first->output(0)->shape());
  if (!groups) return false;
  // A unit axis left without split axes takes the unit axis the next group starts with, so it
  // stays where it was rather than moving with its neighbour.
  for (size_t j = 0; j + 1 < groups->size(); ++j) {
    auto& next = (*groups)[j + 1];
    if ((*groups)[j].empty() && !next.empty() && (*split.shape())[static_cast<size_t>(next.front())] == Dim::Known(1)) {
      (*groups)[j].push_back(next.front());
      next.erase(next.begin());
    }
  }
  std::vector<int64_t> group_of_input(inner.size());  // x's axis -> the transposed axis it is
  for (size_t j = 0; j < inner.size(); ++j) group_of_input[static_cast<size_t>(inner[j])] = static_cast<int64_t>(j);
  Shape unsplit_target;                                 // x with each axis split as its group
  std::vector<int64_t> first_new_axis(inner.size());  // x's axis -> where its split axes start
  for (size_t a = 0; a < inner.size(); ++a) {
    first_new_axis[a] = static_cast<int64_t>(unsplit_target.size());
    for (int64_t axis : (*groups)[static_cast<size_t>(group_of_input[a])]) {
      unsplit_target.push_back((*split.shape())[static_cast<size_t>(axis)]);
    }
  }
  std::vector<int64_t> moved;  // split axis -> the axis of Reshape(x) it reads
  for (size_t j = 0; j < groups->size(); ++j) {
    const int64_t start = first_new_axis[static_cast<size_t>(inner[j])];
    for (size_t k = 0; k < (*groups)[j].size(); ++k) moved.push_back(start + static_cast<int64_t>(k));
  }
  std::vector<int64_t> composed;
  for (int64_t axis : outer) composed.push_back(moved[static_cast<size_t>(axis)]);
  auto target = ReshapeOperand(*x.shape(), unsplit_target);
  if (!target) return false;
  Value& output = *second.output(0);
  Value* unsplit = graph.CreateValue(graph.UniqueName(output.name() + "_split"));
  unsplit->type().dtype = output.dtype();
  unsplit->type().shape = unsplit_target;
  graph.CreateNode("Reshape", "", {first->input(0), AddInts(graph, model, output.name() + "_shape", *target)}, {unsplit},
                   reshape->name());
  Node* transpose = graph.CreateNode("Transpose", "", {unsplit}, {nullptr}, second.name());
  transpose->SetAttribute(Attribute::Ints("perm", composed));
  ReplaceViews(graph, {first, reshape, &second}, *transpose, output);
  context.Matched();
  context.Count("transposes_through_splittings");
  return true;
}

// Whether `node`'s output continues a view chain (merged when the chain's end is reached).
bool FeedsAnotherView(const Graph& graph, const Node& node) {
  const Value* output = node.output(0);
  if (output == nullptr || output->uses().size() != 1) return false;
  const Node& reader = *output->uses().front().node;
  return reader.graph() == &graph && IsView(reader) && SoleFeeder(graph, reader) == &node;
}

}  // namespace

Result<bool> MergeReshapes::RunOnGraph(Graph& graph, PassContext& context) {
  bool changed = false;
  bool inserted = false;
  std::vector<Node*> order;
  for (const auto& node : graph.nodes()) order.push_back(node.get());
  for (Node* node : order) {
    if (IsTranspose(*node)) {
      bool merged = MergeTransposes(graph, *node, context);
      bool regrouped = !merged && (MergeTransposeThroughGrouping(graph, *node, context.model(), context) ||
                                   MergeTransposeThroughSplitting(graph, *node, context.model(), context));
      changed = merged || regrouped || changed;
      inserted = inserted || regrouped;
    } else if (IsView(*node) && !FeedsAnotherView(graph, *node)) {
      bool merged = MergeTransposeThroughReshapes(graph, *node, context) || MergeViewChain(graph, *node, context);
      changed = merged || changed;
      inserted = inserted || merged;
    }
  }
  // Merged views were appended at the end of the node list.
  if (inserted) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
