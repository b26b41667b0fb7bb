// The fused attention kernel (patterns/attention.h): Softmax(Q·Kᵀ·scale + mask)·V, heads
// split and merged, as one kernel that never holds the Sq×Sk score matrix.
//
// Tiled with an online softmax (flash attention): each task owns one block of queries of one
// (batch, head) and walks the keys block by block —
//
//   S = Q_blk·K_blkᵀ (one dnnl_sgemm), then scaled and masked as the body does, element by element;
//   m' = max(m, rowmax S);  P = exp(S - m');  l = l·exp(m - m') + rowsum P;  O = O·exp(m - m') + P·V_blk
//
// and writes O / l. Q, K and V are read where they lie through leading dimensions: a
// [B,S,H·D] tensor, a column slice of the combined [B,S,3·H·D] projection, or a [B,H,S,D]
// (K also [B,H,D,S]) tensor; the output is written as [B,Sq,H·D] when the head merge is part
// of the body, else [B,H,Sq,D]. Tasks run in parallel with OpenMP (the session's threads);
// oneDNN's GEMM runs single-threaded inside them. A boolean mask that selects its fill for a
// whole tile is skipped when every row already holds a score so much larger that the fill's
// exponential is exactly 0 (GPT-2's causal blocks above the diagonal): the result is the same.
//
// Each run checks the shapes the body's ops would see: the Split along the last axis with sizes
// that add up, every Reshape target (evaluated as Reshape would) splitting [B,S,H·D] into
// [B,S,H,D] and merging back, equal batch and heads for Q, K and V, the softmax over the last
// axis, a mask broadcasting to [B,H,Sq,Sk] without widening it. Anything else — and every
// dtype but float32 — returns 0: the body then runs op by op.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>

#include "cpu_runtime/fused_body.h"
#include "cpu_runtime/reduction_engine.h"
#include "cpu_runtime/reduction_math.h"
#include "patterns/attention.h"
#include "patterns/composite.h"

namespace fusionopt::cpu {
namespace {

// Tile sizes: a 64×128 score tile (32 KiB) stays in cache beside the K and V blocks it is made
// from. For BERT-base's products (S 128, D 64) 128-query blocks ran dnnl_sgemm no faster, and
// 256- or 512-key blocks gained nothing end to end.
constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 128;
// Below this many multiply-adds the tasks run on the calling thread.
constexpr int64_t kParallelMinWork = int64_t{1} << 18;
// exp(x) for x below this is exactly 0 in float (reduction::ExpShifted clamps at -87).
constexpr float kVanishingExponent = -200.0f;

// Reshape's target for `input` dims: 0 copies the input's dim (unless allow_zero), one -1 is
// inferred; nullopt when Reshape would fail.
std::optional<std::vector<int64_t>> ReshapeTarget(const std::vector<int64_t>& input, std::vector<int64_t> target,
                                                  bool allow_zero) {
  int64_t total = 1, known = 1;
  for (int64_t dim : input) total *= dim;
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
    if (target[i] < 0) return std::nullopt;
    known *= target[i];
  }
  if (inferred) {
    if (known == 0 || total % known != 0) return std::nullopt;
    target[*inferred] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return target;
}

// One operand as a matrix per (batch, head): rows are sequence positions, columns the head's
// features, unless `transposed` (K stored [D, Sk]).
struct HeadMatrix {
  const float* base = nullptr;
  int64_t batch = 0, heads = 0, rows = 0, columns = 0;
  int64_t batch_stride = 0, head_stride = 0, ld = 0;
  bool transposed = false;
  const float* At(int64_t b, int64_t h) const { return base + b * batch_stride + h * head_stride; }
};

// A tensor the kernel reads: a Split output is a column slice of the combined input.
struct Source {
  const float* data = nullptr;
  std::vector<int64_t> dims;
  int64_t ld = 0;  // elements between rows (the last dim, or the combined tensor's)
};

struct MaskView {
  const uint8_t* data = nullptr;  // float or bool elements
  int64_t strides[4] = {0, 0, 0, 0};
};

class FusedAttentionKernel final : public FusedBodyKernel {
 public:
  explicit FusedAttentionKernel(FusedAttention attention) : attention_(std::move(attention)) {
    // The scale goes into the GEMM's alpha where that computes what the body does: a product,
    // or a division by a power of two (its reciprocal is exact). Another divisor stays a
    // division of each score.
    if (attention_.scale) {
      const float scale = static_cast<float>(*attention_.scale);
      int exponent = 0;
      const bool power_of_two = std::frexp(scale, &exponent) == 0.5f;
      if (!attention_.scale_divides) {
        alpha_ = scale;
      } else if (power_of_two) {
        alpha_ = 1.0f / scale;
      } else {
        divisor_ = scale;
      }
    }
    if (attention_.mask.constant) mask_constant_ = RtTensor::WrapConstant(attention_.mask.constant);
    if (attention_.split_sizes.constant) sizes_constant_ = RtTensor::WrapConstant(attention_.split_sizes.constant);
  }

