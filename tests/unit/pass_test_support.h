// What every pass test needs, whatever the pass: models parsed from IR text and printed back,
// one pass run through the registry, fused nodes put back in place of their calls, and models
// run on the CPU runtime with seeded inputs and their outputs compared. The pass families'
// harness (pass_harness.h) builds its checks from these pieces.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cpu_runtime/engine/session.h"
#include "cpu_test_support.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "passes/cost_model/target_profiles.h"

// Not included here: cpu_runtime/engine/compare.h's Comparison would clash with the fused-kernel
// tests' own; callers that pass tolerances include it.
namespace fusionopt::cpu {
struct Tolerance;
}  // namespace fusionopt::cpu

namespace fusionopt::pass_test {

// A pass's options as {name, value} pairs (`--pass-option PASS.NAME=VALUE`).
using Options = std::vector<std::pair<std::string, std::string>>;

// ---------------------------------------------------------------- text

using cpu_test::Parse;  // the model exactly as written
// Parsed and shape-inferred, as the loader leaves a model.
std::unique_ptr<Model> ParseInferred(const std::string& text);
// Parsed, shape-inferred and run through the whole pipeline of `level` (default target).
std::unique_ptr<Model> ParseOptimized(const std::string& text, int level);
// The node of `graph` named `name`; fails the test when there is none.
Node* FindNode(const Graph& graph, const std::string& name);
// A tensor literal of `count` deterministic values spread over [low, high] (varied per element
// and per `seed`, multiples of 1/64 so they print exactly).
std::string Spread(int count, int seed, double low = -1.0, double high = 1.0);
// The published h100 cost-model profile (the pipeline's default target).
passes::TargetProfile H100();

// Every tensor written out, so a comparison of printed models also compares the weights.
std::string Print(const Model& model);
// Hand-written text as the printer writes it after shape inference: what a pass's result is
// compared with, so expected texts need not spell every inferred type.
std::string Canonical(const std::string& text);

// ---------------------------------------------------------------- passes

struct PassRun {
  passes::PassStatistics statistics;
  std::vector<passes::FusionRecord> fusions;

  int64_t Counter(const std::string& name) const;
  int64_t Rejections(const std::string& reason) const;
};

int64_t RejectionCount(const passes::PassStatistics& statistics, const std::string& reason);

// Runs `pass` alone through the registry's pipeline at the pass's level, as
// `fusionopt -O<level> --only PASS --check-each-pass` does: shapes re-inferred and the IR
// verified after a change; an IR 3 model the pass changed moves to IR 4.
PassRun RunPass(Model& model, const std::string& pass, const Options& options = {});

// Runs `pass` once on `model` with no pipeline around it: nothing re-inferred, verified or
// upgraded afterwards. REQUIREs that it succeeds.
PassRun RunPassObject(Model& model, passes::Pass& pass);

// ---------------------------------------------------------------- outlining

// x·s + b then Relu over [2,3] (nodes @mul, @add, @relu; the sum %u is an output too).
extern const char* const kOutlineChain;

struct Outlined : PassRun {
  bool changed = false;
  WhyNot why_not;  // WhyNotOutlinable's reason when it refused
  Node* fused = nullptr;
};
// The nodes named `names` outlined as one group the way a fusion pass does (OutlineGroup:
// function FusedTest of `kind`), through a pass context.
Outlined OutlineNodes(Model& model, std::vector<std::string> names, std::string kind = "elementwise");

// `text` parsed twice: as it was, and rewritten by one RunPass.
struct Rewritten {
  std::unique_ptr<Model> original;
  std::unique_ptr<Model> model;
  PassRun run;

  int64_t Counter(const std::string& name) const { return run.Counter(name); }
  int64_t Rejections(const std::string& reason) const { return run.Rejections(reason); }
};
Rewritten Rewrite(const std::string& text, const std::string& pass, const Options& options = {});

// The nodes of `graph` as "op" or "domain::op", in order.
std::vector<std::string> OpTypes(const Graph& graph);

// ---------------------------------------------------------------- fused nodes

// A copy of `model` in which every ai.fusionopt node (subgraphs included) is replaced by its
// function's body instantiated for the call, body values renamed uniquely after the call
// ("<call>/t0"); the values the call wrote keep their names and readers; the fused functions
// are dropped. The copy goes through the text form and has its shapes inferred.
std::unique_ptr<Model> InlineFusedNodes(const Model& model);

// The body of the function `node` calls, printed (PrintGraph).
std::string PrintBody(const Model& model, const Node& node);

// ---------------------------------------------------------------- running models

// Sizes for the dims a model leaves open when it runs on seeded inputs.
struct OpenDims {
  std::map<std::string, int64_t> symbols;  // by symbol
  int64_t other_symbols = 3;               // a symbol not listed (not 1: broadcasting is exercised)
  int64_t unnamed = 3;                     // a dim with neither size nor symbol
  // Instead of `other_symbols`: each unlisted symbol its own size, 3, 4, 5, ... in order of
  // first appearance, so a rewrite that confuses two symbols shows.
  bool distinct_symbols = false;
};

// Runs `model` on the CPU runtime, input i random from `seed + i` (cpu::RandomTensor).
std::vector<cpu::NamedTensor> RunOnCpu(const Model& model, const OpenDims& dims = {}, uint64_t seed = 7);
std::vector<cpu::NamedTensor> RunWithFeeds(const Model& model, const std::vector<cpu::NamedTensor>& feeds,
                                           const cpu::SessionOptions& options = {}, cpu::RunStats* stats = nullptr);

// Output by output (names, shapes, dtypes and values): cpu::Compare within `tolerance`, the
// reference being `expected`.
void ExpectClose(const std::vector<cpu::NamedTensor>& actual, const std::vector<cpu::NamedTensor>& expected,
                 cpu::Tolerance tolerance);
// Element by element, each its own REQUIRE: equal, or |actual - expected| <= atol +
// rtol * |expected|; NaNs alike. With rtol = atol = 0: the same numbers.
void RequireClose(const std::vector<cpu::NamedTensor>& actual, const std::vector<cpu::NamedTensor>& expected,
                  double rtol, double atol);

// `candidate` computes what `reference` computes on the same seeded inputs (ExpectClose).
void ExpectSameOutputs(const Model& reference, const Model& candidate, const OpenDims& dims, cpu::Tolerance tolerance,
                       uint64_t seed = 7);

}  // namespace fusionopt::pass_test
