// The operand addressing of a recognised attention body for one run's sizes (layout.h).
#include "patterns/attention/layout.h"

#include <algorithm>
#include <utility>

#include "ir/permutation.h"
#include "ir/reshape_target.h"
#include "patterns/composite/composite.h"

namespace fusionopt {
namespace {

// A Reshape's target at this run's sizes (ir/reshape_target.h), or nullopt when it is no valid
// target for them: the planner then leaves the body to run op by op.
std::optional<std::vector<int64_t>> ResolvedReshape(const std::vector<int64_t>& input, const std::vector<int64_t>& target,
                                                    bool allow_zero) {
  Result<std::vector<int64_t>> resolved = ResolveReshape(input, target, allow_zero);
  if (!resolved.ok()) return std::nullopt;
  return std::move(resolved).value();
}

// One dim of a view: the product of factors (size, stride), outer first. A Reshape that merges
// dims whose strides do not chain keeps them as factors, so a later Reshape can split them
// apart again (torchvision's packed projection merges batch and heads, then splits them back);
// only the final [B,H,S,D] needs one stride per dim.
struct Factor {
  int64_t size = 1, stride = 0;
};
using ViewDim = std::vector<Factor>;

int64_t SizeOf(const ViewDim& dim) {
  int64_t size = 1;
  for (const Factor& factor : dim) size *= factor.size;
  return size;
}

// The dim's single stride, when its factors chain (each outer factor's stride the inner one's
// times its size); 0 for a unit dim.
std::optional<int64_t> StrideOf(const ViewDim& dim) {
  if (dim.empty()) return 0;
  for (size_t i = 0; i + 1 < dim.size(); ++i) {
    if (dim[i].stride != dim[i + 1].stride * dim[i + 1].size) return std::nullopt;
  }
  return dim.back().stride;
}

// A strided view of a source tensor: element (i...) at offset + Σ over dims of the factors'
// coordinates times their strides (elements).
struct StridedView {
  std::vector<ViewDim> dims;
  int64_t offset = 0;
  std::vector<int64_t> Sizes() const {
    std::vector<int64_t> sizes;
    for (const ViewDim& dim : dims) sizes.push_back(SizeOf(dim));
    return sizes;
  }
};

// `dims` row-major, rows (the last dim) `ld` elements apart: a Split output is a column slice.
StridedView Contiguous(const std::vector<int64_t>& dims, int64_t ld, int64_t offset) {
  StridedView view;
  view.offset = offset;
  view.dims.resize(dims.size());
  int64_t stride = 1;
  for (size_t axis = dims.size(); axis-- > 0;) {
    if (dims[axis] != 1) view.dims[axis] = {Factor{dims[axis], stride}};
    stride = axis + 1 == dims.size() ? ld : stride * dims[axis];
  }
  return view;
}

// `view` reshaped to `target` (resolved): the factors, in order, regrouped into the target's
// dims, a factor split where a target dim takes only part of it; nullopt when a target dim's
// size does not fall on a factor boundary that divides it.
std::optional<StridedView> Reshaped(const StridedView& view, const std::vector<int64_t>& target) {
  std::vector<Factor> factors;
  for (const ViewDim& dim : view.dims) {
    for (const Factor& factor : dim) {
      if (factor.size != 1) factors.push_back(factor);
    }
  }
  StridedView out;
  out.offset = view.offset;
  size_t next = 0;
  for (int64_t size : target) {
    ViewDim dim;
    int64_t remaining = size;
    while (remaining > 1) {
      if (next >= factors.size()) return std::nullopt;
      Factor& factor = factors[next];
      if (factor.size <= remaining) {
        if (remaining % factor.size != 0) return std::nullopt;
        dim.push_back(factor);
        remaining /= factor.size;
        ++next;
      } else {
        if (factor.size % remaining != 0) return std::nullopt;
        // The outer part of the factor goes to this dim; the inner part stays for the next.
        const int64_t inner = factor.size / remaining;
        dim.push_back(Factor{remaining, factor.stride * inner});
        factor.size = inner;
        remaining = 1;
      }
    }
    out.dims.push_back(std::move(dim));
  }
  if (next != factors.size()) return std::nullopt;
  return out;
}

// The sizes Split cuts an axis of `total` into: `given` (its input or attribute), which must be
// `outputs` sizes adding up to it, or else even parts, the last one smaller when they do not
// divide it (opset 18's num_outputs); nullopt where Split would fail.
std::optional<std::vector<int64_t>> SplitSizes(std::vector<int64_t> given, int64_t outputs, int64_t total) {
  if (given.empty()) {
    const int64_t part = outputs > 0 ? (total + outputs - 1) / outputs : 0;
    for (int64_t i = 0; i < outputs; ++i) given.push_back(std::max<int64_t>(0, std::min(part, total - i * part)));
  }
  int64_t sum = 0;
  for (int64_t size : given) {
    if (size < 0) return std::nullopt;
    sum += size;
  }
  if (static_cast<int64_t>(given.size()) != outputs || sum != total) return std::nullopt;
  return given;
}

// `dim` narrowed to [start, start + length): its outer factor's range, which must fall on the
// inner factors' boundaries (a merged dim sliced across them is no strided view).
bool Sliced(ViewDim& dim, int64_t start, int64_t length, int64_t& offset) {
  if (length == SizeOf(dim)) return start == 0;
  if (dim.empty()) return false;
  const int64_t inner = SizeOf(dim) / dim.front().size;
  if (start % inner != 0 || length % inner != 0) return false;
  offset += start / inner * dim.front().stride;
  dim.front().size = length / inner;
  return true;
}

StridedView Permuted(const StridedView& view, const std::vector<int64_t>& perm) {
  StridedView out = view;
  for (size_t i = 0; i < perm.size(); ++i) out.dims[i] = view.dims[static_cast<size_t>(perm[i])];
  return out;
}

class Planner {
 public:
  Planner(const FusedAttention& attention, const AttentionInputs& inputs) : a_(attention), in_(inputs) {}

