// The fused attention kernel (patterns/attention.h): an outlined attention body — the core
// (Softmax(Q·Kᵀ·scale + mask)·V, or a standard Attention node) with the head split and merge,
// rotary embedding, grouped-query repeat and scales around it — run by the attention engine
// (attention/engine.h) as one kernel that never holds the Sq×Sk score matrix.
//
// Q, K and V are read where they lie through leading dimensions: a [B,S,H·D] tensor, a column
// slice of the combined [B,S,3·H·D] projection, or a [B,H,S,D] (K also [B,H,D,S]) tensor; a
// repeated K or V is read once per group of query heads; the output is written as [B,Sq,H·D]
// when the head merge is part of the body, else [B,H,Sq,D].
//
// Each run checks the shapes the body's ops would see: the Split along the last axis with sizes
// that add up, every Reshape and Expand target (evaluated as the op would) splitting [B,S,H·D]
// into [B,S,H,D], repeating heads and merging back, the rotary halves and tables fitting the
// operand, equal batch and heads for Q, K and V, the softmax over the last axis, a mask
// broadcasting to [B,H,Sq,Sk] without widening it. Anything else — and any dtype but float32
// and float16 — returns 0: the body then runs op by op.
#include <cmath>
#include <limits>
#include <optional>

#include "cpu_runtime/attention/engine.h"
#include "cpu_runtime/fused/body.h"
#include "ir/float16.h"
#include "ir/permutation.h"
#include "patterns/attention.h"
#include "patterns/composite.h"

