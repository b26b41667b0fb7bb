// The standard attention ops of opset 23, on the attention engine (attention/engine.h):
//
//   Attention(Q, K, V[, attn_mask]) -> Y   Q [B,H,Sq,D] or [B,Sq,H·D] (with q_num_heads and
//     kv_num_heads), K and V likewise with Hkv heads; scale (default 1/√D), is_causal, softcap;
//     a boolean mask marks the keys to attend, a float one is added; a row with no key to
//     attend gives 0. present_key / present_value are K and V themselves (no past is given).
//   RotaryEmbedding(X, cos_cache, sin_cache) -> Y   X [B,H,S,D] or [B,S,H·D] (with num_heads),
//     caches [B,S,R/2] (or [1,S,R/2], broadcast), R = rotary_embedding_dim or D, rotate-half or
//     interleaved pairs.
//
// Refused with the node's name (exit 4), as what the runtime lacks: Attention's past_key /
// past_value, nonpad_kv_seqlen (Attention-24), sliding windows (Attention-25), the
// qk_matmul_output output, a mask shorter than the keys; RotaryEmbedding's position_ids.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "cpu_runtime/attention/engine.h"
#include "cpu_runtime/engine/kernel.h"
#include "cpu_runtime/engine/kernels.h"
#include "ir/float16.h"

namespace fusionopt::cpu {
namespace {

using attention::IsAttentionFloat;

// [B,H,S,D] (4-D) or [B,S,H·D] with `heads` (3-D) as the engine's matrices.
Result<attention::Operand> HeadMatrices(const RtTensor& tensor, int64_t heads, const char* name) {
  attention::Operand operand;
  operand.base = tensor.raw();
  operand.dtype = tensor.dtype();
  const auto& dims = tensor.dims();
  if (dims.size() == 4) {
    operand.batch = dims[0], operand.heads = dims[1], operand.rows = dims[2], operand.columns = dims[3];
    operand.head_stride = dims[2] * dims[3];
    operand.batch_stride = dims[1] * operand.head_stride;
    operand.ld = dims[3];
    return operand;
  }
  if (dims.size() != 3 || heads <= 0 || dims[2] % heads != 0) {
    return InvalidModel(std::string(name) + " " + DimsToString(dims) + " is neither [B,H,S,D] nor [B,S,H·D] of " +
                        std::to_string(heads) + " heads");
  }
  operand.batch = dims[0], operand.heads = heads, operand.rows = dims[1], operand.columns = dims[2] / heads;
  operand.ld = dims[2];
  operand.head_stride = operand.columns;
  operand.batch_stride = dims[1] * dims[2];
  return operand;
}

class AttentionKernel final : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    const Node& node = info.node;
    for (size_t i = 4; i < node.inputs().size(); ++i) {
      if (node.input(i) != nullptr) {
        return Unsupported(info.Describe() + ": past_key, past_value and nonpad_kv_seqlen are not supported");
      }
    }
    if (node.outputs().size() > 3 && node.output(3) != nullptr) {
      return Unsupported(info.Describe() + ": the qk_matmul_output output is not supported");
    }
    if (node.GetInt("left_window_size", -1) >= 0 || node.GetInt("right_window_size", -1) >= 0) {
      return Unsupported(info.Describe() + ": sliding-window attention is not supported");
    }
    q_heads_ = node.GetInt("q_num_heads", 0);
    kv_heads_ = node.GetInt("kv_num_heads", 0);
    if (node.FindAttribute("scale") != nullptr) scale_ = node.GetFloat("scale", 1.0f);
    causal_ = node.GetInt("is_causal", 0) != 0;
    softcap_ = node.GetFloat("softcap", 0.0f);
    describe_ = info.Describe();
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    const RtTensor &q = *context.input(0), &k = *context.input(1), &v = *context.input(2);
    if (!IsAttentionFloat(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
      return Unsupported(describe_ + ": " + std::string(NameOf(q.dtype())) + " attention (float, float16 and bfloat16 only)");
    }
    if (q.rank() != k.rank() || q.rank() != v.rank()) return InvalidModel(describe_ + ": Q, K and V ranks differ");
    attention::Problem problem;
    FUSIONOPT_ASSIGN_OR_RETURN(problem.q, HeadMatrices(q, q_heads_, "Q"));
    FUSIONOPT_ASSIGN_OR_RETURN(problem.k, HeadMatrices(k, kv_heads_, "K"));
    FUSIONOPT_ASSIGN_OR_RETURN(problem.v, HeadMatrices(v, kv_heads_, "V"));
    problem.batch = problem.q.batch, problem.heads = problem.q.heads;
    problem.queries = problem.q.rows, problem.keys = problem.k.rows;
    problem.depth = problem.q.columns, problem.value_depth = problem.v.columns;
    problem.alpha = static_cast<float>(scale_.value_or(1.0 / std::sqrt(static_cast<double>(problem.depth))));
    problem.softcap = softcap_;
    problem.causal = causal_;
    problem.empty_rows = attention::EmptyRows::kZeroIfUndefined;
    if (context.has_input(3)) FUSIONOPT_RETURN_IF_ERROR(Mask(*context.input(3), problem));
    if (!attention::Consistent(problem)) {
      return InvalidModel(describe_ + ": Q " + DimsToString(q.dims()) + ", K " + DimsToString(k.dims()) + " and V " +
                          DimsToString(v.dims()) + " do not make one attention");
    }
    const bool three_d = q.rank() == 3;
    const int64_t b = problem.batch, h = problem.heads, s = problem.queries, dv = problem.value_depth;
    RtTensor& y = context.Output(0, q.dtype(), three_d ? std::vector<int64_t>{b, s, h * dv} : std::vector<int64_t>{b, h, s, dv});
    problem.out = y.raw();
    problem.out_dtype = q.dtype();
    problem.out_batch_stride = h * s * dv;
    problem.out_head_stride = three_d ? dv : s * dv;
    problem.out_ld = three_d ? h * dv : dv;
    FUSIONOPT_RETURN_IF_ERROR(attention::Run(problem));
    // Without a past, the present key and value are K and V ([B,Hkv,S,D]).
    for (size_t output = 1; output <= 2 && output < context.outputs.size(); ++output) {
      const RtTensor& source = output == 1 ? k : v;
      const attention::Operand& matrix = output == 1 ? problem.k : problem.v;
      RtTensor& present = context.Output(output, source.dtype(), {matrix.batch, matrix.heads, matrix.rows, matrix.columns});
      CopyHeadsFirst(source, matrix, present);
    }
    return Status::Ok();
  }

