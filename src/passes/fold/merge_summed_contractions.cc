// merge-summed-contractions (O1): its rewrite, conditions and limits are in merge_summed_contractions.h.
#include "passes/fold/merge_summed_contractions.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_set>

#include "passes/util/attribute_equality.h"
#include "passes/fold/util/channel_affine.h"
#include "passes/util/constant_operand.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"

namespace fusionopt::passes {
namespace {

bool IsSumNode(const Node* node) {
  return node != nullptr && IsDefaultDomain(*node) && (node->op_type() == "Add" || node->op_type() == "Sum") &&
         node->outputs().size() == 1;
}

// The leaves of the Add / Sum tree ending at `root`, and its nodes (root first).
struct SumTree {
  std::vector<Node*> nodes;
  std::vector<Value*> leaves;
};

void CollectTree(Node& node, SumTree& tree) {
  tree.nodes.push_back(&node);
  for (Value* input : node.inputs()) {
    Node* producer = input != nullptr ? input->producer() : nullptr;
    if (IsSumNode(producer) && producer->graph() == node.graph() && OnlyReadBy(*input, node)) {
      CollectTree(*producer, tree);
    } else if (input != nullptr) {
      tree.leaves.push_back(input);
    }
  }
}

std::vector<int64_t> IntsOr(const Node& node, const char* name, std::vector<int64_t> fallback) {
  std::optional<std::vector<int64_t>> value = node.GetInts(name);
  return value ? *value : fallback;
}

// A Conv branch: its weight and bias as doubles, kernel and pads, lined up later.
struct ConvBranch {
  Node* conv = nullptr;  // null for the identity branch
  ConstantOperand weight;
  std::optional<ConstantOperand> bias;
  std::vector<int64_t> kernel, pads;  // pads: begins then ends
};

// The input itself, or a per-channel affine map of it, as a branch: a diagonal kernel.
struct IdentityBranch {
  Value* leaf = nullptr;
  Node* batchnorm = nullptr;  // null when the leaf is the input itself
  ChannelAffine affine;
};

// Whether `leaf` is `x` (scale 1) or an inference BatchNormalization of `x` read only by the sum
// tree, over `channels` channels; why not in `why` when it is a BatchNormalization of `x` that
// does not fold.
std::optional<IdentityBranch> IdentityLeaf(Value& leaf, Value& x, int64_t channels, const Model& model,
                                           WhyNot& why) {
  if (&leaf == &x) {
    return IdentityBranch{&leaf, nullptr, {std::vector<double>(static_cast<size_t>(channels), 1.0),
                                           std::vector<double>(static_cast<size_t>(channels), 0.0)}};
  }
  Node* batchnorm = leaf.producer();
  if (batchnorm == nullptr || !IsDefaultDomain(*batchnorm) || batchnorm->op_type() != "BatchNormalization" ||
      batchnorm->input(0) != &x || leaf.uses().size() != 1 || leaf.is_graph_output()) {
    return std::nullopt;
  }
  why = WhyNotInferenceBatchNorm(*batchnorm, model.OpsetFor(batchnorm->domain()).value_or(0));
  if (why) return std::nullopt;
  Decided<ChannelAffine> affine = BatchNormAffine(*batchnorm, channels, InitializerRuleOf(model));
  if (!affine) {
    why = affine.why_not();
    return std::nullopt;
  }
  return IdentityBranch{&leaf, batchnorm, *affine};
}

// A Conv leaf that can join a merge on `x`, or nullopt.
std::optional<ConvBranch> ConvLeaf(Value& leaf, const Model& model) {
  Node* conv = leaf.producer();
  if (conv == nullptr || !IsDefaultDomain(*conv) || conv->op_type() != "Conv" || leaf.uses().size() != 1 ||
      leaf.is_graph_output() || conv->GetString("auto_pad", "NOTSET") != "NOTSET") {
    return std::nullopt;
  }
  ConvBranch branch;
  branch.conv = conv;
  std::optional<ConstantOperand> weight = ReadConstantOperand(conv->input(1), model);
  if (!weight || weight->dims.size() < 3) return std::nullopt;
  branch.weight = *weight;
  if (conv->inputs().size() > 2 && conv->input(2) != nullptr) {
    branch.bias = ReadConstantOperand(conv->input(2), model);
    if (!branch.bias) return std::nullopt;
  }
  const size_t spatial = weight->dims.size() - 2;
  branch.kernel.assign(weight->dims.begin() + 2, weight->dims.end());
  branch.pads = IntsOr(*conv, "pads", std::vector<int64_t>(2 * spatial, 0));
  if (branch.pads.size() != 2 * spatial) return std::nullopt;
  return branch;
}

// Whether two Convs compute over the same windows of the same input.
bool SameWindows(const Node& a, const Node& b, size_t spatial) {
  const std::vector<int64_t> ones(spatial, 1);
  return a.input(0) == b.input(0) && IntsOr(a, "strides", ones) == IntsOr(b, "strides", ones) &&
         IntsOr(a, "dilations", ones) == IntsOr(b, "dilations", ones) && a.GetInt("group", 1) == b.GetInt("group", 1);
}

// Where a branch's windows sit relative to their centre, per side: pad − d·(k − 1)/2. Branches
// with equal offsets (and odd kernels) line up once the smaller kernels are padded with zeros
// around their centre; nullopt for an even kernel, which would need an off-centre pad.
std::optional<std::vector<int64_t>> CentreOffsets(const ConvBranch& branch, const std::vector<int64_t>& dilations) {
  const size_t spatial = dilations.size();
  std::vector<int64_t> offsets;
  for (size_t side = 0; side < 2 * spatial; ++side) {
    const size_t axis = side % spatial;
    if (branch.kernel[axis] % 2 == 0) return std::nullopt;
    offsets.push_back(branch.pads[side] - dilations[axis] * (branch.kernel[axis] - 1) / 2);
  }
  return offsets;
}

// The merged kernel (the largest of each axis) and its pads for branches of equal offsets.
std::pair<std::vector<int64_t>, std::vector<int64_t>> MergedWindow(const std::vector<ConvBranch>& branches,
                                                                   const std::vector<int64_t>& offsets,
                                                                   const std::vector<int64_t>& dilations) {
  const size_t spatial = dilations.size();
  std::vector<int64_t> kernel(spatial, 1);
  for (const ConvBranch& branch : branches) {
    for (size_t i = 0; i < spatial; ++i) kernel[i] = std::max(kernel[i], branch.kernel[i]);
  }
  std::vector<int64_t> pads;
  for (size_t side = 0; side < 2 * spatial; ++side) {
    pads.push_back(offsets[side] + dilations[side % spatial] * (kernel[side % spatial] - 1) / 2);
  }
  return {kernel, pads};
}

// Adds `branch`'s weight, centred, into `sum` of dims [M, C/g, kernel...].
void AddCentred(std::vector<double>& sum, const std::vector<int64_t>& dims, const ConvBranch& branch) {
  const std::vector<double> values = branch.weight.Values();
  const std::vector<int64_t>& small = branch.weight.dims;
  const size_t rank = dims.size();
  std::vector<int64_t> index(rank, 0);
  for (size_t flat = 0; flat < values.size(); ++flat) {
    size_t rest = flat;
    for (size_t axis = rank; axis-- > 0;) {
      index[axis] = static_cast<int64_t>(rest % static_cast<size_t>(small[axis]));
      rest /= static_cast<size_t>(small[axis]);
    }
    size_t target = 0;
    for (size_t axis = 0; axis < rank; ++axis) {
      const int64_t offset = axis >= 2 ? (dims[axis] - small[axis]) / 2 : 0;
      target = target * static_cast<size_t>(dims[axis]) + static_cast<size_t>(index[axis] + offset);
    }
    sum[target] += values[flat];
  }
}

// The identity kernel of a Conv over `dims` [M, C/g, K...] (M = C), scaled per channel: the
// scale at the centre where the output channel reads its own input channel.
void AddIdentity(std::vector<double>& sum, const std::vector<int64_t>& dims, const std::vector<double>& scale) {
  const int64_t per_group = dims[1];
  size_t area = 1;
  size_t centre = 0;
  for (size_t axis = 2; axis < dims.size(); ++axis) {
    centre = centre * static_cast<size_t>(dims[axis]) + static_cast<size_t>(dims[axis] / 2);
    area *= static_cast<size_t>(dims[axis]);
  }
  for (int64_t m = 0; m < dims[0]; ++m) {
    const int64_t own = m % per_group;  // the output channel's input channel within its group
    sum[(static_cast<size_t>(m) * static_cast<size_t>(per_group) + static_cast<size_t>(own)) * area + centre] +=
        scale[static_cast<size_t>(m)];
  }
}

struct Merge {
  std::vector<ConvBranch> convs;
  std::optional<IdentityBranch> identity;
  std::vector<Node*> matmuls;
};

// The leaf that joins `first`'s candidate as its identity branch, if any: unit strides, offsets
// 0, as many output channels as the group reads. A BatchNormalization of the input that cannot
// join is reported on `context`.
std::optional<IdentityBranch> IdentityFor(const ConvBranch& first, const std::vector<int64_t>& offsets,
                                          const std::vector<Value*>& leaves, const Model& model,
                                          PassContext& context) {
  const std::vector<int64_t> ones(first.kernel.size(), 1);
  const int64_t channels = first.weight.dims[0];
  if (IntsOr(*first.conv, "strides", ones) != ones ||
      !std::all_of(offsets.begin(), offsets.end(), [](int64_t o) { return o == 0; }) ||
      first.weight.dims[1] * first.conv->GetInt("group", 1) != channels) {
    return std::nullopt;
  }
  for (Value* leaf : leaves) {
    WhyNot why;
    std::optional<IdentityBranch> identity = IdentityLeaf(*leaf, *first.conv->input(0), channels, model, why);
    if (identity) return identity;
    if (why) context.Rejected(*leaf->producer(), why.Prefixed("identity branch"));
  }
  return std::nullopt;
}

// The largest set of Conv leaves that line up — one input, the same windows, channels and
// dtype, equal centre offsets — with an identity branch when one fits (IdentityFor); `input`,
// `kernel` and `pads` of the merged Conv.
std::optional<Merge> ConvMerge(const std::vector<Value*>& leaves, const Model& model, PassContext& context,
                               Value*& input, std::vector<int64_t>& kernel, std::vector<int64_t>& pads) {
  struct Candidate {
    std::vector<ConvBranch> branches;
    std::vector<int64_t> offsets, dilations;
    std::optional<IdentityBranch> identity;
  };
  std::vector<Candidate> candidates;
  for (Value* leaf : leaves) {
    std::optional<ConvBranch> branch = ConvLeaf(*leaf, model);
    if (!branch) continue;
    const size_t spatial = branch->kernel.size();
    const std::vector<int64_t> dilations = IntsOr(*branch->conv, "dilations", std::vector<int64_t>(spatial, 1));
    std::optional<std::vector<int64_t>> offsets = CentreOffsets(*branch, dilations);
    if (!offsets) continue;
    auto fits = std::find_if(candidates.begin(), candidates.end(), [&](const Candidate& c) {
      const ConvBranch& first = c.branches[0];
      return c.offsets == *offsets && first.kernel.size() == spatial && SameWindows(*first.conv, *branch->conv, spatial) &&
             first.weight.dims[0] == branch->weight.dims[0] && first.weight.dims[1] == branch->weight.dims[1] &&
             first.weight.dtype == branch->weight.dtype;
    });
    if (fits != candidates.end()) {
      fits->branches.push_back(*branch);
    } else {
      candidates.push_back({{*branch}, *offsets, dilations, std::nullopt});
    }
  }
  Candidate* best = nullptr;
  for (Candidate& candidate : candidates) {
    candidate.identity = IdentityFor(candidate.branches[0], candidate.offsets, leaves, model, context);
    const size_t size = candidate.branches.size() + (candidate.identity ? 1 : 0);
    if (size >= 2 && (best == nullptr || size > best->branches.size() + (best->identity ? 1 : 0))) best = &candidate;
  }
  if (best == nullptr) return std::nullopt;
  Merge merge;
  merge.convs = best->branches;
  merge.identity = best->identity;
  input = best->branches[0].conv->input(0);
  std::tie(kernel, pads) = MergedWindow(best->branches, best->offsets, best->dilations);
  return merge;
}

// MatMul leaves of one input with constant 2-D B of one shape and dtype.
std::optional<Merge> MatMulMerge(const std::vector<Value*>& leaves, const Model& model) {
  std::map<Value*, std::vector<Node*>> by_input;
  for (Value* leaf : leaves) {
    Node* matmul = leaf->producer();
    if (matmul == nullptr || !IsDefaultDomain(*matmul) || matmul->op_type() != "MatMul" || leaf->uses().size() != 1 ||
        leaf->is_graph_output()) {
      continue;
    }
    std::optional<ConstantOperand> weight = ReadConstantOperand(matmul->input(1), model);
    if (weight && weight->dims.size() == 2) by_input[matmul->input(0)].push_back(matmul);
  }
  for (auto& [x, matmuls] : by_input) {
    std::vector<Node*> group;
    std::optional<ConstantOperand> first;
    for (Node* matmul : matmuls) {
      std::optional<ConstantOperand> weight = ReadConstantOperand(matmul->input(1), model);
      if (!first) first = weight;
      if (weight->dims == first->dims && weight->dtype == first->dtype) group.push_back(matmul);
    }
    if (group.size() >= 2) {
      Merge merge;
      merge.matmuls = group;
      return merge;
    }
  }
  return std::nullopt;
}

// The merged Conv writing `out` (null: an empty output slot for the caller to fill).
Node* WriteConv(Graph& graph, const Merge& merge, Value& x, const std::vector<int64_t>& kernel,
                const std::vector<int64_t>& pads, Value* out) {
  const ConvBranch& first = merge.convs[0];
  std::vector<int64_t> dims = {first.weight.dims[0], first.weight.dims[1]};
  dims.insert(dims.end(), kernel.begin(), kernel.end());
  size_t count = 1;
  for (int64_t dim : dims) count *= static_cast<size_t>(dim);
  std::vector<double> weights(count, 0.0), bias(static_cast<size_t>(dims[0]), 0.0);
  bool any_bias = false;
  for (const ConvBranch& branch : merge.convs) {
    AddCentred(weights, dims, branch);
    if (branch.bias) {
      any_bias = true;
      const std::vector<double> values = branch.bias->Values();
      for (size_t m = 0; m < bias.size() && m < values.size(); ++m) bias[m] += values[m];
    }
  }
  if (merge.identity) {
    AddIdentity(weights, dims, merge.identity->affine.scale);
    for (size_t m = 0; m < bias.size(); ++m) bias[m] += merge.identity->affine.shift[m];
    any_bias = any_bias || merge.identity->batchnorm != nullptr;
  }
  const DataType dtype = first.weight.dtype;
  const Node& like = *first.conv;
  std::vector<Value*> inputs = {&x, AddInitializer(graph, like.input(1)->name() + "_summed",
                                                   MakeFloatingTensor(dtype, dims, weights))};
  if (any_bias) {
    inputs.push_back(AddInitializer(graph, like.name() + "_bias_summed", MakeFloatingTensor(dtype, {dims[0]}, bias)));
  }
  Node* conv = graph.CreateNode("Conv", "", inputs, {out}, UniqueNodeName(graph, like.name() + "_summed"));
  for (const Attribute& attribute : like.attributes()) {
    if (attribute.name != "pads" && attribute.name != "kernel_shape") conv->SetAttribute(attribute.CopyWithoutGraphs());
  }
  conv->SetAttribute(Attribute::Ints("pads", pads));
  if (like.FindAttribute("kernel_shape") != nullptr) conv->SetAttribute(Attribute::Ints("kernel_shape", kernel));
  return conv;
}

// The merged MatMul writing `out` (null: an empty output slot).
Node* WriteMatMul(Graph& graph, const Merge& merge, const Model& model, Value* out) {
  const Node& like = *merge.matmuls[0];
  std::optional<ConstantOperand> first = ReadConstantOperand(like.input(1), model);
  std::vector<double> sum(static_cast<size_t>(first->NumElements()), 0.0);
  for (const Node* matmul : merge.matmuls) {
    const std::vector<double> values = ReadConstantOperand(matmul->input(1), model)->Values();
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += values[i];
  }
  Value* weight = AddInitializer(graph, like.input(1)->name() + "_summed", MakeFloatingTensor(first->dtype, first->dims, sum));
  return graph.CreateNode("MatMul", "", {like.input(0), weight}, {out}, UniqueNodeName(graph, like.name() + "_summed"));
}

// Rewrites the tree ending at `root` when a merge applies: the merged contraction plus what
// joined nothing, summed by one Add chain (or nothing more); returns the branches merged.
int64_t MergeTree(Graph& graph, Node& root, const Model& model, PassContext& context) {
  SumTree tree;
  CollectTree(root, tree);
  if (tree.leaves.size() < 2) return 0;
  Value* x = nullptr;
  std::vector<int64_t> kernel, pads;
  std::optional<Merge> merge = ConvMerge(tree.leaves, model, context, x, kernel, pads);
  if (!merge) merge = MatMulMerge(tree.leaves, model);
  if (!merge) return 0;
  std::unordered_set<const Value*> merged_leaves;
  std::vector<Node*> removed;
  for (const ConvBranch& branch : merge->convs) {
    merged_leaves.insert(branch.conv->output(0));
    removed.push_back(branch.conv);
  }
  for (Node* matmul : merge->matmuls) {
    merged_leaves.insert(matmul->output(0));
    removed.push_back(matmul);
  }
  if (merge->identity && merge->identity->batchnorm != nullptr) removed.push_back(merge->identity->batchnorm);
  // What joined nothing stays an addend of the merged contraction.
  std::vector<Value*> others;
  bool identity_taken = false;
  for (Value* leaf : tree.leaves) {
    if (merged_leaves.count(leaf)) continue;
    if (merge->identity && leaf == merge->identity->leaf && !identity_taken) {
      identity_taken = true;  // the identity kernel holds it now
      continue;
    }
    others.push_back(leaf);
  }
  Value& result = *root.output(0);
  Value* contraction_out = others.empty() ? nullptr : graph.CreateValue(graph.UniqueName(result.name() + "_summed"));
  Node* contraction = merge->convs.empty() ? WriteMatMul(graph, *merge, model, contraction_out)
                                           : WriteConv(graph, *merge, *x, kernel, pads, contraction_out);
  Node* last = contraction;
  for (size_t i = 0; i < others.size(); ++i) {
    const bool final_add = i + 1 == others.size();
    Value* sum = final_add ? nullptr : graph.CreateValue(graph.UniqueName(result.name() + "_partial"));
    last = graph.CreateNode("Add", "", {last->output(0), others[i]}, {sum},
                            UniqueNodeName(graph, root.name() + (final_add ? "" : "_partial")));
  }
  std::vector<Value*> operands;
  for (Node* node : removed) {
    for (size_t i = 1; i < node->inputs().size(); ++i) operands.push_back(node->input(i));
  }
  graph.TransferProducer(&result, last, 0);
  // The tree first (consumers before producers: root, then its inner sums), then the branches.
  for (Node* node : tree.nodes) graph.RemoveNode(node);
  for (Node* node : removed) graph.RemoveNode(node);
  RemoveIfUnused(operands);
  return static_cast<int64_t>(merge->convs.size() + merge->matmuls.size() + (merge->identity ? 1 : 0));
}

}  // namespace

Result<bool> MergeSummedContractions::RunOnGraph(Graph& graph, PassContext& context) {
  std::vector<Node*> roots;
  for (const auto& node : graph.nodes()) {
    if (!IsSumNode(node.get())) continue;
    // A root: its output is not itself an inner value of a bigger tree.
    const Value* output = node->output(0);
    const bool inner = output != nullptr && output->uses().size() == 1 && !output->is_graph_output() &&
                       IsSumNode(output->uses().front().node);
    if (!inner) roots.push_back(node.get());
  }
  bool changed = false;
  for (Node* root : roots) {
    const int64_t branches = MergeTree(graph, *root, context.model(), context);
    if (branches == 0) continue;
    context.Matched();
    context.Count("branches_merged", branches);
    changed = true;
  }
  if (changed) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
