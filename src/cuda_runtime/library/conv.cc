// 2-D Conv on cuDNN 9's legacy API (contraction_kernels.h), from a ConvPlan: NCHW float32 or
// float16, groups, symmetric pads, strides, dilations.
//
// With a bias, a residual or a Relu it is one cudnnConvolutionBiasActivationForward:
// y = act(conv(x, w) + alpha2·z + bias). Its constraints, and how they are met: it always takes
// a bias (a zero vector is uploaded when the body has none) and a z (y itself with alpha2 = 0
// when there is no residual); an IDENTITY activation is implemented only by the
// IMPLICIT_PRECOMP_GEMM algorithm, so that algorithm is used whenever there is no Relu.
// Without any epilogue it is cudnnConvolutionForward with the algorithm
// cudnnGetConvolutionForwardAlgorithm_v7 ranks first among those that fit the workspace cap.
//
// Precision: float32 runs with CUDNN_FMA_MATH (no TF32 tensor-core rounding, so results match
// the CPU runtime); float16 stores half and computes in float (CUDNN_DATA_FLOAT convolution,
// tensor-core math allowed).
#include <sstream>
#include <vector>

#include "cuda_runtime/library/kernels.h"
#include "ir/float16.h"

namespace fusionopt::cuda {
namespace {

// Calls `function` with `arguments`; a failure returns the cuDNN error naming the function.
#define FUSIONOPT_CUDNN(function, arguments)                                                \
  do {                                                                                      \
    cudnnStatus_t cudnn_status_ = function arguments;                                       \
    if (cudnn_status_ != CUDNN_STATUS_SUCCESS) return CudnnError(cudnn_status_, #function); \
  } while (0)

cudnnDataType_t CudnnType(DataType dtype) { return dtype == DataType::kFloat16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT; }

const char* AlgorithmName(cudnnConvolutionFwdAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "?";
  }
}

// A zero bias of `channels` values, for the fused call when the body has none.
Tensor ZeroBias(DataType dtype, int64_t channels) {
  std::vector<uint8_t> bytes(ByteSizeOf(dtype, static_cast<uint64_t>(channels)), 0);
  return Tensor::Owned(dtype, {channels}, std::move(bytes));
}

class ConvKernel final : public DeviceKernel {
 public:
  explicit ConvKernel(const ConvPlan& plan) : plan_(plan) {}
  ~ConvKernel() override {
    for (cudnnTensorDescriptor_t desc : {x_desc_, y_desc_, bias_desc_}) {
      if (desc != nullptr) cudnnDestroyTensorDescriptor(desc);
    }
    if (w_desc_ != nullptr) cudnnDestroyFilterDescriptor(w_desc_);
    if (conv_desc_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc_);
    if (activation_desc_ != nullptr) cudnnDestroyActivationDescriptor(activation_desc_);
  }

