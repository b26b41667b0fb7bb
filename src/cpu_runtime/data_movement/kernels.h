// Registration of the data-movement family, one function per file (data_movement/*.cc);
// RegisterDataMovementKernels (kernels.h) calls them all.
#pragma once

#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu::data_movement {

void RegisterViewKernels(KernelRegistry& registry);         // data_movement/kernels.cc
void RegisterTransposeKernels(KernelRegistry& registry);    // data_movement/transpose.cc
void RegisterConcatSplitKernels(KernelRegistry& registry);  // data_movement/concat.cc
void RegisterSliceKernels(KernelRegistry& registry);        // data_movement/slice.cc
void RegisterPadKernels(KernelRegistry& registry);          // data_movement/pad.cc
void RegisterGatherKernels(KernelRegistry& registry);       // data_movement/gather.cc
void RegisterScatterKernels(KernelRegistry& registry);      // data_movement/scatter.cc
void RegisterGeneratorKernels(KernelRegistry& registry);    // data_movement/generators.cc
void RegisterScanKernels(KernelRegistry& registry);         // data_movement/scan.cc
void RegisterResizeKernels(KernelRegistry& registry);       // data_movement/resize.cc

}  // namespace fusionopt::cpu::data_movement