  std::optional<AttentionLayout> Plan() {
    AttentionLayout layout;
    if (!Combined()) return std::nullopt;
    const AttentionOperand* operands[] = {&a_.q, &a_.k, &a_.v};
    OperandLayout* out[] = {&layout.q, &layout.k, &layout.v};
    for (int role = 0; role < 3; ++role) {
      std::optional<OperandLayout> planned = PlanOperand(*operands[role], role);
      if (!planned) return std::nullopt;
      *out[role] = *planned;
    }
    layout.batch = layout.q.batch, layout.heads = layout.q.heads;
    layout.queries = layout.q.rows, layout.keys = layout.k.rows;
    layout.depth = layout.q.columns, layout.value_depth = layout.v.columns;
    if (!Repeated(a_.k, layout.k, layout.heads) || !Repeated(a_.v, layout.v, layout.heads) || !Consistent(layout)) {
      return std::nullopt;
    }
    if (!a_.op && NormalizedAxis(a_.softmax_axis, 4) != 3) return std::nullopt;
    if (!Rotary(a_.q, heads_[0], layout.q_rotary) || !Rotary(a_.k, heads_[1], layout.k_rotary) || !MaskAndBias(layout) ||
        !Output(layout)) {
      return std::nullopt;
    }
    return layout;
  }

 private:
  static bool Consistent(const AttentionLayout& l) {
    return l.k.batch == l.batch && l.v.batch == l.batch && l.v.rows == l.keys && l.k.columns == l.depth &&
           l.batch > 0 && l.heads > 0 && l.depth > 0 && l.value_depth > 0;
  }

