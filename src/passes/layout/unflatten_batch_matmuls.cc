// unflatten-batch-matmuls (O1): its rewrite, conditions and limits are in unflatten_batch_matmuls.h.
#include "passes/layout/unflatten_batch_matmuls.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_class.h"
#include "ir/permutation.h"
#include "passes/util/bypass.h"
#include "passes/util/fold_rewrites.h"
#include "passes/cleanup/util/no_op_rules.h"
#include "passes/util/outline.h"
#include "passes/util/shape_facts.h"
#include "patterns/composite/composite.h"
#include "patterns/matcher_support.h"
#include "shape_inference/context.h"

namespace fusionopt::passes {
namespace {


// The flattened axis holds outer × inner of the unflattened tensor.
struct Unflattening {
  Dim outer;
  Dim inner;
  bool Same(const Unflattening& other) const {
    return ProvablySameDim(outer, other.outer) && ProvablySameDim(inner, other.inner);
  }
};

Shape SplitAxis(const Shape& shape, int64_t axis, const Unflattening& split) {
  Shape result(shape.begin(), shape.begin() + axis);
  result.push_back(split.outer);
  result.push_back(split.inner);
  result.insert(result.end(), shape.begin() + axis + 1, shape.end());
  return result;
}

// How `reshape` (x → v) flattens into v's axis `axis`: x's dims before it are v's, x's dim there
// is the outer factor, and the inner one is what the rest of x holds beyond v's trailing dims
// (a known size of at least 2, or one symbol). Then v's dim there is outer × inner, since the
// element counts agree.
std::optional<Unflattening> FlatteningAt(const Node& reshape, int64_t axis) {
  if (!IsDefaultOp(&reshape, "Reshape") || reshape.input(0) == nullptr || reshape.output(0) == nullptr) return std::nullopt;
  const Shape* from = KnownRankShape(*reshape.input(0));
  const Shape* to = KnownRankShape(*reshape.output(0));
  if (from == nullptr || to == nullptr || axis >= static_cast<int64_t>(from->size()) ||
      axis >= static_cast<int64_t>(to->size())) {
    return std::nullopt;
  }
  const auto at = static_cast<size_t>(axis);
  for (size_t i = 0; i < at; ++i) {
    if (!ProvablySameDim((*from)[i], (*to)[i])) return std::nullopt;
  }
  const Dim& outer = (*from)[at];
  if (!outer.is_known() && !outer.is_symbolic()) return std::nullopt;
  using shape_inference::ProductOf;
  std::optional<shape_inference::DimProduct> inner =
      ProductOf(*from, at + 1, from->size()).DividedBy(ProductOf(*to, at + 1, to->size()));
  if (!inner) return std::nullopt;
  Dim inner_dim = inner->ToDim();
  if (!(inner_dim.is_symbolic() || (inner_dim.is_known() && inner_dim.value >= 2))) return std::nullopt;
  return Unflattening{outer, inner_dim};
}

// The axes at which `target` is `input` with unit axes inserted, so that Unsqueeze spells it
// exactly at every size (BLOOM's ALiBi [B,H,S] as [B,H,1,S]); nullopt otherwise. Input dims
// pair with target dims in order; a unit dim pairs or is inserted alike, the order of the
// elements being the same either way.
std::optional<std::vector<int64_t>> InsertedUnitAxes(const Shape& input, const Shape& target) {
  std::vector<int64_t> axes;
  size_t next = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    if (next < input.size() && ProvablySameDim(input[next], target[i])) {
      ++next;
    } else if (target[i] == Dim::Known(1)) {
      axes.push_back(static_cast<int64_t>(i));
    } else {
      return std::nullopt;
    }
  }
  if (next != input.size() || axes.empty()) return std::nullopt;
  return axes;
}

// A member's inputs, each with the flattened axis it must have (nullopt: it stays as it is and
// must not reach that axis), given the axis of the member's output.
using InputAxes = std::vector<std::optional<int64_t>>;

class Region {
 public:
  Region(int64_t rank, int64_t opset) : rank_(rank), opset_(opset) {}

