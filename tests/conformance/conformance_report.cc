#include "conformance_report.h"

#include <cstdio>

namespace fusionopt::conformance {
namespace {

bool Passed(const Verdict& verdict) { return verdict.outcome == Outcome::kPass; }
bool Skipped(const Verdict& verdict) { return verdict.outcome == Outcome::kSkipped; }

// One output line per test, whatever a runtime message contains.
std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string Describe(const Verdict& verdict) {
  return "(" + std::string(OutcomeName(verdict.outcome)) + "): " + OneLine(verdict.reason);
}

std::string OpLabel(const OpKey& op) {
  return op.first == "ai.onnx" ? op.second : op.first + "::" + op.second;
}

struct OpTally {
  int passed = 0;
  int run = 0;
  std::vector<std::string> failing;
};

void PrintOpSummary(const std::vector<TestResult>& results) {
  std::map<std::string, OpTally> tallies;
  for (const TestResult& result : results) {
    if (Skipped(result.verdict)) continue;
    for (const OpKey& op : result.ops) {
      OpTally& tally = tallies[OpLabel(op)];
      ++tally.run;
      if (Passed(result.verdict)) {
        ++tally.passed;
      } else {
        tally.failing.push_back(result.name);
      }
    }
  }
  std::printf("per-op results (tests passed / tests run):\n");
  for (const auto& [op, tally] : tallies) {
    std::string failing;
    for (size_t i = 0; i < tally.failing.size() && i < 3; ++i) failing += (i ? ", " : "") + tally.failing[i];
    if (tally.failing.size() > 3) failing += ", ...";
    std::printf("  %-28s %4d / %-4d%s%s\n", op.c_str(), tally.passed, tally.run, failing.empty() ? "" : "  failing: ",
                failing.c_str());
  }
}

}  // namespace

void PrintVerdict(const std::string& name, const Verdict& verdict,
                  const std::map<std::string, std::string>& known_failures) {
  bool known = known_failures.count(name) > 0;
  if (Passed(verdict)) {
    std::printf("PASS  %s%s\n", name.c_str(), known ? " (listed in known_failures.txt)" : "");
  } else if (Skipped(verdict)) {
    std::printf("SKIP  %s: %s\n", name.c_str(), OneLine(verdict.reason).c_str());
  } else {
    std::printf("%s %s %s\n", known ? "KNOWN" : "FAIL ", name.c_str(), Describe(verdict).c_str());
  }
  std::fflush(stdout);
}

int Report(const std::vector<TestResult>& results, const std::map<std::string, std::string>& known_failures,
           const ReportSettings& settings) {
  int passed = 0, failed = 0, skipped = 0, known = 0, problems = 0;
  std::set<std::string> ran;
  if (settings.verbose) std::printf("\n");
  for (const TestResult& result : results) {
    ran.insert(result.name);
    bool listed = known_failures.count(result.name) > 0;
    if (Skipped(result.verdict)) {
      ++skipped;
    } else if (Passed(result.verdict)) {
      ++passed;
      if (listed) {
        std::printf("%s: now passes, remove it from known_failures.txt\n", result.name.c_str());
        ++problems;
      }
    } else {
      ++failed;
      if (listed) {
        ++known;
      } else {
        std::printf("FAIL %s %s\n", result.name.c_str(), Describe(result.verdict).c_str());
        ++problems;
      }
    }
  }
  if (settings.complete_run) {
    for (const auto& [name, reason] : known_failures) {
      if (ran.count(name)) continue;
      std::printf("%s: listed in known_failures.txt but not an in-scope test, remove it\n", name.c_str());
      ++problems;
    }
  }
  if (settings.verbose) {
    PrintOpSummary(results);
    std::printf("%d tests out of scope (an op missing from the op list); ran %zu in %.1f s\n",
                settings.out_of_scope, results.size(), settings.seconds);
  }
  if (skipped > 0) std::printf("%d skipped (inputs over 64 MB)\n", skipped);
  std::printf("%d known failures\n", known);
  std::printf("%d passed, %d failed\n", passed, failed);
  return problems == 0 ? 0 : 1;
}

}  // namespace fusionopt::conformance
