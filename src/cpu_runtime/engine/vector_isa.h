// Which vector instruction set the runtime's own kernels run on (the elementwise engine's
// builds in elementwise/ops*.cc, the row kernels' exp in reduction/math.cc), chosen once per
// process: the widest the CPU and OS have, unless FUSIONOPT_CPU_ELEMENTWISE (baseline, avx2,
// avx512) names a narrower one — how a benchmark measures what the wider build buys on a host.
// Tests switch it to compare builds; UseVectorIsa refuses (returns false) what the CPU lacks.
// oneDNN makes its own choice for its kernels (HostCpu::onednn_isa).
#pragma once

namespace fusionopt::cpu {

enum class VectorIsa { kBaseline, kAvx2, kAvx512 };

VectorIsa ActiveVectorIsa();
bool UseVectorIsa(VectorIsa isa);
bool CpuHasVectorIsa(VectorIsa isa);
const char* VectorIsaName(VectorIsa isa);  // "baseline", "avx2", "avx512"

}  // namespace fusionopt::cpu