  // The combined projection's Split: its outputs' dims and column offsets.
  bool Combined() {
    if (!a_.combined) return true;
    std::optional<std::vector<int64_t>> combined = in_.dims(a_.combined_input);
    if (!combined || combined->size() < 2) return false;
    const auto rank = static_cast<int64_t>(combined->size());
    if (NormalizedAxis(a_.split_axis, rank) != rank - 1) return false;
    const int64_t total = combined->back();
    std::optional<std::vector<int64_t>> given = GivenSizes(a_.split_sizes, a_.split_attribute);
    std::optional<std::vector<int64_t>> sizes = given ? SplitSizes(*given, a_.split_outputs, total) : std::nullopt;
    if (!sizes) return false;
    int64_t offset = 0;
    for (int64_t size : *sizes) {
      std::vector<int64_t> dims = *combined;
      dims.back() = size;
      split_dims_.push_back(std::move(dims));
      split_offsets_.push_back(offset);
      offset += size;
    }
    combined_width_ = total;
    return true;
  }

  // A Split's sizes as written: its sizes input's values this run, else its attribute (empty
  // for even parts); nullopt when an input's values are unknown.
  std::optional<std::vector<int64_t>> GivenSizes(const AttentionInput& input, const std::vector<int64_t>& attribute) const {
    if (input.input >= 0) return in_.values(input.input);
    if (input.constant != nullptr) return input.constant->AsInt64s();
    return attribute;
  }

  std::optional<std::vector<int64_t>> DimsOf(const AttentionDimSource& source) const {
    switch (source.kind) {
      case AttentionDimSource::Kind::kInput: return in_.dims(source.index);
      case AttentionDimSource::Kind::kSplitOutput:
        if (static_cast<size_t>(source.index) >= split_dims_.size()) return std::nullopt;
        return split_dims_[static_cast<size_t>(source.index)];
      case AttentionDimSource::Kind::kMergedContext:
        if (merged_context_.empty()) return std::nullopt;
        return merged_context_;
      case AttentionDimSource::Kind::kContext:
        if (context_.empty()) return std::nullopt;
        return context_;
      case AttentionDimSource::Kind::kOperandHeads:
        if (source.index < 0 || source.index > 2 || heads_[source.index].empty()) return std::nullopt;
        return heads_[source.index];
    }
    return std::nullopt;
  }

  // A Reshape or Expand target's values, as the body's shape ops would compute them.
  std::optional<std::vector<int64_t>> Target(const AttentionReshape& reshape) const {
    std::vector<int64_t> target;
    for (const AttentionShapePart& part : reshape.parts) {
      switch (part.kind) {
        case ShapePartMatch::Kind::kConstant: target.insert(target.end(), part.constant.begin(), part.constant.end()); break;
        case ShapePartMatch::Kind::kDimOf: {
          std::optional<std::vector<int64_t>> dims = DimsOf(part.of);
          if (!dims) return std::nullopt;
          std::optional<int64_t> axis = NormalizedAxis(part.axis, static_cast<int64_t>(dims->size()));
          if (!axis) return std::nullopt;
          target.push_back((*dims)[static_cast<size_t>(*axis)]);
          break;
        }
        case ShapePartMatch::Kind::kValues: {
          std::optional<std::vector<int64_t>> values = in_.values(part.input);
          if (!values) return std::nullopt;
          target.insert(target.end(), values->begin(), values->end());
          break;
        }
      }
    }
    return target;
  }

  // The operand's source as a strided view: a Split output is a column slice of the combined input.
  std::optional<std::pair<int, StridedView>> Source(const AttentionOperand& operand) const {
    if (operand.split_output >= 0) {
      const auto output = static_cast<size_t>(operand.split_output);
      if (output >= split_dims_.size()) return std::nullopt;
      return std::make_pair(a_.combined_input, Contiguous(split_dims_[output], combined_width_, split_offsets_[output]));
    }
    std::optional<std::vector<int64_t>> dims = in_.dims(operand.input);
    if (!dims || dims->empty()) return std::nullopt;
    return std::make_pair(operand.input, Contiguous(*dims, dims->back(), 0));
  }

