// The two text files that steer the conformance run: the op list (docs/ops.md), which decides
// which ONNX node tests are in scope, and known_failures.txt, the failures we accept for now,
// each with its reason.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>

#include "ir/status.h"

namespace fusionopt::conformance {

// (domain, op type) with the default domain spelled "ai.onnx".
using OpKey = std::pair<std::string, std::string>;

std::string CanonicalDomain(const std::string& domain);  // "" -> "ai.onnx"

// Parses the Markdown tables of docs/ops.md: every row's first cell lists op types separated
// by commas, the second cell the domains they belong to ("com.microsoft, ai.onnx (...)").
// An ops file without a single op row is an error (probably the wrong file).
Result<std::set<OpKey>> ParseOpsTable(const std::string& markdown);

// known_failures.txt: "test_name # reason" per line; blank lines and lines starting with '#'
// are ignored. A name without a reason or listed twice is an error naming the line.
Result<std::map<std::string, std::string>> ParseKnownFailures(const std::string& text);

Result<std::string> ReadTextFile(const std::string& path);

}  // namespace fusionopt::conformance
