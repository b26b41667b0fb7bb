// Fused attention as one tiled online-softmax kernel (attention_codegen.h).
#include "cuda_runtime/codegen/attention_codegen.h"

#include <array>
#include <cmath>

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "patterns/attention.h"

namespace fusionopt::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kQueryTile = 16;              // queries per CTA: 4 per warp
constexpr int kRowsPerWarp = kQueryTile / kWarps;
constexpr int kKeyTile = 32;                // keys per shared-memory tile: one per lane

// Where element (b, h, s, d) of an operand lies: base + b·batch + h·head + s·seq + d·depth.
struct Addressing {
  std::string pointer;
  int64_t base = 0, batch = 0, head = 0, seq = 0, depth = 0;
  int64_t depth_size = 0;  // D (or Dv)
  int64_t seq_size = 0;    // S
  int64_t batch_size = 0;
  int64_t group = 1;  // query heads per head of this operand (grouped-query K and V)
  DataType dtype = DataType::kUndefined;
  std::string At(const std::string& b, const std::string& h, const std::string& s, const std::string& d) const {
    const std::string head_index = group == 1 ? h : "(" + h + ") / " + std::to_string(group);
    return pointer + "[" + std::to_string(base) + "LL + (long long)(" + b + ") * " + std::to_string(batch) +
           "LL + (long long)(" + head_index + ") * " + std::to_string(head) + "LL + (long long)(" + s + ") * " +
           std::to_string(seq) + "LL + (long long)(" + d + ") * " + std::to_string(depth) + "LL]";
  }
};

struct Geometry {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0;
};

const Node* FindOp(const Graph& graph, std::string_view op_type) {
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == op_type && node->domain().empty()) return node.get();
  }
  return nullptr;
}

Result<std::optional<FusedAttention>> Recognize(const Graph& unfolded) {
  const Node* softmax = FindOp(unfolded, "Softmax");
  if (softmax == nullptr) {
    if (FindOp(unfolded, "Attention") == nullptr) return std::optional<FusedAttention>();
    return std::optional<FusedAttention>(RecognizeAttention(unfolded, 23));
  }
  if (softmax->FindAttribute("axis") == nullptr) {
    return Unsupported("a Softmax without an axis attribute (its default depends on the opset, which a "
                       "typed body does not carry)");
  }
  for (int64_t opset : {17, 12}) {
    if (std::optional<FusedAttention> attention = RecognizeAttention(unfolded, opset)) return attention;
  }
  return std::optional<FusedAttention>();
}

