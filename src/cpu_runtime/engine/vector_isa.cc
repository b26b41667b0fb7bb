#include "cpu_runtime/engine/vector_isa.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace fusionopt::cpu {
namespace {

// The widest set the CPU runs, capped by FUSIONOPT_CPU_ELEMENTWISE when it names a set (an
// unknown value is ignored: the variable is a benchmarking switch, not configuration).
VectorIsa Chosen() {
  VectorIsa widest = CpuHasVectorIsa(VectorIsa::kAvx512) ? VectorIsa::kAvx512
                     : CpuHasVectorIsa(VectorIsa::kAvx2) ? VectorIsa::kAvx2
                                                         : VectorIsa::kBaseline;
  const char* requested = std::getenv("FUSIONOPT_CPU_ELEMENTWISE");
  if (requested == nullptr) return widest;
  for (VectorIsa isa : {VectorIsa::kBaseline, VectorIsa::kAvx2, VectorIsa::kAvx512}) {
    if (std::string_view(requested) == VectorIsaName(isa) && isa < widest) return isa;
  }
  return widest;
}

std::atomic<VectorIsa>& Active() {
  static std::atomic<VectorIsa> isa{Chosen()};
  return isa;
}

}  // namespace

// libgcc's checks include the OS saving the wider registers (XGETBV), not only CPUID.
bool CpuHasVectorIsa(VectorIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case VectorIsa::kBaseline: return true;
    // The AVX2 builds also use FMA (elementwise/ops.cc); every AVX2 CPU from Intel and AMD has it.
    case VectorIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case VectorIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
  return false;
}

VectorIsa ActiveVectorIsa() { return Active().load(std::memory_order_relaxed); }

bool UseVectorIsa(VectorIsa isa) {
  if (!CpuHasVectorIsa(isa)) return false;
  Active().store(isa, std::memory_order_relaxed);
  return true;
}

const char* VectorIsaName(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kBaseline: return "baseline";
    case VectorIsa::kAvx2: return "avx2";
    case VectorIsa::kAvx512: return "avx512";
  }
  return "baseline";
}

}  // namespace fusionopt::cpu