namespace fusionopt::cpu {
namespace {

using attention::EmptyRows;
using attention::MaskKind;
using attention::Operand;
using attention::Problem;
using attention::Rotary;

// Reshape's target for `input` dims: 0 copies the input's dim (unless allow_zero), one -1 is
// inferred; nullopt when Reshape would fail.
std::optional<std::vector<int64_t>> ReshapeTarget(const std::vector<int64_t>& input, std::vector<int64_t> target,
                                                  bool allow_zero) {
  int64_t total = 1, known = 1;
  for (int64_t dim : input) {
    if (__builtin_mul_overflow(total, dim, &total)) return std::nullopt;
  }
  std::optional<size_t> inferred;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (i >= input.size()) return std::nullopt;
      target[i] = input[i];
    }
    if (target[i] == -1) {
      if (inferred) return std::nullopt;
      inferred = i;
      continue;
    }
    if (target[i] < 0 || __builtin_mul_overflow(known, target[i], &known)) return std::nullopt;
  }
  if (inferred) {
    if (known == 0 || total % known != 0) return std::nullopt;
    target[*inferred] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return target;
}

bool IsAttentionFloat(DataType dtype) { return dtype == DataType::kFloat || dtype == DataType::kFloat16; }

// A strided view of a source tensor: element (i...) at offset + Σ i·stride (elements).
struct StridedView {
  std::vector<int64_t> dims, strides;
  int64_t offset = 0;
};

// `dims` row-major, rows (the last dim) `ld` elements apart: a Split output is a column slice.
StridedView Contiguous(const std::vector<int64_t>& dims, int64_t ld) {
  StridedView view;
  view.dims = dims;
  view.strides.assign(dims.size(), 1);
  int64_t stride = ld;
  for (size_t axis = dims.size(); axis-- > 1;) {
    view.strides[axis - 1] = stride;
    stride *= dims[axis - 1];
  }
  return view;
}

// `view` reshaped to `target` (resolved), when a strided view can express it: every run of
// source dims merged into one target dim must be contiguous among themselves (PyTorch's rule).
std::optional<StridedView> Reshaped(const StridedView& view, const std::vector<int64_t>& target) {
  StridedView out;
  out.offset = view.offset;
  out.dims = target;
  out.strides.assign(target.size(), 0);
  // Drop unit dims of the source; they can go anywhere.
  std::vector<int64_t> dims, strides;
  for (size_t i = 0; i < view.dims.size(); ++i) {
    if (view.dims[i] != 1) dims.push_back(view.dims[i]), strides.push_back(view.strides[i]);
  }
  size_t source = 0;
  for (size_t t = 0; t < target.size(); ++t) {
    if (target[t] == 1) {
      out.strides[t] = 0;
      continue;
    }
    // Take source dims (each contiguous with the next) until their product is target[t], or
    // split one source dim when target[t] divides it.
    if (source >= dims.size()) return std::nullopt;
    int64_t size = dims[source];
    if (size % target[t] == 0 && size != target[t]) {  // split dims[source]
      const int64_t inner = size / target[t];
      out.strides[t] = strides[source] * inner;
      dims[source] = inner;
      continue;
    }
    int64_t product = size;
    int64_t stride = strides[source];
    ++source;
    while (product < target[t] && source < dims.size()) {
      if (strides[source - 1] != strides[source] * dims[source]) return std::nullopt;  // not contiguous
      product *= dims[source];
      stride = strides[source];
      ++source;
    }
    if (product != target[t]) return std::nullopt;
    out.strides[t] = stride;
  }
  if (source != dims.size()) return std::nullopt;
  return out;
}

// A tensor the kernel reads: a Split output is a column slice of the combined input.
struct Source {
  const uint8_t* data = nullptr;
  DataType dtype = DataType::kFloat;
  std::vector<int64_t> dims;
  int64_t ld = 0;  // elements between rows (the last dim, or the combined tensor's)
};

// An operand's matrices, with the dims of its heads-first [B,H,S,D] value (before any repeat).
struct OperandPlan {
  Operand matrix;
  std::vector<int64_t> heads_first;
};

class FusedAttentionKernel final : public FusedBodyKernel {
 public:
  explicit FusedAttentionKernel(FusedAttention attention) : attention_(std::move(attention)) {
    for (double prescale : {attention_.q.prescale, attention_.k.prescale}) prescale_ *= prescale;
    // A scale goes into the GEMM's alpha where that computes what the body does: a product, or
    // a division by a power of two (its reciprocal is exact). Another divisor stays a division
    // of each score.
    if (attention_.scale) {
      const float scale = static_cast<float>(*attention_.scale);
      int exponent = 0;
      const bool power_of_two = std::frexp(scale, &exponent) == 0.5f;
      if (!attention_.scale_divides) {
        scale_ = scale;
      } else if (power_of_two) {
        scale_ = 1.0f / scale;
      } else {
        divisor_ = scale;
      }
    }
    if (attention_.mask.constant) mask_constant_ = RtTensor::WrapConstant(attention_.mask.constant);
    if (attention_.split_sizes.constant) sizes_constant_ = RtTensor::WrapConstant(attention_.split_sizes.constant);
  }

  Result<int> Compute(KernelContext& context) override {
    Shapes shapes;
    OperandPlan q, k, v;
    if (!Combined(context, shapes) || !Plan(context, shapes, attention_.q, q) ||
        !Plan(context, shapes, attention_.k, k, /*key_transposed=*/!attention_.op) ||
        !Plan(context, shapes, attention_.v, v)) {
      return 0;
    }
    shapes.heads[0] = q.heads_first, shapes.heads[1] = k.heads_first, shapes.heads[2] = v.heads_first;
    Problem problem;
    problem.q = q.matrix, problem.k = k.matrix, problem.v = v.matrix;
    problem.batch = q.matrix.batch, problem.heads = q.matrix.heads;
    problem.queries = q.matrix.rows, problem.keys = k.matrix.rows;
    problem.depth = q.matrix.columns, problem.value_depth = v.matrix.columns;
    if (!SameDtype(problem) || !Repeated(context, shapes, attention_.k, k, problem.heads) ||
        !Repeated(context, shapes, attention_.v, v, problem.heads) || !attention::Consistent(problem)) {
      return 0;
    }
    if (!attention_.op && NormalizedAxis(attention_.softmax_axis, 4) != 3) return 0;
    std::vector<float> q_tables, k_tables;
    if (!RotaryOf(context, attention_.q, q.heads_first, q_tables, problem.q_rotary) ||
        !RotaryOf(context, attention_.k, k.heads_first, k_tables, problem.k_rotary) || !Mask(context, problem)) {
      return 0;
    }
    Scores(problem);
    if (!Output(context, shapes, problem)) return 0;
    FUSIONOPT_RETURN_IF_ERROR(attention::Run(problem));
    return 1;
  }

