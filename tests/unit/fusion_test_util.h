// Shared by the O2 fusion passes' tests. Besides running fused nodes on the CPU runtime, a
// fused model is checked the way a runtime that inlines functions sees it:
// InlineFusedNodes puts each function body back in place of its call, and the inlined model
// must compute what the original computes. That also checks the body is a faithful copy of
// the nodes it replaced.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cpu_runtime/compare.h"
#include "cpu_runtime/session.h"
#include "ir/graph.h"
#include "passes/pass.h"

namespace fusionopt::fusion_test {

using Options = std::vector<std::pair<std::string, std::string>>;

// Parsed as the loader leaves a model: shapes inferred. REQUIREs that it parses.
std::unique_ptr<Model> ParseInferred(const std::string& text);

// The printed model with every tensor written out; the canonical form of hand-written text.
std::string Print(const Model& model);
std::string Canonical(const std::string& text);

// Runs `pass` alone through the O2 pipeline (shapes re-inferred, IR verified after it).
struct PassRun {
  passes::PassStatistics statistics;
  std::vector<passes::FusionRecord> fusions;
};
PassRun RunPass(Model& model, const std::string& pass, const Options& options = {});

int64_t RejectionCount(const passes::PassStatistics& statistics, const std::string& reason);

// A copy of `model` in which every ai.fusionopt node (subgraphs included) is replaced by a copy
// of its function's body, body values renamed uniquely after the call ("<call>/t0"); the
// values the call wrote keep their names and readers; the fused functions are dropped. The
// copy goes through the text form and has its shapes inferred.
std::unique_ptr<Model> InlineFusedNodes(const Model& model);

// The body of the function `node` calls, printed (PrintGraph).
std::string PrintBody(const Model& model, const Node& node);

// Runs `model` on the CPU runtime with seeded random inputs (cpu::RandomTensor); symbolic dims
// take their size from `symbols`, 3 when not listed (not 1, so broadcasting is exercised).
std::vector<cpu::NamedTensor> RunOnCpu(const Model& model, const std::map<std::string, int64_t>& symbols = {},
                                       uint64_t seed = 7);

// `optimized`, its fused nodes inlined, computes what `original` computes on the same inputs.
void ExpectSameNumbers(const Model& original, const Model& optimized,
                       const std::map<std::string, int64_t>& symbols = {}, cpu::Tolerance tolerance = {1e-5, 1e-6});

// The nodes of the main graph as "op" or "domain::op", in order.
std::vector<std::string> OpTypes(const Graph& graph);

}  // namespace fusionopt::fusion_test