  Result<int> Compute(KernelContext& context) override {
    Plan plan;
    Shapes shapes;
    if (!Combined(context, shapes) || !Operand(context, shapes, attention_.q, plan.q) ||
        !Operand(context, shapes, attention_.k, plan.k) || !Operand(context, shapes, attention_.v, plan.v)) {
      return 0;
    }
    const HeadMatrix &q = plan.q, &k = plan.k, &v = plan.v;
    if (q.batch != k.batch || q.batch != v.batch || q.heads != k.heads || q.heads != v.heads ||
        q.columns != k.columns || k.rows != v.rows) {
      return 0;
    }
    plan.batch = q.batch, plan.heads = q.heads, plan.queries = q.rows, plan.keys = k.rows;
    plan.depth = q.columns, plan.value_depth = v.columns;
    if (plan.batch * plan.heads * plan.queries * plan.keys * plan.depth * plan.value_depth == 0) return 0;
    if (NormalizedAxis(attention_.softmax_axis, 4) != 3) return 0;
    if (!Mask(context, plan)) return 0;

    std::vector<int64_t> out_dims = {plan.batch, plan.heads, plan.queries, plan.value_depth};
    if (attention_.merge) {
      shapes.merged_context = {plan.batch, plan.queries, plan.heads, plan.value_depth};
      std::optional<std::vector<int64_t>> target = Target(context, shapes, *attention_.merge);
      if (!target) return 0;
      std::optional<std::vector<int64_t>> merged =
          ReshapeTarget(shapes.merged_context, *target, attention_.merge->allow_zero);
      out_dims = {plan.batch, plan.queries, plan.heads * plan.value_depth};
      if (merged != out_dims) return 0;
      plan.out_batch_stride = plan.queries * plan.heads * plan.value_depth;
      plan.out_head_stride = plan.value_depth;
      plan.out_ld = plan.heads * plan.value_depth;
    } else {
      plan.out_batch_stride = plan.heads * plan.queries * plan.value_depth;
      plan.out_head_stride = plan.queries * plan.value_depth;
      plan.out_ld = plan.value_depth;
    }
    plan.out = context.Output(static_cast<size_t>(attention_.result_output), DataType::kFloat, out_dims).data<float>();
    if (!Run(plan)) return InternalError("fused attention: oneDNN's sgemm failed");
    return 1;
  }

 private:
  // What one run learns about the body's values, for the Reshape targets that read their dims.
  struct Shapes {
    const float* combined = nullptr;  // the combined projection's data
    int64_t combined_width = 0;
    std::vector<std::vector<int64_t>> split_dims;  // per Split output
    std::vector<int64_t> split_offsets;            // per Split output: its first column
    std::vector<int64_t> merged_context;           // [B,Sq,H,Dv] once known
  };

  struct Plan {
    HeadMatrix q, k, v;
    int64_t batch = 0, heads = 0, queries = 0, keys = 0, depth = 0, value_depth = 0;
    MaskView mask;
    float* out = nullptr;
    int64_t out_batch_stride = 0, out_head_stride = 0, out_ld = 0;
  };

