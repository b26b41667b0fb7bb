// Fuzz target: the ONNX loader and IR builder. Bytes are parsed as a ModelProto and built
// into the IR (external data resolving against an empty private folder, no shape inference);
// a model the loader accepts must pass the IR verifier. Any crash, sanitizer report, or
// accepted model that breaks an IR invariant is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fusionopt;
  auto model = fuzz::LoadFuzzInput(data, size, /*infer_shapes=*/false);
  if (!model.ok()) {
    if (fuzz::IsInternal(model.status())) fuzz::Finding("loader internal error", model.status());
    return 0;
  }
  Status verified = VerifyModel(**model);
  if (!verified.ok()) fuzz::Finding("the loader accepted a model the verifier rejects", verified);
  return 0;
}
