// What the conformance driver prints, and the exit status that follows from it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "conformance_lists.h"
#include "node_test_runner.h"

namespace fusionopt::conformance {

struct TestResult {
  std::string name;
  std::set<OpKey> ops;
  Verdict verdict;
};

struct ReportSettings {
  bool verbose = false;
  bool complete_run = false;  // no filter: a listed known failure that did not run is stale
  int out_of_scope = 0;
  double seconds = 0;
};

// One line as a test finishes (-v): PASS / FAIL / KNOWN / SKIP with the reason.
void PrintVerdict(const std::string& name, const Verdict& verdict,
                  const std::map<std::string, std::string>& known_failures);

// Prints unexpected failures, known failures that now pass, stale list entries, the per-op
// summary (verbose), "K known failures" and "N passed, M failed"; returns the exit status.
int Report(const std::vector<TestResult>& results, const std::map<std::string, std::string>& known_failures,
           const ReportSettings& settings);

}  // namespace fusionopt::conformance
