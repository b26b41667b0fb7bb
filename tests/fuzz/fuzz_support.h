// Shared pieces of the libFuzzer targets in tests/fuzz: the empty folder external data
// resolves against, the per-input size budget, and how a finding is reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::fuzz {

// A private folder created empty once per process (and removed at exit): a mutated
// external_data location can only resolve against nothing, so a fuzzer never reads the
// machine's files and any read outside it is the loader's bug.
const std::string& EmptyModelDir();

// The fuzz input parsed as a ModelProto and built into the IR, external data resolving
// against EmptyModelDir(); shape inference as `infer_shapes` says.
Result<std::unique_ptr<Model>> LoadFuzzInput(const uint8_t* data, size_t size, bool infer_shapes);

// Whether every tensor the model declares, holds or may compute stays small enough for the
// passes and constant folding to run in milliseconds: no known shape over
// `max_elements_per_value`, at most `max_nodes` nodes (subgraphs and function bodies
// included). Unknown and symbolic dims count as 1, as the runtime binds them.
struct Budget {
  int64_t max_elements_per_value = int64_t{1} << 18;
  int64_t max_nodes = 512;
};
bool WithinBudget(const Model& model, const Budget& budget = {});

// A finding: prints what broke and aborts, which libFuzzer records as a crash with its input.
[[noreturn]] void Finding(std::string_view what, const Status& status);
[[noreturn]] void Finding(std::string_view what, std::string_view detail);

// A model error is an expected answer to a bad input; an internal error is a bug.
inline bool IsInternal(const Status& status) { return status.code() == ErrorCode::kInternal; }

}  // namespace fusionopt::fuzz
