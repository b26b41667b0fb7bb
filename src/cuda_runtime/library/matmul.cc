// MatMul / Gemm on cuBLASLt (contraction_kernels.h), from a MatmulPlan: the row-major problem
// mapped onto column-major cuBLASLt as Yᵀ = Bᵀ·Aᵀ (ColumnMajorProblem: no data is transposed),
// strided batches (stride 0 for a shared operand; one call per outer index where an operand
// broadcasts within its batch dims), Gemm's alpha and beta·C, and the BIAS / RELU / GELU
// epilogues.
//
// Precision: compute type CUBLAS_COMPUTE_32F with float scale for every dtype — fp16 and bf16
// accumulate in fp32 — and never CUBLAS_COMPUTE_32F_FAST_TF32, so float32 products are not
// rounded to TF32 and match the CPU runtime within 1e-4.
//
// Algorithm: cublasLtMatmulAlgoGetHeuristic at build, twice — for 16-byte aligned pointers (the
// fast vectorized kernels) and for element-aligned ones — and Enqueue picks by the pointers it
// gets. Workspace: what the chosen algorithms need, at most kMatmulWorkspaceCap.
#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>

#include "cuda_runtime/library/kernels.h"

namespace fusionopt::cuda {
namespace {

constexpr uint32_t kAlignedBytes = 16;

cudaDataType_t LtType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return CUDA_R_16F;
    case DataType::kBFloat16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

cublasLtEpilogue_t LtEpilogue(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case MatmulEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case MatmulEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case MatmulEpilogue::kReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case MatmulEpilogue::kGeluTanh: return CUBLASLT_EPILOGUE_GELU;
    case MatmulEpilogue::kGeluTanhBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool HasBias(MatmulEpilogue epilogue) {
  return epilogue == MatmulEpilogue::kBias || epilogue == MatmulEpilogue::kReluBias ||
         epilogue == MatmulEpilogue::kGeluTanhBias;
}

template <typename T>
Status SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value, const char* what) {
  cublasStatus_t status = cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value));
  return status == CUBLAS_STATUS_SUCCESS ? Status::Ok() : CublasError(status, what);
}

class MatmulKernel final : public DeviceKernel {
 public:
  explicit MatmulKernel(const MatmulPlan& plan) : plan_(plan), problem_(ColumnMajorProblem(plan)) {}
  ~MatmulKernel() override {
    for (cublasLtMatrixLayout_t layout : {first_, second_, output_}) {
      if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
    }
    if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
  }

  Status Build(DeviceContext& context) {
    compile_only_ = context.compile_only();
    FUSIONOPT_ASSIGN_OR_RETURN(a_, BoundOperand::Bind(plan_.a, context));
    FUSIONOPT_ASSIGN_OR_RETURN(b_, BoundOperand::Bind(plan_.b, context));
    FUSIONOPT_ASSIGN_OR_RETURN(c_, BoundOperand::Bind(plan_.c, context));
    FUSIONOPT_ASSIGN_OR_RETURN(bias_, BoundOperand::Bind(plan_.bias, context));
    if (compile_only_) {
      workspace_ = kMatmulWorkspaceCap;  // what a device run may use; no heuristic without one
      return Status::Ok();
    }
    FUSIONOPT_ASSIGN_OR_RETURN(handle_, context.Cublaslt());
    stream_ = context.stream();
    FUSIONOPT_RETURN_IF_ERROR(CreateDescriptors());
    FUSIONOPT_ASSIGN_OR_RETURN(aligned_, ChooseAlgorithm(kAlignedBytes));
    FUSIONOPT_ASSIGN_OR_RETURN(unaligned_, ChooseAlgorithm(static_cast<uint32_t>(ByteSizeOf(plan_.dtype, 1))));
    workspace_ = std::max(aligned_.workspaceSize, unaligned_.workspaceSize);
    return Status::Ok();
  }

