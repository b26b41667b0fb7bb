// Fused attention on tensor cores (attention_codegen.h): FlashAttention-2's register layout on
// mma.sync.m16n8k16 with fp16 or bf16 operands and fp32 accumulators.
//
// One CTA of 4 warps per (batch·head, block of 64 queries); each warp owns 16 query rows. Q's
// block is staged in shared memory once and kept in registers as A fragments; K and V pass
// through shared memory 32 keys at a time (V transposed, so that every B fragment is one 32-bit
// load). A warp's S = Q·Kᵀ tile (16 × 32) stays in the accumulator registers, whose layout the
// PTX ISA fixes (row groupID and groupID + 8, columns 2·(lane % 4) + {0, 1}): each row's
// maximum and sum are four lanes' values reduced with two shuffles, and the exponentiated tile
// is repacked in registers as the A fragments of P·V — the layout of two adjacent accumulator
// tiles is the A layout. Rows are rescaled in the accumulators; 1/l is applied once at the end.
// Rounding: Q, K, V and rotated Q/K are stored as the operands' type; P is rounded to it
// before P·V (as FlashAttention does); every sum is fp32.
#include <string>

#include "cuda_runtime/codegen/attention_kernel_plan.h"
#include "cuda_runtime/codegen/cuda_types.h"

