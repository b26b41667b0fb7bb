// Runs one ONNX backend node test (a test_* folder: model.onnx and test_data_set_N/ with
// input_K.pb / output_K.pb TensorProtos) through the CPU runtime and judges the result.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "tensor_compare.h"

namespace fusionopt::conformance {

enum class Outcome {
  kPass,
  kUnsupported,  // the runtime declines the model: unknown op, dtype or value kind
  kError,        // the runtime accepted the model but Create or Run failed
  kMismatch,     // ran, but an output differs from the expected one
  kBadTest,      // the folder itself is broken (missing or unreadable files)
  kCrash,        // the test process died (signal, internal check)
  kTimeout,
  kSkipped,      // inputs too large to be worth the time
};

std::string_view OutcomeName(Outcome outcome);

struct Verdict {
  Outcome outcome = Outcome::kPass;
  std::string reason;  // empty on pass
};

struct NodeTestOptions {
  Tolerance tolerance = kNodeTestTolerance;
  uint64_t max_input_bytes = uint64_t{64} << 20;
};

// Never throws and never aborts on a malformed folder; a crash inside the runtime itself is
// the caller's to contain (see isolation.h).
Verdict RunNodeTest(const std::filesystem::path& folder, const NodeTestOptions& options);

}  // namespace fusionopt::conformance