  const RtTensor* Input(const KernelContext& context, const AttentionInput& input, const RtTensor& constant) const {
    if (input.input >= 0) return context.input(static_cast<size_t>(input.input));
    return input.constant ? &constant : nullptr;
  }

  // The combined projection's Split: its outputs' dims and column offsets.
  bool Combined(const KernelContext& context, Shapes& shapes) const {
    if (!attention_.combined) return true;
    const RtTensor* combined = context.input(static_cast<size_t>(attention_.combined_input));
    if (combined == nullptr || combined->dtype() != DataType::kFloat || combined->rank() < 2) return false;
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
    shapes.combined = combined->data<float>();
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
    }
    return std::nullopt;
  }

  // A Reshape target's values, as the body's shape ops would compute them this run.
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

  bool Operand(const KernelContext& context, const Shapes& shapes, const AttentionOperand& operand,
               HeadMatrix& matrix) const {
    Source source;
    if (operand.split_output >= 0) {
      const size_t output = static_cast<size_t>(operand.split_output);
      if (output >= shapes.split_dims.size()) return false;
      source.data = shapes.combined + shapes.split_offsets[output];
      source.dims = shapes.split_dims[output];
      source.ld = shapes.combined_width;
    } else {
      const RtTensor* tensor = context.input(static_cast<size_t>(operand.input));
      if (tensor == nullptr || tensor->dtype() != DataType::kFloat || tensor->rank() == 0) return false;
      source.data = tensor->data<float>();
      source.dims = tensor->dims();
      source.ld = source.dims.back();
    }
    if (operand.layout != HeadLayout::kSplitHeads) {
      // [B,H,S,D], or K as [B,H,D,S]: contiguous heads.
      if (source.dims.size() != 4) return false;
      const bool transposed = operand.layout == HeadLayout::kHeadsFirstTransposed;
      matrix.base = source.data;
      matrix.batch = source.dims[0];
      matrix.heads = source.dims[1];
      matrix.rows = transposed ? source.dims[3] : source.dims[2];
      matrix.columns = transposed ? source.dims[2] : source.dims[3];
      matrix.head_stride = source.dims[2] * source.dims[3];
      matrix.batch_stride = matrix.heads * matrix.head_stride;
      matrix.ld = source.dims[3];
      matrix.transposed = transposed;
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
    matrix.base = source.data;
    matrix.batch = heads_dims[0];
    matrix.rows = heads_dims[1];
    matrix.heads = heads_dims[2];
    matrix.columns = heads_dims[3];
    matrix.ld = source.ld;
    matrix.head_stride = matrix.columns;
    matrix.batch_stride = matrix.rows * matrix.ld;
    return true;
  }

  bool Mask(const KernelContext& context, Plan& plan) const {
    if (attention_.mask_kind == AttentionMaskKind::kNone) return true;
    const RtTensor* mask = Input(context, attention_.mask, mask_constant_);
    const DataType wanted = attention_.mask_kind == AttentionMaskKind::kAdditive ? DataType::kFloat : DataType::kBool;
    if (mask == nullptr || mask->dtype() != wanted || mask->rank() > 4) return false;
    const int64_t target[4] = {plan.batch, plan.heads, plan.queries, plan.keys};
    const size_t offset = 4 - mask->rank();
    int64_t stride = 1;
    for (size_t axis = mask->rank(); axis-- > 0;) {
      const int64_t dim = mask->dim(axis);
      if (dim != target[offset + axis] && dim != 1) return false;
      plan.mask.strides[offset + axis] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
    plan.mask.data = mask->raw();
    return true;
  }

  bool Run(const Plan& plan) const {
    const int64_t blocks = (plan.queries + kQueryBlock - 1) / kQueryBlock;
    const int64_t tasks = plan.batch * plan.heads * blocks;
    const int64_t work = plan.batch * plan.heads * plan.queries * plan.keys * (plan.depth + plan.value_depth);
    std::atomic<bool> ok{true};
#pragma omp parallel if (work >= kParallelMinWork)
    {
      Scratch scratch(plan);
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t b = task / (plan.heads * blocks);
        const int64_t h = task / blocks % plan.heads;
        const int64_t first = task % blocks * kQueryBlock;
        if (!QueryBlock(plan, b, h, first, std::min(kQueryBlock, plan.queries - first), scratch)) ok = false;
      }
    }
    return ok;
  }

  struct Scratch {
    std::vector<float> scores, context, row_max;
    std::vector<double> row_sum;
    explicit Scratch(const Plan& plan)
        : scores(static_cast<size_t>(kQueryBlock * kKeyBlock)),
          context(static_cast<size_t>(kQueryBlock * plan.value_depth)),
          row_max(static_cast<size_t>(kQueryBlock)),
          row_sum(static_cast<size_t>(kQueryBlock)) {}
  };

  // Whether the boolean mask selects its fill over the whole tile and every row's running
  // maximum makes the fill's exponential vanish: the tile changes nothing.
  bool TileVanishes(const Plan& plan, int64_t b, int64_t h, int64_t first, int64_t rows, int64_t key, int64_t keys,
                    const Scratch& scratch) const {
    if (attention_.mask_kind != AttentionMaskKind::kBoolean) return false;
    const float fill = static_cast<float>(attention_.fill);
    for (int64_t r = 0; r < rows; ++r) {
      if (!(fill - scratch.row_max[static_cast<size_t>(r)] < kVanishingExponent)) return false;
    }
    const MaskView& mask = plan.mask;
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = mask.data + b * mask.strides[0] + h * mask.strides[1] + (first + r) * mask.strides[2] +
                           key * mask.strides[3];
      for (int64_t j = 0; j < keys; ++j) {
        if ((row[j * mask.strides[3]] != 0) != attention_.fill_when_true) return false;
      }
    }
    return true;
  }

