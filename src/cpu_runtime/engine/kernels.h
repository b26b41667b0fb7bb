// One registration function per kernel family (DESIGN.md §5); registry.cc calls them all.
#pragma once

#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

void RegisterElementwiseKernels(KernelRegistry& registry);    // elementwise/kernels.cc
void RegisterDataMovementKernels(KernelRegistry& registry);   // data_movement/*.cc
void RegisterContractionKernels(KernelRegistry& registry);    // contraction/*.cc (oneDNN)
void RegisterReductionKernels(KernelRegistry& registry);      // reduction/*.cc
void RegisterAttentionKernels(KernelRegistry& registry);      // attention/kernels.cc (opset 23)
void RegisterQuantizedKernels(KernelRegistry& registry);      // quantized/kernels.cc

}  // namespace fusionopt::cpu
