// The fail-safe check: see fusion_check.h.
#include "verify/fusion_check.h"
#include "verify/quantization_steps.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "cpu_runtime/engine/inputs.h"
#include "ir/float16.h"
#include "ir/op_class.h"
#include "passes/cleanup/eliminate_dead_code.h"
#include "passes/util/inline_call.h"
#include "passes/util/outline.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::verify {

using namespace passes;  // the rewrites it undoes and the profiles it reads are the passes'

void CollectFusedCalls(const Model& model, const Graph& graph, std::vector<Node*>& calls) {
  for (const auto& node : graph.nodes()) {
    const bool fused = node->domain() == kFusionDomain && model.FindFunction(node->domain(), node->op_type()) != nullptr;
    if (fused) calls.push_back(node.get());
    for (const Graph* subgraph : node->Subgraphs()) CollectFusedCalls(model, *subgraph, calls);
  }
}

namespace {

using Feeds = std::vector<cpu::NamedTensor>;
using RunFused = std::function<bool(const Node&)>;

// An input set and how its outputs are judged.
struct InputSet {
  std::string label;  // "seeded inputs 1", "inputs ×100", ...
  Feeds feeds;
  bool finite_only = false;  // value-range set: only new non-finite values count
};

// ---------------------------------------------------------------- value-range input sets

bool IsFloating(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kDouble || dtype == DataType::kFloat16 ||
         dtype == DataType::kBFloat16;
}

// A copy of `tensor` with `change(value, index)` applied to every element (floating dtypes only).
cpu::RtTensor Transformed(const cpu::RtTensor& tensor, const std::function<double(double, int64_t)>& change) {
  cpu::RtTensor copy = cpu::RtTensor::Allocate(tensor.dtype(), tensor.dims());
  const int64_t count = tensor.NumElements();
  for (int64_t i = 0; i < count; ++i) {
    double value = change(tensor.ValueAsDouble(i), i);
    switch (tensor.dtype()) {
      case DataType::kFloat: copy.data<float>()[i] = static_cast<float>(value); break;
      case DataType::kDouble: copy.data<double>()[i] = value; break;
      case DataType::kFloat16: copy.data<uint16_t>()[i] = FloatToHalf(static_cast<float>(value)); break;
      case DataType::kBFloat16: copy.data<uint16_t>()[i] = FloatToBFloat16(static_cast<float>(value)); break;
      default: FUSIONOPT_CHECK(false, "Transformed takes floating tensors only");
    }
  }
  return copy;
}

Feeds TransformedFeeds(const Feeds& feeds, const std::function<double(double, int64_t)>& change) {
  Feeds out;
  for (const cpu::NamedTensor& feed : feeds) {
    out.push_back({feed.name, IsFloating(feed.tensor.dtype()) ? Transformed(feed.tensor, change) : feed.tensor});
  }
  return out;
}

// A quarter of the elements (a fixed hash of the index, so every run masks the same ones) set
// to `mask_value`.
std::function<double(double, int64_t)> Masked(double mask_value) {
  return [mask_value](double value, int64_t index) {
    uint64_t hash = static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull;
    hash ^= hash >> 31;
    return (hash * 0xBF58476D1CE4E5B9ull) >> 62 == 0 ? mask_value : value;
  };
}

std::vector<InputSet> InputSets(const FusionCheckOptions& options) {
  std::vector<InputSet> sets;
  for (size_t i = 0; i < options.feeds.size(); ++i) {
    sets.push_back({"seeded inputs " + std::to_string(i + 1), options.feeds[i], false});
  }
  if (options.check_value_ranges && !options.feeds.empty()) {
    const Feeds& base = options.feeds.front();
    sets.push_back({"inputs scaled x100 (large logits)", TransformedFeeds(base, [](double v, int64_t) { return v * 100; }),
                    true});
    sets.push_back({"inputs with -1e4 masks", TransformedFeeds(base, Masked(-1e4)), true});
    sets.push_back({"inputs with -inf masks", TransformedFeeds(base, Masked(-INFINITY)), true});
  }
  return sets;
}

// ---------------------------------------------------------------- comparing outputs

// Elements the reference computes finite and `actual` does not.
int64_t NewNonFinite(const cpu::RtTensor& actual, const cpu::RtTensor& expected) {
  int64_t count = 0;
  for (int64_t i = 0; i < expected.NumElements(); ++i) {
    if (std::isfinite(expected.ValueAsDouble(i)) && !std::isfinite(actual.ValueAsDouble(i))) ++count;
  }
  return count;
}

// The first difference between `actual` and `expected` on `set`, or "" when they agree.
std::string DifferenceOn(const InputSet& set, const Feeds& expected, const Feeds& actual,
                         const cpu::Tolerance& tolerance) {
  if (expected.size() != actual.size()) {
    return fmt::format("{} outputs instead of {}", actual.size(), expected.size());
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const cpu::RtTensor& want = expected[i].tensor;
    const cpu::RtTensor& got = actual[i].tensor;
    const std::string where = "output '" + expected[i].name + "'";
    if (got.dtype() != want.dtype() || got.dims() != want.dims()) {
      return where + " has dtype or shape " + std::string(NameOf(got.dtype())) + cpu::DimsToString(got.dims()) +
             ", the original's " + std::string(NameOf(want.dtype())) + cpu::DimsToString(want.dims());
    }
    if (!IsFloating(want.dtype()) && set.finite_only) continue;
    if (set.finite_only) {
      if (int64_t count = NewNonFinite(got, want); count > 0) {
        return fmt::format("{} has {} NaN/Inf values where the original's are finite, on {}", where, count, set.label);
      }
      continue;
    }
    cpu::Comparison result = cpu::Compare(got, want, tolerance, expected[i].name);
    if (!result.passed) {
      return fmt::format("{} differs on {}: max_abs={:.3g} max_rel={:.3g}, beyond {} ({} elements)", where, set.label,
                         result.max_abs_error, result.max_rel_error, tolerance.Describe(), result.mismatches);
    }
  }
  return "";
}

// ---------------------------------------------------------------- the fused calls


// ---------------------------------------------------------------- the checker

struct Offender {
  Node* call;
  std::string difference;  // with it (and the rest of its set) fused, alone
};

class Checker {
 public:
  Checker(const Model& original, Model& optimized, const FusionCheckOptions& options, FusionCheckReport& report)
      : original_(original),
        optimized_(optimized),
        options_(options),
        tolerance_(ForReference(options.tolerance, original)),
        report_(report),
        sets_(InputSets(options)) {}