  Status Build(DeviceContext& context) {
    compile_only_ = context.compile_only();
    FUSIONOPT_ASSIGN_OR_RETURN(x_, BoundOperand::Bind(plan_.x, context));
    FUSIONOPT_ASSIGN_OR_RETURN(w_, BoundOperand::Bind(plan_.w, context));
    FUSIONOPT_ASSIGN_OR_RETURN(residual_, BoundOperand::Bind(plan_.residual, context));
    if (compile_only_) {
      workspace_ = kConvWorkspaceCap;  // what a device run may use; no algorithm without one
      return Status::Ok();
    }
    if (plan_.bias.present()) {
      FUSIONOPT_ASSIGN_OR_RETURN(bias_, BoundOperand::Bind(plan_.bias, context));
    } else if (plan_.fused()) {
      OperandRef zeros;
      zeros.constant = std::make_shared<const Tensor>(ZeroBias(plan_.dtype, plan_.y_dims[1]));
      FUSIONOPT_ASSIGN_OR_RETURN(bias_, BoundOperand::Bind(zeros, context));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(handle_, context.Cudnn());
    FUSIONOPT_RETURN_IF_ERROR(CreateDescriptors());
    return ChooseAlgorithm();
  }

  uint64_t workspace_bytes() const override { return workspace_; }
  uint32_t launch_count() const override { return 1; }
  std::string Describe() const override {
    std::ostringstream text;
    text << "cuDNN " << (plan_.fused() ? "conv+bias+" : "conv ")
         << (plan_.fused() ? (plan_.relu ? "relu" : "identity") : "") << (plan_.residual.present() ? "+residual" : "");
    if (compile_only_) {
      text << " (compile-only: no algorithm chosen)";
    } else {
      text << " algo=" << AlgorithmName(algo_);
    }
    return text.str();
  }

  Status Enqueue(const void* const* inputs, void* const* outputs, void* workspace) override {
    if (compile_only_) return CudaFailure("compile-only context: the cuDNN convolution cannot be enqueued");
    const float one = 1.0f, zero = 0.0f;
    const void* x = x_.Resolve(inputs);
    const void* w = w_.Resolve(inputs);
    void* y = outputs[0];
    if (!plan_.fused()) {
      FUSIONOPT_CUDNN(cudnnConvolutionForward, (handle_, &one, x_desc_, x, w_desc_, w, conv_desc_, algo_, workspace,
                                                workspace_, &zero, y_desc_, y));
      return Status::Ok();
    }
    const bool has_residual = plan_.residual.present();
    const float alpha2 = has_residual ? 1.0f : 0.0f;
    const void* z = has_residual ? residual_.Resolve(inputs) : y;
    FUSIONOPT_CUDNN(cudnnConvolutionBiasActivationForward,
                    (handle_, &one, x_desc_, x, w_desc_, w, conv_desc_, algo_, workspace, workspace_, &alpha2, y_desc_,
                     z, bias_desc_, bias_.Resolve(inputs), activation_desc_, y_desc_, y));
    return Status::Ok();
  }

 private:
  Status CreateDescriptors() {
    const cudnnDataType_t type = CudnnType(plan_.dtype);
    const auto& x = plan_.x_dims;
    const auto& w = plan_.w_dims;
    const auto& y = plan_.y_dims;
    FUSIONOPT_CUDNN(cudnnCreateTensorDescriptor, (&x_desc_));
    FUSIONOPT_CUDNN(cudnnSetTensor4dDescriptor,
                    (x_desc_, CUDNN_TENSOR_NCHW, type, int(x[0]), int(x[1]), int(x[2]), int(x[3])));
    FUSIONOPT_CUDNN(cudnnCreateTensorDescriptor, (&y_desc_));
    FUSIONOPT_CUDNN(cudnnSetTensor4dDescriptor,
                    (y_desc_, CUDNN_TENSOR_NCHW, type, int(y[0]), int(y[1]), int(y[2]), int(y[3])));
    FUSIONOPT_CUDNN(cudnnCreateFilterDescriptor, (&w_desc_));
    FUSIONOPT_CUDNN(cudnnSetFilter4dDescriptor,
                    (w_desc_, type, CUDNN_TENSOR_NCHW, int(w[0]), int(w[1]), int(w[2]), int(w[3])));
    FUSIONOPT_CUDNN(cudnnCreateConvolutionDescriptor, (&conv_desc_));
    FUSIONOPT_CUDNN(cudnnSetConvolution2dDescriptor,
                    (conv_desc_, int(plan_.pads[0]), int(plan_.pads[1]), int(plan_.strides[0]), int(plan_.strides[1]),
                     int(plan_.dilations[0]), int(plan_.dilations[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    FUSIONOPT_CUDNN(cudnnSetConvolutionGroupCount, (conv_desc_, int(plan_.groups)));
    const cudnnMathType_t math = plan_.dtype == DataType::kFloat ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    FUSIONOPT_CUDNN(cudnnSetConvolutionMathType, (conv_desc_, math));
    int n = 0, c = 0, h = 0, wd = 0;
    FUSIONOPT_CUDNN(cudnnGetConvolution2dForwardOutputDim, (conv_desc_, x_desc_, w_desc_, &n, &c, &h, &wd));
    if (n != y[0] || c != y[1] || h != y[2] || wd != y[3])
      return InternalError("cuDNN's Conv output shape differs from the plan's");
    if (!plan_.fused()) return Status::Ok();
    FUSIONOPT_CUDNN(cudnnCreateTensorDescriptor, (&bias_desc_));
    FUSIONOPT_CUDNN(cudnnSetTensor4dDescriptor, (bias_desc_, CUDNN_TENSOR_NCHW, type, 1, int(y[1]), 1, 1));
    FUSIONOPT_CUDNN(cudnnCreateActivationDescriptor, (&activation_desc_));
    const cudnnActivationMode_t mode = plan_.relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY;
    FUSIONOPT_CUDNN(cudnnSetActivationDescriptor, (activation_desc_, mode, CUDNN_PROPAGATE_NAN, 0.0));
    return Status::Ok();
  }

  Status ChooseAlgorithm() {
    if (plan_.fused() && !plan_.relu) {
      algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;  // the only one with IDENTITY
      size_t bytes = 0;
      FUSIONOPT_CUDNN(cudnnGetConvolutionForwardWorkspaceSize,
                      (handle_, x_desc_, w_desc_, conv_desc_, y_desc_, algo_, &bytes));
      workspace_ = bytes;
      return Status::Ok();
    }
    std::vector<cudnnConvolutionFwdAlgoPerf_t> candidates(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    int returned = 0;
    FUSIONOPT_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7, (handle_, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                             int(candidates.size()), &returned, candidates.data()));
    for (int i = 0; i < returned; ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& candidate = candidates[size_t(i)];
      if (candidate.status != CUDNN_STATUS_SUCCESS || candidate.memory > kConvWorkspaceCap) continue;
      // float32 must not fall back to TF32 tensor cores (FMA math was asked for).
      const bool tensor_ops =
          candidate.mathType == CUDNN_TENSOR_OP_MATH || candidate.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
      if (plan_.dtype == DataType::kFloat && tensor_ops) continue;
      // float16: run the algorithm with the math type it was ranked with.
      if (plan_.dtype == DataType::kFloat16) {
        FUSIONOPT_CUDNN(cudnnSetConvolutionMathType, (conv_desc_, candidate.mathType));
      }
      // The heuristic's memory is an estimate; the exact size also confirms the algorithm takes
      // these descriptors.
      size_t bytes = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(handle_, x_desc_, w_desc_, conv_desc_, y_desc_, candidate.algo,
                                                  &bytes) != CUDNN_STATUS_SUCCESS ||
          bytes > kConvWorkspaceCap) {
        continue;
      }
      algo_ = candidate.algo;
      workspace_ = bytes;
      return Status::Ok();
    }
    return Unsupported("cuDNN offers no convolution algorithm within " + std::to_string(kConvWorkspaceCap >> 20) +
                       " MiB of workspace");
  }

  ConvPlan plan_;
  bool compile_only_ = true;
  BoundOperand x_, w_, bias_, residual_;
  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr, bias_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnActivationDescriptor_t activation_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  uint64_t workspace_ = 0;
};

#undef FUSIONOPT_CUDNN

}  // namespace

Result<std::unique_ptr<DeviceKernel>> BuildConvKernel(const ConvPlan& plan, DeviceContext& context) {
  for (int64_t dim : plan.x_dims) {
    if (dim > INT32_MAX) return Unsupported("Conv dims above 2^31 (cuDNN's 4-D descriptors are int)");
  }
  auto kernel = std::make_unique<ConvKernel>(plan);
  FUSIONOPT_RETURN_IF_ERROR(kernel->Build(context));
  return std::unique_ptr<DeviceKernel>(std::move(kernel));
}

}  // namespace fusionopt::cuda