  uint64_t workspace_bytes() const override { return workspace_; }
  uint32_t launch_count() const override {
    return plan_.outer_offsets.empty() ? 1 : static_cast<uint32_t>(plan_.outer_offsets.size());
  }
  std::string Describe() const override {
    std::ostringstream text;
    text << "cuBLASLt m=" << problem_.m << " n=" << problem_.n << " k=" << problem_.k << " batch=" << problem_.batch
         << (plan_.outer_offsets.empty() ? "" : " x " + std::to_string(plan_.outer_offsets.size()) + " calls")
         << " opA=" << (problem_.first.transposed ? "T" : "N") << " opB=" << (problem_.second.transposed ? "T" : "N")
         << " epilogue=" << NameOf(plan_.epilogue) << (compile_only_ ? " (compile-only: no algorithm chosen)" : "");
    return text.str();
  }

  Status Enqueue(const void* const* inputs, void* const* outputs, void* workspace) override {
    if (compile_only_) return CudaFailure("compile-only context: the cuBLASLt matmul cannot be enqueued");
    const void* a = a_.Resolve(inputs);
    const void* b = b_.Resolve(inputs);
    void* d = outputs[0];
    const void* c = plan_.c.present() ? c_.Resolve(inputs) : d;
    if (HasBias(plan_.epilogue) && !bias_.is_constant()) {
      FUSIONOPT_RETURN_IF_ERROR(
          SetDesc(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_.Resolve(inputs), "bias pointer"));
    }
    const void* bias = HasBias(plan_.epilogue) ? bias_.Resolve(inputs) : d;
    if (plan_.outer_offsets.empty()) return Call(a, b, c, d, bias, workspace);
    const size_t element = ByteSizeOf(plan_.dtype, 1);
    auto at = [element](const void* base, int64_t offset) {
      return static_cast<const char*>(base) + static_cast<size_t>(offset) * element;
    };
    for (const std::array<int64_t, 3>& offsets : plan_.outer_offsets) {
      // C has the output's shape: it moves with Y.
      void* y = const_cast<char*>(at(d, offsets[2]));
      FUSIONOPT_RETURN_IF_ERROR(Call(at(a, offsets[0]), at(b, offsets[1]), plan_.c.present() ? at(c, offsets[2]) : y, y,
                                     bias, workspace));
    }
    return Status::Ok();
  }

 private:
  // One cuBLASLt call on these pointers, with the algorithm their alignment allows.
  Status Call(const void* a, const void* b, const void* c, void* d, const void* bias, void* workspace) {
    const std::array<const void*, 5> pointers = {a, b, c, d, bias};
    const bool aligned = std::all_of(pointers.begin(), pointers.end(), [](const void* pointer) {
      return reinterpret_cast<uintptr_t>(pointer) % kAlignedBytes == 0;
    });
    const cublasLtMatmulHeuristicResult_t& choice = aligned ? aligned_ : unaligned_;
    const float alpha = plan_.alpha;
    const float beta = plan_.c.present() ? plan_.beta : 0.0f;
    // cuBLASLt's first operand is the ONNX B, its second the ONNX A (Yᵀ = Bᵀ·Aᵀ).
    cublasStatus_t status = cublasLtMatmul(handle_, desc_, &alpha, b, first_, a, second_, &beta, c, output_, d, output_,
                                           &choice.algo, workspace, choice.workspaceSize, stream_);
    return status == CUBLAS_STATUS_SUCCESS ? Status::Ok() : CublasError(status, "cublasLtMatmul");
  }

