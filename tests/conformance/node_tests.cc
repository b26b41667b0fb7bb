// fusionopt_conformance: runs the ONNX backend node tests whose ops are all in docs/ops.md
// through the CPU runtime and compares every output with the expected one.
//
//   fusionopt_conformance [--data DIR] [--ops FILE] [--known-failures FILE] [-v] [FILTER]
//
// Prints one line per unexpected failure, then "K known failures" and "N passed, M failed".
// Exit status: 0 when every failure is listed in known_failures.txt (and every listed test
// still fails), 1 otherwise, 2 on a usage error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "conformance_lists.h"
#include "conformance_report.h"
#include "isolation.h"
#include "node_test_runner.h"

namespace fusionopt::conformance {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: fusionopt_conformance [options] [FILTER]\n"
    "  --data DIR             ONNX node test folders (default /usr/share/libonnx-testdata/data/node)\n"
    "  --ops FILE             op list deciding which tests are in scope (default <repo>/docs/ops.md)\n"
    "  --known-failures FILE  accepted failures, 'test_name # reason' per line\n"
    "                         (default <repo>/tests/conformance/known_failures.txt)\n"
    "  --filter TEXT          only tests whose name contains TEXT (same as FILTER)\n"
    "  --timeout SECONDS      per-test time limit (default 20)\n"
    "  --in-process           run tests in this process (for a debugger; a crash ends the run)\n"
    "  -v, --verbose          print every test's result and a per-op summary\n";

struct Options {
  std::string data_dir = "/usr/share/libonnx-testdata/data/node";
  std::string ops_file;
  std::string known_failures_file;
  std::string filter;
  int timeout_seconds = 20;  // node tests take milliseconds; a hang must not eat the run
  bool in_process = false;
  bool verbose = false;
};

// This source lives at <repo>/tests/conformance/, which locates the default list files when
// the binary is run by hand from the build folder.
std::string RepoPath(const std::string& relative) {
  fs::path source(__FILE__);
  return (source.parent_path().parent_path().parent_path() / relative).string();
}

Result<Options> ParseOptions(int argc, char** argv) {
  Options options;
  options.ops_file = RepoPath("docs/ops.md");
  options.known_failures_file = RepoPath("tests/conformance/known_failures.txt");
  bool filter_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string& target) -> Status {
      if (i + 1 >= argc) return UsageError(arg + " needs a value");
      target = argv[++i];
      return Status::Ok();
    };
    if (arg == "--data") {
      FUSIONOPT_RETURN_IF_ERROR(value(options.data_dir));
    } else if (arg == "--ops") {
      FUSIONOPT_RETURN_IF_ERROR(value(options.ops_file));
    } else if (arg == "--known-failures") {
      FUSIONOPT_RETURN_IF_ERROR(value(options.known_failures_file));
    } else if (arg == "--timeout") {
      std::string seconds;
      FUSIONOPT_RETURN_IF_ERROR(value(seconds));
      char* end = nullptr;
      long parsed = std::strtol(seconds.c_str(), &end, 10);
      if (*end != '\0' || parsed < 1 || parsed > 86400) return UsageError("--timeout needs 1..86400 seconds");
      options.timeout_seconds = static_cast<int>(parsed);
    } else if (arg == "--in-process") {
      options.in_process = true;
    } else if (arg == "-v" || arg == "--verbose") {
      options.verbose = true;
    } else if (arg == "--filter" || (!arg.empty() && arg[0] != '-')) {
      if (filter_given) return UsageError("only one filter may be given");
      filter_given = true;
      if (arg == "--filter") {
        FUSIONOPT_RETURN_IF_ERROR(value(options.filter));
      } else {
        options.filter = arg;
      }
    } else {
      return UsageError("unknown option '" + arg + "'");
    }
  }
  return options;
}

struct NodeTest {
  std::string name;
  fs::path folder;
  std::set<OpKey> ops;  // of the main graph
  std::string unreadable;  // why model.onnx could not be parsed, if it could not
};

