// fuse-horizontal-contractions (O3): its rewrite, conditions and limits are in fuse_horizontal_contractions.h.
#include "passes/fusion/horizontal/fuse_horizontal_contractions.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_class.h"
#include "passes/util/attribute_equality.h"
#include "passes/util/constant_operand.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"
#include "patterns/quantized/dynamic_contraction.h"

namespace fusionopt::passes {
namespace {

// Four members cover Q/K/V, SwiGLU's gate/up and Inception's three parallel 1×1 branches;
// the literature puts the register-pressure knee of merged kernels at 4–6 members.
constexpr int64_t kDefaultMaxMembers = 4;

// A dynamically quantized member's head beyond the MatMulInteger
// (patterns/quantized/dynamic_contraction.h): what the merged head is rebuilt from.
struct DynamicHead {
  quantized::DynamicContraction unit;
  std::vector<double> scales;  // %ws per output column (a scalar repeated)
};

struct Member {
  Node* contraction = nullptr;
  std::vector<Node*> head;   // the contraction and, for a dynamically quantized one, its rescale
  DataType dtype = DataType::kUndefined;  // the product's (a dynamically quantized head's is float)
  std::optional<DynamicHead> dynamic;
  ConstantOperand weight;
  std::optional<ConstantOperand> bias;  // Gemm's C, Conv's B
  int64_t width = 0;                     // output columns (MatMul, Gemm) or channels (Conv)
  Value* tail = nullptr;                 // what the Split produces for this member
  std::vector<Node*> epilogue;           // nodes moved below the Split, in order
  std::vector<std::optional<ConstantOperand>> epilogue_biases;  // per epilogue node: an Add's constant addend
  bool zero_bias = false;  // a MatMul without the bias Add the others have: its columns add zeros
};

// The axis of the weight that holds output channels, and of the output.
int64_t WeightOutputAxis(const Node& contraction) {
  if (contraction.op_type() == "MatMul" || contraction.op_type() == "MatMulInteger") return 1;
  if (contraction.op_type() == "Gemm") return contraction.GetInt("transB", 0) != 0 ? 0 : 1;
  return 0;  // Conv: [C_out, C_in, k...]
}

std::optional<ConstantOperand> ConstantInput(const Node& node, size_t index, const Model& model) {
  Value* value = node.input(index);
  if (value == nullptr) return std::nullopt;
  return ReadConstantOperand(value, model);
}

// A MatMulInteger's dynamically quantized head as a member: int8 weights concatenate as bytes.
WhyNot WhyNotDynamicMember(Node& node, const Model& model, Member& member) {
  const quantized::ConstantOf constant_of = quantized::GraphConstantsOf(model);
  Decided<quantized::DynamicContraction> unit = quantized::MatchDynamicContraction(node, constant_of);
  if (!unit) return unit.why_not();
  const Value* x = node.input(0);
  if (!x->shape() || x->shape()->size() < 2) return "shared input has unknown rank or rank < 2";
  if (unit->weight_zero != nullptr && unit->weight_zero->NumElements() != 1) return "per-column weight zero points";
  member.contraction = &node;
  for (const Node* head_node : unit->Nodes()) {
    if (head_node != unit->quantize) member.head.push_back(const_cast<Node*>(head_node));
  }
  member.dtype = unit->output()->dtype();
  member.width = unit->weights->dims()[1];
  member.weight = ConstantOperand{node.input(1), unit->weights->dtype(), unit->weights->dims(), unit->weights};
  const std::vector<double> scales = *unit->weight_scale->AsDoubles();
  DynamicHead head{*unit, {}};
  for (int64_t column = 0; column < member.width; ++column) {
    head.scales.push_back(scales[scales.size() == 1 ? 0 : static_cast<size_t>(column)]);
  }
  member.dynamic = std::move(head);
  member.tail = const_cast<Value*>(unit->output());
  return {};
}

// Why `node` cannot be a member, or "" with `member` filled in.
WhyNot WhyNotMember(Node& node, const Model& model, Member& member) {
  const std::string& op = node.op_type();
  if (op == "MatMulInteger") return WhyNotDynamicMember(node, model, member);
  const Value* x = node.input(0);
  if (x == nullptr || !x->shape() || x->shape()->size() < 2) return "shared input has unknown rank or rank < 2";
  std::optional<ConstantOperand> weight = ConstantInput(node, 1, model);
  if (!weight) return "weight is not a floating-point constant";
  if (weight->dtype != x->dtype()) return "weight dtype differs from the input's";
  if ((op == "MatMul" || op == "Gemm") && weight->dims.size() != 2) return "weight is not 2-D";
  if (op == "Conv" && (weight->dims.size() < 3 || node.GetInt("group", 1) != 1)) return "grouped or malformed Conv";
  member.contraction = &node;
  member.head = {&node};
  member.dtype = weight->dtype;
  member.width = weight->dims[static_cast<size_t>(WeightOutputAxis(node))];
  member.weight = std::move(*weight);
  if (node.inputs().size() > 2 && node.input(2) != nullptr) {
    std::optional<ConstantOperand> bias = ConstantInput(node, 2, model);
    if (!bias) return "bias is not a floating-point constant";
    const bool per_channel = bias->dims == std::vector<int64_t>{member.width} ||
                             (op == "Gemm" && bias->dims == std::vector<int64_t>{1, member.width});
    if (!per_channel || bias->dtype != member.weight.dtype) return "bias is not one value per output channel";
    member.bias = std::move(*bias);
  }
  member.tail = node.output(0);
  if (member.tail == nullptr) return "output unused";
  return {};
}

// The same input scale and zero point (one DynamicQuantizeLinear's), and weights' zero points of
// one value.
bool SameDynamicQuantization(const DynamicHead& a, const DynamicHead& b) {
  auto zero = [](const TensorPtr& tensor) { return tensor != nullptr ? *tensor->AsInt64s() : std::vector<int64_t>{0}; };
  return a.unit.x_scale == b.unit.x_scale && a.unit.x_zero == b.unit.x_zero &&
         zero(a.unit.weight_zero) == zero(b.unit.weight_zero);
}

// Members that can share one kernel: same op and attributes, weights equal but for the
// output axis.
bool Compatible(const Member& a, const Member& b) {
  if (a.contraction->op_type() != b.contraction->op_type() || !SameAttributes(*a.contraction, *b.contraction)) {
    return false;
  }
  if (a.weight.dtype != b.weight.dtype || a.weight.dims.size() != b.weight.dims.size()) return false;
  if (a.dynamic && !SameDynamicQuantization(*a.dynamic, *b.dynamic)) return false;
  const size_t axis = static_cast<size_t>(WeightOutputAxis(*a.contraction));
  for (size_t i = 0; i < a.weight.dims.size(); ++i) {
    if (i != axis && a.weight.dims[i] != b.weight.dims[i]) return false;
  }
  return true;
}

// ---------------------------------------------------------------- epilogues

const std::unordered_set<std::string_view>& SinkableActivations() {
  static const std::unordered_set<std::string_view> ops = {
      "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish",
      "Softplus", "Softsign", "Mish", "Gelu", "Clip", "ThresholdedRelu"};
  return ops;
}

// The single node reading `value`, when `value` is no graph output.
Node* SoleReader(const Value& value) {
  if (value.is_graph_output() || value.uses().size() != 1) return nullptr;
  return value.uses().front().node;
}

// The bias layout an Add after the contraction must have: one value per output channel, on
// the channel axis of the output (last for MatMul/Gemm, 1 for Conv, right-aligned).
bool PerChannelBias(const ConstantOperand& bias, const Member& member, size_t output_rank) {
  const bool conv = member.contraction->op_type() == "Conv";
  const size_t channel_from_right = conv ? output_rank - 2 : 0;  // dims after the channel axis
  if (bias.dims.size() < channel_from_right + 1 || bias.dims.size() > output_rank) return false;
  const size_t channel_axis = bias.dims.size() - 1 - channel_from_right;
  for (size_t i = 0; i < bias.dims.size(); ++i) {
    if (bias.dims[i] != (i == channel_axis ? member.width : 1)) return false;
  }
  return true;
}

// SiLU, x · Sigmoid(x), reading `tail`: the Sigmoid and the Mul, when `tail` is read by those
// two alone and the Sigmoid by the Mul alone (the exporters' nn.SiLU).
std::optional<std::pair<Node*, Node*>> SiluOf(const Value& tail) {
  if (tail.is_graph_output() || tail.uses().size() != 2) return std::nullopt;
  Node* sigmoid = nullptr;
  Node* mul = nullptr;
  for (const Use& use : tail.uses()) {
    if (!IsDefaultDomain(*use.node)) return std::nullopt;
    if (use.node->op_type() == "Sigmoid") sigmoid = use.node;
    if (use.node->op_type() == "Mul") mul = use.node;
  }
  if (sigmoid == nullptr || mul == nullptr || mul->inputs().size() != 2) return std::nullopt;
  Node* reader = SoleReader(*sigmoid->output(0));
  const bool reads_both = (mul->input(0) == &tail && mul->input(1) == sigmoid->output(0)) ||
                          (mul->input(1) == &tail && mul->input(0) == sigmoid->output(0));
  if (reader != mul || !reads_both) return std::nullopt;
  return std::pair{sigmoid, mul};
}

// Whether every member continues with SiLU; if so, records its two nodes.
bool SinkSilu(std::vector<Member>& members) {
  std::vector<std::pair<Node*, Node*>> silus;
  for (const Member& member : members) {
    std::optional<std::pair<Node*, Node*>> silu = SiluOf(*member.tail);
    if (!silu) return false;
    silus.push_back(*silu);
  }
  for (size_t i = 0; i < members.size(); ++i) {
    for (Node* node : {silus[i].first, silus[i].second}) {
      members[i].epilogue.push_back(node);
      members[i].epilogue_biases.emplace_back();
    }
    members[i].tail = silus[i].second->output(0);
  }
  return true;
}

// The bias Add reading `member`'s tail and its per-channel constant, when it has one.
std::optional<std::pair<Node*, ConstantOperand>> BiasAddOf(const Member& member, const Model& model, size_t output_rank) {
  Node* add = SoleReader(*member.tail);
  if (add == nullptr || !IsDefaultDomain(*add) || add->op_type() != "Add" || add->inputs().size() != 2 ||
      add->outputs().size() != 1) {
    return std::nullopt;
  }
  const size_t other = add->input(0) == member.tail ? 1 : 0;
  if (add->input(1 - other) != member.tail) return std::nullopt;
  std::optional<ConstantOperand> bias = ConstantInput(*add, other, model);
  if (!bias || bias->dtype != member.dtype || !PerChannelBias(*bias, member, output_rank)) return std::nullopt;
  return std::pair{add, std::move(*bias)};
}

// MatMul members before any other step, some continuing with a bias Add and the others with
// none (Whisper's key projection has no bias): the others' columns add zeros, so all merge.
// The members' epilogues differ from here on, so no step follows. Whether it applied.
bool SinkBiasWithZeros(std::vector<Member>& members, const Model& model, size_t output_rank) {
  if (members[0].contraction->op_type() != "MatMul") return false;
  std::vector<std::optional<std::pair<Node*, ConstantOperand>>> adds;
  size_t biased = 0;
  std::optional<size_t> bias_rank;  // the biases are concatenated: one rank for all
  for (const Member& member : members) {
    if (!member.epilogue.empty()) return false;
    adds.push_back(BiasAddOf(member, model, output_rank));
    if (!adds.back()) continue;
    const size_t rank = adds.back()->second.dims.size();
    if (bias_rank.value_or(rank) != rank) return false;
    bias_rank = rank;
    ++biased;
  }
  if (biased == 0 || biased == members.size()) return false;
  for (size_t i = 0; i < members.size(); ++i) {
    if (!adds[i]) {
      members[i].zero_bias = true;
      continue;
    }
    members[i].epilogue.push_back(adds[i]->first);
    members[i].epilogue_biases.push_back(std::move(adds[i]->second));
    members[i].tail = adds[i]->first->output(0);
  }
  return true;
}

// Whether every member continues with the same epilogue step; if so, records it.
bool SinkOneStep(std::vector<Member>& members, const Model& model, size_t output_rank) {
  if (std::any_of(members.begin(), members.end(), [](const Member& member) { return member.zero_bias; })) return false;
  if (SinkBiasWithZeros(members, model, output_rank)) return true;
  std::vector<Node*> readers;
  for (const Member& member : members) {
    Node* reader = SoleReader(*member.tail);
    if (reader == nullptr) return SinkSilu(members);
    if (!IsDefaultDomain(*reader) || reader->outputs().size() != 1) return false;
    if (!readers.empty() && reader->op_type() != readers[0]->op_type()) return false;
    readers.push_back(reader);
  }
  const Node& first = *readers[0];
  std::vector<ConstantOperand> biases;
  if (first.op_type() == "Add") {
    for (size_t i = 0; i < members.size(); ++i) {
      auto add = BiasAddOf(members[i], model, output_rank);
      if (!add || (i > 0 && add->second.dims.size() != biases[0].dims.size())) return false;
      biases.push_back(std::move(add->second));
    }
  } else {
    if (!SinkableActivations().count(first.op_type()) || first.input(0) != members[0].tail) return false;
    for (size_t i = 1; i < members.size(); ++i) {
      const Node& reader = *readers[i];
      if (reader.input(0) != members[i].tail || !SameAttributes(first, reader) ||
          reader.inputs().size() != first.inputs().size()) {
        return false;
      }
      // Clip's bounds: the same values for every member.
      for (size_t input = 1; input < reader.inputs().size(); ++input) {
        if (reader.input(input) != first.input(input)) return false;
      }
    }
  }
  for (size_t i = 0; i < members.size(); ++i) {
    members[i].epilogue.push_back(readers[i]);
    if (biases.empty()) {
      members[i].epilogue_biases.emplace_back();
    } else {
      members[i].epilogue_biases.push_back(std::move(biases[i]));
    }
    members[i].tail = readers[i]->output(0);
  }
  return true;
}

// The elementwise op of the standard domain reading `member`'s tail (what the Split would
// produce for it), if any: merged, the member would lose that epilogue fusion.
const Node* LostEpilogue(const Member& member) {
  for (const Use& use : member.tail->uses()) {
    if (IsDefaultDomain(*use.node) && ClassifyOp(*use.node) == OpClass::kElementwise) return use.node;
  }
  return nullptr;
}

WhyNot WhyEpilogueLost(const Member& member) {
  const Node* reader = LostEpilogue(member);
  return reader == nullptr ? ""
                           : "a member continues with " + reader->op_type() +
                                 " the others do not share (its epilogue fusion would be lost)";
}

// `group` with its epilogues sunk; the members that would lose an epilogue fusion dropped (and
// reported) and the rest sunk again: Phi's parallel MLP reads the attention's LayerNorm too, and
// its fc1 keeps its GELU epilogue while Q, K and V merge. Whether two or more members remain.
bool SinkAndDropLostEpilogues(std::vector<Member>& group, const Model& model, size_t output_rank,
                              PassContext& context) {
  const std::vector<Member> unsunk = group;
  while (SinkOneStep(group, model, output_rank)) {
  }
  std::vector<Member> kept;
  for (size_t i = 0; i < group.size(); ++i) {
    if (WhyNot why = WhyEpilogueLost(group[i])) {
      context.Rejected(*group[i].contraction, why);
    } else {
      kept.push_back(unsunk[i]);
    }
  }
  if (kept.size() == group.size()) return true;
  if (kept.size() < 2) return false;
  group = std::move(kept);
  while (SinkOneStep(group, model, output_rank)) {
  }
  for (const Member& member : group) {
    if (WhyNot why = WhyEpilogueLost(member)) {
      context.Rejected(*member.contraction, why);
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------- the merged kernel

// Every part a stored tensor of `dtype`, so the parts' bytes can be copied as they are.
bool AllStoredAs(const std::vector<const ConstantOperand*>& parts, DataType dtype) {
  return std::all_of(parts.begin(), parts.end(), [&](const ConstantOperand* part) {
    return part != nullptr && part->tensor != nullptr && part->tensor->dtype() == dtype;
  });
}

// Concatenation of the stored parts' bytes, row block by row block. Weights are copied once
// from their (possibly memory-mapped) pages, whose residency is dropped after each part, with
// no wider intermediate: the merged Q/K/V weights of a multi-gigabyte model cost only their
// own size.
TensorPtr ConcatenateBytes(const std::vector<const ConstantOperand*>& parts, const std::vector<int64_t>& widths,
                           int64_t outer, int64_t inner, int64_t total, DataType dtype,
                           std::vector<int64_t> dims) {
  const uint64_t element = ByteSizeOf(dtype, 1);
  std::vector<uint8_t> bytes(static_cast<size_t>(ByteSizeOf(dtype, static_cast<uint64_t>(outer * total * inner))));
  int64_t offset = 0;
  for (size_t part = 0; part < parts.size(); ++part) {
    const uint64_t block = static_cast<uint64_t>(widths[part] * inner) * element;
    FUSIONOPT_CHECK(parts[part]->tensor->nbytes() == static_cast<uint64_t>(outer) * block,
                    "a horizontal member's weight holds outer x width x inner elements");
    const uint8_t* source = parts[part]->tensor->bytes().data();
    for (int64_t row = 0; row < outer; ++row) {
      std::memcpy(bytes.data() + static_cast<uint64_t>(row * total + offset) * inner * element,
                  source + static_cast<uint64_t>(row) * block, block);
    }
    parts[part]->tensor->ReleaseMappedPages();
    offset += widths[part];
  }
  return std::make_shared<Tensor>(Tensor::Owned(dtype, std::move(dims), std::move(bytes)));
}

// Concatenation of the parts along `axis`; a missing part (nullopt) is zeros of `width` there.
TensorPtr Concatenate(const std::vector<const ConstantOperand*>& parts, const std::vector<int64_t>& widths,
                      size_t axis, DataType dtype, std::vector<int64_t> like_dims) {
  int64_t outer = 1, inner = 1, total = 0;
  for (size_t i = 0; i < axis; ++i) outer *= like_dims[i];
  for (size_t i = axis + 1; i < like_dims.size(); ++i) inner *= like_dims[i];
  for (int64_t width : widths) total += width;
  if (AllStoredAs(parts, dtype)) {
    like_dims[axis] = total;
    return ConcatenateBytes(parts, widths, outer, inner, total, dtype, std::move(like_dims));
  }
  std::vector<double> values(static_cast<size_t>(outer * total * inner), 0.0);
  int64_t offset = 0;
  for (size_t part = 0; part < parts.size(); ++part) {
    const int64_t block = widths[part] * inner;
    if (parts[part] != nullptr) {
      const std::vector<double> source = parts[part]->Values();
      for (int64_t row = 0; row < outer; ++row) {
        std::copy_n(source.begin() + row * block, block, values.begin() + (row * total * inner + offset * inner));
      }
    }
    offset += widths[part];
  }
  like_dims[axis] = total;
  return MakeFloatingTensor(dtype, std::move(like_dims), values);
}

Value* NewValue(Graph& graph, const Value& like) { return graph.CreateValue(graph.UniqueName(like.name() + "_horizontal")); }

Node* AddNodeLike(Graph& graph, const Node& like, std::vector<Value*> inputs, Value* output) {
  Node* node = graph.CreateNode(like.op_type(), like.domain(), inputs, {output},
                                UniqueNodeName(graph, like.name() + "_horizontal"));
  for (const Attribute& attribute : like.attributes()) node->SetAttribute(attribute.CopyWithoutGraphs());
  return node;
}

struct Rewritten {
  std::vector<Node*> created;        // the merged contraction first
  std::vector<const Node*> removed;  // the members' operands' producers nothing reads any more
};

// A dynamically quantized head's rescale after the merged MatMulInteger (created.back()):
// Cast, then Mul by the input's scale times every column's weight scale.
void AddMergedRescale(Graph& graph, const std::vector<Member>& members, std::vector<Node*>& created) {
  const quantized::DynamicContraction& unit = members[0].dynamic->unit;
  std::vector<double> scales;
  for (const Member& member : members) scales.insert(scales.end(), member.dynamic->scales.begin(), member.dynamic->scales.end());
  const auto count = static_cast<int64_t>(scales.size());
  Value* column_scales = AddInitializer(graph, unit.contraction->input(1)->name() + "_scale_horizontal",
                                        MakeFloatingTensor(DataType::kFloat, {count}, scales));
  Value* x_scale = const_cast<Value*>(unit.x_scale);
  created.push_back(AddNodeLike(graph, *unit.cast, {created.back()->output(0)}, NewValue(graph, *unit.cast->output(0))));
  Node* scales_mul = AddNodeLike(graph, *unit.scales, {x_scale, column_scales}, NewValue(graph, *unit.scales->output(0)));
  created.push_back(scales_mul);
  created.push_back(AddNodeLike(graph, *unit.rescale, {created[created.size() - 2]->output(0), scales_mul->output(0)},
                                NewValue(graph, *unit.rescale->output(0))));
}

// The merged contraction, the merged epilogue and the Split, placed before the first member.
Rewritten Rewrite(Graph& graph, std::vector<Member>& members, int64_t opset, size_t output_rank) {
  const Node& first = *members[0].contraction;
  std::vector<int64_t> widths;
  for (const Member& member : members) widths.push_back(member.width);
  const DataType dtype = members[0].dtype;

  std::vector<const ConstantOperand*> weights;
  for (const Member& member : members) weights.push_back(&member.weight);
  std::vector<Value*> inputs = {first.input(0),
                                AddInitializer(graph, first.input(1)->name() + "_horizontal",
                                               Concatenate(weights, widths, static_cast<size_t>(WeightOutputAxis(first)),
                                                           members[0].weight.dtype, members[0].weight.dims))};
  // MatMulInteger's zero points, the same for every member.
  if (members[0].dynamic) inputs.insert(inputs.end(), first.inputs().begin() + 2, first.inputs().end());
  const bool any_bias = std::any_of(members.begin(), members.end(), [](const Member& m) { return m.bias.has_value(); });
  if (any_bias) {
    std::vector<const ConstantOperand*> biases;
    for (const Member& member : members) biases.push_back(member.bias ? &*member.bias : nullptr);
    inputs.push_back(AddInitializer(graph, first.name() + "_bias_horizontal",
                                    Concatenate(biases, widths, 0, dtype, {widths[0]})));
  }
  std::vector<Node*> created = {AddNodeLike(graph, first, inputs, NewValue(graph, *first.output(0)))};
  if (members[0].dynamic) AddMergedRescale(graph, members, created);

  // Each epilogue node of the first member that has one, re-created over the merged values:
  // what its nodes computed maps to what the merged nodes compute; an Add's per-channel
  // constant is concatenated (zeros for a zero-bias member); any other operand (Clip's bounds)
  // is shared by every member.
  const Member& pattern = *std::find_if(members.begin(), members.end(), [](const Member& m) { return !m.zero_bias; });
  std::unordered_map<const Value*, Value*> merged_of;
  for (const Member& member : members) merged_of[member.head.back()->output(0)] = created.back()->output(0);
  for (size_t step = 0; step < pattern.epilogue.size(); ++step) {
    const Node& like = *pattern.epilogue[step];
    std::vector<Value*> step_inputs;
    for (size_t input = 0; input < like.inputs().size(); ++input) {
      Value* operand = like.input(input);
      auto mapped = merged_of.find(operand);
      if (mapped != merged_of.end()) {
        step_inputs.push_back(mapped->second);
      } else if (const auto& bias0 = pattern.epilogue_biases[step]; bias0 && like.op_type() == "Add") {
        std::vector<const ConstantOperand*> biases;
        for (const Member& member : members) {
          biases.push_back(member.zero_bias ? nullptr : &*member.epilogue_biases[step]);
        }
        const size_t conv_inner = first.op_type() == "Conv" ? output_rank - 2 : 0;
        step_inputs.push_back(AddInitializer(graph, like.name() + "_bias_horizontal",
                                             Concatenate(biases, widths, bias0->dims.size() - 1 - conv_inner, dtype,
                                                         bias0->dims)));
      } else {
        step_inputs.push_back(operand);
      }
    }
    created.push_back(AddNodeLike(graph, like, step_inputs, NewValue(graph, *like.output(0))));
    merged_of[like.output(0)] = created.back()->output(0);
  }

  const int64_t axis = first.op_type() == "Conv" ? 1 : static_cast<int64_t>(output_rank) - 1;
  Node* split = CreateSplit(graph, created.back()->output(0), axis, widths, opset, first.name() + "_split");
  created.push_back(split);

  Node* anchor = members[0].contraction;
  for (const Member& member : members) {
    if (graph.OrderKey(member.contraction) < graph.OrderKey(anchor)) anchor = member.contraction;
  }
  for (Node* node : created) graph.MoveBefore(node, anchor);

  std::vector<Value*> unread;
  // Read before the loop: `first` is members[0]'s contraction, removed in its first iteration.
  const Value* shared_input = first.input(0);
  for (size_t i = 0; i < members.size(); ++i) {
    graph.TransferProducer(members[i].tail, split, static_cast<int>(i));
    std::vector<Node*> chain = members[i].head;
    chain.insert(chain.end(), members[i].epilogue.begin(), members[i].epilogue.end());
    for (Node* node : chain) {
      for (Value* input : node->inputs()) {
        // A value the chain itself produces is erased with it below.
        bool produced_in_chain =
            input != nullptr && std::find(chain.begin(), chain.end(), input->producer()) != chain.end();
        if (input != nullptr && input != shared_input && !produced_in_chain) unread.push_back(input);
      }
    }
    for (auto node = chain.rbegin(); node != chain.rend(); ++node) graph.RemoveNode(*node);
  }
  return {created, RemoveIfUnused(unread)};
}

// Readers of `x` that are contractions, in graph order.
std::vector<Node*> ContractionsReading(const Value& x) {
  std::vector<Node*> readers;
  for (const auto& use : x.uses()) {
    const Node* node = use.node;
    const std::string& op = node->op_type();
    if (use.input_index == 0 && IsDefaultDomain(*node) &&
        (op == "MatMul" || op == "Gemm" || op == "Conv" || op == "MatMulInteger") &&
        std::find(readers.begin(), readers.end(), node) == readers.end()) {
      readers.push_back(use.node);
    }
  }
  return readers;
}

// The contractions reading `x` that may merge, in classes of compatible weights and attributes;
// each one that may not is rejected with its reason.
std::vector<std::vector<Member>> MemberClasses(const Value& x, bool convolutions, PassContext& context) {
  std::vector<std::vector<Member>> classes;
  for (Node* node : ContractionsReading(x)) {
    Member member;
    if (!convolutions && node->op_type() == "Conv") {
      context.Rejected(*node, "Conv members are off (convolutions=0)");
      continue;
    }
    if (WhyNot why = WhyNotMember(*node, context.model(), member)) {
      context.Rejected(*node, why);
      continue;
    }
    auto fits = std::find_if(classes.begin(), classes.end(), [&](const auto& c) { return Compatible(c[0], member); });
    if (fits != classes.end()) fits->push_back(std::move(member));
    else classes.push_back({std::move(member)});
  }
  return classes;
}

// `group` merged into one contraction and a Split, its fusion recorded; false where a lost
// epilogue leaves fewer than two members or the cost model refuses the merge.
bool MergeGroup(Graph& graph, std::vector<Member>& group, int64_t opset, size_t output_rank, PassContext& context) {
  // A member continuing with an elementwise op the others do not share would lose it:
  // O2 fuses it into that member's own contraction, but not across the Split (ResNet's
  // downsample beside the block's first 1×1, SwiGLU's gate beside its up projection).
  if (!SinkAndDropLostEpilogues(group, context.model(), output_rank, context)) return false;
  std::vector<Node*> merged;
  for (const Member& member : group) {
    merged.insert(merged.end(), member.head.begin(), member.head.end());
    merged.insert(merged.end(), member.epilogue.begin(), member.epilogue.end());
  }
  // The Split is costed as free: a view where the parts are contiguous (channels of one
  // image), or read in place by the attention node that takes Q/K/V next.
  if (!context.JudgeFusion(merged).apply()) return false;
  FusionRecord record{"", "", "", "horizontal_" + group[0].contraction->op_type(), {}};  // RecordFusion names the pass
  for (const Member& member : group) {
    for (const Node* node : member.head) record.replaced.push_back(node->name());
    for (const Node* node : member.epilogue) record.replaced.push_back(node->name());
  }
  context.Matched();
  context.Count("contractions_merged", static_cast<int64_t>(group.size()));
  int64_t moved = 0;
  for (const Member& member : group) moved += static_cast<int64_t>(member.epilogue.size());
  context.Count("epilogue_nodes_moved", moved);
  // The merged nodes run per inference like the members, so the cost model's launch-free
  // nodes stay right and the next group is judged without a whole-graph pass.
  const CostModel& costs = context.cost_model();
  const bool keeps_launch_free = costs.ReplacingKeepsLaunchFree(graph, merged);
  const uint64_t revision_before = graph.revision();
  Rewritten rewritten = Rewrite(graph, group, opset, output_rank);
  if (keeps_launch_free) costs.AdoptRewrite(graph, revision_before, rewritten.created, rewritten.removed);
  record.node = rewritten.created.front()->name();
  context.RecordFusion(std::move(record));
  return true;
}

}  // namespace

std::vector<PassOptionInfo> FuseHorizontalContractions::options() const {
  return {{"max_members", std::to_string(kDefaultMaxMembers),
           "most contractions merged into one (larger sets form several groups)"},
          {"convolutions", "1",
           "1: Conv members merge too; 0: only MatMul and Gemm (--runtime ort sets 0: ORT's NCHWc layout stops at the "
           "Split, so YOLOv8n ran 6 more ORT nodes and no faster)"}};
}

Result<bool> FuseHorizontalContractions::RunOnGraph(Graph& graph, PassContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t max_members, context.IntOption("max_members"));
  if (max_members < 2) return UsageError("fuse-horizontal-contractions.max_members must be at least 2");
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t convolutions, context.IntOption("convolutions"));
  if (convolutions != 0 && convolutions != 1) return UsageError("fuse-horizontal-contractions.convolutions must be 0 or 1");
  const int64_t opset = context.model().OpsetFor("").value_or(0);
  // The shared inputs, in the order their first contraction appears.
  std::vector<Value*> shared;
  std::unordered_set<const Value*> seen;
  for (const auto& node : graph.nodes()) {
    Value* x = node->input(0);
    if (x != nullptr && seen.insert(x).second && ContractionsReading(*x).size() >= 2) shared.push_back(x);
  }
  bool changed = false;
  for (Value* x : shared) {
    const size_t output_rank = x->shape()->size();
    for (std::vector<Member>& candidates : MemberClasses(*x, convolutions == 1, context)) {
      if (candidates.size() < 2) {
        context.Rejected(*candidates[0].contraction, "no other contraction on the same input with compatible weights and attributes");
        continue;
      }
      for (size_t begin = 0; begin + 1 < candidates.size(); begin += static_cast<size_t>(max_members)) {
        const size_t end = std::min(candidates.size(), begin + static_cast<size_t>(max_members));
        if (end - begin < 2) break;
        std::vector<Member> group(std::make_move_iterator(candidates.begin() + begin),
                                  std::make_move_iterator(candidates.begin() + end));
        changed = MergeGroup(graph, group, opset, output_rank, context) || changed;
      }
    }
  }
  if (changed) {
    const uint64_t revision_before = graph.revision();
    FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
    context.cost_model().AdoptRevision(graph, revision_before);  // the same nodes and edges
  }
  return changed;
}

}  // namespace fusionopt::passes