  // The operand's heads-first [B,H,S,D] view over its own heads (a repeat is Repeated's).
  std::optional<OperandLayout> PlanOperand(const AttentionOperand& operand, int role) {
    std::optional<std::pair<int, StridedView>> source = Source(operand);
    if (!source) return std::nullopt;
    StridedView view = source->second;
    switch (operand.layout) {
      case HeadLayout::kHeadsFirst:
        if (view.dims.size() != 4) return std::nullopt;
        break;
      case HeadLayout::kHeadsFirstTransposed:  // K as [B,H,D,Sk]
        if (view.dims.size() != 4) return std::nullopt;
        view = Permuted(view, {0, 1, 3, 2});
        break;
      case HeadLayout::kSplitHeads: {
        // [B,S,H·D] reshaped to [B,S,H,D] (or [B,S,H,D] itself), then heads first.
        if (operand.split) {
          std::optional<std::vector<int64_t>> target = Target(*operand.split);
          if (!target) return std::nullopt;
          const std::vector<int64_t> sizes = view.Sizes();
          std::optional<std::vector<int64_t>> resolved = ResolvedReshape(sizes, *target, operand.split->allow_zero);
          if (!resolved || resolved->size() != 4 || (*resolved)[2] * (*resolved)[3] != sizes.back()) return std::nullopt;
          std::optional<StridedView> reshaped = Reshaped(view, *resolved);
          if (!reshaped) return std::nullopt;
          view = *reshaped;
        } else if (view.dims.size() != 4) {
          return std::nullopt;
        }
        view = Permuted(view, {0, 2, 1, 3});
        break;
      }
      case HeadLayout::kView: {
        for (const AttentionViewStep& step : operand.view) {
          if (!ApplyStep(step, view)) return std::nullopt;
        }
        if (view.dims.size() != 4) return std::nullopt;
        // K's chain ends where the MatMul core reads it, [B,H,D,Sk] — unless it ends beneath a
        // rotary, at the heads-first value the rotary turns.
        if (role == 1 && !a_.op && !operand.rotary) view = Permuted(view, {0, 1, 3, 2});
        break;
      }
    }
    std::optional<int64_t> strides[4];
    for (size_t axis = 0; axis < 4; ++axis) {
      if (!(strides[axis] = StrideOf(view.dims[axis]))) return std::nullopt;  // no stride addresses it
    }
    const std::vector<int64_t> sizes = view.Sizes();
    OperandLayout out;
    out.input = source->first;
    out.offset = view.offset;
    out.batch = sizes[0], out.heads = sizes[1], out.rows = sizes[2], out.columns = sizes[3];
    out.batch_stride = *strides[0], out.head_stride = *strides[1];
    out.row_stride = *strides[2], out.column_stride = *strides[3];
    heads_[role] = sizes;
    return out;
  }