 private:
  // What one run learns about the body's values, for the Reshape targets that read their dims.
  struct Shapes {
    const uint8_t* combined = nullptr;  // the combined projection's data
    DataType combined_dtype = DataType::kFloat;
    int64_t combined_width = 0;
    std::vector<std::vector<int64_t>> split_dims;  // per Split output
    std::vector<int64_t> split_offsets;            // per Split output: its first column
    std::vector<int64_t> merged_context;           // [B,Sq,H,Dv] once known
    std::vector<int64_t> context;                  // [B,H,Sq,Dv] once known
    std::vector<int64_t> heads[3];                 // Q's, K's, V's [B,H,S,D] once planned
  };

  const RtTensor* Input(const KernelContext& context, const AttentionInput& input, const RtTensor& constant) const {
    if (input.input >= 0) return context.input(static_cast<size_t>(input.input));
    return input.constant ? &constant : nullptr;
  }

  static bool SameDtype(const Problem& problem) {
    return problem.k.dtype == problem.q.dtype && problem.v.dtype == problem.q.dtype;
  }

  // The combined projection's Split: its outputs' dims and column offsets.
  bool Combined(const KernelContext& context, Shapes& shapes) const {
    if (!attention_.combined) return true;
    const RtTensor* combined = context.input(static_cast<size_t>(attention_.combined_input));
    if (combined == nullptr || !IsAttentionFloat(combined->dtype()) || combined->rank() < 2) return false;
    const int64_t rank = static_cast<int64_t>(combined->rank());
    if (NormalizedAxis(attention_.split_axis, rank) != rank - 1) return false;
    const int64_t total = combined->dims().back();
    const int64_t outputs = attention_.split_outputs;
    std::vector<int64_t> sizes = attention_.split_attribute;
    if (const RtTensor* given = Input(context, attention_.split_sizes, sizes_constant_)) {
      if (given->dtype() != DataType::kInt64) return false;
      sizes = given->ToInt64s();
    }
    if (sizes.empty()) {  // equal parts, the last one smaller when they do not divide (opset 18)
      const int64_t part = (total + outputs - 1) / outputs;
      for (int64_t i = 0; i < outputs; ++i) sizes.push_back(std::min(part, total - i * part));
    }
    int64_t offset = 0;
    if (static_cast<int64_t>(sizes.size()) != outputs) return false;
    for (int64_t size : sizes) {
      if (size < 0) return false;
      std::vector<int64_t> dims = combined->dims();
      dims.back() = size;
      shapes.split_dims.push_back(std::move(dims));
      shapes.split_offsets.push_back(offset);
      offset += size;
    }
    if (offset != total) return false;
    shapes.combined = combined->raw();
    shapes.combined_dtype = combined->dtype();
    shapes.combined_width = total;
    return true;
  }

  std::optional<std::vector<int64_t>> DimsOf(const KernelContext& context, const Shapes& shapes,
                                             const AttentionDimSource& source) const {
    switch (source.kind) {
      case AttentionDimSource::Kind::kInput: {
        const RtTensor* input = context.input(static_cast<size_t>(source.index));
        if (input == nullptr) return std::nullopt;
        return input->dims();
      }
      case AttentionDimSource::Kind::kSplitOutput:
        if (static_cast<size_t>(source.index) >= shapes.split_dims.size()) return std::nullopt;
        return shapes.split_dims[static_cast<size_t>(source.index)];
      case AttentionDimSource::Kind::kMergedContext:
        if (shapes.merged_context.empty()) return std::nullopt;
        return shapes.merged_context;
      case AttentionDimSource::Kind::kContext:
        if (shapes.context.empty()) return std::nullopt;
        return shapes.context;
      case AttentionDimSource::Kind::kOperandHeads:
        if (source.index < 0 || source.index > 2 || shapes.heads[source.index].empty()) return std::nullopt;
        return shapes.heads[source.index];
    }
    return std::nullopt;
  }