  // `value` joins with its flattened axis at `axis`: as an entry, or with its producer.
  bool Include(Value* value, int64_t axis);
  // Every reader of the seed (an entry) and of every member joins, or is a Reshape; the seed's
  // Shape readers go on reading it.
  bool Close(Value* seed);
  // Returns the Reshapes that read the region's results, which now read the unflattened ones.
  std::vector<Node*> Rewrite(Graph& graph) const;

  bool Spellable() const;
  bool has_matmul() const {
    return std::any_of(members_.begin(), members_.end(), [](const Node* node) { return IsDefaultOp(node, "MatMul"); });
  }
  const std::unordered_set<const Node*>& entry_nodes() const { return entry_nodes_; }

 private:
  std::optional<InputAxes> InputAxesOf(const Node& node, int64_t axis) const;
  bool AddEntry(Value* value, int64_t axis);
  bool Grow(Value* value, bool entry);
  Value* Unflattened(Graph& graph, Value* value, std::unordered_map<const Value*, Value*>& done) const;

  void ReplaceShapeRead(Graph& graph, Node& shape, Value& unflattened, int64_t axis) const;

  int64_t rank_;
  int64_t opset_;
  std::optional<Unflattening> split_;
  std::vector<Node*> shape_reads_;  // Shape ops reading members (TorchScript's sizes for the next view)
  std::unordered_map<const Value*, int64_t> axis_of_;
  std::unordered_set<Value*> entries_;
  std::unordered_set<const Node*> entry_nodes_;
  std::vector<Node*> members_;  // in the order they joined (producers first)
  std::unordered_set<const Node*> member_set_;
};

int64_t RankOf(const Value* value) {
  const Shape* shape = value != nullptr ? KnownRankShape(*value) : nullptr;
  return shape != nullptr ? static_cast<int64_t>(shape->size()) : -1;
}

std::optional<InputAxes> Region::InputAxesOf(const Node& node, int64_t axis) const {
  if (node.outputs().size() != 1 || RankOf(node.output(0)) != rank_ || !IsDefaultDomain(node)) return std::nullopt;
  InputAxes axes;
  if (node.op_type() == "Transpose") {
    std::optional<std::vector<int64_t>> perm = node.GetInts("perm");
    if (!perm || static_cast<int64_t>(perm->size()) != rank_ || !IsPermutation(*perm)) return std::nullopt;
    return InputAxes{(*perm)[static_cast<size_t>(axis)]};
  }
  if (node.op_type() == "Softmax" || node.op_type() == "LogSoftmax") {
    std::optional<int64_t> softmax_axis = NormalizedAxis(node.GetInt("axis", -1), rank_);
    if (!softmax_axis || *softmax_axis != rank_ - 1 || axis == rank_ - 1) return std::nullopt;
    return InputAxes{axis};
  }
  const bool matmul = node.op_type() == "MatMul";
  if (matmul && axis >= rank_ - 2) return std::nullopt;  // not a batch axis
  if (!matmul && ClassifyOp(node) != OpClass::kElementwise) return std::nullopt;
  for (const Value* input : node.inputs()) {
    const int64_t rank = RankOf(input);
    if (input == nullptr) {
      axes.push_back(std::nullopt);
    } else if (rank == rank_) {
      axes.push_back(axis);
    } else if (!matmul && rank >= 0 && rank < rank_ - axis) {
      axes.push_back(std::nullopt);  // broadcasts over the flattened axis, unflattened or not
    } else {
      return std::nullopt;
    }
  }
  return axes;
}

bool Region::AddEntry(Value* value, int64_t axis) {
  const Node* producer = value->producer();
  std::optional<Unflattening> split = producer != nullptr ? FlatteningAt(*producer, axis) : std::nullopt;
  if (!split || (split_ && !split_->Same(*split))) return false;
  if (!split_) split_ = split;
  axis_of_[value] = axis;
  entries_.insert(value);
  entry_nodes_.insert(producer);
  return true;
}

bool Region::Include(Value* value, int64_t axis) {
  if (auto it = axis_of_.find(value); it != axis_of_.end()) return it->second == axis;
  if (RankOf(value) != rank_ || value->is_graph_output()) return false;
  Node* producer = value->producer();
  if (producer == nullptr) return false;
  if (IsDefaultOp(producer, "Reshape")) return AddEntry(value, axis);
  std::optional<InputAxes> axes = InputAxesOf(*producer, axis);
  if (!axes) return false;
  axis_of_[value] = axis;  // before the inputs: a DAG reaches no value twice on one path
  for (size_t i = 0; i < axes->size(); ++i) {
    if ((*axes)[i] && !Include(producer->input(i), *(*axes)[i])) {
      axis_of_.erase(value);
      return false;
    }
  }
  members_.push_back(producer);
  member_set_.insert(producer);
  return true;
}

// The flattened axis of `node`'s output when an input has it at `axis`.
std::optional<int64_t> OutputAxis(const Node& node, int64_t axis) {
  if (IsDefaultOp(&node, "Transpose")) {
    std::optional<std::vector<int64_t>> perm = node.GetInts("perm");
    if (!perm) return std::nullopt;
    auto it = std::find(perm->begin(), perm->end(), axis);
    if (it == perm->end()) return std::nullopt;
    return static_cast<int64_t>(it - perm->begin());
  }
  return axis;
}

bool Region::Grow(Value* value, bool entry) {
  const int64_t axis = axis_of_.at(value);
  const std::vector<Use> uses = value->uses();
  for (const Use& use : uses) {
    if (member_set_.count(use.node) || (IsDefaultOp(use.node, "Reshape") && use.input_index == 0)) continue;
    if (entry && IsDefaultOp(use.node, "Shape")) continue;  // the flattened value stays for it
    if (!entry && IsDefaultOp(use.node, "Shape") && opset_ >= 10 && use.node->FindAttribute("start") == nullptr &&
        use.node->FindAttribute("end") == nullptr && !use.node->output(0)->is_graph_output()) {
      shape_reads_.push_back(use.node);  // reads the unflattened dims, the split pair multiplied back
      continue;
    }
    std::optional<int64_t> out_axis = OutputAxis(*use.node, axis);
    if (!out_axis || use.node->outputs().size() != 1 || use.node->output(0) == nullptr ||
        !Include(use.node->output(0), *out_axis)) {
      return false;
    }
  }
  return true;
}

bool Region::Close(Value* seed) {
  if (!Grow(seed, /*entry=*/true)) return false;
  // Members join producers first, so the readers of later members are looked at as they join.
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!Grow(members_[i]->output(0), /*entry=*/false)) return false;
  }
  return true;
}

