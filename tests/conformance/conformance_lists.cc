#include "conformance_lists.h"

#include <fstream>
#include <sstream>
#include <vector>

namespace fusionopt::conformance {
namespace {

std::string Trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

std::vector<std::string> SplitAndTrim(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) {
    part = Trim(part);
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// Cells of a Markdown table row "| a | b | c |" (leading/trailing pipes optional).
std::vector<std::string> TableCells(std::string row) {
  row = Trim(row);
  if (!row.empty() && row.front() == '|') row.erase(0, 1);
  if (!row.empty() && row.back() == '|') row.pop_back();
  std::vector<std::string> cells;
  std::stringstream stream(row);
  std::string cell;
  while (std::getline(stream, cell, '|')) cells.push_back(Trim(cell));
  return cells;
}

bool IsSeparatorRow(const std::vector<std::string>& cells) {
  return !cells.empty() && cells[0].find_first_not_of("-: ") == std::string::npos;
}

// "com.microsoft, ai.onnx (onnxruntime registers it there)" -> {com.microsoft, ai.onnx}.
std::vector<std::string> DomainsOf(const std::string& cell) {
  std::vector<std::string> domains;
  for (const std::string& part : SplitAndTrim(cell, ',')) {
    domains.push_back(part.substr(0, part.find_first_of(" (")));
  }
  return domains;
}

}  // namespace

std::string CanonicalDomain(const std::string& domain) {
  return domain.empty() ? "ai.onnx" : domain;
}

Result<std::set<OpKey>> ParseOpsTable(const std::string& markdown) {
  std::set<OpKey> ops;
  std::stringstream stream(markdown);
  std::string line;
  while (std::getline(stream, line)) {
    if (Trim(line).rfind('|', 0) != 0) continue;
    std::vector<std::string> cells = TableCells(line);
    if (cells.size() < 2 || IsSeparatorRow(cells) || cells[0] == "Op") continue;
    for (const std::string& op : SplitAndTrim(cells[0], ',')) {
      for (const std::string& domain : DomainsOf(cells[1])) ops.emplace(domain, op);
    }
  }
  if (ops.empty()) return InvalidModel("no operator table rows ('| Op | Domain | ...') found");
  return ops;
}

Result<std::map<std::string, std::string>> ParseKnownFailures(const std::string& text) {
  std::map<std::string, std::string> known;
  std::stringstream stream(text);
  std::string line;
  for (int number = 1; std::getline(stream, line); ++number) {
    std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    std::string where = "line " + std::to_string(number) + ": ";
    size_t hash = trimmed.find(" #");
    std::string name = Trim(trimmed.substr(0, hash));
    std::string reason = hash == std::string::npos ? "" : Trim(trimmed.substr(hash + 2));
    if (reason.empty()) return InvalidModel(where + "'" + name + "' needs a reason: 'test_name # reason'");
    if (name.find_first_of(" \t") != std::string::npos) {
      return InvalidModel(where + "'" + name + "' is not a single test name");
    }
    if (!known.emplace(name, reason).second) return InvalidModel(where + "'" + name + "' is listed twice");
  }
  return known;
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return IoError("cannot read '" + path + "'");
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

}  // namespace fusionopt::conformance