  // A Reshape or Expand target's values, as the body's shape ops would compute them this run.
  std::optional<std::vector<int64_t>> Target(const KernelContext& context, const Shapes& shapes,
                                             const AttentionReshape& reshape) const {
    std::vector<int64_t> target;
    for (const AttentionShapePart& part : reshape.parts) {
      switch (part.kind) {
        case ShapePartMatch::Kind::kConstant:
          target.insert(target.end(), part.constant.begin(), part.constant.end());
          break;
        case ShapePartMatch::Kind::kDimOf: {
          std::optional<std::vector<int64_t>> dims = DimsOf(context, shapes, part.of);
          if (!dims) return std::nullopt;
          std::optional<int64_t> axis = NormalizedAxis(part.axis, static_cast<int64_t>(dims->size()));
          if (!axis) return std::nullopt;
          target.push_back((*dims)[static_cast<size_t>(*axis)]);
          break;
        }
        case ShapePartMatch::Kind::kValues: {
          const RtTensor* values = context.input(static_cast<size_t>(part.input));
          if (values == nullptr || values->dtype() != DataType::kInt64 || values->rank() > 1) return std::nullopt;
          std::vector<int64_t> read = values->ToInt64s();
          target.insert(target.end(), read.begin(), read.end());
          break;
        }
      }
    }
    return target;
  }

  bool SourceOf(const KernelContext& context, const Shapes& shapes, const AttentionOperand& operand,
                Source& source) const {
    if (operand.split_output >= 0) {
      const size_t output = static_cast<size_t>(operand.split_output);
      if (output >= shapes.split_dims.size()) return false;
      source.dtype = shapes.combined_dtype;
      source.data = shapes.combined + shapes.split_offsets[output] * static_cast<int64_t>(BitsOf(source.dtype) / 8);
      source.dims = shapes.split_dims[output];
      source.ld = shapes.combined_width;
      return true;
    }
    const RtTensor* tensor = context.input(static_cast<size_t>(operand.input));
    if (tensor == nullptr || !IsAttentionFloat(tensor->dtype()) || tensor->rank() == 0) return false;
    source.data = tensor->raw();
    source.dtype = tensor->dtype();
    source.dims = tensor->dims();
    source.ld = source.dims.back();
    return true;
  }

  // The operand's matrices over its own heads (a repeat is applied by Repeated).
  bool Plan(const KernelContext& context, const Shapes& shapes, const AttentionOperand& operand,
            OperandPlan& plan, bool key_transposed = false) const {
    Source source;
    if (!SourceOf(context, shapes, operand, source)) return false;
    Operand& matrix = plan.matrix;
    matrix.base = source.data;
    matrix.dtype = source.dtype;
    if (operand.layout == HeadLayout::kView) return PlanView(context, shapes, operand, source, key_transposed, plan);
    if (operand.layout != HeadLayout::kSplitHeads) {
      // [B,H,S,D], or K as [B,H,D,S]: contiguous heads.
      if (source.dims.size() != 4) return false;
      const bool transposed = operand.layout == HeadLayout::kHeadsFirstTransposed;
      matrix.batch = source.dims[0];
      matrix.heads = source.dims[1];
      matrix.rows = transposed ? source.dims[3] : source.dims[2];
      matrix.columns = transposed ? source.dims[2] : source.dims[3];
      matrix.head_stride = source.dims[2] * source.dims[3];
      matrix.batch_stride = matrix.heads * matrix.head_stride;
      matrix.ld = source.dims[3];
      matrix.transposed = transposed;
      plan.heads_first = {matrix.batch, matrix.heads, matrix.rows, matrix.columns};
      return true;
    }
    // Split heads: rows of H·D features, each head a column block.
    std::vector<int64_t> heads_dims;  // [B,S,H,D]
    if (operand.split) {
      std::optional<std::vector<int64_t>> target = Target(context, shapes, *operand.split);
      if (!target) return false;
      std::optional<std::vector<int64_t>> resolved = ReshapeTarget(source.dims, *target, operand.split->allow_zero);
      if (!resolved || resolved->size() != 4 || (*resolved)[2] * (*resolved)[3] != source.dims.back()) return false;
      heads_dims = *resolved;
    } else {
      if (source.dims.size() != 4) return false;
      heads_dims = source.dims;
      source.ld = heads_dims[2] * heads_dims[3];
    }
    matrix.batch = heads_dims[0];
    matrix.rows = heads_dims[1];
    matrix.heads = heads_dims[2];
    matrix.columns = heads_dims[3];
    matrix.ld = source.ld;
    matrix.head_stride = matrix.columns;
    matrix.batch_stride = matrix.rows * matrix.ld;
    plan.heads_first = {matrix.batch, matrix.heads, matrix.rows, matrix.columns};
    return true;
  }