namespace fusionopt::cuda::attention_kernel {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 16;  // the mma's M
constexpr int kQueryTile = kWarps * kRowsPerWarp;
constexpr int kKeyTile = 32;       // four accumulator tiles of 8 keys
constexpr int kRowPadding = 8;     // halves: rows start 4 banks apart, so fragment loads do not conflict

int64_t QueryTiles(const KernelPlan& plan) { return (plan.geometry.queries + kQueryTile - 1) / kQueryTile; }

int64_t RoundUp(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Head sizes as the fragments tile them: Q·K's to the mma's K (16), V's to its N (8); the
// padding is staged as zeros, and padded output columns are not stored.
int64_t PaddedDepth(const KernelPlan& plan) { return RoundUp(plan.q.depth_size, 16); }
int64_t PaddedValueDepth(const KernelPlan& plan) { return RoundUp(plan.v.depth_size, 8); }

// The device function computing D += A·B (m16n8k16, fp32 accumulators) for the operands' type.
std::string MmaName(DataType dtype) {
  return dtype == DataType::kFloat16 ? "fo_mma_m16n8k16_f16" : "fo_mma_m16n8k16_bf16";
}

// fo_bits (float → the operand type's 16 bits), fo_pack (two floats → one .f16x2/.bf16x2
// register, the first in the low half) and the mma (MmaName). The mma exists in device
// compilation only; the host shim of the tests provides its own.
std::string Helpers(DataType dtype) {
  const bool half = dtype == DataType::kFloat16;
  const std::string to_bits =
      half ? "__half_as_ushort(__float2half_rn(x))" : "__bfloat16_as_ushort(__float2bfloat16_rn(x))";
  const std::string mma_name = MmaName(dtype);
  const std::string ptx_type = half ? "f16" : "bf16";
  std::string code;
  code += "\n__device__ __forceinline__ unsigned short fo_bits(float x) { return " + to_bits + "; }\n";
  code += "__device__ __forceinline__ unsigned fo_pack(float low, float high) {\n";
  code += "  return (unsigned)fo_bits(low) | ((unsigned)fo_bits(high) << 16);\n}\n";
  code += "#if defined(__CUDA_ARCH__)\n";
  code += "__device__ __forceinline__ void " + mma_name +
          "(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {\n";
  code += "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." + ptx_type + "." + ptx_type +
          ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n";
  code += "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n";
  code += "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n}\n";
  code += "#endif\n";
  code += "__device__ __forceinline__ unsigned fo_word(const unsigned short* at) {\n";
  code += "  return *reinterpret_cast<const unsigned*>(at);\n}\n";
  return code;
}

// A block-wide loop staging `rows` × `width` elements of an operand in shared memory as 16 bits:
// element (j, d) — `index` names j's sequence position for Load — goes to `slot`, zero where the
// position is past `length` or d past the operand's own width (the padding).
std::string StageLoop(const std::string& indent, int64_t rows, int64_t width, const std::string& index,
                      const std::string& first, int64_t length, int64_t operand_width, const std::string& slot,
                      const std::string& load) {
  const std::string W = Number(width);
  return indent + "for (int e = threadIdx.x; e < " + Number(rows * width) + "; e += " + Number(kWarps * 32) + ") {\n" +
         indent + "  const int j = e / " + W + ", d = e % " + W + ", " + index + " = " + first + " + j;\n" + indent +
         "  " + slot + " = fo_bits(" + index + " < " + Number(length) + " && d < " + Number(operand_width) + " ? " +
         load + " : 0.0f);\n" + indent + "}\n";
}

// Stages the CTA's Q block in shared memory as 16-bit operands.
std::string StageQueries(const KernelPlan& plan) {
  const std::string QS = Number(PaddedDepth(plan) + kRowPadding);
  return StageLoop("  ", kQueryTile, PaddedDepth(plan), "query", "first", plan.geometry.queries, plan.q.depth_size,
                   "q_tile[j * " + QS + " + d]", Load(plan.q, plan.q_rotary, "query"));
}

// Stages the tile of keys from key0 as 16-bit operands: K row-major, V transposed.
std::string StageKeysAndValues(const KernelPlan& plan) {
  const std::string QS = Number(PaddedDepth(plan) + kRowPadding), VS = Number(kKeyTile + kRowPadding);
  return StageLoop("    ", kKeyTile, PaddedDepth(plan), "key", "key0", plan.geometry.keys, plan.k.depth_size,
                   "k_tile[j * " + QS + " + d]", Load(plan.k, plan.k_rotary, "key")) +
         StageLoop("    ", kKeyTile, PaddedValueDepth(plan), "key", "key0", plan.geometry.keys, plan.v.depth_size,
                   "v_tile[d * " + VS + " + j]", Load(plan.v, std::nullopt, "key"));
}

// S = Q·Kᵀ for the warp's 16 rows and the tile's 32 keys, then the body's epilogue per score.
std::string Scores(const FusedAttention& attention, const KernelPlan& plan) {
  const int64_t depth = PaddedDepth(plan);
  const std::string QS = Number(depth + kRowPadding), CHUNKS = Number(depth / 16);
  const std::string kNegInf = kNegativeInfinity;
  std::string code;
  code += "    float score[4][4];\n";
  code += "#pragma unroll\n    for (int n = 0; n < 4; ++n) {\n";
  code += "      score[n][0] = score[n][1] = score[n][2] = score[n][3] = 0.0f;\n";
  code += "#pragma unroll\n      for (int c = 0; c < " + CHUNKS + "; ++c) {\n";
  code += "        const unsigned short* at = k_tile + (n * 8 + group) * " + QS + " + c * 16 + pair;\n";
  code += "        " + MmaName(plan.dtype) + "(score[n], q_frag[c], fo_word(at), fo_word(at + 8));\n      }\n    }\n";
  code += "#pragma unroll\n    for (int n = 0; n < 4; ++n) {\n";
  code += "#pragma unroll\n      for (int i = 0; i < 4; ++i) {\n";
  code += "        const int key = key0 + n * 8 + pair + (i & 1);\n";
  code += "        const int query = first + row0 + (i >> 1) * 8;\n";
  code += "        float s = score[n][i];\n";
  code += "        if (key >= " + Number(plan.geometry.keys) + ") {\n          s = " + kNegInf + ";\n";
  code += "        } else if (query < " + Number(plan.geometry.queries) + ") {\n";
  code += ScoreEpilogue(attention, plan, plan.q.depth_size);
  code += "        }\n        score[n][i] = s;\n      }\n    }\n";
  return code;
}

// `statements` for each of this lane's 8 scores of row r, as `score[n][2 * r + c]`.
std::string ForRowScores(const std::string& statements) {
  return "#pragma unroll\n      for (int n = 0; n < 4; ++n) {\n#pragma unroll\n        for (int c = 0; c < 2; ++c) {\n" +
         statements + "        }\n      }\n";
}

// Online softmax over the tile for rows groupID (r = 0) and groupID + 8 (r = 1): the row's
// four lanes agree on the new maximum, keep partial sums, and rescale their accumulators.
std::string OnlineSoftmax(const KernelPlan& plan) {
  const std::string kNegInf = kNegativeInfinity;
  const std::string TILES = Number(PaddedValueDepth(plan) / 8);
  std::string code;
  code += "#pragma unroll\n    for (int r = 0; r < 2; ++r) {\n";
  code += "      float tile_max = " + kNegInf + ";\n";
  code += ForRowScores("          const float v = score[n][2 * r + c];\n"
                       "          tile_max = " + MaxOrNan("v", "tile_max") + ";\n");
  code += "#pragma unroll\n      for (int o = 1; o < 4; o <<= 1) {\n";
  code += "        const float other = __shfl_xor_sync(0xffffffffu, tile_max, o);\n";
  code += "        tile_max = " + MaxOrNan("other", "tile_max") + ";\n      }\n";
  code += "      const float new_max = " + MaxOrNan("tile_max", "row_max[r]") + ";\n";
  code += "      const bool empty = new_max == " + kNegInf + ";  // every score so far -inf\n";
  code += "      const float correction = empty ? 1.0f : expf(row_max[r] - new_max);\n";
  code += "      float tile_sum = 0.0f;\n";
  code += ForRowScores("          const float p = empty ? 0.0f : expf(score[n][2 * r + c] - new_max);\n"
                       "          score[n][2 * r + c] = p;\n          tile_sum += p;\n");
  code += "      row_sum[r] = row_sum[r] * correction + tile_sum;\n";
  code += "      row_max[r] = new_max;\n";
  code += "#pragma unroll\n      for (int t = 0; t < " + TILES + "; ++t) {\n";
  code += "        out[t][2 * r] *= correction;\n        out[t][2 * r + 1] *= correction;\n      }\n    }\n";
  return code;
}

// O += P·V: accumulator tiles 2c and 2c + 1 of P are the A fragment of keys 16c..16c+15.
std::string AccumulateValues(const KernelPlan& plan) {
  const std::string VS = Number(kKeyTile + kRowPadding), TILES = Number(PaddedValueDepth(plan) / 8);
  std::string code;
  code += "#pragma unroll\n    for (int c = 0; c < " + Number(kKeyTile / 16) + "; ++c) {\n";
  code += "      const unsigned p[4] = {fo_pack(score[2 * c][0], score[2 * c][1]), fo_pack(score[2 * c][2], "
          "score[2 * c][3]),\n";
  code += "                             fo_pack(score[2 * c + 1][0], score[2 * c + 1][1]), "
          "fo_pack(score[2 * c + 1][2], score[2 * c + 1][3])};\n";
  code += "#pragma unroll\n      for (int t = 0; t < " + TILES + "; ++t) {\n";
  code += "        const unsigned short* at = v_tile + (t * 8 + group) * " + VS + " + c * 16 + pair;\n";
  code += "        " + MmaName(plan.dtype) + "(out[t], p, fo_word(at), fo_word(at + 8));\n      }\n    }\n";
  return code;
}

std::string Finish(const FusedAttention& attention, const KernelPlan& plan) {
  const std::string TILES = Number(PaddedValueDepth(plan) / 8);
  const bool padded = PaddedValueDepth(plan) != plan.v.depth_size;
  std::string code;
  code += "#pragma unroll\n  for (int r = 0; r < 2; ++r) {\n";
  code += "    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);\n";
  code += "    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);\n";
  code += "    const int query = first + row0 + 8 * r;\n";
  code += "    if (query >= " + Number(plan.geometry.queries) + ") continue;\n";
  code += "    const float inverse = " + RowInverse(attention) + ";\n";
  code += "#pragma unroll\n    for (int t = 0; t < " + TILES + "; ++t) {\n";
  code += "#pragma unroll\n      for (int c = 0; c < 2; ++c) {\n";
  code += "        const int d = t * 8 + pair + c;\n";
  if (padded) code += "        if (d >= " + Number(plan.v.depth_size) + ") continue;\n";
  code += "        " + OutputAt(plan, "d") + " = " +
          StoreFromCompute(plan.dtype, "inverse == 0.0f ? 0.0f : out[t][2 * r + c] * inverse") + ";\n";
  code += "      }\n    }\n  }\n";
  return code;
}

std::string KernelBody(const FusedAttention& attention, const KernelPlan& plan, const std::string& entry,
                       const std::string& parameters) {
  const int64_t depth = PaddedDepth(plan), value_depth = PaddedValueDepth(plan);
  const std::string QS = Number(depth + kRowPadding), CHUNKS = Number(depth / 16), TILES = Number(value_depth / 8);
  std::string code = "\nextern \"C\" __global__ void __launch_bounds__(" + Number(kWarps * 32) + ") " + entry + "(" +
                     parameters + ") {\n";
  code += "  extern __shared__ float shared[];\n";
  code += "  unsigned short* q_tile = reinterpret_cast<unsigned short*>(shared);  // [" + Number(kQueryTile) +
          "][D + pad]\n";
  code += "  unsigned short* k_tile = q_tile + " + Number(kQueryTile * (depth + kRowPadding)) + ";  // [" +
          Number(kKeyTile) + "][D + pad]\n";
  code += "  unsigned short* v_tile = k_tile + " + Number(kKeyTile * (depth + kRowPadding)) + ";  // [Dv][" +
          Number(kKeyTile) + " + pad]: V transposed\n";
  code += "  const int tile = blockIdx.x % " + Number(QueryTiles(plan)) + ";\n";
  code += "  const int bh = blockIdx.x / " + Number(QueryTiles(plan)) + ";\n";
  code += "  const int b = bh / " + Number(plan.geometry.heads) + ", h = bh % " + Number(plan.geometry.heads) + ";\n";
  code += "  const int first = tile * " + Number(kQueryTile) + ";\n";
  code += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n";
  code += "  const int group = lane >> 2, pair = (lane & 3) * 2, row0 = warp * " + Number(kRowsPerWarp) + " + group;\n";
  code += StageQueries(plan);
  code += "  __syncthreads();\n";
  code += "  unsigned q_frag[" + CHUNKS + "][4];\n";
  code += "#pragma unroll\n  for (int c = 0; c < " + CHUNKS + "; ++c) {\n";
  code += "    const unsigned short* at = q_tile + row0 * " + QS + " + c * 16 + pair;\n";
  code += "    q_frag[c][0] = fo_word(at);\n    q_frag[c][1] = fo_word(at + 8 * " + QS + ");\n";
  code += "    q_frag[c][2] = fo_word(at + 8);\n    q_frag[c][3] = fo_word(at + 8 * " + QS + " + 8);\n  }\n";
  code += "  float out[" + TILES + "][4];\n";
  code += "#pragma unroll\n  for (int t = 0; t < " + TILES + "; ++t) out[t][0] = out[t][1] = out[t][2] = out[t][3] = 0.0f;\n";
  code += "  float row_max[2] = {" + std::string(kNegativeInfinity) + ", " + kNegativeInfinity +
          "}, row_sum[2] = {0.0f, 0.0f};\n";
  code += "  for (int key0 = 0; key0 < " + Number(plan.geometry.keys) + "; key0 += " + Number(kKeyTile) + ") {\n";
  code += "    __syncthreads();  // the previous K/V tile consumed\n";
  code += StageKeysAndValues(plan);
  code += "    __syncthreads();\n";
  code += Scores(attention, plan) + OnlineSoftmax(plan) + AccumulateValues(plan);
  code += "  }\n";
  code += Finish(attention, plan);
  code += "}\n";
  return code;
}

}  // namespace

bool TensorCoreEligible(const KernelPlan& plan, int sm_arch) {
  if (sm_arch < 80) return false;
  if (plan.dtype != DataType::kFloat16 && plan.dtype != DataType::kBFloat16) return false;
  return plan.q.depth_size > 0 && plan.v.depth_size > 0;
}

AttentionKernel TensorCoreKernel(const FusedAttention& attention, const KernelPlan& plan, const std::string& entry,
                                 const std::string& parameters) {
  AttentionKernel kernel;
  kernel.source = Helpers(plan.dtype) + KernelBody(attention, plan, entry, parameters);
  kernel.blocks = plan.geometry.batch * plan.geometry.heads * QueryTiles(plan);
  kernel.threads = kWarps * 32;
  const int64_t halves = (kQueryTile + kKeyTile) * (PaddedDepth(plan) + kRowPadding) +
                         PaddedValueDepth(plan) * (kKeyTile + kRowPadding);
  kernel.shared_bytes = static_cast<uint32_t>(halves * 2);
  kernel.description = "flash attention on tensor cores (mma.sync m16n8k16 " +
                       std::string(plan.dtype == DataType::kFloat16 ? "fp16" : "bf16") + ", fp32 accumulators; " +
                       std::to_string(kQueryTile) + " queries x " + std::to_string(kKeyTile) +
                       " keys per tile, head_dim " + std::to_string(plan.q.depth_size) + ")";
  return kernel;
}

}  // namespace fusionopt::cuda::attention_kernel