Value* Region::Unflattened(Graph& graph, Value* value, std::unordered_map<const Value*, Value*>& done) const {
  if (auto it = done.find(value); it != done.end()) return it->second;
  const Node& reshape = *value->producer();
  Value* input = reshape.input(0);
  const Shape target = SplitAxis(*value->shape(), axis_of_.at(value), *split_);
  Value* unflattened = input;
  if (!ProvablySameShape(*input->shape(), target)) {
    unflattened = graph.CreateValue(graph.UniqueName(value->name() + "_unflattened"));
    unflattened->type().dtype = value->dtype();
    unflattened->type().shape = target;
    const std::string name = UniqueNodeName(graph, reshape.name() + "_unflattened");
    if (std::optional<std::vector<int64_t>> axes = InsertedUnitAxes(*input->shape(), target)) {
      // The axes are an input from opset 13, an attribute before.
      std::vector<Value*> inputs = {input};
      if (opset_ >= 13) inputs.push_back(AddInt64Initializer(graph, value->name() + "_unflattened_axes", *axes));
      Node* unsqueeze = graph.CreateNode("Unsqueeze", "", inputs, {unflattened}, name);
      if (opset_ < 13) unsqueeze->SetAttribute(Attribute::Ints("axes", *axes));
    } else {
      Value* shape = AddInt64Initializer(graph, value->name() + "_unflattened_shape",
                                         *ReshapeOperand(*input->shape(), target));
      graph.CreateNode("Reshape", "", {input, shape}, {unflattened}, name);
    }
  }
  done[value] = unflattened;
  return unflattened;
}