  // One layout step of a kView operand applied to `view`; false where it fails as the op would,
  // or where a strided view cannot express a Reshape.
  bool ApplyStep(const KernelContext& context, const Shapes& shapes, const AttentionViewStep& step,
                 StridedView& view) const {
    const int64_t rank = static_cast<int64_t>(view.dims.size());
    switch (step.kind) {
      case AttentionViewStep::Kind::kTranspose: {
        if (static_cast<int64_t>(step.ints.size()) != rank || !IsPermutation(step.ints)) return false;
        StridedView out = view;
        for (size_t i = 0; i < step.ints.size(); ++i) {
          out.dims[i] = view.dims[static_cast<size_t>(step.ints[i])];
          out.strides[i] = view.strides[static_cast<size_t>(step.ints[i])];
        }
        view = std::move(out);
        return true;
      }
      case AttentionViewStep::Kind::kUnsqueeze: {
        const int64_t out_rank = rank + static_cast<int64_t>(step.ints.size());
        std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
        for (int64_t axis : step.ints) {
          std::optional<int64_t> at = NormalizedAxis(axis, out_rank);
          if (!at || inserted[static_cast<size_t>(*at)]) return false;
          inserted[static_cast<size_t>(*at)] = true;
        }
        StridedView out;
        out.offset = view.offset;
        size_t next = 0;
        for (int64_t i = 0; i < out_rank; ++i) {
          const bool fresh = inserted[static_cast<size_t>(i)];
          out.dims.push_back(fresh ? 1 : view.dims[next]);
          out.strides.push_back(fresh ? 0 : view.strides[next]);
          if (!fresh) ++next;
        }
        view = std::move(out);
        return true;
      }
      case AttentionViewStep::Kind::kSqueeze: {
        std::vector<bool> removed(static_cast<size_t>(rank), false);
        for (int64_t axis : step.ints) {
          std::optional<int64_t> at = NormalizedAxis(axis, rank);
          if (!at || view.dims[static_cast<size_t>(*at)] != 1) return false;
          removed[static_cast<size_t>(*at)] = true;
        }
        StridedView out;
        out.offset = view.offset;
        for (int64_t i = 0; i < rank; ++i) {
          if (removed[static_cast<size_t>(i)]) continue;
          out.dims.push_back(view.dims[static_cast<size_t>(i)]);
          out.strides.push_back(view.strides[static_cast<size_t>(i)]);
        }
        view = std::move(out);
        return true;
      }
      case AttentionViewStep::Kind::kGather: {
        std::optional<int64_t> axis = NormalizedAxis(step.axis, rank);
        if (!axis) return false;
        const int64_t size = view.dims[static_cast<size_t>(*axis)];
        const int64_t index = step.index < 0 ? step.index + size : step.index;
        if (index < 0 || index >= size) return false;
        view.offset += index * view.strides[static_cast<size_t>(*axis)];
        view.dims.erase(view.dims.begin() + *axis);
        view.strides.erase(view.strides.begin() + *axis);
        return true;
      }
      case AttentionViewStep::Kind::kReshape: {
        std::optional<std::vector<int64_t>> target = Target(context, shapes, step.reshape);
        if (!target) return false;
        std::optional<std::vector<int64_t>> resolved = ReshapeTarget(view.dims, *target, step.reshape.allow_zero);
        if (!resolved) return false;
        std::optional<StridedView> reshaped = Reshaped(view, *resolved);
        if (!reshaped) return false;
        view = std::move(*reshaped);
        return true;
      }
    }
    return false;
  }

