// lower-for-ort, packed in-projections: torchvision's nn.MultiheadAttention projects Q, K and V
// as one [B,S,3·E] value and reaches each operand's [B,H,S,D] through a chain of layout ops
// (Transpose, Reshape to [S,B,3,E] forms, Squeeze, Gather of slot 0, 1 or 2, head split to
// [S,B·H,D], Transpose, Reshape). The recogniser keeps such an operand as that chain (a kView
// operand, patterns/attention.h). ORT's kernels need Q, K and V as [B,S,H·D] slices instead, so
// each chain is run on a tensor of source positions (element i holds i) and must come out as one
// third of the packed value split into heads:
//
//   out[b,h,s,d] = b·S·W + s·W + slot·H·D + h·D + d   (K, as the score MatMul reads it: out[b,h,d,s])
//   where W = 3·H·D and slot is 0, 1 or 2
//
// Some steps (the [S,B,E] → [S,B·H,D] head split) are not strided views of the source, so the
// chain is evaluated, not composed. Where the model leaves B or S symbolic, it is evaluated at
// two sizes of each and must give that form at both: a chain that hard-codes a size, or mixes
// the batch into the heads differently, fails at one of them. A Reshape target is a constant (the
// dynamo exporter folds them for a fixed sequence) or a shape computation outside the group
// (TorchScript's Concat of Shape dims and B·H as a Mul), read in a copy of the model with the
// trial's sizes in place of the symbols and fold-constants run over it (what -O1 does to static
// shapes); one that does not fold to a constant there is refused.
#include <algorithm>
#include <array>
#include <map>

#include "ir/function_body.h"
#include "ir/permutation.h"
#include "passes/fold_constants.h"
#include "passes/lower_for_ort_support.h"
#include "patterns/composite.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::passes::ort_lowering {
namespace {

// Two sizes for a dim the model leaves open, apart from each other and from common head counts.
constexpr std::array<int64_t, 2> kTrialBatches = {3, 5};
constexpr std::array<int64_t, 2> kTrialSequences = {7, 11};
// The largest source evaluated (elements): 64 MB of positions per copy.
constexpr int64_t kMaxPositions = int64_t{1} << 23;

// A Reshape target of the chain at one trial: constants, or values computed outside the group
// from the run's shapes, read in the model folded at the trial's sizes.
std::optional<std::vector<int64_t>> TargetAt(const AttentionReshape& reshape, const Node& call, const Model* trial) {
  std::vector<int64_t> target;
  for (const AttentionShapePart& part : reshape.parts) {
    if (part.kind == ShapePartMatch::Kind::kConstant) {
      target.insert(target.end(), part.constant.begin(), part.constant.end());
    } else if (part.kind == ShapePartMatch::Kind::kValues && part.input >= 0) {
      const Value* argument = call.input(static_cast<size_t>(part.input));
      std::optional<std::vector<int64_t>> values = Int64Constant(argument);
      if (!values && trial != nullptr) values = Int64Constant(trial->graph->FindValue(argument->name()));
      if (!values) return std::nullopt;
      target.insert(target.end(), values->begin(), values->end());
    } else {
      return std::nullopt;
    }
  }
  return target;
}

// A tensor of source positions: what a chain of layout ops makes of [0, 1, 2, ...].
struct Positions {
  std::vector<int64_t> dims, data;
};

std::optional<Positions> Transposed(const Positions& in, const std::vector<int64_t>& perm) {
  if (perm.size() != in.dims.size() || !IsPermutation(perm)) return std::nullopt;
  const size_t rank = perm.size();
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t axis = rank; axis-- > 1;) in_strides[axis - 1] = in_strides[axis] * in.dims[axis];
  Positions out;
  for (int64_t axis : perm) out.dims.push_back(in.dims[static_cast<size_t>(axis)]);
  out.data.reserve(in.data.size());
  std::vector<int64_t> index(rank, 0);
  for (size_t n = 0; n < in.data.size(); ++n) {
    int64_t at = 0;
    for (size_t axis = 0; axis < rank; ++axis) at += index[axis] * in_strides[static_cast<size_t>(perm[axis])];
    out.data.push_back(in.data[static_cast<size_t>(at)]);
    for (size_t axis = rank; axis-- > 0;) {  // next output index, row-major
      if (++index[axis] < out.dims[axis]) break;
      index[axis] = 0;
    }
  }
  return out;
}

// Reshape as the op resolves its target: 0 copies the input's dim (unless allow_zero), one -1
// takes what is left.
std::optional<Positions> Reshaped(Positions in, std::vector<int64_t> target, bool allow_zero) {
  int64_t known = 1;
  std::optional<size_t> inferred;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (i >= in.dims.size()) return std::nullopt;
      target[i] = in.dims[i];
    }
    if (target[i] == -1 && !inferred) {
      inferred = i;
    } else if (target[i] <= 0) {
      return std::nullopt;
    } else {
      known *= target[i];
    }
  }
  const int64_t total = static_cast<int64_t>(in.data.size());
  if (inferred) {
    if (total % known != 0) return std::nullopt;
    target[*inferred] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  in.dims = std::move(target);
  return in;
}

