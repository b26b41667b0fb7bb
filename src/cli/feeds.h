// Building a session's feeds from --input files, --shape overrides and a seed (shared by
// `run` and `verify`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/session.h"
#include "cpu_runtime/engine/session.h"

namespace fusionopt::cli {

struct FeedOptions {
  std::vector<std::string> input_files;  // NAME=FILE
  std::vector<std::string> shapes;       // NAME=D1xD2...
  // Symbolic dim sizes by symbol (`--dim sequence=128`), for inputs no --shape names; other
  // symbolic dims are 1.
  std::map<std::string, int64_t, std::less<>> dims;
  uint64_t seed = 0;
};

// Feeds for every input of `session` (either backend): files where given, seeded random data otherwise. The
// seed is mixed with the input's position so inputs differ from each other. `defaulted`, when
// given, receives each symbolic (or unnamed unknown) dim that neither --shape nor --dim sized
// and so became 1: a benchmark warns about those, since they silently change what it measures.
Result<std::vector<cpu::NamedTensor>> MakeFeeds(const api::Session& session, const FeedOptions& options,
                                                uint64_t run_index = 0, std::vector<std::string>* defaulted = nullptr);
// The same for a model's graph `inputs`.
Result<std::vector<cpu::NamedTensor>> MakeFeeds(const std::vector<const Value*>& inputs, const FeedOptions& options,
                                                uint64_t run_index = 0, std::vector<std::string>* defaulted = nullptr);

// "input_ids 1x128 int64, attention_mask 1x128 int64": what a run was fed.
std::string DescribeFeeds(const std::vector<cpu::NamedTensor>& feeds);

}  // namespace fusionopt::cli
