// Fused attention as one tiled online-softmax kernel (attention_codegen.h).
#include "cuda_runtime/codegen/attention_codegen.h"

#include <cmath>

#include "cuda_runtime/codegen/attention_kernel_plan.h"
#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "ir/constant_value.h"
#include "patterns/attention/attention.h"
#include "patterns/attention/layout.h"

namespace fusionopt::cuda {
namespace attention_kernel {

std::string Addressing::At(const std::string& b, const std::string& h, const std::string& s,
                           const std::string& d) const {
  const std::string head_index = group == 1 ? h : "(" + h + ") / " + std::to_string(group);
  return pointer + "[" + std::to_string(base) + "LL + (long long)(" + b + ") * " + std::to_string(batch) +
         "LL + (long long)(" + head_index + ") * " + std::to_string(head) + "LL + (long long)(" + s + ") * " +
         std::to_string(seq) + "LL + (long long)(" + d + ") * " + std::to_string(depth) + "LL]";
}

std::string Number(int64_t value) { return std::to_string(value); }

std::string MaxOrNan(const std::string& candidate, const std::string& current) {
  return "(" + candidate + " > " + current + " || " + candidate + " != " + candidate + ") ? " + candidate + " : " +
         current;
}

namespace {

// The scores' scale: the body's (Q and K prescales included), or Attention-23's (default 1/√D).
std::optional<double> ScaleOf(const FusedAttention& attention, int64_t depth) {
  const double prescale = attention.q.prescale * attention.k.prescale;
  if (attention.op) return attention.op->scale.value_or(1.0 / std::sqrt(static_cast<double>(depth))) * prescale;
  if (prescale != 1.0) return prescale;
  return std::nullopt;
}

// Element (b, h, query, key) of a mask or score bias.
std::string TermElement(const MaskAddressing& term) {
  return term.pointer + "[(long long)b * " + Number(term.strides[0]) + "LL + (long long)h * " +
         Number(term.strides[1]) + "LL + (long long)query * " + Number(term.strides[2]) + "LL + (long long)key * " +
         Number(term.strides[3]) + "LL]";
}

}  // namespace

// The statements turning `s` (this lane's raw score Q·K) into the body's masked score.
std::string ScoreEpilogue(const FusedAttention& attention, const KernelPlan& plan, int64_t depth) {
  const std::optional<MaskAddressing>& mask = plan.mask;
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
  if (plan.bias) code += "          s = s + " + LoadAsCompute(plan.bias->dtype, TermElement(*plan.bias)) + ";\n";
  if (mask) {
    const std::string at = TermElement(*mask);
    if (mask->additive) {
      code += "          s = s + " + LoadAsCompute(mask->dtype, at) + ";\n";
    } else {
      code += "          if (" + at + " == " + (attention.fill_when_true ? "true" : "false") + ") s = " +
              (std::isinf(attention.fill) ? std::string(kNegativeInfinity) : FloatLiteral(attention.fill)) +
              ";\n";
    }
  }
  if (attention.op && attention.op->causal) code += "          if (key > query) s = " + std::string(kNegativeInfinity) + ";\n";
  return code;
}

// 1 / l for a row, or what a row without a finite softmax gives.
std::string RowInverse(const FusedAttention& attention) {
  const std::string undefined = "row_max[r] == " + std::string(kNegativeInfinity);
  if (attention.op) return undefined + " ? 0.0f : 1.0f / row_sum[r]";  // Attention-23: 0
  if (attention.nan_guard) {  // Where(IsNaN(p), 0, p)
    return "(" + undefined + " || row_sum[r] != row_sum[r]) ? 0.0f : 1.0f / row_sum[r]";
  }
  return undefined + " ? __int_as_float(0x7fc00000) : 1.0f / row_sum[r]";  // the softmax's 0/0
}

// Element (b, h, `s`, d) of an operand as the compute type, rotated when the body rotates it
// (patterns/attention/layout.h's RotaryLayout: the pair partner and the tables' entry read beside it).
std::string Load(const Addressing& operand, const std::optional<RotaryAddressing>& rotary, const std::string& s) {
  const std::string x = LoadAsCompute(operand.dtype, operand.At("b", "h", s, "d"));
  if (!rotary) return x;
  const RotaryLayout& r = rotary->layout;
  const int64_t half = r.dims / 2;
  const std::string H = Number(half);
  const std::string second = r.interleaved ? "((d & 1) != 0)" : "(d >= " + H + ")";
  const std::string partner = r.interleaved ? "(d ^ 1)" : "(" + second + " ? d - " + H + " : d + " + H + ")";
  const std::string column = r.full_width ? "d" : (r.interleaved ? "(d >> 1)" : "(" + second + " ? d - " + H + " : d)");
  const std::string entry = "(long long)b * " + Number(r.batch_stride) + "LL + (long long)(" + s + ") * " +
                            Number(r.row_stride) + "LL + " + column;
  const std::string c = LoadAsCompute(rotary->dtype, rotary->cos + "[" + entry + "]");
  const std::string sn = LoadAsCompute(rotary->dtype, rotary->sin + "[" + entry + "]");
  const std::string p = LoadAsCompute(operand.dtype, operand.At("b", "h", s, partner));
  const std::string turned = "(" + second + " ? " + x + " * " + c + " + " + p + " * " + sn + " : " + x + " * " + c +
                             " - " + p + " * " + sn + ")";
  // A partial rotary turns the first r.dims features; the others pass through.
  return r.dims < operand.depth_size ? "(d < " + Number(r.dims) + " ? " + turned + " : " + x + ")" : turned;
}

std::string OutputAt(const KernelPlan& plan, const std::string& d) {
  return "out0[(long long)b * " + Number(plan.out_batch) + "LL + (long long)h * " + Number(plan.out_head) +
         "LL + (long long)query * " + Number(plan.out_seq) + "LL + " + d + "]";
}

}  // namespace attention_kernel

namespace {

using namespace attention_kernel;

constexpr int kWarps = 4;
constexpr int kQueryTile = 16;              // queries per CTA: 4 per warp
constexpr int kRowsPerWarp = kQueryTile / kWarps;
constexpr int kKeyTile = 32;                // keys per shared-memory tile: one per lane

const Node* FindOp(const Graph& graph, std::string_view op_type) {
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == op_type && IsDefaultDomain(*node)) return node.get();
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

// What the generator knows of the body's inputs: static dims, and the values of the ones held
// as constants (Reshape targets, Split sizes folded by the host).
AttentionInputs StaticInputs(const Graph& unfolded, const UnfoldedBody& folded) {
  AttentionInputs inputs;
  inputs.dims = [&unfolded](int index) -> std::optional<std::vector<int64_t>> {
    if (index < 0 || static_cast<size_t>(index) >= unfolded.inputs().size()) return std::nullopt;
    return StaticDims(*unfolded.inputs()[static_cast<size_t>(index)]);
  };
  inputs.values = [&folded](int index) -> std::optional<std::vector<int64_t>> {
    if (index < 0 || static_cast<size_t>(index) >= folded.folded.size() || folded.folded[index] == nullptr) {
      return std::nullopt;
    }
    return ConstantInts(folded.folded[static_cast<size_t>(index)], InitializerRule::kAllConstant);
  };
  return inputs;
}

Result<Addressing> AddressOf(const OperandLayout& layout, const Graph& unfolded, KernelParameters& parameters,
                             const char* role) {
  Addressing out;
  out.pointer = parameters.InputPointer(layout.input);
  out.dtype = unfolded.inputs()[static_cast<size_t>(layout.input)]->dtype();
  out.base = layout.offset;
  out.batch = layout.batch_stride, out.head = layout.head_stride, out.seq = layout.row_stride;
  out.depth = layout.column_stride;
  out.batch_size = layout.batch, out.seq_size = layout.rows, out.depth_size = layout.columns;
  out.group = layout.group;
  if (out.depth_size > kMaxAttentionHeadDim) {
    return Unsupported("head_dim " + std::to_string(out.depth_size) + " of " + role + " is above " +
                       std::to_string(kMaxAttentionHeadDim) + " (each lane keeps head_dim/32 accumulators in " +
                       "registers and a K/V tile must fit in 48 KiB of shared memory)");
  }
  return out;
}

Result<std::optional<RotaryAddressing>> RotaryOf(const std::optional<RotaryLayout>& layout, const Graph& unfolded,
                                                 KernelParameters& parameters) {
  if (!layout) return std::optional<RotaryAddressing>();
  RotaryAddressing out;
  out.layout = *layout;
  out.cos = parameters.InputPointer(layout->cos);
  out.sin = parameters.InputPointer(layout->sin);
  out.dtype = unfolded.inputs()[static_cast<size_t>(layout->cos)]->dtype();
  if (unfolded.inputs()[static_cast<size_t>(layout->sin)]->dtype() != out.dtype || !StorageType(out.dtype) ||
      (out.dtype != DataType::kFloat && out.dtype != DataType::kFloat16 && out.dtype != DataType::kBFloat16)) {
    return Unsupported("rotary tables of " + std::string(NameOf(out.dtype)));
  }
  return std::optional<RotaryAddressing>(out);
}

// A mask or score bias the kernel reads from body input `term` with `strides`: a Where
// condition (boolean), or `additive` to scores of `dtype` — float32 too, beside 16-bit scores
// upcast first.
Result<MaskAddressing> TermOf(const AttentionInput& term, const std::array<int64_t, 4>& strides, bool additive,
                              const char* what, const Graph& unfolded, DataType dtype, KernelParameters& parameters) {
  if (term.input < 0) return Unsupported(std::string("a ") + what + " held as a Constant node inside the body");
  MaskAddressing out;
  out.pointer = parameters.InputPointer(term.input);
  out.dtype = unfolded.inputs()[static_cast<size_t>(term.input)]->dtype();
  out.additive = additive;
  if (additive ? out.dtype != dtype && out.dtype != DataType::kFloat : out.dtype != DataType::kBool) {
    return Unsupported(std::string("a ") + what + " of " + std::string(NameOf(out.dtype)) +
                       (additive ? " added to scores of " + std::string(NameOf(dtype)) : " as a Where condition"));
  }
  out.strides = strides;
  return out;
}

Result<std::optional<MaskAddressing>> MaskOf(const FusedAttention& attention, const AttentionLayout& layout,
                                             const Graph& unfolded, DataType dtype, KernelParameters& parameters) {
  if (!layout.mask_strides) return std::optional<MaskAddressing>();
  if (attention.mask.input < 0) return Unsupported("a mask held as a Constant node inside the body");
  // Attention-23's mask is additive or boolean by its dtype; the body's by the match.
  const bool additive = attention.op ? unfolded.inputs()[static_cast<size_t>(attention.mask.input)]->dtype() != DataType::kBool
                                     : attention.mask_kind == AttentionMaskKind::kAdditive;
  FUSIONOPT_ASSIGN_OR_RETURN(MaskAddressing mask,
                             TermOf(attention.mask, *layout.mask_strides, additive, "mask", unfolded, dtype, parameters));
  return std::optional<MaskAddressing>(mask);
}

Result<std::optional<MaskAddressing>> BiasOf(const FusedAttention& attention, const AttentionLayout& layout,
                                             const Graph& unfolded, DataType dtype, KernelParameters& parameters) {
  if (!layout.bias_strides) return std::optional<MaskAddressing>();
  FUSIONOPT_ASSIGN_OR_RETURN(MaskAddressing bias, TermOf(attention.bias, *layout.bias_strides, /*additive=*/true,
                                                         "score bias", unfolded, dtype, parameters));
  return std::optional<MaskAddressing>(bias);
}

std::string KernelSource(const FusedAttention& attention, const KernelPlan& plan, const std::string& entry,
                         const std::string& parameters) {
  const int64_t depth = plan.q.depth_size, value_depth = plan.v.depth_size;
  const int64_t value_slots = (value_depth + 31) / 32;
  const int64_t tiles = (plan.geometry.queries + kQueryTile - 1) / kQueryTile;
  const std::string D = Number(depth), DV = Number(value_depth), SQ = Number(plan.geometry.queries),
                    SK = Number(plan.geometry.keys), KD = Number(depth + 1), SLOTS = Number(value_slots);
  const std::string kNegInf = kNegativeInfinity;
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
  code += "    q_tile[e] = query < " + SQ + " ? " + Load(plan.q, plan.q_rotary, "query") + " : 0.0f;\n  }\n";
  code += "  float row_max[" + Number(kRowsPerWarp) + "], row_sum[" + Number(kRowsPerWarp) + "], acc[" +
          Number(kRowsPerWarp) + "][" + SLOTS + "];\n";
  code += "#pragma unroll\n  for (int r = 0; r < " + Number(kRowsPerWarp) + "; ++r) {\n    row_max[r] = " + kNegInf +
          ";\n    row_sum[r] = 0.0f;\n#pragma unroll\n    for (int t = 0; t < " + SLOTS +
          "; ++t) acc[r][t] = 0.0f;\n  }\n";
  code += "  for (int key0 = 0; key0 < " + SK + "; key0 += " + Number(kKeyTile) + ") {\n";
  code += "    __syncthreads();  // Q staged; the previous K/V tile consumed\n";
  code += "    for (int e = threadIdx.x; e < " + Number(kKeyTile * depth) + "; e += " + Number(kWarps * 32) + ") {\n";
  code += "      const int j = e / " + D + ", d = e % " + D + ", key = key0 + j;\n";
  code += "      k_tile[j * " + KD + " + d] = key < " + SK + " ? " + Load(plan.k, plan.k_rotary, "key") +
          " : 0.0f;\n    }\n";
  code += "    for (int e = threadIdx.x; e < " + Number(kKeyTile * value_depth) + "; e += " + Number(kWarps * 32) +
          ") {\n";
  code += "      const int j = e / " + DV + ", d = e % " + DV + ", key = key0 + j;\n";
  code += "      v_tile[e] = key < " + SK + " ? " + Load(plan.v, std::nullopt, "key") + " : 0.0f;\n    }\n";
  code += "    __syncthreads();\n";
  code += "    const int key = key0 + lane;\n";
  code += "#pragma unroll\n    for (int r = 0; r < " + Number(kRowsPerWarp) + "; ++r) {\n";
  code += "      const int row = warp * " + Number(kRowsPerWarp) + " + r, query = first + row;\n";
  code += "      if (query >= " + SQ + ") continue;  // the same for the whole warp\n";
  code += "      float s = " + kNegInf + ";\n";
  code += "      if (key < " + SK + ") {\n        s = 0.0f;\n";
  code += "        for (int d = 0; d < " + D + "; ++d) s += q_tile[row * " + D + " + d] * k_tile[lane * " + KD +
          " + d];\n";
  code += "        {\n" + ScoreEpilogue(attention, plan, depth) + "        }\n      }\n";
  code += "      float tile_max = s;\n";
  code += "#pragma unroll\n      for (int o = 16; o > 0; o >>= 1) { const float other = __shfl_xor_sync(0xffffffffu, "
          "tile_max, o); tile_max = " + MaxOrNan("other", "tile_max") + "; }\n";
  code += "      const float new_max = " + MaxOrNan("tile_max", "row_max[r]") + ";\n";
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
  code += "      if (d < " + DV + ") " + OutputAt(plan, "d") + " = " +
          StoreFromCompute(plan.dtype, "inverse == 0.0f ? 0.0f : acc[r][t] * inverse") + ";\n";
  code += "    }\n  }\n}\n";
  return code;
}

AttentionKernel ScalarKernel(const FusedAttention& attention, const KernelPlan& plan, const std::string& entry,
                             const std::string& parameters) {
  AttentionKernel kernel;
  kernel.source = KernelSource(attention, plan, entry, parameters);
  kernel.blocks = plan.geometry.batch * plan.geometry.heads * ((plan.geometry.queries + kQueryTile - 1) / kQueryTile);
  kernel.threads = kWarps * 32;
  kernel.shared_bytes = static_cast<uint32_t>(
      (kQueryTile * plan.q.depth_size + kKeyTile * (plan.k.depth_size + 1) + kKeyTile * plan.v.depth_size) *
      sizeof(float));
  kernel.description = "flash attention (online softmax, " + std::to_string(kQueryTile) + " queries x " +
                       std::to_string(kKeyTile) + " keys per tile, head_dim " + std::to_string(plan.q.depth_size) +
                       ")";
  return kernel;
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

}  // namespace

Result<GeneratedProgram> GenerateAttention(const Graph& typed_body, std::string_view name,
                                           const CodegenTarget& target) {
  UnfoldedBody unfolded = Unfold(typed_body);
  FUSIONOPT_ASSIGN_OR_RETURN(std::optional<FusedAttention> attention, Recognize(*unfolded.graph));
  if (!attention) return Unsupported("the body is not a fused attention (patterns/attention/attention.h)");
  if (attention->result_output != 0 || typed_body.outputs().size() != 1) {
    return Unsupported("the result is not the body's only output");
  }
  const Graph& graph = *unfolded.graph;
  std::optional<AttentionLayout> layout = LayOutAttention(*attention, StaticInputs(graph, unfolded));
  if (!layout) {
    return Unsupported("the operands' layout at these shapes is no strided view of the inputs, or a Reshape target is "
                       "computed at run time (patterns/attention/layout.h)");
  }
  KernelParameters parameters(typed_body, unfolded);
  KernelPlan plan;
  plan.geometry = {layout->batch, layout->heads, layout->queries, layout->keys};
  FUSIONOPT_ASSIGN_OR_RETURN(plan.q, AddressOf(layout->q, graph, parameters, "Q"));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.k, AddressOf(layout->k, graph, parameters, "K"));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.v, AddressOf(layout->v, graph, parameters, "V"));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.q_rotary, RotaryOf(layout->q_rotary, graph, parameters));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.k_rotary, RotaryOf(layout->k_rotary, graph, parameters));
  plan.dtype = plan.q.dtype;
  FUSIONOPT_RETURN_IF_ERROR(CheckGeometry(plan));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.mask, MaskOf(*attention, *layout, graph, plan.dtype, parameters));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.bias, BiasOf(*attention, *layout, graph, plan.dtype, parameters));
  const Value& output = *typed_body.outputs()[0];
  if (StaticDims(output) != layout->output_dims || output.dtype() != plan.dtype) {
    return Unsupported("the body's output is not the context the layout describes");
  }
  plan.out_batch = layout->output_batch_stride, plan.out_head = layout->output_head_stride;
  plan.out_seq = layout->output_row_stride;
  if (ElementCount(layout->output_dims) == 0) return Unsupported("an empty context");

  const std::string entry = KernelIdentifier(name);
  const AttentionKernel chosen = TensorCoreEligible(plan, target.sm_arch)
                                     ? TensorCoreKernel(*attention, plan, entry, parameters.Declaration())
                                     : ScalarKernel(*attention, plan, entry, parameters.Declaration());
  if (chosen.blocks > 0x7fffffffLL) return Unsupported("more query tiles than one grid holds");
  GeneratedProgram program;
  program.name = entry;
  program.source = std::string(SourcePrelude()) + chosen.source;
  GeneratedKernel kernel;
  kernel.entry = entry;
  kernel.grid = {static_cast<uint32_t>(chosen.blocks), 1, 1};
  kernel.block = {chosen.threads, 1, 1};
  kernel.shared_bytes = chosen.shared_bytes;
  program.kernels.push_back(kernel);
  program.constant_inputs = parameters.constant_inputs();
  program.description =
      chosen.description + (plan.bias ? ", score bias" : "") +
      (plan.mask ? (plan.mask->additive ? ", additive mask" : ", boolean mask") : "");
  return program;
}

}  // namespace fusionopt::cuda
