// The attention engine (attention/engine.h). Each task owns one block of queries of one
// (batch, head) and walks the keys block by block —
//
//   S = Q_blk·K_blkᵀ (one dnnl_sgemm), then scaled, capped and masked element by element;
//   m' = max(m, rowmax S);  P = exp(S - m');  l = l·exp(m - m') + rowsum P;  O = O·exp(m - m') + P·V_blk
//
// and writes O / l. float32 operands without rotary embedding are read in place through their
// leading dimensions; float16 ones, and rotated Q and K, are first converted into a float32
// tile. Tasks run in parallel with OpenMP (the session's threads); oneDNN's GEMM runs
// single-threaded inside them. Tiles that change nothing are skipped: keys after the last
// query of a causal block, and boolean-masked tiles whose fill's exponential is exactly 0 for
// every row (GPT-2's causal blocks above the diagonal, read from its buffer).
#include "cpu_runtime/attention/engine.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_runtime/engine/host_cpu.h"
#include "cpu_runtime/reduction/engine.h"
#include "cpu_runtime/reduction/math.h"
#include "ir/float16.h"

namespace fusionopt::cpu::attention {
namespace {

// Query blocks of 128 rows: 64 ran BERT-base's attention (S 128) no faster and Whisper's
// encoder (S 1500) 8% slower. Key blocks are as long as a score tile (query block × key block
// floats) fits in half the core's L2 — 1024 keys on a 1 MiB L2, 512 on 512 KiB — and never
// shorter than 128: each key block is two GEMM calls and a rescale of the running context, and
// on Whisper 128-key blocks cost 15% over 1024 (`fusionopt run --profile`, AVX-512 EPYC).
constexpr int64_t kQueryBlock = 128;
constexpr int64_t kMinKeyBlock = 128;
constexpr int64_t kUnknownL2Bytes = 512 * 1024;

// FUSIONOPT_CPU_ATTENTION_KEY_BLOCK=N forces N-key blocks (tests cover the multi-block path
// with it on any host); read on every run so a test can change it.
int64_t KeyBlockFor(int64_t keys) {
  if (const char* forced = std::getenv("FUSIONOPT_CPU_ATTENTION_KEY_BLOCK")) {
    const int64_t block = std::strtoll(forced, nullptr, 10);
    if (block > 0) return std::min(block, keys);
  }
  const int64_t l2 = ThisHost().l2_bytes > 0 ? ThisHost().l2_bytes : kUnknownL2Bytes;
  const int64_t fitting = l2 / 2 / (kQueryBlock * static_cast<int64_t>(sizeof(float)));
  const int64_t block = std::max(kMinKeyBlock, fitting / kMinKeyBlock * kMinKeyBlock);
  return std::min(block, keys);
}

// Below this many multiply-adds the tasks run on the calling thread.
constexpr int64_t kParallelMinWork = int64_t{1} << 18;
// exp(x) for x below this is exactly 0 in float (reduction::ExpShifted clamps at -87).
constexpr float kVanishingExponent = -200.0f;
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

float LoadElement(const void* base, DataType dtype, int64_t index) {
  if (dtype == DataType::kFloat) return static_cast<const float*>(base)[index];
  return SixteenBitToFloat(dtype == DataType::kBFloat16, static_cast<const uint16_t*>(base)[index]);
}

// Elements [index, index + n) as float32, the 16-bit types through the bulk conversions.
void LoadContiguous(const void* base, DataType dtype, int64_t index, int64_t n, float* out) {
  if (dtype == DataType::kFloat) {
    std::copy_n(static_cast<const float*>(base) + index, n, out);
    return;
  }
  SixteenBitToFloatN(dtype == DataType::kBFloat16, static_cast<const uint16_t*>(base) + index, out, n);
}

void StoreContiguous(void* base, DataType dtype, int64_t index, int64_t n, const float* values) {
  if (dtype == DataType::kFloat) {
    std::copy_n(values, n, static_cast<float*>(base) + index);
    return;
  }
  FloatToSixteenBitN(dtype == DataType::kBFloat16, values, static_cast<uint16_t*>(base) + index, n);
}

// Whether the GEMMs read `operand` where it lies: float32, not rotated, and — for Q and V, which
// the GEMMs read row-major — not stored transposed (K's GEMM reads either).
bool ReadInPlace(const Operand& operand, const std::optional<Rotary>& rotary, bool key = false) {
  return operand.dtype == DataType::kFloat && !rotary && (key || !operand.transposed);
}

int64_t HeadOffset(const Operand& operand, const Problem& problem, int64_t b, int64_t h) {
  const int64_t group = problem.heads / operand.heads;  // grouped-query heads share K and V
  return b * operand.batch_stride + (h / group) * operand.head_stride;
}

void Rotate(const Rotary& rotary, int64_t b, int64_t position, float* x) {
  const int64_t half = rotary.dims / 2;
  const int64_t row = b * rotary.batch_stride + position * rotary.row_stride;
  for (int64_t j = 0; j < half; ++j) {
    const int64_t first = rotary.interleaved ? 2 * j : j;
    const int64_t second = rotary.interleaved ? 2 * j + 1 : j + half;
    const int64_t first_column = rotary.full_width ? first : j;
    const int64_t second_column = rotary.full_width ? second : j;
    const float a = x[first], c = x[second];
    x[first] = a * rotary.cos[row + first_column] - c * rotary.sin[row + first_column];
    x[second] = c * rotary.cos[row + second_column] + a * rotary.sin[row + second_column];
  }
}

// Rows [first, first + rows) of the operand's (b, h) matrix as a dense float32 [rows, columns]
// tile, rotated where the problem says so.
void LoadRows(const Problem& problem, const Operand& operand, const std::optional<Rotary>& rotary, int64_t b,
              int64_t h, int64_t first, int64_t rows, float* tile) {
  const int64_t offset = HeadOffset(operand, problem, b, h);
  for (int64_t r = 0; r < rows; ++r) {
    float* x = tile + r * operand.columns;
    const int64_t row = first + r;
    if (operand.transposed) {
      for (int64_t c = 0; c < operand.columns; ++c) {
        x[c] = LoadElement(operand.base, operand.dtype, offset + c * operand.ld + row);
      }
    } else {
      LoadContiguous(operand.base, operand.dtype, offset + row * operand.ld, operand.columns, x);
    }
    if (rotary) Rotate(*rotary, b, row, x);
  }
}

struct Scratch {
  int64_t key_block;
  std::vector<float> scores, context, row_max, q, k, v, mask_row;
  std::vector<double> row_sum;
  Scratch(const Problem& problem, int64_t key_block_length)
      : key_block(key_block_length),
        scores(static_cast<size_t>(kQueryBlock * key_block)),
        context(static_cast<size_t>(kQueryBlock * problem.value_depth)),
        row_max(static_cast<size_t>(kQueryBlock)),
        row_sum(static_cast<size_t>(kQueryBlock)) {
    if (!ReadInPlace(problem.q, problem.q_rotary)) q.resize(static_cast<size_t>(kQueryBlock * problem.depth));
    if (!ReadInPlace(problem.k, problem.k_rotary, /*key=*/true)) {
      k.resize(static_cast<size_t>(key_block * problem.depth));
    }
    if (!ReadInPlace(problem.v, std::nullopt)) v.resize(static_cast<size_t>(key_block * problem.value_depth));
    for (const Mask* term : {&problem.bias, &problem.mask}) {
      if (term->kind == MaskKind::kAdditive && term->dtype != DataType::kFloat) mask_row.resize(static_cast<size_t>(key_block));
    }
  }
};

class QueryBlockRunner {
 public:
  QueryBlockRunner(const Problem& problem, Scratch& scratch) : p_(problem), s_(scratch) {}