// Operand `operand` (Q, K or V) as an addressing over its source tensor.
Result<Addressing> AddressOf(const FusedAttention& attention, const AttentionOperand& operand, const Graph& unfolded,
                             const Geometry& geometry, KernelParameters& parameters, const char* role) {
  Addressing out;
  std::vector<int64_t> dims;
  int64_t ld = 0;
  if (operand.split_output >= 0) {
    const Node* split = FindOp(unfolded, "Split");
    const Value* combined = unfolded.inputs()[static_cast<size_t>(attention.combined_input)];
    const std::vector<int64_t> combined_dims = StaticDims(*combined);
    if (split == nullptr || combined_dims.empty() ||
        NormalizedAxis(attention.split_axis, static_cast<int64_t>(combined_dims.size())) !=
            static_cast<int64_t>(combined_dims.size()) - 1) {
      return Unsupported("the combined projection's Split is not along its last axis");
    }
    if (operand.layout != HeadLayout::kSplitHeads || !operand.split) {
      return Unsupported(std::string(role) + " is a Split output not reshaped into heads");
    }
    for (int i = 0; i < operand.split_output; ++i) out.base += StaticDims(*split->output(static_cast<size_t>(i))).back();
    dims = StaticDims(*split->output(static_cast<size_t>(operand.split_output)));
    ld = combined_dims.back();
    out.pointer = parameters.InputPointer(attention.combined_input);
    out.dtype = combined->dtype();
  } else {
    const Value* source = unfolded.inputs()[static_cast<size_t>(operand.input)];
    dims = StaticDims(*source);
    ld = dims.empty() ? 0 : dims.back();
    out.pointer = parameters.InputPointer(operand.input);
    out.dtype = source->dtype();
  }
  if (operand.rotary) {
    return Unsupported("rotary embedding inside the attention is not generated for CUDA yet (" + std::string(role) + ")");
  }
  if (operand.layout == HeadLayout::kView) {
    return Unsupported(std::string(role) + " read through a chain of layout ops is not generated for CUDA yet");
  }
  int64_t heads = geometry.heads;
  if (operand.repeat) {
    const int64_t own = operand.repeat->source_heads;  // known in a typed body
    if (own <= 0 || geometry.heads % own != 0) {
      return Unsupported(std::string(role) + "'s head repeat does not divide the scores' heads");
    }
    out.group = geometry.heads / own;
    heads = own;
  }
  switch (operand.layout) {
    case HeadLayout::kSplitHeads:
      if (dims.size() == 3 && dims[2] % heads == 0) {
        out.depth_size = dims[2] / heads;
      } else if (dims.size() == 4 && dims[2] == heads && operand.split_output < 0) {
        out.depth_size = dims[3];
        ld = heads * dims[3];
      } else {
        return Unsupported(std::string(role) + "'s dims do not split into the scores' heads");
      }
      out.batch_size = dims[0], out.seq_size = dims[1];
      out.batch = dims[1] * ld, out.head = out.depth_size, out.seq = ld, out.depth = 1;
      break;
    case HeadLayout::kView:  // refused above
    case HeadLayout::kHeadsFirst:
    case HeadLayout::kHeadsFirstTransposed: {
      if (dims.size() != 4 || dims[1] != heads || operand.split_output >= 0) {
        return Unsupported(std::string(role) + " is not a [B,H,S,D] tensor of the scores' heads");
      }
      const bool transposed = operand.layout == HeadLayout::kHeadsFirstTransposed;
      out.batch_size = dims[0];
      out.seq_size = transposed ? dims[3] : dims[2];
      out.depth_size = transposed ? dims[2] : dims[3];
      out.head = dims[2] * dims[3], out.batch = heads * out.head;
      out.seq = transposed ? 1 : dims[3];
      out.depth = transposed ? dims[3] : 1;
      break;
    }
  }
  if (out.depth_size > kMaxAttentionHeadDim) {
    return Unsupported("head_dim " + std::to_string(out.depth_size) + " of " + role + " is above " +
                       std::to_string(kMaxAttentionHeadDim) + " (each lane keeps head_dim/32 accumulators in " +
                       "registers and a K/V tile must fit in 48 KiB of shared memory)");
  }
  if (out.batch_size != geometry.batch || out.depth_size <= 0) {
    return Unsupported(std::string(role) + "'s batch or head size disagrees with the scores'");
  }
  return out;
}

// The mask's element offsets per (b, h, query, key): broadcast strides.
struct MaskAddressing {
  std::string pointer;
  bool additive = true;
  std::array<int64_t, 4> strides = {0, 0, 0, 0};
  DataType dtype = DataType::kUndefined;
};

Result<std::optional<MaskAddressing>> MaskOf(const FusedAttention& attention, const Graph& unfolded,
                                             const Geometry& geometry, DataType dtype, KernelParameters& parameters) {
  if (attention.mask_kind == AttentionMaskKind::kNone) return std::optional<MaskAddressing>();
  if (attention.mask.input < 0) return Unsupported("a mask held as a Constant node inside the body");
  const Value* mask = unfolded.inputs()[static_cast<size_t>(attention.mask.input)];
  MaskAddressing out;
  out.pointer = parameters.InputPointer(attention.mask.input);
  out.dtype = mask->dtype();
  const bool additive =
      attention.op ? out.dtype != DataType::kBool : attention.mask_kind == AttentionMaskKind::kAdditive;
  out.additive = additive;
  if (additive ? out.dtype != dtype : out.dtype != DataType::kBool) {
    return Unsupported("a mask of " + std::string(NameOf(out.dtype)) +
                       (additive ? " added to scores of " + std::string(NameOf(dtype)) : " as a Where condition"));
  }
  const std::vector<int64_t> dims = StaticDims(*mask);
  const std::array<int64_t, 4> target = {geometry.batch, geometry.heads, geometry.queries, geometry.keys};
  if (dims.size() > 4) return Unsupported("a mask of rank above 4");
  const size_t offset = 4 - dims.size();
  int64_t stride = 1;
  for (size_t axis = dims.size(); axis-- > 0;) {
    if (dims[axis] != target[offset + axis] && dims[axis] != 1) {
      return Unsupported("the mask does not broadcast to the scores [B,H,Sq,Sk]");
    }
    out.strides[offset + axis] = dims[axis] == 1 ? 0 : stride;
    stride *= dims[axis];
  }
  return std::optional<MaskAddressing>(out);
}