  // Scores of one tile as the body computes them: scaled (what alpha did not), then masked.
  void ScaleAndMask(const Plan& plan, int64_t b, int64_t h, int64_t query, int64_t key, int64_t keys, float* z) const {
    if (divisor_) {
      const float divisor = *divisor_;
      for (int64_t j = 0; j < keys; ++j) z[j] = z[j] / divisor;
    }
    if (attention_.mask_kind == AttentionMaskKind::kNone) return;
    const MaskView& mask = plan.mask;
    const int64_t offset =
        b * mask.strides[0] + h * mask.strides[1] + query * mask.strides[2] + key * mask.strides[3];
    const int64_t stride = mask.strides[3];
    if (attention_.mask_kind == AttentionMaskKind::kAdditive) {
      const float* values = reinterpret_cast<const float*>(mask.data) + offset;
      if (stride == 1) {  // contiguous: a loop the compiler vectorizes
        for (int64_t j = 0; j < keys; ++j) z[j] = z[j] + values[j];
      } else {
        for (int64_t j = 0; j < keys; ++j) z[j] = z[j] + values[j * stride];
      }
    } else {
      const uint8_t* condition = mask.data + offset;
      const float fill = static_cast<float>(attention_.fill);
      for (int64_t j = 0; j < keys; ++j) {
        if ((condition[j * stride] != 0) == attention_.fill_when_true) z[j] = fill;
      }
    }
  }