  bool Run(int64_t b, int64_t h, int64_t first, int64_t rows) {
    std::fill(s_.context.begin(), s_.context.end(), 0.0f);
    std::fill(s_.row_max.begin(), s_.row_max.end(), kNegativeInfinity);
    std::fill(s_.row_sum.begin(), s_.row_sum.end(), 0.0);
    const float* q = QueryTile(b, h, first, rows);
    const int64_t key_end = p_.causal ? std::min(p_.keys, first + rows) : p_.keys;
    for (int64_t key = 0; key < key_end; key += s_.key_block) {
      const int64_t keys = std::min(s_.key_block, key_end - key);
      if (TileVanishes(b, h, first, rows, key, keys)) continue;
      if (!Scores(q, b, h, rows, key, keys)) return false;
      for (int64_t r = 0; r < rows; ++r) Accumulate(b, h, first + r, r, key, keys);
      if (!AddValues(b, h, rows, key, keys)) return false;
    }
    WriteRows(b, h, first, rows);
    return true;
  }

 private:
  const float* QueryTile(int64_t b, int64_t h, int64_t first, int64_t rows) {
    if (ReadInPlace(p_.q, p_.q_rotary)) {
      q_ld_ = p_.q.ld;
      return static_cast<const float*>(p_.q.base) + HeadOffset(p_.q, p_, b, h) + first * p_.q.ld;
    }
    LoadRows(p_, p_.q, p_.q_rotary, b, h, first, rows, s_.q.data());
    q_ld_ = p_.depth;
    return s_.q.data();
  }

