// One registration function per kernel family (DESIGN.md §5); registry.cc calls them all.
#pragma once

#include "cpu_runtime/kernel.h"

namespace fusionopt::cpu {

void RegisterElementwiseKernels(KernelRegistry& registry);    // kernels_elementwise.cc
void RegisterDataMovementKernels(KernelRegistry& registry);   // kernels_data_movement*.cc
void RegisterContractionKernels(KernelRegistry& registry);    // kernels_contraction*.cc (oneDNN)
void RegisterReductionKernels(KernelRegistry& registry);      // kernels_reduction*.cc
void RegisterAttentionKernels(KernelRegistry& registry);      // kernels_attention.cc (opset 23)

}  // namespace fusionopt::cpu