  // One layout step of a kView operand; false where it fails as the op would, or where a
  // strided view cannot express a Reshape.
  bool ApplyStep(const AttentionViewStep& step, StridedView& view) const {
    const auto rank = static_cast<int64_t>(view.dims.size());
    switch (step.kind) {
      case AttentionViewStep::Kind::kTranspose:
        if (static_cast<int64_t>(step.ints.size()) != rank || !IsPermutation(step.ints)) return false;
        view = Permuted(view, step.ints);
        return true;
      case AttentionViewStep::Kind::kUnsqueeze: {
        const int64_t out_rank = rank + static_cast<int64_t>(step.ints.size());
        std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
        for (int64_t axis : step.ints) {
          std::optional<int64_t> at = NormalizedAxis(axis, out_rank);
          if (!at || inserted[static_cast<size_t>(*at)]) return false;
          inserted[static_cast<size_t>(*at)] = true;
        }
        std::vector<ViewDim> dims;
        size_t next = 0;
        for (int64_t i = 0; i < out_rank; ++i) dims.push_back(inserted[static_cast<size_t>(i)] ? ViewDim() : view.dims[next++]);
        view.dims = std::move(dims);
        return true;
      }
      case AttentionViewStep::Kind::kSqueeze: {
        std::vector<bool> removed(static_cast<size_t>(rank), false);
        for (int64_t axis : step.ints) {
          std::optional<int64_t> at = NormalizedAxis(axis, rank);
          if (!at || SizeOf(view.dims[static_cast<size_t>(*at)]) != 1) return false;
          removed[static_cast<size_t>(*at)] = true;
        }
        std::vector<ViewDim> dims;
        for (int64_t i = 0; i < rank; ++i) {
          if (!removed[static_cast<size_t>(i)]) dims.push_back(view.dims[static_cast<size_t>(i)]);
        }
        view.dims = std::move(dims);
        return true;
      }
      case AttentionViewStep::Kind::kGather: {
        std::optional<int64_t> axis = NormalizedAxis(step.axis, rank);
        if (!axis) return false;
        const ViewDim& dim = view.dims[static_cast<size_t>(*axis)];
        const int64_t size = SizeOf(dim);
        int64_t index = step.index < 0 ? step.index + size : step.index;
        if (index < 0 || index >= size) return false;
        for (size_t f = dim.size(); f-- > 0;) {  // the index's coordinate in each factor, inner first
          view.offset += (index % dim[f].size) * dim[f].stride;
          index /= dim[f].size;
        }
        view.dims.erase(view.dims.begin() + *axis);
        return true;
      }
      case AttentionViewStep::Kind::kSplit: {
        std::optional<int64_t> axis = NormalizedAxis(step.axis, rank);
        if (!axis) return false;
        ViewDim& dim = view.dims[static_cast<size_t>(*axis)];
        std::optional<std::vector<int64_t>> given = GivenSizes(step.sizes, step.ints);
        std::optional<std::vector<int64_t>> sizes = given ? SplitSizes(*given, step.outputs, SizeOf(dim)) : std::nullopt;
        if (!sizes || step.index < 0 || step.index >= step.outputs) return false;
        int64_t start = 0;
        for (int64_t i = 0; i < step.index; ++i) start += (*sizes)[static_cast<size_t>(i)];
        return Sliced(dim, start, (*sizes)[static_cast<size_t>(step.index)], view.offset);
      }
      case AttentionViewStep::Kind::kReshape: {
        std::optional<std::vector<int64_t>> target = Target(step.reshape);
        if (!target) return false;
        std::optional<std::vector<int64_t>> resolved =
            ResolvedReshape(view.Sizes(), *target, step.reshape.allow_zero);
        if (!resolved) return false;
        std::optional<StridedView> reshaped = Reshaped(view, *resolved);
        if (!reshaped) return false;
        view = std::move(*reshaped);
        return true;
      }
    }
    return false;
  }

  // A repeated K or V: Expand of [B,Hkv,1,S,D] to [B,Hkv,n,S,D], then Reshape to [B,Hkv·n,S,D],
  // exactly as the body's ops would compute it with Hkv·n the queries' heads.
  // Without a repeat, one K or V head broadcasts over every query head as the products
  // broadcast it (multi-query attention, Falcon's): a group of all the heads.
  bool Repeated(const AttentionOperand& operand, OperandLayout& layout, int64_t heads) const {
    if (!operand.repeat && layout.heads == 1 && heads > 1) {
      layout.group = heads;
      return true;
    }
    if (!operand.repeat) return layout.heads == heads;
    const std::vector<int64_t> x = {layout.batch, layout.heads, layout.rows, layout.columns};
    std::optional<std::vector<int64_t>> expand = Target(operand.repeat->expand_shape);
    if (!expand || expand->size() != 5) return false;
    const std::vector<int64_t> unsqueezed = {x[0], x[1], 1, x[2], x[3]};
    std::vector<int64_t> expanded(5);
    for (size_t i = 0; i < 5; ++i) {  // Expand broadcasts both ways; only the repeat axis may grow
      const int64_t want = (*expand)[i];
      if (want != unsqueezed[i] && want != 1 && !(i == 2 && want > 0)) return false;
      expanded[i] = i == 2 ? want : unsqueezed[i];
    }
    std::optional<std::vector<int64_t>> target = Target(operand.repeat->reshape_shape);
    if (!target) return false;
    std::optional<std::vector<int64_t>> merged = ResolvedReshape(expanded, *target, false);
    if (merged != std::vector<int64_t>{x[0], x[1] * expanded[2], x[2], x[3]} || x[1] * expanded[2] != heads) return false;
    layout.group = expanded[2];
    return true;
  }

