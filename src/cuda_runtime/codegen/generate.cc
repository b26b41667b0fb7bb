// GenerateKernel (generate.h): tries each generator family in the order generate.h gives and
// returns the first program generated. A family that declines returns Unsupported; any other
// error (an invalid model, a generator bug) stops the search, because another family
// generating the body would hide it. When every family declines, the reason lists each one's.
#include "cuda_runtime/codegen/generate.h"

#include <vector>

#include "cuda_runtime/codegen/attention_codegen.h"
#include "cuda_runtime/codegen/data_movement_codegen.h"
#include "cuda_runtime/codegen/elementwise_codegen.h"
#include "cuda_runtime/codegen/lines_codegen.h"
#include "cuda_runtime/codegen/lrn_codegen.h"
#include "cuda_runtime/codegen/pooling_codegen.h"
#include "cuda_runtime/codegen/resize_codegen.h"
#include "cuda_runtime/codegen/rotary_codegen.h"
#include "cuda_runtime/codegen/rows_codegen.h"
#include "ir/op_class.h"

namespace fusionopt::cuda {
namespace {

using Generator = Result<GeneratedProgram> (*)(const Graph&, std::string_view, const CodegenTarget&);

// The families whose kernels do not depend on the target.
template <Result<GeneratedProgram> (*generate)(const Graph&, std::string_view)>
Result<GeneratedProgram> AnyTarget(const Graph& typed_body, std::string_view name, const CodegenTarget&) {
  return generate(typed_body, name);
}

struct Family {
  const char* name;
  Generator generate;
};

// Order matters: the narrower families (attention, row kernels) recognise bodies that also
// contain elementwise nodes, so they are asked before the elementwise family.
const std::vector<Family>& Families() {
  static const std::vector<Family> kFamilies = {
      {"attention", &GenerateAttention},
      {"rows", &AnyTarget<&GenerateRows>},
      {"elementwise", &AnyTarget<&GenerateElementwise>},
      {"data movement", &AnyTarget<&GenerateDataMovement>},
      {"lines", &AnyTarget<&GenerateLines>},
      {"resize", &AnyTarget<&GenerateResize>},
      {"rotary", &AnyTarget<&GenerateRotary>},
      {"pooling", &AnyTarget<&GeneratePooling>},
      {"lrn", &AnyTarget<&GenerateLrn>},
  };
  return kFamilies;
}

}  // namespace

Result<GeneratedProgram> GenerateKernel(const Graph& typed_body, std::string_view name, const CodegenTarget& target) {
  std::string reasons;
  for (const Family& family : Families()) {
    Result<GeneratedProgram> program = family.generate(typed_body, name, target);
    if (program.ok()) return program;
    if (program.status().code() != ErrorCode::kUnsupported) {
      return program.status().WithContext(std::string(family.name) + " generator");
    }
    reasons += std::string(reasons.empty() ? "" : "; ") + family.name + ": " + program.status().message();
  }
  // Attention bodies hold MatMuls, so contractions are named only once every family declined,
  // with the attention generator's reason (why a body that looks like attention is not one).
  for (const auto& node : typed_body.nodes()) {
    if (ClassifyOp(*node) == OpClass::kContraction) {
      return Unsupported("contains " + node->op_type() + " (contractions run on cuBLASLt / cuDNN, not generated code; " +
                         reasons.substr(0, reasons.find("; ")) + ")");
    }
  }
  return Unsupported("no CUDA generator handles this body (" + reasons + ")");
}

}  // namespace fusionopt::cuda
