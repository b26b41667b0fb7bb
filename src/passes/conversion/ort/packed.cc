// lower-for-ort, packed in-projections: torchvision's nn.MultiheadAttention projects Q, K and V
// as one [B,S,3·E] value and reaches each operand's [B,H,S,D] through a chain of layout ops
// (Transpose, Reshape to [S,B,3,E] forms, Squeeze, Gather of slot 0, 1 or 2, head split to
// [S,B·H,D], Transpose, Reshape). The recogniser keeps such an operand as that chain (a kView
// operand, patterns/attention/attention.h). ORT's kernels need Q, K and V as [B,S,H·D] slices instead, so
// each chain's addressing — patterns/attention/layout.h's, the one the CPU and CUDA kernels read
// the operands with — must be one third of the packed value split into heads:
//
//   element (b,h,s,d) at b·S·W + s·W + slot·H·D + h·D + d,   W = 3·H·D, slot 0, 1 or 2 (K too)
//
// Where the model leaves B or S symbolic, the layout is taken at two sizes of each and must
// give that form at both: a chain that hard-codes a size, or mixes the batch into the heads
// differently, fails at one of them. A Reshape target is a constant (the dynamo exporter folds
// them for a fixed sequence) or a shape computation outside the group (TorchScript's Concat of
// Shape dims and B·H as a Mul), read in a copy of the model with the trial's sizes in place of
// the symbols and fold-constants run over it (what -O1 does to static shapes); one that does not
// fold to a constant there is refused.
#include <algorithm>
#include <array>
#include <map>

#include "ir/constant_value.h"
#include "passes/conversion/ort/support.h"
#include "patterns/attention/layout.h"
#include "patterns/composite/composite.h"

namespace fusionopt::passes::ort_lowering {
namespace {

struct Slice {
  int64_t heads = 0, head_size = 0, slot = -1;
};

// The one of three equal slices of the [B,S,W] packed input `input` the operand reads, split into
// heads; nullopt when it reads anything else.
std::optional<Slice> SliceOf(const OperandLayout& operand, int input, int64_t batch, int64_t sequence, int64_t width) {
  const int64_t projection = operand.heads * operand.columns;
  if (operand.input != input || projection <= 0 || width != 3 * projection || operand.batch != batch ||
      operand.rows != sequence || operand.column_stride != 1 || (sequence > 1 && operand.row_stride != width) ||
      (batch > 1 && operand.batch_stride != sequence * width) ||
      (operand.heads > 1 && operand.head_stride != operand.columns) || operand.offset % projection != 0 ||
      operand.offset / projection >= 3 || operand.group != 1) {
    return std::nullopt;
  }
  return Slice{operand.heads, operand.columns, operand.offset / projection};
}

}  // namespace

WhyNot ProvePackedOperands(const FusedAttention& attention, const Node& call, TrialModels& trials,
                                PackedOperands& packed) {
  const std::array<const AttentionOperand*, 3> operands = {&attention.q, &attention.k, &attention.v};
  for (const AttentionOperand* operand : operands) {
    if (operand->layout != HeadLayout::kView || operand->input < 0 || operand->input != attention.q.input) {
      return "Q, K and V are not layout chains over one packed projection";
    }
    if (operand->rotary || operand->repeat) return "a packed projection's operand is rotated or repeated";
  }
  const Value* source = call.input(static_cast<size_t>(attention.q.input));
  if (!source->shape() || source->shape()->size() != 3) return "the packed projection is not [B,S,W]";
  const Shape& shape = *source->shape();
  if (!shape[2].is_known()) return "a layout chain's source has an unknown width";
  const int64_t width = shape[2].value;
  std::optional<std::array<Slice, 3>> first;
  for (size_t trial = 0; trial < kTrialBatches.size(); ++trial) {
    if (trial > 0 && shape[0].is_known() && shape[1].is_known()) break;  // nothing left open: one layout
    const int64_t batch = shape[0].is_known() ? shape[0].value : kTrialBatches[trial];
    const int64_t sequence = shape[1].is_known() ? shape[1].value : kTrialSequences[trial];
    TrialSizes sizes;
    if (shape[0].is_symbolic()) sizes[shape[0].symbol] = batch;
    if (shape[1].is_symbolic()) sizes[shape[1].symbol] = sequence;
    Decided<AttentionLayout> layout = LayoutAt(attention, call, trials, sizes);
    if (!layout) {
      return layout.why_not() == kTargetNotKnown
                 ? "a packed projection's layout chain reshapes to a target that cannot be evaluated ahead of time"
                 : "a packed projection's layout chain does not address its [B,S,W] source as a strided view";
    }
    std::array<Slice, 3> slices;
    const OperandLayout* laid_out[3] = {&layout->q, &layout->k, &layout->v};
    for (size_t i = 0; i < 3; ++i) {
      std::optional<Slice> slice = SliceOf(*laid_out[i], attention.q.input, batch, sequence, width);
      if (!slice) return "a packed projection's layout chain does not read one third of it split into heads";
      slices[i] = *slice;
    }
    if (first && (slices[0].slot != (*first)[0].slot || slices[1].slot != (*first)[1].slot ||
                  slices[2].slot != (*first)[2].slot || slices[0].heads != (*first)[0].heads)) {
      return "a layout chain depends on the batch or sequence size";
    }
    first = slices;
  }
  const std::array<Slice, 3>& slices = *first;
  if (slices[0].heads != slices[1].heads || slices[0].heads != slices[2].heads ||
      slices[0].head_size != slices[1].head_size || slices[0].head_size != slices[2].head_size) {
    return "Q, K and V differ in heads";
  }
  packed = {attention.q.input, slices[0].heads, slices[0].head_size,
            {static_cast<int>(slices[0].slot), static_cast<int>(slices[1].slot), static_cast<int>(slices[2].slot)}};
  if (packed.slots[0] == packed.slots[1] || packed.slots[0] == packed.slots[2] || packed.slots[1] == packed.slots[2]) {
    return "Q, K and V read the same third of the packed projection";
  }
  return {};
}

}  // namespace fusionopt::passes::ort_lowering
