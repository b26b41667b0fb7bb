// fusionopt: command-line entry point. Parses arguments and dispatches; the work lives in
// the libraries so a program embedding fusionopt gets the same behaviour.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/thread_wait.h"
#include "cpu_runtime/engine/host_cpu.h"

namespace {

const std::set<std::string> kSubcommands = {"optimize", "inspect", "run", "verify", "bench"};

const std::set<std::string> kGlobalFlags = {"-h", "--help", "--version", "--list-passes",
                                             "-v", "--verbose", "-q", "--quiet"};

// `fusionopt [OPTIONS] MODEL ...` means `fusionopt optimize [OPTIONS] MODEL ...`: when no
// argument names a subcommand and something other than global flags was given, the
// subcommand is `optimize` (its options may appear before or after the model).
std::vector<std::string> WithDefaultSubcommand(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  bool names_subcommand = false;
  bool only_global_flags = true;
  for (const auto& arg : args) {
    names_subcommand = names_subcommand || kSubcommands.count(arg) != 0;
    only_global_flags = only_global_flags && kGlobalFlags.count(arg) != 0;
  }
  if (!names_subcommand && !only_global_flags) args.insert(args.begin(), "optimize");
  return args;
}

void ConfigureLogging(int verbosity, bool quiet) {
  auto logger = spdlog::stderr_color_mt("fusionopt");
  logger->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(logger);
  if (quiet) spdlog::set_level(spdlog::level::err);
  else if (verbosity >= 2) spdlog::set_level(spdlog::level::trace);
  else if (verbosity == 1) spdlog::set_level(spdlog::level::debug);
  else spdlog::set_level(spdlog::level::info);
}

}  // namespace

namespace {

int Main(int argc, char** argv) {
  using namespace fusionopt;
  CLI::App app{"fusionopt: ahead-of-time operator fusion for ONNX models", "fusionopt"};
  // The host line says which instruction sets the CPU runtime will use here.
  app.set_version_flag("--version", std::function<std::string()>([] {
    return std::string("fusionopt ") + FUSIONOPT_VERSION + "\nhost: " + cpu::ThisHost().Describe();
  }));
  app.footer(
      "Without a subcommand, `fusionopt MODEL.onnx -o OUT.onnx` runs `optimize`.\n"
      "Exit codes: 0 ok, 1 invalid model, 2 usage, 3 I/O error, 4 unsupported model,\n"
      "5 verify (or bench) found different outputs, 6 bench: speed-up below --fail-if-slower.");
  int verbosity = 0;
  bool quiet = false;
  bool list_passes = false;
  app.add_flag("-v,--verbose", verbosity, "More log output (repeat for trace)");
  app.add_flag("-q,--quiet", quiet, "Only print errors");
  app.add_flag("--list-passes", list_passes, "List the optimization passes and exit");

  cli::OptimizeOptions optimize;
  auto* optimize_command = app.add_subcommand("optimize", "Optimize a model (the default)");
  cli::AddOptimizeOptions(*optimize_command, optimize);
  cli::InspectOptions inspect;
  auto* inspect_command = app.add_subcommand("inspect", "Summarize a model");
  cli::AddInspectOptions(*inspect_command, inspect);
  cli::RunOptions run;
  auto* run_command = app.add_subcommand("run", "Run a model on the CPU runtime");
  cli::AddRunOptions(*run_command, run);
  cli::VerifyOptions verify;
  auto* verify_command = app.add_subcommand("verify", "Compare two models' outputs on the same inputs");
  cli::AddVerifyOptions(*verify_command, verify);
  cli::BenchOptions bench;
  auto* bench_command = app.add_subcommand("bench", "Measure the optimized model's speed-up over the original");
  cli::AddBenchOptions(*bench_command, bench);
  for (auto* command : {optimize_command, inspect_command, run_command, verify_command, bench_command}) command->fallthrough();

  std::vector<std::string> args = WithDefaultSubcommand(argc, argv);
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector form reversed
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "error: %s (see fusionopt --help)\n", error.what());
    return static_cast<int>(ErrorCode::kUsage);
  }
  ConfigureLogging(verbosity, quiet);
  if (list_passes) return cli::ListPasses(verbosity > 0);
  if (optimize_command->parsed()) return cli::RunOptimize(optimize);
  if (inspect_command->parsed()) return cli::RunInspect(inspect);
  if (run_command->parsed()) return cli::RunRun(run);
  if (verify_command->parsed()) return cli::RunVerify(verify);
  if (bench_command->parsed()) return cli::RunBench(bench);
  std::fprintf(stderr, "error: no model given (see fusionopt --help)\n");
  return static_cast<int>(ErrorCode::kUsage);
}

}  // namespace

// Errors travel as Status; an exception reaching here is a bug (or memory exhaustion), and
// is still reported as one line with the internal-error code rather than a core dump.
int main(int argc, char** argv) {
  fusionopt::cli::ApplyThreadWait(argc, argv);
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: internal error: %s\n", fusionopt::cli::OneLine(error.what()).c_str());
  }
  return static_cast<int>(fusionopt::ErrorCode::kInternal);
}