std::string Number(int64_t value) { return std::to_string(value); }

// The scores' scale: the body's (Q and K prescales included), or Attention-23's (default 1/√D).
std::optional<double> ScaleOf(const FusedAttention& attention, int64_t depth) {
  const double prescale = attention.q.prescale * attention.k.prescale;
  if (attention.op) return attention.op->scale.value_or(1.0 / std::sqrt(static_cast<double>(depth))) * prescale;
  if (prescale != 1.0) return prescale;
  return std::nullopt;
}

// The statements turning `s` (this lane's raw score Q·K) into the body's masked score.
std::string ScoreEpilogue(const FusedAttention& attention, const std::optional<MaskAddressing>& mask, int64_t depth) {
  std::string code;
  if (std::optional<double> scale = ScaleOf(attention, depth)) code += "          s = s * " + FloatLiteral(*scale) + ";\n";
  if (attention.scale) {
    code += "          s = s " + std::string(attention.scale_divides ? "/ " : "* ") + FloatLiteral(*attention.scale) +
            ";\n";
  }
  if (attention.op && attention.op->softcap > 0) {
    const std::string cap = FloatLiteral(attention.op->softcap);
    code += "          s = " + cap + " * tanhf(s / " + cap + ");\n";
  }
  if (mask) {
    const std::string at = mask->pointer + "[(long long)b * " + Number(mask->strides[0]) + "LL + (long long)h * " +
                           Number(mask->strides[1]) + "LL + (long long)query * " + Number(mask->strides[2]) +
                           "LL + (long long)key * " + Number(mask->strides[3]) + "LL]";
    if (mask->additive) {
      code += "          s = s + " + LoadAsCompute(mask->dtype, at) + ";\n";
    } else {
      code += "          if (" + at + " == " + (attention.fill_when_true ? "true" : "false") + ") s = " +
              (std::isinf(attention.fill) ? std::string("__int_as_float(0xff800000)") : FloatLiteral(attention.fill)) +
              ";\n";
    }
  }
  if (attention.op && attention.op->causal) code += "          if (key > query) s = __int_as_float(0xff800000);\n";
  return code;
}

// 1 / l for a row, or what a row without a finite softmax gives.
std::string RowInverse(const FusedAttention& attention) {
  const std::string undefined = "row_max[r] == __int_as_float(0xff800000)";
  if (attention.op) return undefined + " ? 0.0f : 1.0f / row_sum[r]";  // Attention-23: 0
  if (attention.nan_guard) {  // Where(IsNaN(p), 0, p)
    return "(" + undefined + " || row_sum[r] != row_sum[r]) ? 0.0f : 1.0f / row_sum[r]";
  }
  return undefined + " ? __int_as_float(0x7fc00000) : 1.0f / row_sum[r]";  // the softmax's 0/0
}

struct KernelPlan {
  Geometry geometry;
  Addressing q, k, v;
  std::optional<MaskAddressing> mask;
  // Output element (b, h, query, d).
  int64_t out_batch = 0, out_head = 0, out_seq = 0;
  DataType dtype = DataType::kFloat;
};