  // The rotary tables broadcasting to the operand's [B,H,S,D] value: [B|1, S, W], W = D, or D/2
  // for RotaryEmbedding-23's caches, with leading unit dims (a head axis must be 1).
  bool Rotary(const AttentionOperand& operand, const std::vector<int64_t>& x, std::optional<RotaryLayout>& out) const {
    if (!operand.rotary) return true;
    const AttentionRotary& form = *operand.rotary;
    std::optional<int64_t> turned = Turned(form, x[3]);
    if (!turned) return false;
    const int64_t depth = *turned, width = form.op ? depth / 2 : depth;
    if (depth % 2 != 0 || (form.half != 0 && form.half * 2 != depth)) return false;
    if (form.split_sizes >= 0 && in_.values(form.split_sizes) != std::vector<int64_t>{depth / 2, depth / 2}) return false;
    if (!PairsFlattenBack(form, x, depth)) return false;
    std::optional<std::vector<int64_t>> cos = in_.dims(form.cos), sin = in_.dims(form.sin);
    if (!cos || cos != sin) return false;
    const std::vector<int64_t>& dims = *cos;
    const size_t rank = dims.size();
    // Before the head split (GPT-J) a 4-D table is [B|1, S, 1, W]: the same rows.
    const bool before_heads = form.before_heads && !form.op && rank == 4;
    const int64_t positions = before_heads ? dims[1] : dims[rank - 2];
    if (rank < 2 || rank > (form.op ? 3u : 4u) || dims[rank - 1] != width || positions != x[2]) return false;
    if (!form.op && rank == 4 && (before_heads ? dims[2] : dims[1]) != 1) return false;
    const int64_t batch = rank >= 3 ? dims[0] : 1;
    if (batch != 1 && batch != x[0]) return false;
    RotaryLayout rotary;
    rotary.cos = form.cos, rotary.sin = form.sin;
    rotary.batch_stride = batch == 1 ? 0 : x[2] * width;
    rotary.row_stride = width;
    rotary.full_width = !form.op;
    rotary.interleaved = form.interleaved;
    rotary.dims = depth;
    out = rotary;
    return true;
  }

  // The interleaved form stacks each pair on a new last axis and flattens it back: its Reshape
  // target this run must give the turned value's own shape ([B,S,H,r] before the head split,
  // [B,H,S,r] after), or the form computes something else.
  bool PairsFlattenBack(const AttentionRotary& form, const std::vector<int64_t>& x, int64_t depth) const {
    if (!form.pair_target.present()) return !(form.interleaved && !form.op);
    std::optional<std::vector<int64_t>> target = GivenSizes(form.pair_target, {});
    if (!target) return false;
    std::vector<int64_t> turned = form.before_heads ? std::vector<int64_t>{x[0], x[2], x[1], depth}
                                                    : std::vector<int64_t>{x[0], x[1], x[2], depth};
    std::vector<int64_t> stacked = turned;
    stacked.back() = depth / 2;
    stacked.push_back(2);
    return ResolvedReshape(stacked, *target, form.pair_allow_zero) == std::optional<std::vector<int64_t>>(turned);
  }

  // The features the rotary turns, a prefix of each head of `depth`: all of them, or a partial
  // form's r — the first of the two parts its Split cuts the head into this run.
  std::optional<int64_t> Turned(const AttentionRotary& form, int64_t depth) const {
    if (!form.partial) return depth;
    std::optional<std::vector<int64_t>> given = GivenSizes(form.part_sizes, form.part_attribute);
    std::optional<std::vector<int64_t>> sizes = given ? SplitSizes(*given, 2, depth) : std::nullopt;
    if (!sizes || sizes->front() <= 0) return std::nullopt;
    return sizes->front();
  }

