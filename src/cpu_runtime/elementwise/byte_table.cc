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
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) __m512i LookUp64(__m512i x, __m512i t0, __m512i t1,
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
    _mm512_storeu_si512(out + i, LookUp64(_mm512_loadu_si512(index + i), t0, t1, t2, t3));
  }
  if (i < count) {
    const __mmask64 rest = ~0ULL >> (64 - (count - i));
    _mm512_mask_storeu_epi8(out + i, rest, LookUp64(_mm512_maskz_loadu_epi8(rest, index + i), t0, t1, t2, t3));
  }
}
#endif

}  // namespace

bool LooksUpBytesWithVbmi() {
#if defined(__x86_64__)
  return ActiveVectorIsa() == VectorIsa::kAvx512 && CpuHasAvx512Vbmi();
#else
  return false;
#endif
}

void LookUpBytes(const uint8_t* table, const uint8_t* index, uint8_t* out, int64_t count) {
#if defined(__x86_64__)
  if (LooksUpBytesWithVbmi()) return LookUpVbmi(table, index, out, count);
#endif
  LookUpScalar(table, index, out, count);
}

}  // namespace fusionopt::cpu::ew