 private:
  Status Mask(const RtTensor& mask, attention::Problem& problem) const {
    const bool boolean = mask.dtype() == DataType::kBool;
    if (!boolean && mask.dtype() != problem.q.dtype) {
      return InvalidModel(describe_ + ": a " + std::string(NameOf(mask.dtype())) + " mask for " +
                          std::string(NameOf(problem.q.dtype)) + " attention");
    }
    if (mask.rank() > 4 || mask.rank() < 1) return InvalidModel(describe_ + ": the mask's rank is not 1 to 4");
    const int64_t target[4] = {problem.batch, problem.heads, problem.queries, problem.keys};
    const size_t offset = 4 - mask.rank();
    int64_t stride = 1;
    for (size_t axis = mask.rank(); axis-- > 0;) {
      const int64_t dim = mask.dim(axis);
      if (offset + axis == 3 && dim < problem.keys) {
        return Unsupported(describe_ + ": a mask shorter than the keys (padded with -inf) is not supported");
      }
      if (dim != target[offset + axis] && dim != 1) {
        return InvalidModel(describe_ + ": the mask " + DimsToString(mask.dims()) + " does not broadcast to the scores");
      }
      problem.mask.strides[offset + axis] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
    problem.mask.kind = boolean ? attention::MaskKind::kBoolean : attention::MaskKind::kAdditive;
    problem.mask.data = mask.raw();
    problem.mask.dtype = mask.dtype();
    problem.mask.fill = -std::numeric_limits<float>::infinity();  // where the mask says not to attend
    problem.mask.fill_when_true = false;
    return Status::Ok();
  }

  static void CopyHeadsFirst(const RtTensor& source, const attention::Operand& matrix, RtTensor& out) {
    const size_t bytes = static_cast<size_t>(BitsOf(source.dtype()) / 8);
    const auto* in = source.raw();
    auto* dst = out.raw();
    for (int64_t b = 0; b < matrix.batch; ++b) {
      for (int64_t h = 0; h < matrix.heads; ++h) {
        for (int64_t r = 0; r < matrix.rows; ++r) {
          const int64_t from = b * matrix.batch_stride + h * matrix.head_stride + r * matrix.ld;
          const int64_t to = ((b * matrix.heads + h) * matrix.rows + r) * matrix.columns;
          std::memcpy(dst + to * bytes, in + from * bytes, static_cast<size_t>(matrix.columns) * bytes);
        }
      }
    }
  }

  int64_t q_heads_ = 0, kv_heads_ = 0;
  std::optional<double> scale_;
  bool causal_ = false;
  float softcap_ = 0;
  std::string describe_;
};

class RotaryEmbeddingKernel final : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    if (info.node.inputs().size() > 3 && info.node.input(3) != nullptr) {
      return Unsupported(info.Describe() + ": position_ids are not supported");
    }
    interleaved_ = info.node.GetInt("interleaved", 0) != 0;
    heads_ = info.node.GetInt("num_heads", 0);
    rotary_dims_ = info.node.GetInt("rotary_embedding_dim", 0);
    describe_ = info.Describe();
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    const RtTensor &x = *context.input(0), &cos = *context.input(1), &sin = *context.input(2);
    if (!IsAttentionFloat(x.dtype()) || cos.dtype() != x.dtype() || sin.dtype() != x.dtype()) {
      return Unsupported(describe_ + ": " + std::string(NameOf(x.dtype())) + " (float, float16 and bfloat16 only)");
    }
    FUSIONOPT_ASSIGN_OR_RETURN(attention::Operand matrix, HeadMatrices(x, heads_, "X"));
    const int64_t depth = matrix.columns, rotated = rotary_dims_ > 0 ? rotary_dims_ : depth;
    const int64_t batch = matrix.batch, rows = matrix.rows, width = rotated / 2;
    // Caches [B,S,R/2]; a batch of 1 broadcasts (what the dynamo exporter writes, and ONNX's
    // reference evaluator accepts).
    if (rotated % 2 != 0 || rotated > depth || cos.dims() != sin.dims() || cos.rank() != 3 || cos.dim(1) != rows ||
        cos.dim(2) != width || (cos.dim(0) != batch && cos.dim(0) != 1)) {
      return InvalidModel(describe_ + ": caches " + DimsToString(cos.dims()) + " do not fit X " + DimsToString(x.dims()));
    }
    std::vector<float> tables(static_cast<size_t>(2 * cos.NumElements()));
    for (int64_t i = 0; i < cos.NumElements(); ++i) {
      tables[static_cast<size_t>(i)] = static_cast<float>(cos.ValueAsDouble(i));
      tables[static_cast<size_t>(cos.NumElements() + i)] = static_cast<float>(sin.ValueAsDouble(i));
    }
    attention::Rotary rotary;
    rotary.cos = tables.data();
    rotary.sin = tables.data() + cos.NumElements();
    rotary.batch_stride = cos.dim(0) == 1 ? 0 : rows * width;
    rotary.row_stride = width;
    rotary.dims = rotated;
    rotary.interleaved = interleaved_;
    rotary.full_width = false;
    RtTensor& y = context.Output(0, x.dtype(), x.dims());
    attention::Operand out = matrix;
    out.base = y.raw();
    attention::RotateRows(matrix, rotary, out);
    return Status::Ok();
  }

 private:
  bool interleaved_ = false;
  int64_t heads_ = 0, rotary_dims_ = 0;
  std::string describe_;
};

}  // namespace

void RegisterAttentionKernels(KernelRegistry& registry) {
  registry.Register("", "Attention", 23, kAnyOpset, Make<AttentionKernel>());
  registry.Register("", "RotaryEmbedding", 23, kAnyOpset, Make<RotaryEmbeddingKernel>());
}

}  // namespace fusionopt::cpu
