// gathers-to-slices (O1): its rewrite, conditions and limits are in gathers_to_slices.h.
#include "passes/layout/gathers_to_slices.h"

#include <algorithm>

#include "ir/constant_value.h"
#include "ir/permutation.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"
#include "passes/util/shape_facts.h"
#include "patterns/matcher_support.h"

namespace fusionopt::passes {
namespace {


std::optional<std::vector<int64_t>> Ints(const Node& node, size_t index, const Model& model) {
  if (node.inputs().size() <= index || node.input(index) == nullptr) return std::nullopt;
  TensorPtr tensor = ConstantValueOf(*node.input(index), InitializerRuleOf(model));
  return tensor != nullptr ? tensor->AsInt64s() : std::nullopt;
}

// The axis a Gather/GatherND indexes and the first of its consecutive indices and their count,
// when it takes a slice.
struct TakenSlice {
  int64_t axis = 0;
  int64_t begin = 0;
  int64_t count = 0;
};

std::optional<TakenSlice> SliceTakenBy(const Node& gather, const Model& model) {
  const bool nd = IsDefaultOp(&gather, "GatherND");
  if ((!nd && !IsDefaultOp(&gather, "Gather")) || gather.inputs().size() != 2 || gather.input(0) == nullptr) return std::nullopt;
  const Shape* shape = KnownRankShape(*gather.input(0));
  TensorPtr indices = ConstantValueOf(*gather.input(1), InitializerRuleOf(model));
  std::optional<std::vector<int64_t>> values = indices != nullptr ? indices->AsInt64s() : std::nullopt;
  if (shape == nullptr || !values || values->empty()) return std::nullopt;
  const std::vector<int64_t>& dims = indices->dims();
  const auto rank = static_cast<int64_t>(shape->size());
  int64_t axis = 0;
  if (nd) {
    if (gather.GetInt("batch_dims", 0) != 0 || dims.size() != 2 || dims[1] != 1) return std::nullopt;
  } else {
    axis = gather.GetInt("axis", 0);
    if (axis < 0) axis += rank;
    if (dims.size() != 1 || axis < 0 || axis >= rank) return std::nullopt;
  }
  const Dim& size = (*shape)[static_cast<size_t>(axis)];
  std::vector<int64_t> normalized;
  for (int64_t index : *values) {
    if (index < 0 && !size.is_known()) return std::nullopt;
    normalized.push_back(index < 0 ? index + size.value : index);
  }
  for (size_t i = 0; i < normalized.size(); ++i) {
    if (normalized[i] != normalized.front() + static_cast<int64_t>(i) || normalized[i] < 0) return std::nullopt;
    if (size.is_known() && normalized[i] >= size.value) return std::nullopt;
  }
  return TakenSlice{axis, normalized.front(), static_cast<int64_t>(normalized.size())};
}

void ReplaceGather(Graph& graph, Node& gather, const TakenSlice& taken) {
  const std::string stem = gather.output(0)->name();
  Value* begin = AddInt64Initializer(graph, stem + "_begin", {taken.begin});
  Value* end = AddInt64Initializer(graph, stem + "_end", {taken.begin + taken.count});
  Value* axis = AddInt64Initializer(graph, stem + "_axis", {taken.axis});
  Value* indices = gather.input(1);
  Node* slice = graph.CreateNode("Slice", "", {gather.input(0), begin, end, axis}, {nullptr}, gather.name());
  ReplaceChain(graph, *slice, 0, {&gather}, *gather.output(0));
  RemoveIfUnused({indices});
}

// Slices with constant bounds reading `transpose`, each read by a Transpose alone (which the
// moved Transpose then composes with), or empty when anything else reads them.
std::vector<Node*> SliceReaders(const Node& transpose, const Model& model) {
  const Value* output = transpose.output(0);
  if (output == nullptr || output->is_graph_output() || output->uses().empty()) return {};
  std::vector<Node*> slices;
  for (const Use& use : output->uses()) {
    Node* slice = use.node;
    const bool constant = IsDefaultOp(slice, "Slice") && use.input_index == 0 && slice->inputs().size() >= 3 &&
                          Ints(*slice, 1, model) && Ints(*slice, 2, model) &&
                          (slice->inputs().size() < 4 || slice->input(3) == nullptr || Ints(*slice, 3, model)) &&
                          (slice->inputs().size() < 5 || slice->input(4) == nullptr || Ints(*slice, 4, model));
    const Value* sliced = constant ? slice->output(0) : nullptr;
    if (sliced == nullptr || sliced->is_graph_output() || sliced->uses().size() != 1 ||
        !IsDefaultOp(sliced->uses().front().node, "Transpose")) {
      return {};
    }
    slices.push_back(slice);
  }
  return slices;
}

// Each of `slices` reads `transpose`'s input (its axes mapped through the perm), a copy of the
// Transpose after it; the Transpose goes.
void SliceBeforeTranspose(Graph& graph, Node& transpose, const std::vector<Node*>& slices, const std::vector<int64_t>& perm,
                          const Model& model) {
  const auto rank = static_cast<int64_t>(perm.size());
  for (Node* slice : slices) {
    std::vector<int64_t> axes;
    if (auto given = slice->inputs().size() >= 4 && slice->input(3) != nullptr ? Ints(*slice, 3, model) : std::nullopt) {
      axes = *given;
    } else {
      for (size_t i = 0; i < Ints(*slice, 1, model)->size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    for (int64_t& axis : axes) axis = perm[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
    Value* steps = slice->inputs().size() >= 5 ? slice->input(4) : nullptr;
    Value& output = *slice->output(0);
    Value* moved_axes = AddInt64Initializer(graph, output.name() + "_axes", axes);
    Value* old_axes = slice->inputs().size() >= 4 ? slice->input(3) : nullptr;
    std::vector<Value*> inputs = {transpose.input(0), slice->input(1), slice->input(2), moved_axes};
    if (steps != nullptr) inputs.push_back(steps);
    Node* moved = graph.CreateNode("Slice", "", inputs, {nullptr}, slice->name());
    Value* sliced = graph.CreateValue(graph.UniqueName(output.name() + "_untransposed"));
    sliced->type().dtype = output.dtype();
    graph.TransferProducer(sliced, moved, 0);
    Node* copy = graph.CreateNode("Transpose", "", {sliced}, {nullptr}, UniqueNodeName(graph, transpose.name()));
    copy->SetAttribute(Attribute::Ints("perm", perm));
    ReplaceChain(graph, *copy, 0, {slice}, output);
    if (old_axes != nullptr) RemoveIfUnused({old_axes});
  }
  RemoveIfUnused({transpose.output(0)});
}

bool AxesValid(const Node& slice, int64_t rank, const Model& model) {
  if (slice.inputs().size() < 4 || slice.input(3) == nullptr) return Ints(slice, 1, model)->size() <= static_cast<size_t>(rank);
  std::optional<std::vector<int64_t>> axes = Ints(slice, 3, model);
  return std::all_of(axes->begin(), axes->end(), [rank](int64_t axis) { return axis >= -rank && axis < rank; });
}

}  // namespace

Result<bool> GathersToSlices::RunOnGraph(Graph& graph, PassContext& context) {
  const Model& model = context.model();
  if (model.OpsetFor("").value_or(0) < 11) return false;
  std::vector<Node*> gathers;
  std::vector<Node*> transposes;
  for (const auto& node : graph.nodes()) {
    if (IsDefaultOp(node.get(), "Gather") || IsDefaultOp(node.get(), "GatherND")) gathers.push_back(node.get());
  }
  bool changed = false;
  for (Node* gather : gathers) {
    if (std::optional<TakenSlice> taken = SliceTakenBy(*gather, model)) {
      ReplaceGather(graph, *gather, *taken);
      context.Matched();
      context.Count("gathers_sliced");
      changed = true;
    }
  }
  for (const auto& node : graph.nodes()) {
    if (IsDefaultOp(node.get(), "Transpose")) transposes.push_back(node.get());
  }
  for (Node* transpose : transposes) {
    std::optional<std::vector<int64_t>> perm = transpose->GetInts("perm");
    if (!perm || !IsPermutation(*perm)) continue;
    std::vector<Node*> slices = SliceReaders(*transpose, model);
    const auto rank = static_cast<int64_t>(perm->size());
    if (slices.empty() || !std::all_of(slices.begin(), slices.end(), [&](const Node* s) { return AxesValid(*s, rank, model); })) {
      continue;
    }
    SliceBeforeTranspose(graph, *transpose, slices, *perm, model);
    context.Matched();
    context.Count("transposes_below_slices");
    changed = true;
  }
  if (changed) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
