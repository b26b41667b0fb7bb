// The plugin's dispatch between the contraction family and the code generators (dispatch.h).
#include "cuda_runtime/plugin/dispatch.h"

#include "cuda_runtime/codegen/generate.h"
#include "cuda_runtime/codegen/lower_batchnorm.h"
#include "cuda_runtime/library/contraction.h"
#include "cuda_runtime/library/plan.h"
#include "ir/op_class.h"

namespace fusionopt::cuda {
namespace {

// One contraction: the contraction family's. None, or several (attention's two MatMuls):
// the generators'.
bool ForContractionFamily(const Graph& typed_body) {
  int contractions = 0;
  for (const auto& node : typed_body.nodes()) contractions += IsLibraryContraction(*node) ? 1 : 0;
  return contractions == 1;
}

// The body the generators see: inference BatchNormalization lowered to a multiply-add (its
// constants live in the lowered copy, so the kernel is built from that copy too).
const Graph& ForGenerators(const Graph& typed_body, std::unique_ptr<Graph>& lowered) {
  lowered = LowerBatchNormalization(typed_body);
  return lowered ? *lowered : typed_body;
}

}  // namespace

Status RejectView(const Node& node) {
  if (ClassifyOp(node) == OpClass::kView) return Unsupported("a view: the host aliases the input");
  return Status::Ok();
}

Status CheckKernelSupported(const Graph& typed_body, std::string_view name) {
  if (ForContractionFamily(typed_body)) return ContractionSupported(typed_body);
  std::unique_ptr<Graph> lowered;
  Result<GeneratedProgram> program = GenerateKernel(ForGenerators(typed_body, lowered), name);
  return program.status();
}

Result<std::unique_ptr<DeviceKernel>> BuildKernel(const Graph& typed_body, std::string_view name,
                                                  DeviceContext& context) {
  if (ForContractionFamily(typed_body)) return BuildContraction(typed_body, context);
  std::unique_ptr<Graph> lowered;
  const Graph& body = ForGenerators(typed_body, lowered);
  FUSIONOPT_ASSIGN_OR_RETURN(GeneratedProgram program, GenerateKernel(body, name, CodegenTarget{context.sm_arch()}));
  return context.BuildGenerated(program, body);
}

}  // namespace fusionopt::cuda
