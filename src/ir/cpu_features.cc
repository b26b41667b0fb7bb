#include "ir/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace fusionopt {

namespace {

constexpr unsigned kLeaf1EcxF16c = 1u << 29;
constexpr unsigned kLeaf7EdxAmxTile = 1u << 24;
constexpr unsigned kLeaf7EcxAvx512Vbmi = 1u << 1;

struct Registers {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// CPUID leaf 7, subleaf 0 (structured extended features), read once; zeros off x86.
const Registers& Leaf7() {
  static const Registers leaf = [] {
    Registers r;
#if defined(__x86_64__) || defined(__i386__)
    if (!__get_cpuid_count(7, 0, &r.eax, &r.ebx, &r.ecx, &r.edx)) return Registers{};
#endif
    return r;
  }();
  return leaf;
}

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

bool CpuHasAmxTile() { return (Leaf7().edx & kLeaf7EdxAmxTile) != 0; }

bool CpuHasAvx512Vbmi() { return (Leaf7().ecx & kLeaf7EcxAvx512Vbmi) != 0; }

}  // namespace fusionopt