  bool QueryBlock(const Plan& plan, int64_t b, int64_t h, int64_t first, int64_t rows, Scratch& scratch) const {
    const int64_t dv = plan.value_depth;
    std::fill(scratch.context.begin(), scratch.context.end(), 0.0f);
    std::fill(scratch.row_max.begin(), scratch.row_max.end(), -std::numeric_limits<float>::infinity());
    std::fill(scratch.row_sum.begin(), scratch.row_sum.end(), 0.0);
    const float* q = plan.q.At(b, h) + first * plan.q.ld;
    const float* k = plan.k.At(b, h);
    const float* v = plan.v.At(b, h);
    for (int64_t key = 0; key < plan.keys; key += kKeyBlock) {
      const int64_t keys = std::min(kKeyBlock, plan.keys - key);
      if (TileVanishes(plan, b, h, first, rows, key, keys, scratch)) continue;
      float* s = scratch.scores.data();
      dnnl_status_t status =
          plan.k.transposed
              ? dnnl_sgemm('N', 'N', rows, keys, plan.depth, alpha_, q, plan.q.ld, k + key, plan.k.ld, 0.0f, s, keys)
              : dnnl_sgemm('N', 'T', rows, keys, plan.depth, alpha_, q, plan.q.ld, k + key * plan.k.ld, plan.k.ld, 0.0f,
                           s, keys);
      if (status != dnnl_success) return false;
      for (int64_t r = 0; r < rows; ++r) {
        float* z = s + r * keys;
        ScaleAndMask(plan, b, h, first + r, key, keys, z);
        float& running_max = scratch.row_max[static_cast<size_t>(r)];
        const float tile_max = reduction::ReduceBlock(z, keys, -std::numeric_limits<float>::infinity(),
                                                      [](float value) { return value; }, reduction::TakeMax());
        const float new_max = std::max(running_max, tile_max);
        if (new_max == -std::numeric_limits<float>::infinity()) {
          std::fill(z, z + keys, 0.0f);  // every score so far -inf: nothing to add yet
          continue;
        }
        reduction::ExpShifted(z, new_max, z, keys);
        const double sum = reduction::ReduceBlock(z, keys, 0.0f, [](float value) { return value; }, std::plus<float>());
        const float correction = std::exp(running_max - new_max);
        double& running_sum = scratch.row_sum[static_cast<size_t>(r)];
        running_sum = running_sum * correction + sum;
        if (correction != 1.0f) {
          float* row = scratch.context.data() + r * dv;
          for (int64_t d = 0; d < dv; ++d) row[d] *= correction;
        }
        running_max = new_max;
      }
      status = dnnl_sgemm('N', 'N', rows, dv, keys, 1.0f, s, keys, v + key * plan.v.ld, plan.v.ld, 1.0f,
                          scratch.context.data(), dv);
      if (status != dnnl_success) return false;
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* out = plan.out + b * plan.out_batch_stride + h * plan.out_head_stride + (first + r) * plan.out_ld;
      const float* row = scratch.context.data() + r * dv;
      // A row of -inf scores: the softmax's 0/0, as op by op.
      const bool undefined = scratch.row_max[static_cast<size_t>(r)] == -std::numeric_limits<float>::infinity();
      const float inverse = undefined ? std::numeric_limits<float>::quiet_NaN()
                                      : static_cast<float>(1.0 / scratch.row_sum[static_cast<size_t>(r)]);
      for (int64_t d = 0; d < dv; ++d) out[d] = row[d] * inverse;
    }
    return true;
  }

  FusedAttention attention_;
  RtTensor mask_constant_, sizes_constant_;
  float alpha_ = 1.0f;              // the scores' scale applied by the GEMM
  std::optional<float> divisor_;    // else each score divided by it
};

}  // namespace

std::unique_ptr<FusedBodyKernel> CreateFusedAttention(const FusedBodyInfo& info) {
  std::optional<FusedAttention> attention = RecognizeAttention(info.body, info.context.OpsetFor(""));
  if (!attention || static_cast<size_t>(attention->result_output) >= info.call.outputs().size()) return nullptr;
  for (const AttentionOperand* operand : {&attention->q, &attention->k, &attention->v}) {
    const int input = operand->split_output >= 0 ? attention->combined_input : operand->input;
    const DataType declared = info.body.inputs()[static_cast<size_t>(input)]->dtype();
    if (declared != DataType::kUndefined && declared != DataType::kFloat) return nullptr;
  }
  return std::make_unique<FusedAttentionKernel>(std::move(*attention));
}

}  // namespace fusionopt::cpu
