// The library halves of the contraction family: a cuBLASLt matmul (contraction_matmul.cc) and
// a cuDNN convolution (contraction_conv.cc) built from their plans (contraction_plan.h), plus
// the operand binding both share. Their Enqueue takes the *body's* inputs and a single output,
// the library's result; contraction.cc chains the generated remainder after them.
#pragma once

#include <memory>

#include "cuda_runtime/library/plan.h"
#include "cuda_runtime/plugin/device_kernel.h"

namespace fusionopt::cuda {

// The most workspace a library call may use; cuBLASLt's heuristics and cuDNN's algorithm
// choice are capped by it.
inline constexpr uint64_t kMatmulWorkspaceCap = 32ull << 20;
inline constexpr uint64_t kConvWorkspaceCap = 256ull << 20;

// An operand on the device: its constant uploaded at build, or the body input read at Enqueue.
class BoundOperand {
 public:
  BoundOperand() = default;
  static Result<BoundOperand> Bind(const OperandRef& ref, DeviceContext& context);
  bool present() const { return input_ >= 0 || buffer_.get() != nullptr; }
  bool is_constant() const { return buffer_.get() != nullptr; }
  const void* Resolve(const void* const* inputs) const { return input_ >= 0 ? inputs[input_] : buffer_.get(); }

 private:
  int input_ = -1;
  DeviceBuffer buffer_;
};

Result<std::unique_ptr<DeviceKernel>> BuildMatmulKernel(const MatmulPlan& plan, DeviceContext& context);
Result<std::unique_ptr<DeviceKernel>> BuildConvKernel(const ConvPlan& plan, DeviceContext& context);

}  // namespace fusionopt::cuda
