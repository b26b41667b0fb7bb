#include <spdlog/spdlog.h>

#include <cstdio>

#include "cli/commands.h"

namespace fusionopt::cli {

int ReportError(const std::string& file, const Status& status) {
  std::string message = status.message();
  for (char& c : message) {
    if (c == '\n') c = ' ';  // the contract is one line per error
  }
  std::fprintf(stderr, "error: %s: %s\n", file.c_str(), message.c_str());
  return static_cast<int>(status.code());
}

int ListPasses() {
  // The registry arrives with the first passes; the format is fixed now so scripts can rely
  // on it: one line per pass, "NAME<TAB>LEVEL<TAB>SUMMARY", after this header.
  std::printf("name\tlevel\tsummary\n");
  return 0;
}

}  // namespace fusionopt::cli
