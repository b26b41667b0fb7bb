// Subcommands of the `fusionopt` binary. Each returns the process exit code; errors are
// printed as one line `error: <file>: <problem>` by ReportError.
#pragma once

#include <cstdint>
#include <string>

#include "ir/status.h"

namespace CLI {
class App;
}

namespace fusionopt::cli {

struct OptimizeOptions {
  std::string input;
  std::string output;
  int level = 2;
  bool external_data = false;
  uint64_t external_threshold = 1024;
  std::string external_name;
  bool dump = false;
  bool write_shapes = false;
};

struct InspectOptions {
  std::string input;
  bool json = false;
};

void AddOptimizeOptions(CLI::App& command, OptimizeOptions& options);
void AddInspectOptions(CLI::App& command, InspectOptions& options);

int RunOptimize(const OptimizeOptions& options);
int RunInspect(const InspectOptions& options);
int ListPasses();

// Prints `error: <file>: <message>` and returns the exit code for the status.
int ReportError(const std::string& file, const Status& status);

}  // namespace fusionopt::cli