  // The mask's and the score bias's strides: each broadcasts to [B,H,Sq,Sk] without widening it
  // (Attention-23 pads a short mask, which the body's ops then do).
  bool MaskAndBias(AttentionLayout& layout) const {
    if (a_.mask_kind != AttentionMaskKind::kNone && !(layout.mask_strides = BroadcastStrides(a_.mask, layout))) {
      return false;
    }
    return !a_.bias.present() || (layout.bias_strides = BroadcastStrides(a_.bias, layout)).has_value();
  }

  std::optional<std::array<int64_t, 4>> BroadcastStrides(const AttentionInput& term, const AttentionLayout& layout) const {
    std::optional<std::vector<int64_t>> dims =
        term.input >= 0 ? in_.dims(term.input)
                        : (term.constant ? std::optional<std::vector<int64_t>>(term.constant->dims()) : std::nullopt);
    if (!dims || dims->size() > 4) return std::nullopt;
    const int64_t target[4] = {layout.batch, layout.heads, layout.queries, layout.keys};
    const size_t offset = 4 - dims->size();
    std::array<int64_t, 4> strides = {0, 0, 0, 0};
    int64_t stride = 1;
    for (size_t axis = dims->size(); axis-- > 0;) {
      const int64_t dim = (*dims)[axis];
      if (dim != target[offset + axis] && dim != 1) return std::nullopt;
      strides[offset + axis] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
    return strides;
  }

  bool Output(AttentionLayout& layout) {
    context_ = {layout.batch, layout.heads, layout.queries, layout.value_depth};
    if (a_.merge_view) {  // a Reshape of the context to its own shape
      std::optional<std::vector<int64_t>> target = Target(*a_.merge_view);
      if (!target || ResolvedReshape(context_, *target, a_.merge_view->allow_zero) != context_) return false;
    }
    if (!a_.merge) {
      layout.output_dims = context_;
      layout.output_batch_stride = layout.heads * layout.queries * layout.value_depth;
      layout.output_head_stride = layout.queries * layout.value_depth;
      layout.output_row_stride = layout.value_depth;
      return true;
    }
    // The context transposed by the merge's perm (the features stay innermost), stored
    // contiguously, then reshaped: each context dim's stride in that order.
    const std::vector<int64_t>& perm = a_.merge_perm;
    if (perm.size() != 4 || !IsPermutation(perm) || perm[3] != 3) return false;
    merged_context_.assign(4, 0);
    for (size_t i = 0; i < 4; ++i) merged_context_[i] = context_[static_cast<size_t>(perm[i])];
    std::optional<std::vector<int64_t>> target = Target(*a_.merge);
    if (!target) return false;
    std::optional<std::vector<int64_t>> merged = ResolvedReshape(merged_context_, *target, a_.merge->allow_zero);
    if (!merged) return false;
    layout.output_dims = *merged;
    int64_t strides[4] = {0, 0, 0, 0};
    int64_t stride = 1;
    for (size_t i = 4; i-- > 0;) {
      strides[perm[i]] = stride;
      stride *= merged_context_[i];
    }
    layout.output_batch_stride = strides[0];
    layout.output_head_stride = strides[1];
    layout.output_row_stride = strides[2];
    return true;
  }

  const FusedAttention& a_;
  const AttentionInputs& in_;
  std::vector<std::vector<int64_t>> split_dims_;  // per Split output
  std::vector<int64_t> split_offsets_;            // per Split output: its first column
  int64_t combined_width_ = 0;
  std::vector<int64_t> merged_context_;  // [B,Sq,H,Dv] once known
  std::vector<int64_t> context_;         // [B,H,Sq,Dv] once known
  std::vector<int64_t> heads_[3];        // Q's, K's, V's [B,H,S,D] once planned
};

}  // namespace

std::optional<AttentionLayout> LayOutAttention(const FusedAttention& attention, const AttentionInputs& inputs) {
  return Planner(attention, inputs).Plan();
}

}  // namespace fusionopt
