// Fuzz target: the full -O3 optimizer on small mutated models. Bytes are loaded (with shape
// inference, as the CLI does), models whose tensors or node count exceed a small budget are
// skipped so each execution stays fast, then RunPipeline runs level 3 for the h100 target
// with the IR verified after every pass; the result must verify and serialize. A crash,
// sanitizer report, internal error (a pass broke an invariant) or a serialize failure is a
// finding; a pass rejecting the model with a model error is an answer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "ir/verifier.h"
#include "onnx_io/model_io.h"
#include "passes/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fusionopt;
  auto model = fuzz::LoadFuzzInput(data, size, /*infer_shapes=*/true);
  if (!model.ok() || !fuzz::WithinBudget(**model)) return 0;
  passes::PipelineOptions options;
  options.level = 3;
  options.target = "h100";
  options.check_each_pass = true;
  auto report = passes::RunPipeline(**model, options);
  if (!report.ok()) {
    if (fuzz::IsInternal(report.status())) fuzz::Finding("O3 pipeline internal error", report.status());
    return 0;
  }
  Status verified = VerifyModel(**model);
  if (!verified.ok()) fuzz::Finding("the optimized model breaks an IR invariant", verified);
  auto bytes = SerializeModel(**model);
  if (!bytes.ok()) fuzz::Finding("the optimized model does not serialize", bytes.status());
  return 0;
}
