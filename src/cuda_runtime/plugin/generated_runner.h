// Runs what a code generator produced (codegen/generated_kernel.h): the program's source is
// compiled by NVRTC to CUBIN for the context's architecture (through the disk cache), loaded
// with cuModuleLoadData, and each kernel entry launched in order with cuLaunchKernel. The
// body's large initializers (GeneratedProgram::constant_inputs) are uploaded once, at build.
//
// In a compile-only context the program is compiled (PTX and CUBIN, proving it builds for
// the target) but nothing is loaded; the kernel's Enqueue returns a CUDA failure.
#pragma once

#include <functional>

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "cuda_runtime/plugin/device_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

struct GeneratedTarget {
  bool compile_only = false;
  int sm_arch = 90;
  int device = -1;            // CUDA ordinal the module is loaded on (unused when compile_only)
  cudaStream_t stream = nullptr;
  std::string cache_dir;      // NVRTC disk cache; "" for none
  // Told of each compile: whether the disk cache answered, and the seconds it took.
  std::function<void(bool from_cache, double seconds)> compiled;
};

// `body` is the typed body `program` was generated from; `context` uploads its constants.
Result<std::unique_ptr<DeviceKernel>> BuildGeneratedKernel(const GeneratedProgram& program, const Graph& body,
                                                           const GeneratedTarget& target, DeviceContext& context);

// OK when every kernel of `program` has an entry and a launch shape CUDA accepts
// (non-zero grid and block, at most 1024 threads a block); InternalError naming the kernel
// otherwise — a generator bug, caught before any compile.
Status CheckLaunchShapes(const GeneratedProgram& program);

}  // namespace fusionopt::cuda
