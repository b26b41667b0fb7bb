// Shared pieces of the contraction family (MatMul/Gemm, Conv/ConvTranspose, pooling,
// normalizations with statistics): sub-family registration and float32 staging.
//
// float32 is the compute type: float16/bfloat16 tensors are converted to float32, computed,
// and converted back; double runs direct loops where a kernel supports it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

void RegisterMatMulKernels(KernelRegistry& registry);         // contraction/matmul.cc
void RegisterConvKernels(KernelRegistry& registry);           // contraction/conv.cc
void RegisterPoolKernels(KernelRegistry& registry);           // contraction/pool.cc
void RegisterNormalizationKernels(KernelRegistry& registry);  // contraction/norm.cc

// Below this much work (elements, or multiply-adds) an OpenMP region costs more than it saves.
constexpr int64_t kParallelWork = 32768;

// float16 and bfloat16: computed in float32.
bool IsHalfPrecision(DataType dtype);
bool IsSupportedFloat(DataType dtype);  // float, double, float16, bfloat16 (no float8)

// `tensor` itself when float32, else a float32 copy (float16/bfloat16/double sources).
RtTensor ToFloat32(const RtTensor& tensor, Allocator& allocator);
// A float32 copy of a constant made once at kernel creation (null stays undefined).
RtTensor ConstantToFloat32(const TensorPtr& constant);
// The last two axes of a float32 `matrix` swapped in a fresh buffer (a constant B stored
// column-major; see ConstantWeightsLayout).
RtTensor TransposedMatrix(const RtTensor& matrix);

// How MatMul and Gemm keep a constant B, by the kernels oneDNN dispatches to on this host
// (bench/onednn_versions.cc, docs/benchmarks.md). AVX2 (gemm:jit): column-major, 0-13% faster
// than row-major on the transformer shapes and twice oneDNN's own pick there. AVX-512 (brgemm):
// the blocked layout the primitive picks, reordered once per layout, 1-13% faster than
// column-major on the same shapes. FUSIONOPT_CPU_GEMM_WEIGHTS=packed|column-major overrides
// the choice (measurements); read once.
enum class ConstantWeights { kColumnMajor, kPacked };
ConstantWeights ConstantWeightsLayout();
// Writes float32 `source` into `destination` (float32, float16 or bfloat16; same size).
void ConvertFromFloat32(const RtTensor& source, const RtTensor& destination);
// Small parameter vectors (scales, means) of any floating dtype, and back.
std::vector<double> ValuesAsDoubles(const RtTensor& tensor);
void StoreDoubles(const std::vector<double>& values, const RtTensor& destination);

// Float32 views of a kernel's outputs: the output itself when its dtype is float32,
// otherwise a float32 stand-in converted into the real output by Finish().
class Float32Outputs {
 public:
  explicit Float32Outputs(KernelContext& context) : context_(context) {}
  RtTensor& Output(size_t index, DataType dtype, std::vector<int64_t> dims);
  void Finish();

 private:
  struct Staged {
    size_t index;
    DataType dtype;
    RtTensor value;
  };
  KernelContext& context_;
  std::deque<Staged> staged_;  // deque: references handed out stay valid
};

// Pooled scratch memory of `bytes` bytes (undefined when zero), returned when it dies.
RtTensor Scratch(Allocator& allocator, size_t bytes);

// "float16" / "float[2,3]" style text for messages.
std::string DescribeTensor(const RtTensor& tensor);

}  // namespace fusionopt::cpu
