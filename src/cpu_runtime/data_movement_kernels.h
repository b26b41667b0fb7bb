// Registration of the data-movement family, one function per file (kernels_data_movement*.cc);
// RegisterDataMovementKernels (kernels.h) calls them all.
#pragma once

#include "cpu_runtime/kernel.h"

namespace fusionopt::cpu::data_movement {

void RegisterViewKernels(KernelRegistry& registry);         // kernels_data_movement.cc
void RegisterTransposeKernels(KernelRegistry& registry);    // kernels_data_movement_transpose.cc
void RegisterConcatSplitKernels(KernelRegistry& registry);  // kernels_data_movement_concat.cc
void RegisterSliceKernels(KernelRegistry& registry);        // kernels_data_movement_slice.cc
void RegisterPadKernels(KernelRegistry& registry);          // kernels_data_movement_pad.cc
void RegisterGatherKernels(KernelRegistry& registry);       // kernels_data_movement_gather.cc
void RegisterScatterKernels(KernelRegistry& registry);      // kernels_data_movement_scatter.cc
void RegisterGeneratorKernels(KernelRegistry& registry);    // kernels_data_movement_generators.cc
void RegisterScanKernels(KernelRegistry& registry);         // kernels_data_movement_scan.cc
void RegisterResizeKernels(KernelRegistry& registry);       // kernels_data_movement_resize.cc

}  // namespace fusionopt::cpu::data_movement