std::vector<Node*> Region::Rewrite(Graph& graph) const {
  std::unordered_map<const Value*, Value*> done;
  for (const Node* member : members_) {
    std::vector<Value*> inputs;
    for (Value* input : member->inputs()) {
      if (input != nullptr && entries_.count(input)) {
        inputs.push_back(Unflattened(graph, input, done));
      } else if (auto it = done.find(input); input != nullptr && it != done.end()) {
        inputs.push_back(it->second);
      } else {
        inputs.push_back(input);
      }
    }
    const Value* output = member->output(0);
    const int64_t axis = axis_of_.at(output);
    Value* unflattened = graph.CreateValue(graph.UniqueName(output->name() + "_unflattened"));
    unflattened->type().dtype = output->dtype();
    unflattened->type().shape = SplitAxis(*output->shape(), axis, *split_);
    Node* copy = graph.CreateNode(member->op_type(), member->domain(), inputs, {unflattened},
                                  UniqueNodeName(graph, member->name() + "_unflattened"));
    for (const Attribute& attribute : member->attributes()) copy->SetAttribute(attribute.CopyWithoutGraphs());
    if (member->op_type() == "Transpose") {
      const std::vector<int64_t> flattened_perm = *member->GetInts("perm");
      const int64_t input_axis = axis_of_.at(member->input(0));
      std::vector<int64_t> perm;
      for (int64_t from : flattened_perm) {
        if (from == input_axis) {
          perm.insert(perm.end(), {from, from + 1});
        } else {
          perm.push_back(from < input_axis ? from : from + 1);
        }
      }
      copy->SetAttribute(Attribute::Ints("perm", perm));
    } else if (member->op_type() == "Softmax" || member->op_type() == "LogSoftmax") {
      copy->SetAttribute(Attribute::Int("axis", rank_));
    }
    done[output] = unflattened;
  }
  // Readers outside are Reshapes: they read the unflattened value, element for element the same.
  std::vector<Node*> exits;
  for (const Node* member : members_) {
    Value* output = member->output(0);
    const std::vector<Use> uses = output->uses();
    for (const Use& use : uses) {
      if (member_set_.count(use.node)) continue;
      if (std::find(shape_reads_.begin(), shape_reads_.end(), use.node) != shape_reads_.end()) {
        ReplaceShapeRead(graph, *use.node, *done.at(output), axis_of_.at(output));
        continue;
      }
      use.node->ReplaceInput(use.input_index, done.at(output));
      exits.push_back(use.node);
    }
  }
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) graph.RemoveNode(*it);
  // Entries read by nothing else go with their shape operands, so the layout ops before them
  // meet the new Reshapes alone.
  RemoveIfUnused(std::vector<Value*>(entries_.begin(), entries_.end()));
  return exits;
}

// Shape(v) of a flattened member as the unflattened value's dims with the split pair multiplied:
// Concat(dims[:axis], dims[axis] * dims[axis + 1], dims[axis + 2:]).
void Region::ReplaceShapeRead(Graph& graph, Node& shape, Value& unflattened, int64_t axis) const {
  const std::string stem = shape.output(0)->name();
  auto int64_value = [&](const std::string& suffix, int64_t length) {
    Value* value = graph.CreateValue(graph.UniqueName(stem + suffix));
    value->type().dtype = DataType::kInt64;
    value->type().shape = Shape{Dim::Known(length)};
    return value;
  };
  auto slice = [&](Value* dims, int64_t begin, int64_t end) {
    Value* out = int64_value("_part", end - begin);
    graph.CreateNode("Slice", "",
                     {dims, AddInt64Initializer(graph, stem + "_begin", {begin}), AddInt64Initializer(graph, stem + "_end", {end})},
                     {out}, UniqueNodeName(graph, shape.name() + "_part"));
    return out;
  };
  const int64_t rank = rank_ + 1;
  Value* dims = int64_value("_unflattened", rank);
  graph.CreateNode("Shape", "", {&unflattened}, {dims}, UniqueNodeName(graph, shape.name() + "_unflattened"));
  std::vector<Value*> pieces;
  if (axis > 0) pieces.push_back(slice(dims, 0, axis));
  Value* merged = int64_value("_merged", 1);
  graph.CreateNode("Mul", "", {slice(dims, axis, axis + 1), slice(dims, axis + 1, axis + 2)}, {merged},
                   UniqueNodeName(graph, shape.name() + "_merged"));
  pieces.push_back(merged);
  if (axis + 2 < rank) pieces.push_back(slice(dims, axis + 2, rank));
  Value* flattened = int64_value("_flattened", rank_);
  Node* concat = graph.CreateNode("Concat", "", pieces, {flattened}, UniqueNodeName(graph, shape.name() + "_flattened"));
  concat->SetAttribute(Attribute::Int("axis", 0));
  graph.ReplaceAllUses(shape.output(0), flattened);
  graph.RemoveNode(&shape);
}