  bool Scores(const float* q, int64_t b, int64_t h, int64_t rows, int64_t key, int64_t keys) {
    float* s = s_.scores.data();
    const Operand& k = p_.k;
    dnnl_status_t status;
    if (ReadInPlace(k, p_.k_rotary, /*key=*/true)) {
      const float* base = static_cast<const float*>(k.base) + HeadOffset(k, p_, b, h);
      status = k.transposed
                   ? dnnl_sgemm('N', 'N', rows, keys, p_.depth, p_.alpha, q, q_ld_, base + key, k.ld, 0.0f, s, keys)
                   : dnnl_sgemm('N', 'T', rows, keys, p_.depth, p_.alpha, q, q_ld_, base + key * k.ld, k.ld, 0.0f, s,
                                keys);
    } else {
      LoadRows(p_, k, p_.k_rotary, b, h, key, keys, s_.k.data());
      status = dnnl_sgemm('N', 'T', rows, keys, p_.depth, p_.alpha, q, q_ld_, s_.k.data(), p_.depth, 0.0f, s, keys);
    }
    return status == dnnl_success;
  }

  bool AddValues(int64_t b, int64_t h, int64_t rows, int64_t key, int64_t keys) {
    const Operand& v = p_.v;
    const float* values;
    int64_t ld;
    if (ReadInPlace(v, std::nullopt)) {
      values = static_cast<const float*>(v.base) + HeadOffset(v, p_, b, h) + key * v.ld;
      ld = v.ld;
    } else {
      LoadRows(p_, v, std::nullopt, b, h, key, keys, s_.v.data());
      values = s_.v.data();
      ld = p_.value_depth;
    }
    return dnnl_sgemm('N', 'N', rows, p_.value_depth, keys, 1.0f, s_.scores.data(), keys, values, ld, 1.0f,
                      s_.context.data(), p_.value_depth) == dnnl_success;
  }

  static int64_t OffsetIn(const Mask& term, int64_t b, int64_t h, int64_t query, int64_t key) {
    const int64_t* strides = term.strides;
    return b * strides[0] + h * strides[1] + query * strides[2] + key * strides[3];
  }

  // Whether the boolean mask selects its fill over the whole tile and every row's running
  // maximum makes the fill's exponential vanish: the tile changes nothing.
  bool TileVanishes(int64_t b, int64_t h, int64_t first, int64_t rows, int64_t key, int64_t keys) const {
    const Mask& mask = p_.mask;
    if (mask.kind != MaskKind::kBoolean || p_.softcap > 0) return false;
    for (int64_t r = 0; r < rows; ++r) {
      if (!(mask.fill - s_.row_max[static_cast<size_t>(r)] < kVanishingExponent)) return false;
    }
    const auto* condition = static_cast<const uint8_t*>(mask.data);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = condition + OffsetIn(mask, b, h, first + r, key);
      for (int64_t j = 0; j < keys; ++j) {
        if ((row[j * mask.strides[3]] != 0) != mask.fill_when_true) return false;
      }
    }
    return true;
  }