std::optional<Positions> Squeezed(Positions in, const std::vector<int64_t>& axes, bool unsqueeze) {
  const int64_t rank = static_cast<int64_t>(in.dims.size()) + (unsqueeze ? static_cast<int64_t>(axes.size()) : 0);
  std::vector<bool> listed(static_cast<size_t>(rank), false);
  for (int64_t axis : axes) {
    std::optional<int64_t> at = NormalizedAxis(axis, rank);
    if (!at || listed[static_cast<size_t>(*at)]) return std::nullopt;
    listed[static_cast<size_t>(*at)] = true;
  }
  std::vector<int64_t> dims;
  size_t next = 0;
  for (int64_t axis = 0; axis < rank; ++axis) {
    if (unsqueeze) {
      dims.push_back(listed[static_cast<size_t>(axis)] ? 1 : in.dims[next++]);
    } else if (!listed[static_cast<size_t>(axis)]) {
      dims.push_back(in.dims[static_cast<size_t>(axis)]);
    } else if (in.dims[static_cast<size_t>(axis)] != 1) {
      return std::nullopt;
    }
  }
  in.dims = std::move(dims);
  return in;
}

std::optional<Positions> Gathered(const Positions& in, int64_t axis_written, int64_t index) {
  const std::optional<int64_t> axis = NormalizedAxis(axis_written, static_cast<int64_t>(in.dims.size()));
  if (!axis) return std::nullopt;
  const int64_t size = in.dims[static_cast<size_t>(*axis)];
  if (index < 0) index += size;
  if (index < 0 || index >= size) return std::nullopt;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < *axis; ++i) outer *= in.dims[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(*axis) + 1; i < in.dims.size(); ++i) inner *= in.dims[i];
  Positions out{in.dims, {}};
  out.dims.erase(out.dims.begin() + *axis);
  for (int64_t o = 0; o < outer; ++o) {
    const auto begin = in.data.begin() + (o * size + index) * inner;
    out.data.insert(out.data.end(), begin, begin + inner);
  }
  return out;
}

// The operand's chain run on the positions of a [dims] source; nullopt, with `why`, where a step
// fails as the op would or a Reshape's target is not a constant.
std::optional<Positions> Evaluated(const AttentionOperand& operand, const Node& call, const std::vector<int64_t>& dims,
                                   const Model* trial, std::string& why) {
  Positions positions{dims, {}};
  positions.data.resize(static_cast<size_t>(dims[0] * dims[1] * dims[2]));
  for (size_t i = 0; i < positions.data.size(); ++i) positions.data[i] = static_cast<int64_t>(i);
  for (const AttentionViewStep& step : operand.view) {
    std::optional<Positions> next;
    switch (step.kind) {
      case AttentionViewStep::Kind::kTranspose: next = Transposed(positions, step.ints); break;
      case AttentionViewStep::Kind::kSqueeze: next = Squeezed(std::move(positions), step.ints, false); break;
      case AttentionViewStep::Kind::kUnsqueeze: next = Squeezed(std::move(positions), step.ints, true); break;
      case AttentionViewStep::Kind::kGather: next = Gathered(positions, step.axis, step.index); break;
      case AttentionViewStep::Kind::kReshape: {
        std::optional<std::vector<int64_t>> target = TargetAt(step.reshape, call, trial);
        if (!target) {
          why = "a packed projection's layout chain reshapes to a target that cannot be evaluated ahead of time";
          return std::nullopt;
        }
        next = Reshaped(std::move(positions), *target, step.reshape.allow_zero);
        break;
      }
    }
    if (!next) {
      why = "a packed projection's layout chain fails on its [B,S,W] source";
      return std::nullopt;
    }
    positions = std::move(*next);
  }
  return positions;
}

struct Slice {
  int64_t heads = 0, head_size = 0, slot = -1;
};

// The one of `parts` equal slices of the [B,S,W] source the positions read, split into heads;
// nullopt when they read anything else.
std::optional<Slice> SliceOf(const Positions& out, int64_t batch, int64_t sequence, int64_t width, bool key, int64_t parts) {
  if (out.dims.size() != 4 || out.dims[0] != batch || out.data.empty()) return std::nullopt;
  const size_t rows = key ? 3 : 2, features = key ? 2 : 3;
  Slice slice{out.dims[1], out.dims[features], -1};
  const int64_t projection = slice.heads * slice.head_size;
  if (out.dims[rows] != sequence || projection <= 0 || width != parts * projection) return std::nullopt;
  slice.slot = out.data[0] / projection;
  if (out.data[0] % projection != 0 || slice.slot >= parts) return std::nullopt;
  std::vector<int64_t> stride(4);  // of each output axis in the source
  stride[0] = sequence * width;
  stride[1] = slice.head_size;
  stride[rows] = width;
  stride[features] = 1;
  size_t n = 0;
  for (int64_t i0 = 0; i0 < out.dims[0]; ++i0) {
    for (int64_t i1 = 0; i1 < out.dims[1]; ++i1) {
      for (int64_t i2 = 0; i2 < out.dims[2]; ++i2) {
        for (int64_t i3 = 0; i3 < out.dims[3]; ++i3, ++n) {
          const int64_t want = slice.slot * projection + i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
          if (out.data[n] != want) return std::nullopt;
        }
      }
    }
  }
  return slice;
}