std::string KernelSource(const FusedAttention& attention, const KernelPlan& plan, const std::string& entry,
                         const std::string& parameters) {
  const int64_t depth = plan.q.depth_size, value_depth = plan.v.depth_size;
  const int64_t value_slots = (value_depth + 31) / 32;
  const int64_t tiles = (plan.geometry.queries + kQueryTile - 1) / kQueryTile;
  const std::string D = Number(depth), DV = Number(value_depth), SQ = Number(plan.geometry.queries),
                    SK = Number(plan.geometry.keys), KD = Number(depth + 1), SLOTS = Number(value_slots);
  const std::string kNegInf = "__int_as_float(0xff800000)";
  std::string code = "\nextern \"C\" __global__ void __launch_bounds__(" + Number(kWarps * 32) + ") " + entry + "(" +
                     parameters + ") {\n";
  code += "  extern __shared__ float shared[];\n";
  code += "  float* q_tile = shared;                                 // [" + Number(kQueryTile) + "][D]\n";
  code += "  float* k_tile = q_tile + " + Number(kQueryTile * depth) + ";  // [" + Number(kKeyTile) +
          "][D + 1]: lanes read distinct banks\n";
  code += "  float* v_tile = k_tile + " + Number(kKeyTile * (depth + 1)) + ";  // [" + Number(kKeyTile) + "][Dv]\n";
  code += "  const int tile = blockIdx.x % " + Number(tiles) + ";\n";
  code += "  const int bh = blockIdx.x / " + Number(tiles) + ";\n";
  code += "  const int b = bh / " + Number(plan.geometry.heads) + ", h = bh % " + Number(plan.geometry.heads) + ";\n";
  code += "  const int first = tile * " + Number(kQueryTile) + ";\n";
  code += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
  code += "  for (int e = threadIdx.x; e < " + Number(kQueryTile * depth) + "; e += " + Number(kWarps * 32) + ") {\n";
  code += "    const int r = e / " + D + ", d = e % " + D + ", query = first + r;\n";
  code += "    q_tile[e] = query < " + SQ + " ? " + LoadAsCompute(plan.q.dtype, plan.q.At("b", "h", "query", "d")) +
          " : 0.0f;\n  }\n";
  code += "  float row_max[" + Number(kRowsPerWarp) + "], row_sum[" + Number(kRowsPerWarp) + "], acc[" +
          Number(kRowsPerWarp) + "][" + SLOTS + "];\n";
  code += "#pragma unroll\n  for (int r = 0; r < " + Number(kRowsPerWarp) + "; ++r) {\n    row_max[r] = " + kNegInf +
          ";\n    row_sum[r] = 0.0f;\n#pragma unroll\n    for (int t = 0; t < " + SLOTS +
          "; ++t) acc[r][t] = 0.0f;\n  }\n";
  code += "  for (int key0 = 0; key0 < " + SK + "; key0 += " + Number(kKeyTile) + ") {\n";
  code += "    __syncthreads();  // Q staged; the previous K/V tile consumed\n";
  code += "    for (int e = threadIdx.x; e < " + Number(kKeyTile * depth) + "; e += " + Number(kWarps * 32) + ") {\n";
  code += "      const int j = e / " + D + ", d = e % " + D + ", key = key0 + j;\n";
  code += "      k_tile[j * " + KD + " + d] = key < " + SK + " ? " +
          LoadAsCompute(plan.k.dtype, plan.k.At("b", "h", "key", "d")) + " : 0.0f;\n    }\n";
  code += "    for (int e = threadIdx.x; e < " + Number(kKeyTile * value_depth) + "; e += " + Number(kWarps * 32) +
          ") {\n";
  code += "      const int j = e / " + DV + ", d = e % " + DV + ", key = key0 + j;\n";
  code += "      v_tile[e] = key < " + SK + " ? " + LoadAsCompute(plan.v.dtype, plan.v.At("b", "h", "key", "d")) +
          " : 0.0f;\n    }\n";
  code += "    __syncthreads();\n";
  code += "    const int key = key0 + lane;\n";
  code += "#pragma unroll\n    for (int r = 0; r < " + Number(kRowsPerWarp) + "; ++r) {\n";
  code += "      const int row = warp * " + Number(kRowsPerWarp) + " + r, query = first + row;\n";
  code += "      if (query >= " + SQ + ") continue;  // the same for the whole warp\n";
  code += "      float s = " + kNegInf + ";\n";
  code += "      if (key < " + SK + ") {\n        s = 0.0f;\n";
  code += "        for (int d = 0; d < " + D + "; ++d) s += q_tile[row * " + D + " + d] * k_tile[lane * " + KD +
          " + d];\n";
  code += "        {\n" + ScoreEpilogue(attention, plan.mask, depth) + "        }\n      }\n";
  code += "      float tile_max = s;\n";
  code += "#pragma unroll\n      for (int o = 16; o > 0; o >>= 1) { const float other = __shfl_xor_sync(0xffffffffu, "
          "tile_max, o); tile_max = (other > tile_max || other != other) ? other : tile_max; }\n";
  code += "      const float new_max = (tile_max > row_max[r] || tile_max != tile_max) ? tile_max : row_max[r];\n";
  code += "      if (new_max == " + kNegInf + ") continue;  // every score so far -inf: nothing to add yet\n";
  code += "      const float p = key < " + SK + " ? expf(s - new_max) : 0.0f;\n";
  code += "      const float correction = expf(row_max[r] - new_max);\n";
  code += "      float tile_sum = p;\n";
  code += "#pragma unroll\n      for (int o = 16; o > 0; o >>= 1) tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, o);\n";
  code += "      row_sum[r] = row_sum[r] * correction + tile_sum;\n";
  code += "      row_max[r] = new_max;\n";
  code += "#pragma unroll\n      for (int t = 0; t < " + SLOTS + "; ++t) acc[r][t] *= correction;\n";
  code += "      for (int j = 0; j < " + Number(kKeyTile) + "; ++j) {\n";
  code += "        const float pj = __shfl_sync(0xffffffffu, p, j);\n";
  code += "#pragma unroll\n        for (int t = 0; t < " + SLOTS + "; ++t) {\n";
  code += "          const int d = lane + 32 * t;\n";
  code += "          if (d < " + DV + ") acc[r][t] += pj * v_tile[j * " + DV + " + d];\n        }\n      }\n";
  code += "    }\n  }\n";
  code += "#pragma unroll\n  for (int r = 0; r < " + Number(kRowsPerWarp) + "; ++r) {\n";
  code += "    const int query = first + warp * " + Number(kRowsPerWarp) + " + r;\n";
  code += "    if (query >= " + SQ + ") continue;\n";
  code += "    const float inverse = " + RowInverse(attention) + ";\n";
  code += "#pragma unroll\n    for (int t = 0; t < " + SLOTS + "; ++t) {\n";
  code += "      const int d = lane + 32 * t;\n";
  code += "      if (d < " + DV + ") out0[(long long)b * " + Number(plan.out_batch) + "LL + (long long)h * " +
          Number(plan.out_head) + "LL + (long long)query * " + Number(plan.out_seq) + "LL + d] = " +
          StoreFromCompute(plan.dtype, "inverse == 0.0f ? 0.0f : acc[r][t] * inverse") + ";\n";
  code += "    }\n  }\n}\n";
  return code;
}

