// slices-to-split (O1): its rewrite, conditions and limits are in slices_to_split.h.
#include "passes/layout/slices_to_split.h"

#include <algorithm>
#include <map>

#include "ir/constant_value.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"

namespace fusionopt::passes {
namespace {

struct Piece {
  Node* slice = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
};

std::optional<int64_t> SingleConstant(const Node& node, size_t index, const Model& model) {
  if (node.inputs().size() <= index || node.input(index) == nullptr) return std::nullopt;
  TensorPtr tensor = ConstantValueOf(*node.input(index), InitializerRuleOf(model));
  if (tensor == nullptr || tensor->NumElements() != 1) return std::nullopt;
  auto values = tensor->AsInt64s();
  if (!values || values->size() != 1) return std::nullopt;
  return values->front();
}

// The axis and [begin, end) a Slice takes of its input, or nullopt when it is no such piece.
std::optional<std::pair<int64_t, Piece>> PieceOf(Node& slice, const Model& model) {
  if (slice.op_type() != "Slice" || !IsDefaultDomain(slice) || slice.inputs().size() < 3) return std::nullopt;
  if (model.OpsetFor("").value_or(0) < 10 || slice.outputs().size() != 1 || slice.output(0) == nullptr) {
    return std::nullopt;
  }
  const Value* input = slice.input(0);
  if (input == nullptr || !input->shape()) return std::nullopt;
  const auto rank = static_cast<int64_t>(input->shape()->size());
  auto start = SingleConstant(slice, 1, model);
  auto end = SingleConstant(slice, 2, model);
  std::optional<int64_t> axis = slice.inputs().size() > 3 && slice.input(3) != nullptr
                                    ? SingleConstant(slice, 3, model) : std::optional<int64_t>(0);
  std::optional<int64_t> step = slice.inputs().size() > 4 && slice.input(4) != nullptr
                                    ? SingleConstant(slice, 4, model) : std::optional<int64_t>(1);
  if (!start || !end || !axis || step != 1) return std::nullopt;
  if (*axis < 0) *axis += rank;
  if (*axis < 0 || *axis >= rank) return std::nullopt;
  const Dim& dim = (*input->shape())[static_cast<size_t>(*axis)];
  if (!dim.is_known()) return std::nullopt;
  auto clamp = [&](int64_t bound) { return std::clamp(bound < 0 ? bound + dim.value : bound, int64_t{0}, dim.value); };
  return std::make_pair(*axis, Piece{&slice, clamp(*start), clamp(*end)});
}

// The pieces sorted by begin when they tile [0, size) with no gap, overlap or empty piece.
bool TileExactly(std::vector<Piece>& pieces, int64_t size) {
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  int64_t covered = 0;
  for (const Piece& piece : pieces) {
    if (piece.begin != covered || piece.end <= piece.begin) return false;
    covered = piece.end;
  }
  return covered == size;
}

void ReplaceBySplit(Graph& graph, Value& input, int64_t axis, const std::vector<Piece>& pieces, int64_t opset) {
  std::vector<int64_t> sizes;
  for (const Piece& piece : pieces) sizes.push_back(piece.end - piece.begin);
  Node& first = *pieces.front().slice;
  Node* split = CreateSplit(graph, &input, axis, sizes, opset, first.name() + "_split");
  Node* earliest = &first;
  for (const Piece& piece : pieces) {
    if (graph.OrderKey(piece.slice) < graph.OrderKey(earliest)) earliest = piece.slice;
  }
  graph.MoveBefore(split, earliest);
  for (size_t i = 0; i < pieces.size(); ++i) {
    Value* output = pieces[i].slice->output(0);
    graph.DetachProducer(output);
    graph.TransferProducer(output, split, static_cast<int>(i));
  }
  for (const Piece& piece : pieces) graph.RemoveNode(piece.slice);
}

}  // namespace

Result<bool> SlicesToSplit::RunOnGraph(Graph& graph, PassContext& context) {
  const Model& model = context.model();
  const int64_t opset = model.OpsetFor("").value_or(0);
  // Per sliced value, per axis, the pieces taken of it, in graph order of first appearance.
  std::vector<Value*> sliced;
  std::map<Value*, std::map<int64_t, std::vector<Piece>>> pieces_of;
  for (const auto& node : graph.nodes()) {
    auto piece = PieceOf(*node, model);
    if (!piece) continue;
    Value* input = node->input(0);
    if (!pieces_of.count(input)) sliced.push_back(input);
    pieces_of[input][piece->first].push_back(piece->second);
  }
  bool changed = false;
  for (Value* input : sliced) {
    for (auto& [axis, pieces] : pieces_of[input]) {
      if (pieces.size() < 2) continue;
      const int64_t size = (*input->shape())[static_cast<size_t>(axis)].value;
      if (!TileExactly(pieces, size)) {
        context.Rejected(*pieces.front().slice, "the Slices of its input leave a gap or overlap along the axis");
        continue;
      }
      ReplaceBySplit(graph, *input, axis, pieces, opset);
      context.Matched();
      context.Count("slices_merged", static_cast<int64_t>(pieces.size()));
      changed = true;
    }
  }
  return changed;
}

}  // namespace fusionopt::passes
