#include "cpu_runtime/engine/kernels.h"

namespace fusionopt::cpu {

const KernelRegistry& KernelRegistry::BuiltIn() {
  static const KernelRegistry registry = [] {
    KernelRegistry built;
    RegisterElementwiseKernels(built);
    RegisterDataMovementKernels(built);
    RegisterContractionKernels(built);
    RegisterReductionKernels(built);
    RegisterAttentionKernels(built);
    RegisterQuantizedKernels(built);
    return built;
  }();
  return registry;
}

}  // namespace fusionopt::cpu
