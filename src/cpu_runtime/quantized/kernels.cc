#include "cpu_runtime/quantized/kernels.h"

#include "cpu_runtime/engine/kernels.h"

namespace fusionopt::cpu {

void RegisterQuantizedKernels(KernelRegistry& registry) {
  RegisterQuantizeLinearKernels(registry);
  RegisterIntegerContractionKernels(registry);
  RegisterQLinearKernels(registry);
  RegisterMatMulNBitsKernels(registry);
}

}  // namespace fusionopt::cpu
