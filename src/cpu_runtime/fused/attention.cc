// The fused attention kernel (patterns/attention/attention.h): an outlined attention body — the core
// (Softmax(Q·Kᵀ·scale + mask)·V, or a standard Attention node) with the head split and merge,
// rotary embedding, grouped-query repeat and scales around it — run by the attention engine
// (attention/engine.h) as one kernel that never holds the Sq×Sk score matrix.
//
// Where Q, K, V, the rotary tables, the mask and the output lie for this run's sizes is
// patterns/attention/layout.h's (the derivation the CUDA generator uses too): every Reshape and
// Expand target evaluated as the op would, composed into strided views of the inputs. The engine
// reads an operand whose features (or, for K, whose sequence) are contiguous, through a leading
// dimension. Anything else — a layout the ops would refuse, no contiguous axis, any dtype but
// float32, float16 and bfloat16 — returns 0: the body then runs op by op.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "cpu_runtime/attention/engine.h"
#include "cpu_runtime/fused/body.h"
#include "ir/float16.h"
#include "patterns/attention/attention.h"
#include "patterns/attention/layout.h"
#include "patterns/composite/composite.h"

namespace fusionopt::cpu {
namespace {

using attention::EmptyRows;
using attention::IsAttentionFloat;
using attention::MaskKind;
using attention::Operand;
using attention::Problem;
using attention::Rotary;

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
    if (attention_.bias.constant) bias_constant_ = RtTensor::WrapConstant(attention_.bias.constant);
  }

  Result<int> Compute(KernelContext& context) override {
    AttentionInputs inputs;
    inputs.dims = [&](int index) -> std::optional<std::vector<int64_t>> {
      const RtTensor* tensor = index >= 0 ? context.input(static_cast<size_t>(index)) : nullptr;
      if (tensor == nullptr) return std::nullopt;
      return tensor->dims();
    };
    inputs.values = [&](int index) -> std::optional<std::vector<int64_t>> {
      const RtTensor* tensor = index >= 0 ? context.input(static_cast<size_t>(index)) : nullptr;
      if (tensor == nullptr || tensor->dtype() != DataType::kInt64 || tensor->rank() > 1) return std::nullopt;
      return tensor->ToInt64s();
    };
    std::optional<AttentionLayout> layout = LayOutAttention(attention_, inputs);
    if (!layout) return 0;
    Problem problem;
    if (!OperandOf(context, layout->q, problem.q) || !OperandOf(context, layout->k, problem.k) ||
        !OperandOf(context, layout->v, problem.v)) {
      return 0;
    }
    problem.batch = layout->batch, problem.heads = layout->heads;
    problem.queries = layout->queries, problem.keys = layout->keys;
    problem.depth = layout->depth, problem.value_depth = layout->value_depth;
    if (!SameDtype(problem) || !attention::Consistent(problem)) return 0;
    std::vector<float> q_tables, k_tables;
    if (!RotaryOf(context, layout->q_rotary, q_tables, problem.q_rotary) ||
        !RotaryOf(context, layout->k_rotary, k_tables, problem.k_rotary) ||
        !Mask(context, *layout, problem) || !Bias(context, *layout, problem)) {
      return 0;
    }
    Scores(problem);
    problem.out_batch_stride = layout->output_batch_stride;
    problem.out_head_stride = layout->output_head_stride;
    problem.out_ld = layout->output_row_stride;
    problem.out_dtype = problem.q.dtype;
    problem.out = context.Output(static_cast<size_t>(attention_.result_output), problem.out_dtype, layout->output_dims).raw();
    FUSIONOPT_RETURN_IF_ERROR(attention::Run(problem));
    return 1;
  }

 private:
  static bool SameDtype(const Problem& problem) {
    return problem.k.dtype == problem.q.dtype && problem.v.dtype == problem.q.dtype;
  }

