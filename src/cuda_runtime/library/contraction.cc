// The contraction family's entry (contraction.h): plan the body (contraction_plan.h), build the
// library kernel (cuBLASLt or cuDNN) and, when the library cannot fuse the whole epilogue, the
// generated kernel for the remainder (codegen/generate.h, compiled by the context), and chain
// them: the library writes its result into the body output it is, or into workspace the
// remainder then reads.
//
// Workspace of the chained kernel, each part aligned to 256 bytes:
//   [ library workspace | library result (when it is no body output) | remainder workspace ]
#include "cuda_runtime/library/contraction.h"

#include <vector>

#include "cuda_runtime/codegen/generate.h"
#include "cuda_runtime/library/kernels.h"
#include "cuda_runtime/library/plan.h"

namespace fusionopt::cuda {
namespace {

constexpr uint64_t kWorkspaceAlignment = 256;

uint64_t AlignUp(uint64_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

uint64_t ElementCount(const std::vector<int64_t>& dims) {
  uint64_t count = 1;
  for (int64_t dim : dims) count *= static_cast<uint64_t>(dim);
  return count;
}

std::string RemainderName(const Graph& body) {
  return (body.name().empty() ? std::string("contraction") : body.name()) + "_epilogue";
}

class ContractionKernel final : public DeviceKernel {
 public:
  ContractionKernel(ContractionPlan plan, DataType result_dtype, std::unique_ptr<DeviceKernel> library,
                    std::unique_ptr<DeviceKernel> remainder)
      : plan_(std::move(plan)), library_(std::move(library)), remainder_(std::move(remainder)) {
    result_offset_ = AlignUp(library_->workspace_bytes());
    const uint64_t result_bytes = plan_.library_result_output < 0
                                      ? AlignUp(ByteSizeOf(result_dtype, ElementCount(plan_.library_result_dims)))
                                      : 0;
    remainder_offset_ = result_offset_ + result_bytes;
    workspace_ = remainder_offset_ + (remainder_ != nullptr ? remainder_->workspace_bytes() : 0);
  }

  uint64_t workspace_bytes() const override { return workspace_; }
  uint32_t launch_count() const override {
    return library_->launch_count() + (remainder_ != nullptr ? remainder_->launch_count() : 0);
  }
  std::string Describe() const override {
    std::string text = plan_.Describe() + " | " + library_->Describe();
    if (remainder_ != nullptr) text += " | " + remainder_->Describe();
    return text;
  }

  Status Enqueue(const void* const* inputs, void* const* outputs, void* workspace) override {
    char* base = static_cast<char*>(workspace);
    void* result = plan_.library_result_output >= 0 ? outputs[plan_.library_result_output] : base + result_offset_;
    FUSIONOPT_RETURN_IF_ERROR(library_->Enqueue(inputs, &result, base));
    if (remainder_ == nullptr) return Status::Ok();
    std::vector<const void*> remainder_inputs = {result};
    for (int index : plan_.remainder_inputs) remainder_inputs.push_back(inputs[index]);
    std::vector<void*> remainder_outputs;
    for (int index : plan_.remainder_outputs) remainder_outputs.push_back(outputs[index]);
    return remainder_->Enqueue(remainder_inputs.data(), remainder_outputs.data(), base + remainder_offset_);
  }

 private:
  ContractionPlan plan_;
  std::unique_ptr<DeviceKernel> library_;
  std::unique_ptr<DeviceKernel> remainder_;
  uint64_t result_offset_ = 0;
  uint64_t remainder_offset_ = 0;
  uint64_t workspace_ = 0;
};

DataType ResultDtype(const ContractionPlan& plan) {
  if (const auto* matmul = std::get_if<MatmulPlan>(&plan.core)) return matmul->dtype;
  return std::get<ConvPlan>(plan.core).dtype;
}

}  // namespace

Status ContractionSupported(const Graph& typed_body) {
  FUSIONOPT_ASSIGN_OR_RETURN(ContractionPlan plan, PlanContraction(typed_body));
  if (plan.remainder == nullptr) return Status::Ok();
  Result<GeneratedProgram> program = GenerateKernel(*plan.remainder, RemainderName(typed_body));
  if (!program.ok()) return program.status().WithContext("contraction epilogue");
  return Status::Ok();
}

Result<std::unique_ptr<DeviceKernel>> BuildContraction(const Graph& typed_body, DeviceContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(ContractionPlan plan, PlanContraction(typed_body));
  std::unique_ptr<DeviceKernel> remainder;
  if (plan.remainder != nullptr) {
    Result<GeneratedProgram> program = GenerateKernel(*plan.remainder, RemainderName(typed_body));
    if (!program.ok()) return program.status().WithContext("contraction epilogue");
    FUSIONOPT_ASSIGN_OR_RETURN(remainder, context.BuildGenerated(*program, *plan.remainder));
  }
  std::unique_ptr<DeviceKernel> library;
  if (const auto* matmul = std::get_if<MatmulPlan>(&plan.core)) {
    FUSIONOPT_ASSIGN_OR_RETURN(library, BuildMatmulKernel(*matmul, context));
  } else {
    FUSIONOPT_ASSIGN_OR_RETURN(library, BuildConvKernel(std::get<ConvPlan>(plan.core), context));
  }
  const DataType dtype = ResultDtype(plan);
  return std::unique_ptr<DeviceKernel>(
      std::make_unique<ContractionKernel>(std::move(plan), dtype, std::move(library), std::move(remainder)));
}

}  // namespace fusionopt::cuda
