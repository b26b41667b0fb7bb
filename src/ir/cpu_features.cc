#include "ir/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace fusionopt {

namespace {

constexpr unsigned kLeaf1EcxF16c = 1u << 29;
constexpr unsigned kLeaf7EdxAmxTile = 1u << 24;
constexpr unsigned kLeaf7EcxAvx512Vbmi = 1u << 1;

}  // namespace

bool CpuHasF16c() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && (ecx & kLeaf1EcxF16c) != 0;
  }();
  return has;
#else
  return false;
#endif
}

bool CpuHasAmxTile() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    return (edx & kLeaf7EdxAmxTile) != 0;
  }();
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx512Vbmi() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    return (ecx & kLeaf7EcxAvx512Vbmi) != 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace fusionopt
