// 3×3 stride-1 convolutions by Winograd's minimal filtering F(4×4, 3×3) (Lavin & Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016), for CPUs where oneDNN has no Winograd
// kernel of its own (oneDNN 2.6 has one for AVX-512 only) and its direct kernel runs these
// convolutions below ONNX Runtime's (docs/benchmarks.md, issue 15).
//
// Each 4×4 block of outputs comes from a 6×6 input tile. Transformed, a tile's 36 positions
// are independent, so the multiply-adds become 36 matrix products — a quarter of the direct
// convolution's — which oneDNN runs as one batched matmul:
//
//   x (any convolution layout, or row-major) --Bᵀ·d·B per tile--> V [36][tiles][C]
//   V[p] · U[p], U = G·g·Gᵀ (the weights, transformed once)      --> M [36][tiles][M]
//   M --Aᵀ·m·A--> + bias --> the epilogue's program, in cache       --> y (the layout asked for)
//
// Limits: 2-D, kernel 3×3, stride 1, dilation 1, group 1, pads ≥ 0, channel counts multiples
// of 8 (the transforms work on 8 channels at a time, which every convolution layout stores
// contiguously), float32, constant weights. F(4×4, 3×3)'s transforms carry factors up to 8
// and 1/24, so results differ from the direct kernel's in the last few bits (≤ 1e-5 relative
// on unit-scale data in the tests); FUSIONOPT_CPU_WINOGRAD=off turns it off.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <vector>

#include "cpu_runtime/contraction/conv_reference.h"
#include "cpu_runtime/elementwise/elementwise.h"
#include "cpu_runtime/engine/allocator.h"
#include "cpu_runtime/engine/rt_tensor.h"

namespace fusionopt::cpu::winograd {

// FUSIONOPT_CPU_WINOGRAD: `auto` (unset: where Pays says so on this host), `off`, or `always` (wherever it
// Applies: tests and benchmarks of the kernel itself). Read once.
enum class Mode { kAuto, kOff, kAlways };
Mode ModeFromEnvironment();

// Whether F(4×4, 3×3) computes `shape` (the limits above, less the weights').
bool Applies(const ConvShape& shape);
// The direct kernels F(4×4, 3×3) competes with: oneDNN's AVX2 ones (on nChw8c), or its
// AVX-512 brgemm ones (on nhwc), which run narrow and small convolutions much better.
enum class DirectKernels { kAvx2, kAvx512 };
DirectKernels DirectKernelsOnThisHost();  // from the ISA oneDNN dispatches to (engine/host_cpu.h)

// Whether it is expected to beat the `direct` kernels on `shape`: a rule per kind, measured on
// the real corpus's convolutions (bench/winograd.py; docs/benchmarks.md).
bool Pays(const ConvShape& shape, DirectKernels direct);
// Whether a convolution of `shape` runs this way under `mode`.
bool Chosen(const ConvShape& shape, Mode mode);

// Convolutions this process has run by F(4x4, 3x3) so far (`fusionopt run -v` reports them).
int64_t RunsSoFar();

class Conv3x3 {
 public:
  // `weights` float32 (M, C, 3, 3) row-major, `bias` (M) or null; `epilogue` as
  // PostOpsAsProgram makes it (input 0 the product with its bias, input 1 a summed residual).
  Conv3x3(const ConvShape& shape, const float* weights, const float* bias, ew::Program epilogue);

  // x: float32 (N, C, H, W) in any layout; y: the float32 output, written as `y_layout`;
  // residual: the summed addend, float32 in `y_layout`, when the epilogue reads one.
  void Run(const RtTensor& x, RtTensor& y, Layout y_layout, const RtTensor* residual, Allocator& allocator) const;

 private:
  struct Tiling {
    int64_t rows, columns, per_image, total;
  };
  void TransformInput(const RtTensor& x, float* v) const;
  void TransformOutput(const float* m, RtTensor& y, Layout y_layout, const RtTensor* residual) const;

  ConvShape shape_;
  Tiling tiles_;
  std::vector<float> bias_;  // zeros without one
  ew::Program epilogue_;
  bool epilogue_is_identity_;
  dnnl::matmul products_;
  dnnl::memory::desc v_desc_, m_desc_;
  dnnl::memory transformed_weights_;  // U, in the layout the matmul chose
};

}  // namespace fusionopt::cpu::winograd