  // One row of a score tile as the graph computes it: divided (what alpha did not scale),
  // capped, masked.
  void ScaleAndMask(int64_t b, int64_t h, int64_t query, int64_t key, int64_t keys, float* z) const {
    if (p_.divisor) {
      const float divisor = *p_.divisor;
      for (int64_t j = 0; j < keys; ++j) z[j] = z[j] / divisor;
    }
    if (p_.softcap > 0) {
      const float cap = p_.softcap;
      for (int64_t j = 0; j < keys; ++j) z[j] = cap * std::tanh(z[j] / cap);
    }
    if (p_.bias.kind == MaskKind::kAdditive) AddTerm(p_.bias, b, h, query, key, keys, z);
    const Mask& mask = p_.mask;
    const int64_t stride = mask.strides[3];
    if (mask.kind == MaskKind::kAdditive) {
      AddTerm(mask, b, h, query, key, keys, z);
    } else if (mask.kind == MaskKind::kBoolean) {
      const auto* condition = static_cast<const uint8_t*>(mask.data) + OffsetIn(mask, b, h, query, key);
      for (int64_t j = 0; j < keys; ++j) {
        if ((condition[j * stride] != 0) == mask.fill_when_true) z[j] = mask.fill;
      }
    }
    if (p_.causal) {
      for (int64_t j = std::max<int64_t>(0, query + 1 - key); j < keys; ++j) z[j] = kNegativeInfinity;
    }
  }

  // z += the additive term's row for (b, h, query) from `key` on.
  void AddTerm(const Mask& term, int64_t b, int64_t h, int64_t query, int64_t key, int64_t keys, float* z) const {
    const int64_t stride = term.strides[3];
    const int64_t offset = OffsetIn(term, b, h, query, key);
    if (term.dtype != DataType::kFloat && stride == 1) {
      float* values = s_.mask_row.data();
      LoadContiguous(term.data, term.dtype, offset, keys, values);
      for (int64_t j = 0; j < keys; ++j) z[j] = z[j] + values[j];
    } else if (term.dtype != DataType::kFloat) {
      for (int64_t j = 0; j < keys; ++j) z[j] = z[j] + LoadElement(term.data, term.dtype, offset + j * stride);
    } else if (stride == 1) {  // contiguous: a loop the compiler vectorizes
      const auto* values = static_cast<const float*>(term.data) + offset;
      for (int64_t j = 0; j < keys; ++j) z[j] = z[j] + values[j];
    } else {
      const auto* values = static_cast<const float*>(term.data) + offset;
      for (int64_t j = 0; j < keys; ++j) z[j] = z[j] + values[j * stride];
    }
  }

  void Accumulate(int64_t b, int64_t h, int64_t query, int64_t r, int64_t key, int64_t keys) {
    float* z = s_.scores.data() + r * keys;
    ScaleAndMask(b, h, query, key, keys, z);
    float& running_max = s_.row_max[static_cast<size_t>(r)];
    const float tile_max =
        reduction::ReduceBlock(z, keys, kNegativeInfinity, [](float value) { return value; }, reduction::TakeMax());
    const float new_max = std::max(running_max, tile_max);
    if (new_max == kNegativeInfinity) {
      std::fill(z, z + keys, 0.0f);  // every score so far -inf: nothing to add yet
      return;
    }
    reduction::ExpShifted(z, new_max, z, keys);
    const double sum = reduction::ReduceBlock(z, keys, 0.0f, [](float value) { return value; }, std::plus<float>());
    const float correction = std::exp(running_max - new_max);
    double& running_sum = s_.row_sum[static_cast<size_t>(r)];
    running_sum = running_sum * correction + sum;
    if (correction != 1.0f) {
      float* row = s_.context.data() + r * p_.value_depth;
      for (int64_t d = 0; d < p_.value_depth; ++d) row[d] *= correction;
    }
    running_max = new_max;
  }

  // 1 / l for a row, or what a row without a finite softmax gives (NaN, or 0 as a factor).
  float RowFactor(int64_t r) const {
    const bool undefined = s_.row_max[static_cast<size_t>(r)] == kNegativeInfinity;  // every score -inf: 0/0
    const double sum = s_.row_sum[static_cast<size_t>(r)];
    switch (p_.empty_rows) {
      case EmptyRows::kZeroWhereNaN:
        if (undefined || std::isnan(sum)) return 0.0f;
        break;
      case EmptyRows::kZeroIfUndefined:
        if (undefined) return 0.0f;
        break;
      case EmptyRows::kNaN: break;
    }
    return undefined ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(1.0 / sum);
  }

