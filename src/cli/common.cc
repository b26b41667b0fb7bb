#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "cli/commands.h"
#include "passes/registry.h"

namespace fusionopt::cli {

namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0.
size_t Utf8Length(const std::string& text, size_t i) {
  auto byte = static_cast<unsigned char>(text[i]);
  size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xe ? 3 : (byte >> 3) == 0x1e ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return 0;
  }
  return length;
}

}  // namespace

std::string OneLine(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    size_t length = Utf8Length(text, i);
    // Control characters, invalid UTF-8 and the Unicode line/paragraph separators would
    // break the one-line contract (or a terminal): escape them.
    bool separator = length == 3 && byte == 0xe2 && text[i + 1] == '\x80' &&
                     (text[i + 2] == '\xa8' || text[i + 2] == '\xa9');
    if (length == 0 || byte < 0x20 || byte == 0x7f || separator) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
      out += escaped;
      ++i;
      continue;
    }
    out.append(text, i, length);
    i += length;
  }
  return out;
}

int ReportError(const std::string& file, const Status& status) {
  std::fprintf(stderr, "error: %s: %s\n", OneLine(file).c_str(), OneLine(status.message()).c_str());
  return static_cast<int>(status.code());
}

int ListPasses(bool verbose) {
  // One line per pass, "NAME<TAB>LEVEL<TAB>SUMMARY", after a header: scripts rely on it. A
  // conversion's level is the runtime it converts for ("--runtime ort"): it runs at every level.
  // Verbose: each pass's rewrite after its line, indented, then a blank line.
  std::printf("name\tlevel\tsummary\n");
  for (const passes::PassInfo& pass : passes::AllPasses()) {
    const std::string level = pass.runtime.empty() ? "O" + std::to_string(pass.level) : "--runtime " + pass.runtime;
    std::printf("%s\t%s\t%s\n", pass.name.c_str(), level.c_str(), pass.summary.c_str());
    if (!verbose) continue;
    std::string rewrite = pass.rewrite;
    while (!rewrite.empty() && rewrite.front() == '\n') rewrite.erase(rewrite.begin());
    size_t start = 0;
    while (start < rewrite.size()) {
      const size_t end = rewrite.find('\n', start);
      const std::string line = rewrite.substr(start, end == std::string::npos ? std::string::npos : end - start);
      std::printf("    %s\n", line.c_str());
      if (end == std::string::npos) break;
      start = end + 1;
    }
    std::printf("\n");
  }
  return 0;
}

Result<DimSizes> DimsForModel(const std::string& file, const Model& model, DimSizes dims, bool strict) {
  return api::DimsForModel(OneLine(file), model, std::move(dims), strict);
}

void AddStrictDimsOption(CLI::App& command, bool& strict) {
  command.add_flag("--strict-dims", strict, "A --dim symbol the model does not have is an error (default: a warning)");
}

}  // namespace fusionopt::cli