  // A kView operand: its layout steps composed over the source into a 4-D strided view — [B,H,S,D],
  // or [B,H,D,S] for K as the MatMul core reads it — whose features (or, for that K, its
  // sequence) are contiguous.
  bool PlanView(const KernelContext& context, const Shapes& shapes, const AttentionOperand& operand,
                const Source& source, bool key_transposed, OperandPlan& plan) const {
    StridedView view = Contiguous(source.dims, source.ld);
    for (const AttentionViewStep& step : operand.view) {
      if (!ApplyStep(context, shapes, step, view)) return false;
    }
    if (view.dims.size() != 4) return false;
    Operand& matrix = plan.matrix;
    matrix.batch = view.dims[0];
    matrix.heads = view.dims[1];
    matrix.batch_stride = view.strides[0];
    matrix.head_stride = view.strides[1];
    const size_t sequence = key_transposed ? 3 : 2, features = key_transposed ? 2 : 3;
    matrix.rows = view.dims[sequence];
    matrix.columns = view.dims[features];
    if (view.strides[features] == 1 || matrix.columns == 1) {
      matrix.ld = view.strides[sequence];
      matrix.transposed = false;
    } else if (view.strides[sequence] == 1 || matrix.rows == 1) {
      matrix.ld = view.strides[features];  // stored [D, S]: element (s, d) at d·ld + s
      matrix.transposed = true;
    } else {
      return false;  // neither axis contiguous: no matrix the GEMM reads
    }
    if (view.strides[0] < 0 || view.strides[1] < 0 || matrix.ld <= 0) return false;
    matrix.base = source.data + view.offset * static_cast<int64_t>(BitsOf(source.dtype) / 8);
    plan.heads_first = {matrix.batch, matrix.heads, matrix.rows, matrix.columns};
    return true;
  }

  // A repeated K or V: Expand of [B,Hkv,1,S,D] to [B,Hkv,n,S,D], then Reshape to [B,Hkv·n,S,D],
  // exactly as the body's ops would compute this run with Hkv·n the queries' heads.
  bool Repeated(const KernelContext& context, const Shapes& shapes, const AttentionOperand& operand,
                const OperandPlan& plan, int64_t heads) const {
    if (!operand.repeat) return plan.matrix.heads == heads;
    const std::vector<int64_t>& x = plan.heads_first;
    std::optional<std::vector<int64_t>> expand = Target(context, shapes, operand.repeat->expand_shape);
    if (!expand || expand->size() != 5) return false;
    const std::vector<int64_t> unsqueezed = {x[0], x[1], 1, x[2], x[3]};
    std::vector<int64_t> expanded(5);
    for (size_t i = 0; i < 5; ++i) {  // Expand broadcasts both ways; only the repeat axis may grow
      const int64_t want = (*expand)[i];
      if (want != unsqueezed[i] && want != 1 && !(i == 2 && want > 0)) return false;
      expanded[i] = i == 2 ? want : unsqueezed[i];
    }
    std::optional<std::vector<int64_t>> target = Target(context, shapes, operand.repeat->reshape_shape);
    if (!target) return false;
    std::optional<std::vector<int64_t>> merged = ReshapeTarget(expanded, *target, false);
    return merged == std::vector<int64_t>{x[0], x[1] * expanded[2], x[2], x[3]} && x[1] * expanded[2] == heads;
  }