  Status ComputeReference() {
    cpu::SessionOptions session_options;
    session_options.threads = options_.threads;
    session_options.fused_kernels = false;  // the oracle: every call (if any) op by op
    FUSIONOPT_ASSIGN_OR_RETURN(auto session, cpu::Session::Create(original_, session_options));
    for (const InputSet& set : sets_) {
      FUSIONOPT_ASSIGN_OR_RETURN(Feeds outputs, session->Run(set.feeds));
      expected_.push_back(std::move(outputs));
    }
    report_.input_sets = static_cast<int>(sets_.size());
    return Status::Ok();
  }

  // The first difference of the optimized model with `run_fused` deciding which calls run
  // fused (null: all), or "".
  Result<std::string> Difference(const RunFused* run_fused) {
    ++report_.checks;
    cpu::SessionOptions session_options;
    session_options.threads = options_.threads;
    if (run_fused != nullptr) session_options.run_fused = *run_fused;
    session_options.fused_output_hook = options_.fused_output_hook;
    FUSIONOPT_ASSIGN_OR_RETURN(auto session, cpu::Session::Create(optimized_, session_options));
    for (size_t i = 0; i < sets_.size(); ++i) {
      FUSIONOPT_ASSIGN_OR_RETURN(Feeds outputs, session->Run(sets_[i].feeds));
      std::string difference = DifferenceOn(sets_[i], expected_[i], outputs, tolerance_);
      if (!difference.empty()) return difference;
    }
    return std::string();
  }

  // The difference with only `calls` fused.
  Result<std::string> DifferenceFusing(const std::vector<Node*>& calls) {
    auto chosen = std::make_shared<std::unordered_set<const Node*>>(calls.begin(), calls.end());
    RunFused run_fused = [chosen](const Node& call) { return chosen->count(&call) > 0; };
    return Difference(&run_fused);
  }

  // Bisection: `calls` differ when fused together (`difference`); which of them do alone?
  // A set that differs only as a whole (two calls that are wrong only together) is kept whole.
  Status FindOffenders(const std::vector<Node*>& calls, const std::string& difference, std::vector<Offender>& out) {
    if (calls.size() == 1) {
      out.push_back({calls.front(), difference});
      return Status::Ok();
    }
    std::vector<Node*> first(calls.begin(), calls.begin() + calls.size() / 2);
    std::vector<Node*> second(calls.begin() + calls.size() / 2, calls.end());
    FUSIONOPT_ASSIGN_OR_RETURN(std::string first_difference, DifferenceFusing(first));
    FUSIONOPT_ASSIGN_OR_RETURN(std::string second_difference, DifferenceFusing(second));
    if (first_difference.empty() && second_difference.empty()) {
      for (Node* call : calls) out.push_back({call, difference});
      return Status::Ok();
    }
    if (!first_difference.empty()) FUSIONOPT_RETURN_IF_ERROR(FindOffenders(first, first_difference, out));
    if (!second_difference.empty()) FUSIONOPT_RETURN_IF_ERROR(FindOffenders(second, second_difference, out));
    return Status::Ok();
  }