  // The engine's matrices of an operand: rows its sequence, columns its features, one of the two
  // contiguous (K stored [D, S]: transposed).
  static bool OperandOf(const KernelContext& context, const OperandLayout& layout, Operand& matrix) {
    const RtTensor* source = context.input(static_cast<size_t>(layout.input));
    if (source == nullptr || !IsAttentionFloat(source->dtype())) return false;
    matrix.dtype = source->dtype();
    matrix.base = source->raw() + layout.offset * static_cast<int64_t>(BitsOf(source->dtype()) / 8);
    matrix.batch = layout.batch, matrix.heads = layout.heads, matrix.rows = layout.rows, matrix.columns = layout.columns;
    matrix.batch_stride = layout.batch_stride, matrix.head_stride = layout.head_stride;
    // A unit axis has no stride of its own (a view gives it 0); its leading dimension is then moot.
    if (layout.column_stride == 1 || layout.columns == 1) {
      matrix.ld = layout.rows == 1 ? std::max<int64_t>(layout.columns, 1) : layout.row_stride;
      matrix.transposed = false;
    } else if (layout.row_stride == 1 || layout.rows == 1) {
      matrix.ld = layout.columns == 1 ? std::max<int64_t>(layout.rows, 1) : layout.column_stride;
      matrix.transposed = true;
    } else {
      return false;  // neither axis contiguous: no matrix the GEMM reads
    }
    return matrix.batch_stride >= 0 && matrix.head_stride >= 0 && matrix.ld > 0;
  }

  // The rotary tables as float32 (the engine's), addressed as the layout says.
  static bool RotaryOf(const KernelContext& context, const std::optional<RotaryLayout>& layout,
                       std::vector<float>& tables, std::optional<Rotary>& rotary) {
    if (!layout) return true;
    const RtTensor* cos = context.input(static_cast<size_t>(layout->cos));
    const RtTensor* sin = context.input(static_cast<size_t>(layout->sin));
    if (cos == nullptr || sin == nullptr || !IsAttentionFloat(cos->dtype()) || cos->dtype() != sin->dtype()) return false;
    const int64_t count = cos->NumElements();
    tables.resize(static_cast<size_t>(2 * count));
    for (int64_t i = 0; i < count; ++i) {
      tables[static_cast<size_t>(i)] = static_cast<float>(cos->ValueAsDouble(i));
      tables[static_cast<size_t>(count + i)] = static_cast<float>(sin->ValueAsDouble(i));
    }
    Rotary out;
    out.cos = tables.data();
    out.sin = tables.data() + count;
    out.batch_stride = layout->batch_stride;
    out.row_stride = layout->row_stride;
    out.dims = layout->dims;
    out.interleaved = layout->interleaved;
    out.full_width = layout->full_width;
    rotary = out;
    return true;
  }

  // The tensor of a mask or score bias: a body input this run, or the constant the body holds.
  static const RtTensor* TermTensor(const KernelContext& context, const AttentionInput& term, const RtTensor& constant) {
    return term.input >= 0 ? context.input(static_cast<size_t>(term.input)) : &constant;
  }

  // `tensor` read with `strides` as a term of `kind`.
  static attention::Mask TermOver(const RtTensor& tensor, const std::array<int64_t, 4>& strides, MaskKind kind) {
    attention::Mask term;
    for (size_t axis = 0; axis < 4; ++axis) term.strides[axis] = strides[axis];
    term.kind = kind;
    term.data = tensor.raw();
    term.dtype = tensor.dtype();
    return term;
  }

  bool Mask(const KernelContext& context, const AttentionLayout& layout, Problem& problem) const {
    if (!layout.mask_strides) return true;
    const RtTensor* mask = TermTensor(context, attention_.mask, mask_constant_);
    if (mask == nullptr) return false;
    // Attention-23's mask is boolean or additive by its dtype (a body's inputs may be untyped).
    const bool additive = attention_.op ? mask->dtype() != DataType::kBool
                                        : attention_.mask_kind == AttentionMaskKind::kAdditive;
    if (additive ? !IsAttentionFloat(mask->dtype()) : mask->dtype() != DataType::kBool) return false;
    if (attention_.op && additive && mask->dtype() != problem.q.dtype) return false;
    problem.mask = TermOver(*mask, *layout.mask_strides, additive ? MaskKind::kAdditive : MaskKind::kBoolean);
    problem.mask.fill = static_cast<float>(attention_.fill);
    problem.mask.fill_when_true = attention_.fill_when_true;
    return true;
  }

  // The additive score bias before the mask (ALiBi), in the scores' float types.
  bool Bias(const KernelContext& context, const AttentionLayout& layout, Problem& problem) const {
    if (!layout.bias_strides) return true;
    const RtTensor* bias = TermTensor(context, attention_.bias, bias_constant_);
    if (bias == nullptr || !IsAttentionFloat(bias->dtype())) return false;
    problem.bias = TermOver(*bias, *layout.bias_strides, MaskKind::kAdditive);
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

  FusedAttention attention_;
  RtTensor mask_constant_, bias_constant_;
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
