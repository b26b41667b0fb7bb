// The registry: every pass fusionopt has, its level, and the pipeline of each level (the
// order and the reasons for it live in registry.cc, in one place).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace fusionopt::passes {

struct PassInfo {
  std::string name;
  int level = 1;
  // A conversion's runtime ("ort"): it runs after every optimization, whatever the level,
  // exactly when --runtime names that runtime, and --only/--disable do not select it.
  std::string runtime;
  std::string summary;
  std::string rewrite;  // Pass::rewrite()
  std::vector<PassOptionInfo> options;
  std::function<std::unique_ptr<Pass>()> create;
};

// Every pass, in pipeline order of first appearance.
const std::vector<PassInfo>& AllPasses();
const PassInfo* FindPass(std::string_view name);

// The passes of `level` (0-3), in order; a pass may appear more than once (cleanup after
// fusion). RunPipeline runs them less the deselected ones, never one twice in a row.
std::vector<std::string> PipelineFor(int level);

// The conversions --runtime `runtime` ends the pipeline with, in order; none for "" (our own
// runtimes, which run the fused functions as they are).
std::vector<std::string> ConversionsFor(std::string_view runtime);

}  // namespace fusionopt::passes