  // Inlines the offenders; false when none could be.
  bool Undo(const std::vector<Offender>& offenders) {
    bool any = false;
    for (const Offender& offender : offenders) {
      Node& call = *offender.call;
      UndoneFusion undone{call.name(), std::string(call.domain()) + "::" + call.op_type(), FusedNodeNames(call),
                          offender.difference};
      const Function* function = optimized_.FindFunction(call.domain(), call.op_type());
      FUSIONOPT_CHECK(function != nullptr, "a fused call without its function");
      if (InlineCall(*call.graph(), call, *function).done()) {
        report_.undone.push_back(std::move(undone));
        any = true;
      } else {
        report_.not_undone.push_back(undone.node + " (" + undone.function + "): " + undone.difference);
      }
    }
    return any;
  }

 private:
  const Model& original_;
  Model& optimized_;
  const FusionCheckOptions& options_;
  cpu::Tolerance tolerance_;  // options_'s, with the quantization steps of the original's outputs
  FusionCheckReport& report_;
  std::vector<InputSet> sets_;
  std::vector<Feeds> expected_;
};

// Each round isolates and undoes the calls that differ; a later round catches a difference an
// earlier undo uncovered. Three rounds are plenty: each undoes every offender it can see.
constexpr int kMaxRounds = 3;

Status Repair(Checker& checker, Model& optimized, FusionCheckReport& report, std::string difference) {
  const RunFused none = [](const Node&) { return false; };
  for (int round = 0; round < kMaxRounds && !difference.empty(); ++round) {
    std::vector<Node*> calls;
    CollectFusedCalls(optimized, *optimized.graph, calls);
    if (calls.empty()) break;
    FUSIONOPT_ASSIGN_OR_RETURN(std::string unfused, checker.Difference(&none));
    if (!unfused.empty()) {  // not a fused kernel's doing: nothing here can undo it
      difference = "with every fused call run op by op, " + unfused;
      break;
    }
    std::vector<Offender> offenders;
    FUSIONOPT_RETURN_IF_ERROR(checker.FindOffenders(calls, difference, offenders));
    if (!checker.Undo(offenders)) break;
    RemoveUncalledFusedFunctions(optimized);
    InferShapes(optimized);  // function bodies are untyped: the inlined ops' values get their types here
    FUSIONOPT_ASSIGN_OR_RETURN(difference, checker.Difference(nullptr));
  }
  report.matches = difference.empty();
  report.remaining_difference = difference;
  return Status::Ok();
}

}  // namespace

Result<FusionCheckReport> CheckAndRepairFusions(const Model& original, Model& optimized,
                                                const FusionCheckOptions& options) {
  FUSIONOPT_CHECK(!options.feeds.empty(), "the fail-safe check needs at least one input set");
  FusionCheckReport report;
  std::vector<Node*> calls;
  CollectFusedCalls(optimized, *optimized.graph, calls);
  report.fused_calls = static_cast<int>(calls.size());
  Checker checker(original, optimized, options, report);
  FUSIONOPT_RETURN_IF_ERROR(checker.ComputeReference());
  FUSIONOPT_ASSIGN_OR_RETURN(report.initial_difference, checker.Difference(nullptr));
  if (report.initial_difference.empty()) {
    report.matches = true;
    return report;
  }
  FUSIONOPT_RETURN_IF_ERROR(Repair(checker, optimized, report, report.initial_difference));
  return report;
}

Result<std::vector<cpu::NamedTensor>> SeededFeeds(const Model& model,
                                                  const std::map<std::string, int64_t, std::less<>>& symbols,
                                                  uint64_t seed) {
  Feeds feeds;
  const auto& inputs = model.graph->inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& input = *inputs[i];
    if (input.is_initializer()) continue;  // keeps its value (a caller may override it, we do not)
    if (!input.shape()) return Unsupported("input '" + input.name() + "' has an unknown rank");
    std::vector<int64_t> dims;
    for (const Dim& dim : *input.shape()) {
      auto symbol = dim.is_symbolic() ? symbols.find(dim.symbol) : symbols.end();
      dims.push_back(dim.is_known() ? dim.value : symbol != symbols.end() ? symbol->second : 1);
    }
    DataType dtype = input.dtype() == DataType::kUndefined ? DataType::kFloat : input.dtype();
    FUSIONOPT_ASSIGN_OR_RETURN(cpu::RtTensor tensor, cpu::RandomTensor(dtype, dims, seed * 1000003u + i));
    feeds.push_back({input.name(), std::move(tensor)});
  }
  return feeds;
}

std::string FusionCheckToJson(const FusionCheckReport& report) {
  using nlohmann::json;
  json undone = json::array();
  for (const UndoneFusion& fusion : report.undone) {
    undone.push_back({{"node", fusion.node},
                      {"function", fusion.function},
                      {"members", fusion.members},
                      {"difference", fusion.difference}});
  }
  json out = {{"fused_calls", report.fused_calls},
              {"input_sets", report.input_sets},
              {"checks", report.checks},
              {"initial_difference", report.initial_difference},
              {"undone", undone},
              {"not_undone", report.not_undone},
              {"matches", report.matches},
              {"remaining_difference", report.remaining_difference}};
  return out.dump();
}

}  // namespace fusionopt::verify