  // The rotary tables broadcasting to the operand's [B,H,S,D] value as float32 [B|1, S, W]
  // (W = D, or D/2 for RotaryEmbedding-23's caches [B,S,D/2]).
  bool RotaryOf(const KernelContext& context, const AttentionOperand& operand, const std::vector<int64_t>& x,
                std::vector<float>& tables, std::optional<Rotary>& rotary) const {
    if (!operand.rotary) return true;
    const AttentionRotary& form = *operand.rotary;
    const int64_t depth = x[3], width = form.op ? depth / 2 : depth;
    if (depth % 2 != 0 || (form.half != 0 && form.half * 2 != depth)) return false;
    if (form.split_sizes >= 0) {  // the halves' Split sizes, read at run time
      const RtTensor* sizes = context.input(static_cast<size_t>(form.split_sizes));
      if (sizes == nullptr || sizes->dtype() != DataType::kInt64 ||
          sizes->ToInt64s() != std::vector<int64_t>{depth / 2, depth / 2}) {
        return false;
      }
    }
    const RtTensor* cos = context.input(static_cast<size_t>(form.cos));
    const RtTensor* sin = context.input(static_cast<size_t>(form.sin));
    if (cos == nullptr || sin == nullptr || cos->dims() != sin->dims() || !IsAttentionFloat(cos->dtype()) ||
        cos->dtype() != sin->dtype()) {
      return false;
    }
    // Aligned right: [.., S, W]; a head axis must be 1; a batch axis 1 or B.
    const std::vector<int64_t>& dims = cos->dims();
    const size_t rank = dims.size();
    if (rank < 2 || rank > (form.op ? 3u : 4u) || dims[rank - 1] != width || dims[rank - 2] != x[2]) return false;
    int64_t batch = 1;
    if (!form.op && rank == 4 && dims[1] != 1) return false;
    if (rank >= 3) batch = dims[0];
    if (batch != 1 && batch != x[0]) return false;
    const int64_t count = batch * x[2] * width;
    tables.resize(static_cast<size_t>(2 * count));
    for (int64_t i = 0; i < count; ++i) {
      tables[static_cast<size_t>(i)] = static_cast<float>(cos->ValueAsDouble(i));
      tables[static_cast<size_t>(count + i)] = static_cast<float>(sin->ValueAsDouble(i));
    }
    Rotary out;
    out.cos = tables.data();
    out.sin = tables.data() + count;
    out.batch_stride = batch == 1 ? 0 : x[2] * width;
    out.row_stride = width;
    out.dims = depth;
    out.interleaved = form.interleaved;
    out.full_width = !form.op;
    rotary = out;
    return true;
  }