  Status CreateLayout(const LtMatrix& matrix, cublasLtMatrixLayout_t& layout) {
    cublasStatus_t status =
        cublasLtMatrixLayoutCreate(&layout, LtType(plan_.dtype), matrix.rows, matrix.cols, matrix.ld);
    if (status != CUBLAS_STATUS_SUCCESS) return CublasError(status, "cublasLtMatrixLayoutCreate");
    if (problem_.batch == 1) return Status::Ok();
    const int32_t count = static_cast<int32_t>(problem_.batch);
    const int64_t stride = matrix.batch_stride;
    status = cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                sizeof(stride));
    }
    return status == CUBLAS_STATUS_SUCCESS ? Status::Ok() : CublasError(status, "cublasLtMatrixLayoutSetAttribute");
  }

  Status CreateDescriptors() {
    if (problem_.batch > INT32_MAX) return Unsupported("cuBLASLt batch count above 2^31");
    cublasStatus_t status = cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (status != CUBLAS_STATUS_SUCCESS) return CublasError(status, "cublasLtMatmulDescCreate");
    const cublasOperation_t op_a = problem_.first.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = problem_.second.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    FUSIONOPT_RETURN_IF_ERROR(SetDesc(desc_, CUBLASLT_MATMUL_DESC_TRANSA, op_a, "transa"));
    FUSIONOPT_RETURN_IF_ERROR(SetDesc(desc_, CUBLASLT_MATMUL_DESC_TRANSB, op_b, "transb"));
    FUSIONOPT_RETURN_IF_ERROR(SetDesc(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, LtEpilogue(plan_.epilogue), "epilogue"));
    if (HasBias(plan_.epilogue)) {
      // The bias has the output's dtype (ONNX Add takes one type); batches share it (stride 0).
      const cudaDataType_t bias_type = LtType(plan_.dtype);
      FUSIONOPT_RETURN_IF_ERROR(SetDesc(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, "bias type"));
      if (bias_.is_constant()) {
        FUSIONOPT_RETURN_IF_ERROR(
            SetDesc(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_.Resolve(nullptr), "bias pointer"));
      }
      const int64_t bias_stride = 0;
      FUSIONOPT_RETURN_IF_ERROR(
          SetDesc(desc_, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, bias_stride, "bias batch stride"));
    }
    FUSIONOPT_RETURN_IF_ERROR(CreateLayout(problem_.first, first_));
    FUSIONOPT_RETURN_IF_ERROR(CreateLayout(problem_.second, second_));
    return CreateLayout(problem_.output, output_);
  }

  Result<cublasLtMatmulHeuristicResult_t> ChooseAlgorithm(uint32_t alignment) {
    cublasLtMatmulPreference_t preference = nullptr;
    cublasStatus_t status = cublasLtMatmulPreferenceCreate(&preference);
    if (status != CUBLAS_STATUS_SUCCESS) return CublasError(status, "cublasLtMatmulPreferenceCreate");
    const uint64_t cap = kMatmulWorkspaceCap;
    status =
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof(cap));
    for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      if (status == CUBLAS_STATUS_SUCCESS) {
        status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof(alignment));
      }
    }
    if (HasBias(plan_.epilogue) && !bias_.is_constant()) {
      // The heuristic reads only the bias pointer's alignment: a stand-in with the alignment
      // asked for (a bias fed at run time is unknown at build).
      const void* stand_in = reinterpret_cast<const void*>(uintptr_t{256} + (alignment % 256));
      FUSIONOPT_RETURN_IF_ERROR(SetDesc(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, stand_in, "bias pointer"));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, first_, second_, output_, output_, preference, 1, &result,
                                              &returned);
    }
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS) return CublasError(status, "cublasLtMatmulAlgoGetHeuristic");
    if (returned == 0) {
      return Unsupported("cuBLASLt has no algorithm for " + Describe() + " with " + std::to_string(alignment) +
                         "-byte alignment");
    }
    return result;
  }

  MatmulPlan plan_;
  LtProblem problem_;
  bool compile_only_ = true;
  BoundOperand a_, b_, c_, bias_;
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, output_ = nullptr;
  cublasLtMatmulHeuristicResult_t aligned_{}, unaligned_{};
  uint64_t workspace_ = 0;
};

}  // namespace

Result<BoundOperand> BoundOperand::Bind(const OperandRef& ref, DeviceContext& context) {
  BoundOperand bound;
  bound.input_ = ref.input;
  if (ref.constant != nullptr && !context.compile_only()) {
    FUSIONOPT_ASSIGN_OR_RETURN(bound.buffer_, context.Upload(*ref.constant));
  }
  return bound;
}

Result<std::unique_ptr<DeviceKernel>> BuildMatmulKernel(const MatmulPlan& plan, DeviceContext& context) {
  auto kernel = std::make_unique<MatmulKernel>(plan);
  FUSIONOPT_RETURN_IF_ERROR(kernel->Build(context));
  return std::unique_ptr<DeviceKernel>(std::move(kernel));
}

}  // namespace fusionopt::cuda