Status CheckGeometry(const KernelPlan& plan) {
  const Geometry& g = plan.geometry;
  if (plan.q.seq_size != g.queries || plan.k.seq_size != g.keys || plan.v.seq_size != g.keys) {
    return Unsupported("Q, K and V sequence lengths disagree with the scores'");
  }
  if (plan.q.depth_size != plan.k.depth_size) return Unsupported("Q and K head sizes differ");
  for (const Addressing* operand : {&plan.q, &plan.k, &plan.v}) {
    if (operand->dtype != plan.dtype) return Unsupported("Q, K and V of different dtypes");
  }
  if (plan.dtype != DataType::kFloat && plan.dtype != DataType::kFloat16 && plan.dtype != DataType::kBFloat16) {
    return Unsupported(std::string(NameOf(plan.dtype)) + " (float, float16 and bfloat16 only)");
  }
  return Status::Ok();
}

// Output element strides, checked against the body's output shape.
Status PlanOutput(const FusedAttention& attention, const Value& output, KernelPlan& plan) {
  const Geometry& g = plan.geometry;
  const int64_t dv = plan.v.depth_size;
  std::vector<int64_t> expected;
  if (attention.merge && attention.merge_perm != std::vector<int64_t>{0, 2, 1, 3}) {
    return Unsupported("a head merge other than [B,Sq,H·D] is not generated for CUDA yet");
  }
  if (attention.merge) {
    expected = {g.batch, g.queries, g.heads * dv};
    plan.out_batch = g.queries * g.heads * dv, plan.out_head = dv, plan.out_seq = g.heads * dv;
  } else {
    expected = {g.batch, g.heads, g.queries, dv};
    plan.out_batch = g.heads * g.queries * dv, plan.out_head = g.queries * dv, plan.out_seq = dv;
  }
  if (StaticDims(output) != expected || output.dtype() != plan.dtype) {
    return Unsupported("the body's output is not the merged or per-head context of the scores");
  }
  return Status::Ok();
}

}  // namespace

