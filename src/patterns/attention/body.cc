// Recognising an outlined attention body (attention.h): the match, found in the body,
// described by the body's inputs and the constants it holds, for a kernel.
#include "ir/constant_value.h"
#include "patterns/attention/attention.h"
#include "patterns/matcher_support.h"

namespace fusionopt {
namespace {

using composite::BodyInputIndex;

// A body input, or a constant the body holds; nullopt for anything computed.
std::optional<AttentionInput> InputOf(const Graph& body, const Value* value) {
  std::optional<CompositeOperand> operand = composite::BodyOperandOf(body, value);
  if (!operand) return std::nullopt;
  AttentionInput input;
  input.input = operand->input;
  input.constant = std::move(operand->constant);
  return input;
}

std::optional<AttentionDimSource> DimSourceOf(const Graph& body, const AttentionMatch& match, const Value* value) {
  AttentionDimSource source;
  if ((source.index = BodyInputIndex(body, value)) >= 0) return source;
  if (match.split != nullptr && value->producer() == match.split) {
    source.kind = AttentionDimSource::Kind::kSplitOutput;
    source.index = value->producer_output_index();
    return source;
  }
  if (match.merge_transpose != nullptr && value == match.merge_transpose->output(0)) {
    source.kind = AttentionDimSource::Kind::kMergedContext;
    source.index = 0;
    return source;
  }
  const Node* core = match.attention_op != nullptr ? match.attention_op : match.context_matmul;
  if (value == core->output(0)) {
    source.kind = AttentionDimSource::Kind::kContext;
    source.index = 0;
    return source;
  }
  const AttentionOperandMatch* operands[] = {&match.q, &match.k, &match.v};
  for (int role = 0; role < 3; ++role) {
    // The head-split Transpose [0,2,1,3] right after the Reshape: [B,H,S,D].
    const AttentionOperandMatch& operand = *operands[role];
    if (operand.layout == HeadLayout::kSplitHeads && !operand.transposes.empty() &&
        value == operand.transposes.front()->output(0) &&
        operand.transposes.front()->GetInts("perm") == std::optional<std::vector<int64_t>>({0, 2, 1, 3})) {
      source.kind = AttentionDimSource::Kind::kOperandHeads;
      source.index = role;
      return source;
    }
  }
  return std::nullopt;
}

std::optional<AttentionReshape> DescribeReshape(const Graph& body, const AttentionMatch& match,
                                                const HeadReshapeMatch& reshape) {
  AttentionReshape described;
  described.allow_zero = reshape.allow_zero;
  for (const ShapePartMatch& part : reshape.parts) {
    AttentionShapePart out;
    out.kind = part.kind;
    switch (part.kind) {
      case ShapePartMatch::Kind::kConstant: out.constant = part.constant; break;
      case ShapePartMatch::Kind::kDimOf: {
        std::optional<AttentionDimSource> source = DimSourceOf(body, match, part.value);
        if (!source) return std::nullopt;
        out.of = *source;
        out.axis = part.axis;
        break;
      }
      case ShapePartMatch::Kind::kValues: {
        std::optional<AttentionInput> input = InputOf(body, part.value);
        if (!input || !input->present()) return std::nullopt;
        if (input->constant != nullptr) {
          std::optional<std::vector<int64_t>> values = input->constant->AsInt64s();
          if (!values || input->constant->dims().size() > 1) return std::nullopt;
          out.kind = ShapePartMatch::Kind::kConstant;
          out.constant = *values;
        } else {
          out.input = input->input;
        }
        break;
      }
    }
    described.parts.push_back(std::move(out));
  }
  return described;
}

// A Split's sizes as the body gives them: its sizes input (a body input or a constant), else its
// `split` attribute (before opset 13); neither: even parts. False when the input is neither.
bool DescribeSplitSizes(const Graph& body, const Node& split, AttentionInput& input, std::vector<int64_t>& attribute) {
  if (split.inputs().size() >= 2 && split.input(1) != nullptr) {
    std::optional<AttentionInput> sizes = InputOf(body, split.input(1));
    if (!sizes) return false;
    input = *sizes;
  } else if (std::optional<std::vector<int64_t>> sizes = split.GetInts("split")) {
    attribute = *sizes;
  }
  return true;
}

std::optional<AttentionRotary> DescribeRotary(const Graph& body, const RotaryMatch& rotary) {
  AttentionRotary described;
  described.cos = BodyInputIndex(body, rotary.cos);
  described.sin = BodyInputIndex(body, rotary.sin);
  if (described.cos < 0 || described.sin < 0) return std::nullopt;  // a runtime reads them as tables
  described.half = rotary.half;
  if (rotary.part_split != nullptr) {
    described.partial = true;
    if (!DescribeSplitSizes(body, *rotary.part_split, described.part_sizes, described.part_attribute)) return std::nullopt;
  }
  if (rotary.split_sizes != nullptr && (described.split_sizes = BodyInputIndex(body, rotary.split_sizes)) < 0) {
    return std::nullopt;
  }
  described.op = rotary.op;
  described.interleaved = rotary.interleaved;
  described.before_heads = rotary.before_heads;
  if (rotary.pair_flatten != nullptr) {
    std::optional<AttentionInput> target = InputOf(body, rotary.pair_flatten->input(1));
    if (!target) return std::nullopt;
    described.pair_target = std::move(*target);
    described.pair_allow_zero = rotary.pair_flatten->GetInt("allowzero", 0) != 0;
  }
  return described;
}

std::optional<AttentionRepeat> DescribeRepeat(const Graph& body, const AttentionMatch& match, const RepeatMatch& repeat) {
  AttentionRepeat described;
  described.repeats = repeat.repeats;
  if (const auto& shape = repeat.unsqueeze->input(0)->shape(); shape && shape->size() == 4 && (*shape)[1].is_known()) {
    described.source_heads = (*shape)[1].value;
  }
  std::optional<AttentionReshape> expand = DescribeReshape(body, match, repeat.expand_shape);
  std::optional<AttentionReshape> reshape = DescribeReshape(body, match, repeat.reshape_shape);
  if (!expand || !reshape) return std::nullopt;
  described.expand_shape = std::move(*expand);
  described.reshape_shape = std::move(*reshape);
  return described;
}

// A layout step's constant arguments: a Transpose's perm, Squeeze / Unsqueeze axes (attribute
// or constant input), a Gather's axis and scalar index, a Split's axis, sizes (input from opset
// 13, attribute before; none: even parts) and output read, a Reshape's target.
std::optional<AttentionViewStep> DescribeViewStep(const Graph& body, const AttentionMatch& match,
                                                  const ViewStepMatch& step) {
  const Node& node = *step.node;
  AttentionViewStep described;
  auto constant_ints = [](const Value* value) -> std::optional<std::vector<int64_t>> {
    TensorPtr tensor = value != nullptr ? ConstantValueOf(*value, InitializerRule::kFeedsOverride) : nullptr;
    return tensor != nullptr ? tensor->AsInt64s() : std::nullopt;
  };
  const std::string& op = node.op_type();
  if (op == "Transpose") {
    described.kind = AttentionViewStep::Kind::kTranspose;
    std::optional<std::vector<int64_t>> perm = node.GetInts("perm");
    if (!perm) return std::nullopt;
    described.ints = *perm;
  } else if (op == "Reshape") {
    described.kind = AttentionViewStep::Kind::kReshape;
    if (!step.reshape) return std::nullopt;
    std::optional<AttentionReshape> reshape = DescribeReshape(body, match, *step.reshape);
    if (!reshape) return std::nullopt;
    described.reshape = std::move(*reshape);
  } else if (op == "Squeeze" || op == "Unsqueeze") {
    described.kind = op == "Squeeze" ? AttentionViewStep::Kind::kSqueeze : AttentionViewStep::Kind::kUnsqueeze;
    std::optional<std::vector<int64_t>> axes = node.GetInts("axes");
    if (!axes) axes = constant_ints(node.inputs().size() == 2 ? node.input(1) : nullptr);
    if (!axes) return std::nullopt;
    described.ints = *axes;
  } else if (op == "Gather") {
    described.kind = AttentionViewStep::Kind::kGather;
    std::optional<std::vector<int64_t>> index = constant_ints(node.input(1));
    if (!index || index->size() != 1) return std::nullopt;
    described.axis = node.GetInt("axis", 0);
    described.index = index->front();
  } else if (op == "Split") {
    described.kind = AttentionViewStep::Kind::kSplit;
    described.axis = node.GetInt("axis", 0);
    described.index = step.output;
    described.outputs = static_cast<int64_t>(node.outputs().size());
    if (!DescribeSplitSizes(body, node, described.sizes, described.ints)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return described;
}

std::optional<AttentionOperand> DescribeOperand(const Graph& body, const AttentionMatch& match,
                                                const AttentionOperandMatch& operand) {
  AttentionOperand described;
  described.layout = operand.layout;
  described.split_output = operand.split_output;
  described.prescale = operand.prescale;
  if (operand.split_output < 0 && (described.input = BodyInputIndex(body, operand.source)) < 0) return std::nullopt;
  if (operand.split) {
    described.split = DescribeReshape(body, match, *operand.split);
    if (!described.split) return std::nullopt;
  }
  if (operand.rotary) {
    described.rotary = DescribeRotary(body, *operand.rotary);
    if (!described.rotary) return std::nullopt;
  }
  if (operand.repeat) {
    described.repeat = DescribeRepeat(body, match, *operand.repeat);
    if (!described.repeat) return std::nullopt;
  }
  for (const ViewStepMatch& step : operand.view) {
    std::optional<AttentionViewStep> view = DescribeViewStep(body, match, step);
    if (!view) return std::nullopt;
    described.view.push_back(std::move(*view));
  }
  return described;
}

std::optional<FusedAttention> Describe(const Graph& body, const AttentionMatch& match, int64_t opset) {
  if (!match.outside_shape_reads.empty() || !composite::BodyIsExactly(body, match.nodes)) return std::nullopt;
  if (body.outputs().size() != 1 || body.outputs()[0] != match.output) return std::nullopt;
  FusedAttention described;
  described.result_output = 0;
  for (auto [operand, out] : {std::pair{&match.q, &described.q}, std::pair{&match.k, &described.k},
                              std::pair{&match.v, &described.v}}) {
    std::optional<AttentionOperand> operand_described = DescribeOperand(body, match, *operand);
    if (!operand_described) return std::nullopt;
    *out = std::move(*operand_described);
  }
  if (match.split != nullptr) {
    described.combined = true;
    described.combined_input = BodyInputIndex(body, match.combined);
    if (described.combined_input < 0) return std::nullopt;
    described.split_axis = match.split_axis;
    described.split_outputs = static_cast<int>(match.split->outputs().size());
    if (opset >= 13) {
      std::optional<AttentionInput> sizes = InputOf(body, match.split->input(1));
      if (!sizes) return std::nullopt;
      described.split_sizes = *sizes;
    } else if (std::optional<std::vector<int64_t>> sizes = match.split->GetInts("split")) {
      described.split_attribute = *sizes;
    }
  }
  described.scale = match.scale;
  described.scale_divides = match.scale_divides;
  if (match.bias != nullptr) {
    std::optional<AttentionInput> bias = InputOf(body, match.bias);
    if (!bias) return std::nullopt;
    described.bias = *bias;
  }
  described.mask_kind = match.mask_kind;
  if (match.mask != nullptr) {
    std::optional<AttentionInput> mask = InputOf(body, match.mask);
    if (!mask) return std::nullopt;
    described.mask = *mask;
  }
  described.fill = match.fill;
  described.fill_when_true = match.fill_when_true;
  described.softmax_axis = match.softmax_axis;
  described.nan_guard = match.guard != nullptr;
  described.op = match.op;
  if (match.merge_view) {
    described.merge_view = DescribeReshape(body, match, *match.merge_view);
    if (!described.merge_view) return std::nullopt;
  }
  if (match.merge) {
    described.merge_perm = match.merge_perm;
    described.merge = DescribeReshape(body, match, *match.merge);
    if (!described.merge) return std::nullopt;
  }
  return described;
}

}  // namespace

std::optional<FusedAttention> RecognizeAttention(const Graph& body, int64_t opset) {
  for (const auto& node : body.nodes()) {
    if (!IsDefaultOp(node.get(), "Softmax") && !IsDefaultOp(node.get(), "Attention")) continue;
    AttentionSearch search = MatchAttentionAt(*node, opset);
    if (!search.match) continue;
    if (auto described = Describe(body, *search.match, opset)) return described;
  }
  return std::nullopt;
}

std::optional<FusedAttention> RecognizeAttention(const Function& function) {
  std::optional<int64_t> opset = function.OpsetFor("");
  if (!opset || function.body == nullptr) return std::nullopt;
  return RecognizeAttention(*function.body, *opset);
}

}  // namespace fusionopt