NodeTest Inspect(const fs::path& folder) {
  NodeTest test{folder.filename().string(), folder, {}, {}};
  std::ifstream file(folder / "model.onnx", std::ios::binary);
  onnx::ModelProto model;
  if (!file) {
    test.unreadable = "model.onnx is missing or unreadable";
  } else if (!model.ParseFromIstream(&file)) {
    test.unreadable = "model.onnx is not a ModelProto";
  }
  for (const onnx::NodeProto& node : model.graph().node()) {
    test.ops.emplace(CanonicalDomain(node.domain()), node.op_type());
  }
  return test;
}

// Test folders matching the filter, sorted by name.
Result<std::vector<fs::path>> ListTestFolders(const Options& options) {
  std::error_code error;
  std::vector<fs::path> folders;
  for (const auto& entry : fs::directory_iterator(options.data_dir, error)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("test_", 0) != 0) continue;
    if (name.find(options.filter) == std::string::npos) continue;
    folders.push_back(entry.path());
  }
  if (error) return UsageError("cannot list --data '" + options.data_dir + "': " + error.message());
  std::sort(folders.begin(), folders.end());
  return folders;
}

bool InScope(const NodeTest& test, const std::set<OpKey>& known_ops) {
  for (const OpKey& op : test.ops) {
    if (!known_ops.count(op)) return false;
  }
  return true;
}

Verdict RunOne(const NodeTest& test, const Options& options) {
  if (!test.unreadable.empty()) return {Outcome::kBadTest, test.unreadable};
  NodeTestOptions run_options;
  auto run = [&] { return RunNodeTest(test.folder, run_options); };
  return options.in_process ? run() : RunIsolated(run, options.timeout_seconds);
}

int Main(int argc, char** argv) {
  auto options = ParseOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "error: %s\n%s", options.status().message().c_str(), kUsage);
    return 2;
  }
  auto ops_text = ReadTextFile(options->ops_file);
  auto ops = ops_text.ok() ? ParseOpsTable(*ops_text) : Result<std::set<OpKey>>(ops_text.status());
  if (!ops.ok()) {
    std::fprintf(stderr, "error: --ops %s: %s\n", options->ops_file.c_str(), ops.status().message().c_str());
    return 2;
  }
  auto known_text = ReadTextFile(options->known_failures_file);
  auto known = known_text.ok() ? ParseKnownFailures(*known_text)
                               : Result<std::map<std::string, std::string>>(known_text.status());
  if (!known.ok()) {
    std::fprintf(stderr, "error: --known-failures %s: %s\n", options->known_failures_file.c_str(),
                 known.status().message().c_str());
    return 2;
  }
  auto folders = ListTestFolders(*options);
  if (!folders.ok()) {
    std::fprintf(stderr, "error: %s\n", folders.status().message().c_str());
    return 2;
  }

  auto start = std::chrono::steady_clock::now();
  std::vector<TestResult> results;
  int out_of_scope = 0;
  for (const fs::path& folder : *folders) {
    NodeTest test = Inspect(folder);
    if (test.unreadable.empty() && !InScope(test, *ops)) {
      ++out_of_scope;
      continue;
    }
    Verdict verdict = RunOne(test, *options);
    if (options->verbose) PrintVerdict(test.name, verdict, *known);
    results.push_back({test.name, test.ops, std::move(verdict)});
  }
  if (results.empty()) {
    std::fprintf(stderr, "error: no in-scope test in %s matches '%s'\n", options->data_dir.c_str(),
                 options->filter.c_str());
    return 2;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ReportSettings settings{options->verbose, options->filter.empty(), out_of_scope, seconds};
  return Report(results, *known, settings);
}

}  // namespace
}  // namespace fusionopt::conformance

int main(int argc, char** argv) { return fusionopt::conformance::Main(argc, argv); }
