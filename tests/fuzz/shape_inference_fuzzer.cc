// Fuzz target: dtype and shape inference. Bytes are loaded as a ModelProto without inference,
// then InferShapes(Model&) — the entry point the loader calls — runs over the main graph,
// subgraphs and model-local function calls. Inference never fails by contract (bad inputs
// become warnings, recursive functions its one error), so any crash, sanitizer report or
// IR invariant broken by inference is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "shape_inference/shape_inference.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fusionopt;
  auto model = fuzz::LoadFuzzInput(data, size, /*infer_shapes=*/false);
  if (!model.ok()) return 0;
  ShapeInferenceReport report = InferShapes(**model);
  if (fuzz::IsInternal(report.error)) fuzz::Finding("shape inference internal error", report.error);
  Status verified = VerifyModel(**model);
  if (!verified.ok()) fuzz::Finding("shape inference broke an IR invariant", verified);
  return 0;
}
