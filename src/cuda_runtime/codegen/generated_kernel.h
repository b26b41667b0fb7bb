// What every CUDA code generator hands to the plugin (and to `--emit-cuda`): CUDA C++ source
// for one node, generated for fixed shapes, with how to launch it.
//
// The contract between generators (src/cuda_runtime/codegen) and the plugin
// (src/cuda_runtime/plugin):
// - A generator takes a *typed body*: an ir::Graph whose inputs, outputs and every
//   intermediate have a known dtype and a fully static shape. For a fused node it is the
//   called function's body instantiated for the call (ir/function_body.h) with shapes
//   inferred; for a standard op, a graph of that one node. Constant inputs are initializers.
// - It returns a GeneratedProgram or a Status: Unsupported(reason) when the body is outside
//   what it handles (the plugin then tries another family or reports the reason), never a
//   wrong kernel.
// - Sources are self-contained: they include nothing but <cuda_fp16.h> and <cuda_bf16.h>
//   (the toolkit's headers; NVRTC 13 gets their folder with -I), so each compiles alone with NVRTC or `nvcc --ptx`.
// - Every kernel of a program takes the same parameters, in this order: one device pointer
//   per graph input that is not an initializer (graph-input order), one per initializer
//   named in GeneratedProgram::constant_inputs (that order), one per graph output
//   (graph-output order), then the workspace pointer if workspace_bytes > 0. Small
//   initializers (scalars, short vectors) are compiled into the source instead.
// - The kernels of a program run in order on one stream; each is one launch.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fusionopt::cuda {

// The device a program is generated for. Families whose fast kernel needs an architecture (tensor
// cores' mma.sync for fp16/bf16 from sm_80) choose it only when sm_arch says so; 0 (unknown, as
// for `--emit-cuda` without a device) gets the kernels every supported architecture runs.
struct CodegenTarget {
  int sm_arch = 0;  // compute capability × 10
};

struct GeneratedKernel {
  std::string entry;  // the extern "C" __global__ function's name
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  uint32_t shared_bytes = 0;  // dynamic shared memory
};

struct GeneratedProgram {
  std::string name;         // a readable identifier for files and messages, e.g. "FusedGelu_3"
  std::string source;       // one translation unit holding every kernel's entry
  std::string description;  // one line: family and notable choices ("elementwise, 4-wide vectors")
  std::vector<GeneratedKernel> kernels;
  uint64_t workspace_bytes = 0;
  // Initializers of the body the kernels read through a pointer parameter (too large to
  // compile in), in parameter order; the plugin uploads each once when it builds the kernel.
  std::vector<std::string> constant_inputs;
};

}  // namespace fusionopt::cuda
