#include "cpu_runtime/einsum.h"
#include "cpu_runtime/kernels.h"
#include "cpu_runtime/kernels_contraction_common.h"

namespace fusionopt::cpu {

void RegisterContractionKernels(KernelRegistry& registry) {
  RegisterMatMulKernels(registry);
  RegisterConvKernels(registry);
  RegisterPoolKernels(registry);
  RegisterNormalizationKernels(registry);
  RegisterEinsumKernels(registry);
}

}  // namespace fusionopt::cpu