// `operand`'s chain over its source (rank 3 [B,S,W] or rank 4 [B,S,H,D], which reads the same
// flat positions), checked as one of `parts` slices split into heads at each trial size of an open
// B or S; the slice of the first trial, or why not.
std::string SliceAtEveryTrial(const AttentionOperand& operand, bool key, const Node& call, int64_t parts,
                              TrialModels& trials, Slice& slice) {
  const Value* source = call.input(static_cast<size_t>(operand.input));
  const size_t rank = source->shape() ? source->shape()->size() : 0;
  if (rank != 3 && rank != 4) return "a layout chain's source is not [B,S,W] or [B,S,H,D]";
  const Shape& shape = *source->shape();
  int64_t width = 1;
  for (size_t axis = 2; axis < rank; ++axis) {
    if (!shape[axis].is_known()) return "a layout chain's source has an unknown width";
    width *= shape[axis].value;
  }
  for (size_t trial = 0; trial < kTrialBatches.size(); ++trial) {
    const int64_t batch = shape[0].is_known() ? shape[0].value : kTrialBatches[trial];
    const int64_t sequence = shape[1].is_known() ? shape[1].value : kTrialSequences[trial];
    if (trial > 0 && shape[0].is_known() && shape[1].is_known()) break;  // nothing left open: one evaluation
    if (width <= 0 || batch * sequence > kMaxPositions / width) return "a layout chain's source is too large to check";
    TrialSizes sizes;
    if (shape[0].is_symbolic()) sizes[shape[0].symbol] = batch;
    if (shape[1].is_symbolic()) sizes[shape[1].symbol] = sequence;
    std::vector<int64_t> dims = {batch, sequence};
    for (size_t axis = 2; axis < rank; ++axis) dims.push_back(shape[axis].value);
    std::string why;
    std::optional<Positions> out = Evaluated(operand, call, dims, sizes.empty() ? nullptr : trials.At(sizes), why);
    if (!out) return why;
    std::optional<Slice> found = SliceOf(*out, batch, sequence, width, key, parts);
    if (!found) {
      return parts == 1 ? "a layout chain does not read its source split into heads"
                        : "a packed projection's layout chain does not read one third of it split into heads";
    }
    if (trial > 0 && (found->heads != slice.heads || found->head_size != slice.head_size || found->slot != slice.slot)) {
      return "a layout chain depends on the batch or sequence size";
    }
    slice = *found;
  }
  return {};
}

}  // namespace

const Model* TrialModels::At(const TrialSizes& sizes) {
  auto [entry, fresh] = copies_.try_emplace(sizes);
  if (!fresh) return entry->second.get();
  auto copy = std::make_unique<Model>();
  copy->ir_version = model_.ir_version;
  copy->opsets = model_.opsets;
  copy->graph = CopyGraph(*model_.graph);
  for (const Value* value : copy->graph->AllValues()) {
    Value* sized = copy->graph->FindValue(value->name());
    if (sized == nullptr || !sized->shape()) continue;
    for (Dim& dim : *sized->type().shape) {
      if (auto size = sizes.find(dim.symbol); dim.is_symbolic() && size != sizes.end()) dim = Dim::Known(size->second);
    }
  }
  InferShapes(*copy);
  FoldConstants fold;
  PassOptions options;
  PassStatistics statistics;
  std::vector<FusionRecord> fusions;
  PassContext context(*copy, fold, options, statistics, fusions);
  if (fold.Run(*copy, context).ok()) entry->second = std::move(copy);
  return entry->second.get();
}

std::string ProvePackedOperands(const FusedAttention& attention, const Node& call, TrialModels& trials,
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
  std::optional<Slice> first[3];
  for (size_t i = 0; i < operands.size(); ++i) {
    Slice slice;
    if (std::string why = SliceAtEveryTrial(*operands[i], /*key=*/i == 1, call, 3, trials, slice); !why.empty()) return why;
    first[i] = slice;
  }
  if (first[0]->heads != first[1]->heads || first[0]->heads != first[2]->heads ||
      first[0]->head_size != first[1]->head_size || first[0]->head_size != first[2]->head_size) {
    return "Q, K and V differ in heads";
  }
  packed = {attention.q.input, first[0]->heads, first[0]->head_size,
            {static_cast<int>(first[0]->slot), static_cast<int>(first[1]->slot), static_cast<int>(first[2]->slot)}};
  if (packed.slots[0] == packed.slots[1] || packed.slots[0] == packed.slots[2] || packed.slots[1] == packed.slots[2]) {
    return "Q, K and V read the same third of the packed projection";
  }
  return {};
}

}  // namespace fusionopt::passes::ort_lowering
