#include "cpu_runtime/einsum/einsum.h"
#include "cpu_runtime/engine/kernels.h"
#include "cpu_runtime/contraction/common.h"

namespace fusionopt::cpu {

void RegisterContractionKernels(KernelRegistry& registry) {
  RegisterMatMulKernels(registry);
  RegisterConvKernels(registry);
  RegisterPoolKernels(registry);
  RegisterNormalizationKernels(registry);
  RegisterEinsumKernels(registry);
}

}  // namespace fusionopt::cpu