  void WriteRows(int64_t b, int64_t h, int64_t first, int64_t rows) const {
    const int64_t dv = p_.value_depth;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t offset = b * p_.out_batch_stride + h * p_.out_head_stride + (first + r) * p_.out_ld;
      float* row = s_.context.data() + r * dv;
      const float factor = RowFactor(r);
      // A zero factor must give 0 even where the context holds NaN (0 · NaN is NaN).
      const bool zero = factor == 0.0f;
      if (p_.out_dtype != DataType::kFloat) {  // scaled in place, then stored in bulk
        for (int64_t d = 0; d < dv; ++d) row[d] = zero ? 0.0f : row[d] * factor;
        StoreContiguous(p_.out, p_.out_dtype, offset, dv, row);
      } else {
        float* out = static_cast<float*>(p_.out) + offset;
        for (int64_t d = 0; d < dv; ++d) out[d] = zero ? 0.0f : row[d] * factor;
      }
    }
  }

  const Problem& p_;
  Scratch& s_;
  int64_t q_ld_ = 0;
};

}  // namespace

bool Consistent(const Problem& problem) {
  const Operand &q = problem.q, &k = problem.k, &v = problem.v;
  if (!IsAttentionFloat(q.dtype) || !IsAttentionFloat(k.dtype) || !IsAttentionFloat(v.dtype) ||
      !IsAttentionFloat(problem.out_dtype)) {
    return false;
  }
  if (problem.batch <= 0 || problem.heads <= 0 || problem.queries <= 0 || problem.keys <= 0 || problem.depth <= 0 ||
      problem.value_depth <= 0) {
    return false;
  }
  for (const Operand* operand : {&k, &v}) {
    if (operand->batch != problem.batch || operand->heads <= 0 || problem.heads % operand->heads != 0 ||
        operand->rows != problem.keys) {
      return false;
    }
  }
  if (q.batch != problem.batch || q.heads != problem.heads || q.rows != problem.queries) return false;
  if (q.columns != problem.depth || k.columns != problem.depth || v.columns != problem.value_depth) return false;
  for (const auto* rotary : {&problem.q_rotary, &problem.k_rotary}) {
    if (*rotary && ((*rotary)->dims <= 0 || (*rotary)->dims % 2 != 0 || (*rotary)->dims > problem.depth)) return false;
  }
  return true;
}

Status Run(const Problem& problem) {
  if (!Consistent(problem)) return InternalError("attention: inconsistent problem");
  const int64_t blocks = (problem.queries + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = problem.batch * problem.heads * blocks;
  const int64_t work = problem.batch * problem.heads * problem.queries * problem.keys *
                       (problem.depth + problem.value_depth);
  std::atomic<bool> ok{true};
#pragma omp parallel if (work >= kParallelMinWork)
  {
    Scratch scratch(problem, KeyBlockFor(problem.keys));
    QueryBlockRunner runner(problem, scratch);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / (problem.heads * blocks);
      const int64_t h = task / blocks % problem.heads;
      const int64_t first = task % blocks * kQueryBlock;
      if (!runner.Run(b, h, first, std::min(kQueryBlock, problem.queries - first))) ok = false;
    }
  }
  return ok ? Status::Ok() : InternalError("attention: oneDNN's sgemm failed");
}

void RotateRows(const Operand& in, const Rotary& rotary, const Operand& out) {
  std::vector<float> row(static_cast<size_t>(in.columns));
  for (int64_t b = 0; b < in.batch; ++b) {
    for (int64_t h = 0; h < in.heads; ++h) {
      for (int64_t r = 0; r < in.rows; ++r) {
        const int64_t from = b * in.batch_stride + h * in.head_stride + r * in.ld;
        const int64_t to = b * out.batch_stride + h * out.head_stride + r * out.ld;
        LoadContiguous(in.base, in.dtype, from, in.columns, row.data());
        Rotate(rotary, b, r, row.data());
        StoreContiguous(const_cast<void*>(out.base), out.dtype, to, in.columns, row.data());
      }
    }
  }
}

}  // namespace fusionopt::cpu::attention
