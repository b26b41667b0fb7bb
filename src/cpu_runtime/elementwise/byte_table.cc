#include "cpu_runtime/elementwise/byte_table.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_runtime/engine/vector_isa.h"
#include "ir/cpu_features.h"

namespace fusionopt::cpu::ew {
namespace {

void LookUpScalar(const uint8_t* table, const uint8_t* index, uint8_t* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = table[index[i]];
}

#if defined(__x86_64__)
// vpermi2b picks from 128 bytes by an index's low 7 bits: one lookup for each half of the
// table, and the index's top bit chooses between them.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) __m512i LookUp64Vbmi(__m512i x, __m512i t0, __m512i t1,
                                                                            __m512i t2, __m512i t3) {
  const __m512i low = _mm512_permutex2var_epi8(t0, x, t1);
  const __m512i high = _mm512_permutex2var_epi8(t2, x, t3);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), low, high);
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void LookUpVbmi(const uint8_t* table, const uint8_t* index,
                                                                       uint8_t* out, int64_t count) {
  const __m512i t0 = _mm512_loadu_si512(table);
  const __m512i t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128);
  const __m512i t3 = _mm512_loadu_si512(table + 192);
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    _mm512_storeu_si512(out + i, LookUp64Vbmi(_mm512_loadu_si512(index + i), t0, t1, t2, t3));
  }
  if (i < count) {
    const __mmask64 rest = ~0ULL >> (64 - (count - i));
    _mm512_mask_storeu_epi8(out + i, rest, LookUp64Vbmi(_mm512_maskz_loadu_epi8(rest, index + i), t0, t1, t2, t3));
  }
}

// pshufb looks up 16 entries by an index's low 4 bits within each 128-bit lane: the table's
// row k (entries 16k..16k+15) is taken where the index's high nibble is k.
__attribute__((target("avx512f,avx512bw"))) __m512i LookUp64Bw(__m512i x, const __m512i* rows) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i low = _mm512_and_si512(x, nibble);
  const __m512i high = _mm512_and_si512(_mm512_srli_epi16(x, 4), nibble);
  __m512i result = _mm512_setzero_si512();
  for (int k = 0; k < 16; ++k) {
    const __mmask64 row = _mm512_cmpeq_epi8_mask(high, _mm512_set1_epi8(static_cast<char>(k)));
    result = _mm512_mask_shuffle_epi8(result, row, rows[k], low);
  }
  return result;
}

__attribute__((target("avx512f,avx512bw"))) void LookUpAvx512Bw(const uint8_t* table, const uint8_t* index,
                                                                uint8_t* out, int64_t count) {
  __m512i rows[16];
  for (int k = 0; k < 16; ++k) {
    rows[k] = _mm512_maskz_broadcast_i32x4(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * k)));
  }
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) _mm512_storeu_si512(out + i, LookUp64Bw(_mm512_loadu_si512(index + i), rows));
  if (i < count) {
    const __mmask64 rest = ~0ULL >> (64 - (count - i));
    _mm512_mask_storeu_epi8(out + i, rest, LookUp64Bw(_mm512_maskz_loadu_epi8(rest, index + i), rows));
  }
}

#endif

}  // namespace

bool HostRunsByteTableLoop(ByteTableLoop loop) {
  switch (loop) {
    case ByteTableLoop::kScalar: return true;
    case ByteTableLoop::kAvx512Bw: return CpuHasVectorIsa(VectorIsa::kAvx512);
    case ByteTableLoop::kVbmi: return CpuHasVectorIsa(VectorIsa::kAvx512) && CpuHasAvx512Vbmi();
  }
  return false;
}

ByteTableLoop ActiveByteTableLoop() {
#if defined(__x86_64__)
  switch (ActiveVectorIsa()) {
    case VectorIsa::kAvx512: return CpuHasAvx512Vbmi() ? ByteTableLoop::kVbmi : ByteTableLoop::kAvx512Bw;
    case VectorIsa::kAvx2: case VectorIsa::kBaseline: break;
  }
#endif
  return ByteTableLoop::kScalar;
}

void LookUpBytesWith(ByteTableLoop loop, const uint8_t* table, const uint8_t* index, uint8_t* out, int64_t count) {
#if defined(__x86_64__)
  switch (loop) {
    case ByteTableLoop::kVbmi: return LookUpVbmi(table, index, out, count);
    case ByteTableLoop::kAvx512Bw: return LookUpAvx512Bw(table, index, out, count);
    case ByteTableLoop::kScalar: break;
  }
#endif
  LookUpScalar(table, index, out, count);
}

void LookUpBytes(const uint8_t* table, const uint8_t* index, uint8_t* out, int64_t count) {
  LookUpBytesWith(ActiveByteTableLoop(), table, index, out, count);
}

}  // namespace fusionopt::cpu::ew