// Everything that can fail is checked before the graph changes: each entry's unflattened value
// is its input, an Unsqueeze of it, or a Reshape of it whose operand spells the target at every
// run (a -1 beside a copied dim would be undefined where that dim is 0).
bool Region::Spellable() const {
  for (const Value* entry : entries_) {
    const Shape target = SplitAxis(*entry->shape(), axis_of_.at(entry), *split_);
    const Shape& input = *entry->producer()->input(0)->shape();
    if (!ProvablySameShape(input, target) && !InsertedUnitAxes(input, target) && !ReshapeOperand(input, target)) {
      return false;
    }
  }
  return true;
}

// A Reshape that flattens into a batch axis of a rank >= 3 value, and that axis.
std::optional<int64_t> SeedAxis(const Node& node) {
  const int64_t rank = RankOf(node.output(0));
  if (!IsDefaultOp(&node, "Reshape") || rank < 3 || node.output(0)->is_graph_output()) return std::nullopt;
  // A flattened last axis is a feature axis (the head merge [B,S,H,D] → [B,S,H·D]).
  for (int64_t axis = 0; axis < rank - 1; ++axis) {
    if (FlatteningAt(node, axis)) return axis;
  }
  return std::nullopt;
}

}  // namespace

Result<bool> UnflattenBatchMatmuls::RunOnGraph(Graph& graph, PassContext& context) {
  const std::optional<int64_t> opset = context.model().OpsetFor("");
  if (!opset) return false;
  std::vector<Node*> seeds;
  for (const auto& node : graph.nodes()) {
    if (SeedAxis(*node)) seeds.push_back(node.get());
  }
  bool changed = false;
  std::unordered_set<const Node*> rewritten;  // entries whose readers moved already
  for (Node* seed : seeds) {
    if (rewritten.count(seed)) continue;
    Value* flattened = seed->output(0);
    const int64_t axis = *SeedAxis(*seed);
    Region region(RankOf(flattened), *opset);
    if (!region.Include(flattened, axis) || !region.Close(flattened)) {
      const int64_t rank = RankOf(flattened);
      const bool batched = std::any_of(flattened->uses().begin(), flattened->uses().end(), [rank](const Use& use) {
        return IsDefaultOp(use.node, "MatMul") && RankOf(use.node->input(0)) == rank && RankOf(use.node->input(1)) == rank;
      });
      if (batched && axis < rank - 2) {
        context.Rejected(*seed, "a value of the batched MatMul's region is read by an op that is neither a MatMul of two "
                                "flattened operands, an elementwise op, a Transpose, a last-axis Softmax nor a Reshape");
      }
      continue;
    }
    if (!region.has_matmul()) continue;
    if (!region.Spellable()) {
      context.Rejected(*seed, "an entry's unflattened shape is no Unsqueeze of its input and no Reshape target spells it at "
                              "every size");
      continue;
    }
    // A Reshape back to the unflattened shape (the region's usual end) reads its input as it is.
    for (Node* exit : region.Rewrite(graph)) {
      if (PassesInputThrough(*exit, context.model())) BypassChain(graph, {exit}, *exit->input(0), *exit->output(0));
    }
    rewritten.insert(region.entry_nodes().begin(), region.entry_nodes().end());
    context.Matched();
    context.Count("regions_unflattened");
    changed = true;
  }
  if (changed) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