Result<GeneratedProgram> GenerateAttention(const Graph& typed_body, std::string_view name) {
  UnfoldedBody unfolded = Unfold(typed_body);
  FUSIONOPT_ASSIGN_OR_RETURN(std::optional<FusedAttention> attention, Recognize(*unfolded.graph));
  if (!attention) return Unsupported("the body is not a fused attention (patterns/attention.h)");
  std::vector<int64_t> scores;
  if (const Node* core = FindOp(*unfolded.graph, "Attention"); core != nullptr && attention->op) {
    const std::vector<int64_t> q = StaticDims(*core->input(0)), k = StaticDims(*core->input(1));
    if (q.size() != 4 || k.size() != 4) return Unsupported("the Attention node's operands are not 4-D");
    scores = {q[0], q[1], q[2], k[2]};
  } else {
    const Node* softmax = FindOp(*unfolded.graph, "Softmax");
    scores = StaticDims(*softmax->input(0));
    if (scores.size() != 4 || NormalizedAxis(attention->softmax_axis, 4) != 3) {
      return Unsupported("the softmax is not over the last axis of [B,H,Sq,Sk] scores");
    }
  }
  KernelParameters parameters(typed_body, unfolded);
  KernelPlan plan;
  plan.geometry = {scores[0], scores[1], scores[2], scores[3]};
  if (ElementCount(scores) == 0) return Unsupported("empty scores");
  const Graph& graph = *unfolded.graph;
  FUSIONOPT_ASSIGN_OR_RETURN(plan.q, AddressOf(*attention, attention->q, graph, plan.geometry, parameters, "Q"));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.k, AddressOf(*attention, attention->k, graph, plan.geometry, parameters, "K"));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.v, AddressOf(*attention, attention->v, graph, plan.geometry, parameters, "V"));
  plan.dtype = plan.q.dtype;
  FUSIONOPT_RETURN_IF_ERROR(CheckGeometry(plan));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.mask, MaskOf(*attention, graph, plan.geometry, plan.dtype, parameters));
  FUSIONOPT_RETURN_IF_ERROR(
      PlanOutput(*attention, *typed_body.outputs()[static_cast<size_t>(attention->result_output)], plan));
  if (attention->result_output != 0) return Unsupported("the result is not the body's only output");
  if (attention->merge_view) {  // the context reshaped to its own shape before the merge
    bool same = false;
    for (const auto& node : graph.nodes()) {
      const Node* producer = node->op_type() == "Reshape" ? node->input(0)->producer() : nullptr;
      if (producer != nullptr && (producer->op_type() == "Attention" ||
                                  (producer->op_type() == "MatMul" && StaticDims(*producer->output(0)).size() == 4 &&
                                   node->output(0)->uses().size() == 1))) {
        same = StaticDims(*node->output(0)) == StaticDims(*node->input(0));
      }
    }
    if (!same) return Unsupported("the context's Reshape before the head merge is not to its own shape");
  }

  const int64_t tiles = (plan.geometry.queries + kQueryTile - 1) / kQueryTile;
  const int64_t blocks = plan.geometry.batch * plan.geometry.heads * tiles;
  if (blocks > 0x7fffffffLL) return Unsupported("more query tiles than one grid holds");
  const std::string entry = KernelIdentifier(name);
  GeneratedProgram program;
  program.name = entry;
  program.source = std::string(SourcePrelude()) + KernelSource(*attention, plan, entry, parameters.Declaration());
  GeneratedKernel kernel;
  kernel.entry = entry;
  kernel.grid = {static_cast<uint32_t>(blocks), 1, 1};
  kernel.block = {kWarps * 32, 1, 1};
  kernel.shared_bytes = static_cast<uint32_t>(
      (kQueryTile * plan.q.depth_size + kKeyTile * (plan.k.depth_size + 1) + kKeyTile * plan.v.depth_size) *
      sizeof(float));
  program.kernels.push_back(kernel);
  program.constant_inputs = parameters.constant_inputs();
  program.description = "flash attention (online softmax, " + std::to_string(kQueryTile) + " queries x " +
                        std::to_string(kKeyTile) + " keys per tile, head_dim " +
                        std::to_string(plan.q.depth_size) + ")" +
                        (plan.mask ? (plan.mask->additive ? ", additive mask"
                                                                                           : ", boolean mask")
                                   : "");
  return program;
}

}  // namespace fusionopt::cuda