  bool Mask(const KernelContext& context, Problem& problem) const {
    if (attention_.mask_kind == AttentionMaskKind::kNone) return true;
    const RtTensor* mask = Input(context, attention_.mask, mask_constant_);
    if (mask == nullptr || mask->rank() > 4) return false;
    // Attention-23's mask is boolean or additive by its dtype (a body's inputs may be untyped).
    const bool additive = attention_.op ? mask->dtype() != DataType::kBool
                                        : attention_.mask_kind == AttentionMaskKind::kAdditive;
    if (additive ? !IsAttentionFloat(mask->dtype()) : mask->dtype() != DataType::kBool) return false;
    if (attention_.op && additive && mask->dtype() != problem.q.dtype) return false;
    const int64_t target[4] = {problem.batch, problem.heads, problem.queries, problem.keys};
    const size_t offset = 4 - mask->rank();
    int64_t stride = 1;
    for (size_t axis = mask->rank(); axis-- > 0;) {
      const int64_t dim = mask->dim(axis);
      if (dim != target[offset + axis] && dim != 1) return false;  // Attention-23 pads a short mask: op by op
      problem.mask.strides[offset + axis] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
    problem.mask.kind = additive ? MaskKind::kAdditive : MaskKind::kBoolean;
    problem.mask.data = mask->raw();
    problem.mask.dtype = mask->dtype();
    problem.mask.fill = static_cast<float>(attention_.fill);
    problem.mask.fill_when_true = attention_.fill_when_true;
    return true;
  }

  // The scores' scale, cap and what an empty row gives, from the core's form.
  void Scores(Problem& problem) const {
    if (attention_.op) {
      // Attention-23 scales Q and K by √scale each (default 1/√D); masked-out rows give 0.
      const double scale = attention_.op->scale.value_or(1.0 / std::sqrt(static_cast<double>(problem.depth)));
      problem.alpha = static_cast<float>(scale * prescale_);
      problem.softcap = static_cast<float>(attention_.op->softcap);
      problem.causal = attention_.op->causal;
      problem.empty_rows = EmptyRows::kZeroIfUndefined;
      return;
    }
    problem.alpha = static_cast<float>(scale_ * prescale_);
    problem.divisor = divisor_;
    problem.empty_rows = attention_.nan_guard ? EmptyRows::kZeroWhereNaN : EmptyRows::kNaN;
  }

  bool Output(KernelContext& context, Shapes& shapes, Problem& problem) const {
    const int64_t batch = problem.batch, heads = problem.heads, queries = problem.queries, dv = problem.value_depth;
    std::vector<int64_t> out_dims = {batch, heads, queries, dv};
    shapes.context = out_dims;
    if (attention_.merge_view) {  // a Reshape of the context to its own shape
      std::optional<std::vector<int64_t>> target = Target(context, shapes, *attention_.merge_view);
      if (!target || ReshapeTarget(shapes.context, *target, attention_.merge_view->allow_zero) != shapes.context) {
        return false;
      }
    }
    if (attention_.merge) {
      // The context transposed by the merge's perm (the features stay innermost), stored
      // contiguously, then reshaped: each context dim's stride in that order.
      const std::vector<int64_t>& perm = attention_.merge_perm;
      if (perm.size() != 4 || !IsPermutation(perm) || perm[3] != 3) return false;
      shapes.merged_context.assign(4, 0);
      for (size_t i = 0; i < 4; ++i) shapes.merged_context[i] = shapes.context[static_cast<size_t>(perm[i])];
      std::optional<std::vector<int64_t>> target = Target(context, shapes, *attention_.merge);
      if (!target) return false;
      std::optional<std::vector<int64_t>> merged = ReshapeTarget(shapes.merged_context, *target, attention_.merge->allow_zero);
      if (!merged) return false;
      out_dims = *merged;
      int64_t strides[4] = {0, 0, 0, 0};
      int64_t stride = 1;
      for (size_t i = 4; i-- > 0;) {
        strides[perm[i]] = stride;
        stride *= shapes.merged_context[i];
      }
      problem.out_batch_stride = strides[0];
      problem.out_head_stride = strides[1];
      problem.out_ld = strides[2];
    } else {
      problem.out_batch_stride = heads * queries * dv;
      problem.out_head_stride = queries * dv;
      problem.out_ld = dv;
    }
    problem.out_dtype = problem.q.dtype;
    problem.out = context.Output(static_cast<size_t>(attention_.result_output), problem.out_dtype, out_dims).raw();
    return true;
  }

  FusedAttention attention_;
  RtTensor mask_constant_, sizes_constant_;
  double prescale_ = 1.0;          // Q's and K's scales, multiplied
  float scale_ = 1.0f;             // the scores' scale applied by the GEMM
  std::optional<float> divisor_;   // else each score divided by it
};

}  // namespace

std::unique_ptr<FusedBodyKernel> CreateFusedAttention(const FusedBodyInfo& info) {
  std::optional<FusedAttention> attention = RecognizeAttention(info.body, info.context.OpsetFor(""));
  if (!attention || static_cast<size_t>(attention->result_output) >= info.call.outputs().size()) return nullptr;
  for (const AttentionOperand* operand : {&attention->q, &attention->k, &attention->v}) {
    const int input = operand->split_output >= 0 ? attention->combined_input : operand->input;
    const DataType declared = info.body.inputs()[static_cast<size_t>(input)]->dtype();
    if (declared != DataType::kUndefined && !IsAttentionFloat(declared)) return nullptr;
  }
  return std::make_unique<FusedAttentionKernel>(std::move(*attention));
}

}  // namespace fusionopt::cpu
