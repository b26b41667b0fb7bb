// Subcommands of the `fusionopt` binary. Each returns the process exit code; errors are
// printed as one line `error: <file>: <problem>` by ReportError.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/optimize.h"
#include "cli/feeds.h"
#include "cpu_runtime/engine/compare.h"
#include "ir/status.h"

namespace CLI {
class App;
}

namespace fusionopt {
struct Model;
}  // namespace fusionopt

namespace fusionopt::cli {

struct OptimizeOptions {
  std::string input;
  std::string output;
  bool external_data = false;
  uint64_t external_threshold = 1024;
  std::string external_name;
  bool dump = false;
  bool write_shapes = false;
  std::string report;
  std::string emit_cuda;          // --emit-cuda: folder for the generated CUDA sources
  int cuda_arch = 0;              // --cuda-arch: the device --emit-cuda generates for (0: any)
  api::OptimizeRequest request;   // the level, passes, target, dims, --verify and --runtime
};

struct InspectOptions {
  std::string input;
  bool json = false;
  bool cost = false;              // the per-kernel roofline table instead of the summary
  std::string target = "h100";
  std::vector<std::string> dims;  // SYMBOL=N
  bool strict_dims = false;       // a --dim symbol the model lacks is an error, not a warning
  bool cuda = false;              // --cuda: how each node would run on the CUDA backend
  int cuda_arch = 90;             // compute capability × 10 to plan for
  std::vector<std::string> shapes;  // --shape NAME=D1xD2... for --cuda
};

struct RunOptions {
  std::string model;
  FeedOptions feeds;
  std::string output_dir;
  int threads = 0;
  int warmup = 0;
  int repeat = 1;
  bool op_by_op = false;  // run fused nodes' bodies op by op (cpu::SessionOptions::fused_kernels)
  bool profile = false;   // print where the timed runs spent their time, per node and per op
  int profile_top = 25;   // nodes listed by --profile, slowest first (0: all)
  std::string backend = "cpu";  // cpu | cuda
  bool cuda_graph = false;      // cuda: replay one captured inference as a CUDA Graph
};

struct VerifyOptions {
  std::string reference;
  std::string candidate;
  cpu::Tolerance tolerance;
  int runs = 3;
  FeedOptions feeds;
  int threads = 0;
  std::string backend = "cpu";  // where the candidate runs; the reference always runs on the CPU
};

struct BenchOptions {
  std::string model;
  int level = 3;
  std::string optimized;  // --optimized: use this model instead of optimizing in memory
  int warmup = 5;
  int iters = 50;
  double time_s = 0;  // --time: time for this long instead of --iters
  FeedOptions feeds;  // --shape and --seed (no --input files)
  int threads = 0;
  std::string target = "h100";
  std::string json;
  std::string trace;
  std::string roofline;  // --roofline: SVG of every kernel of both sides on the machine's roofline
  std::optional<double> fail_if_slower;
  bool no_verify = false;
  std::string backend = "auto";
  bool cuda_graph = false;      // CUDA: time replays of one captured inference per side
  bool compare_levels = false;  // one row per level O0..O3 instead of original vs optimized
  // CPU backend: keep every fusion the cost model chose, untimed (verify/fusion_timing.h).
  bool no_fusion_timing = false;
  std::vector<std::string> dims;  // --dim SYMBOL=N: the feeds' and -O3's symbolic dim sizes
  bool strict_dims = false;
};

void AddRunOptions(CLI::App& command, RunOptions& options);
void AddVerifyOptions(CLI::App& command, VerifyOptions& options);
int RunRun(const RunOptions& options);
int RunVerify(const VerifyOptions& options);
void AddBenchOptions(CLI::App& command, BenchOptions& options);
int RunBench(const BenchOptions& options);  // bench/command.cc

void AddOptimizeOptions(CLI::App& command, OptimizeOptions& options);
void AddInspectOptions(CLI::App& command, InspectOptions& options);

int RunOptimize(const OptimizeOptions& options);
int RunInspect(const InspectOptions& options);
// `inspect --cost`: the roofline table of the loaded model (inspect/cost.cc).
int RunInspectCost(const InspectOptions& options, const Model& model);
// `inspect --cuda`: the CUDA backend's plan, compiled without a GPU (inspect/cuda.cc).
int RunInspectCuda(const InspectOptions& options, const Model& model);
int ListPasses(bool verbose);

// `--emit-cuda DIR` (emit_cuda.cc). CheckEmitCudaDir refuses, before anything is written, a DIR
// that exists and is not a folder, or that cannot be created or written. EmitCuda generates the
// CUDA program of every ai.fusionopt node of `model`'s main graph — symbolic input dims sized by
// `dims` (1 when not listed) in a specialized copy — for `cuda_arch` (0: any architecture) — and
// writes DIR/<program>.cu files and DIR/index.json atomically.
Status CheckEmitCudaDir(const std::string& dir);
Status EmitCuda(const Model& model, const std::string& dir, const std::map<std::string, int64_t, std::less<>>& dims,
                int cuda_arch);

// `text` with control characters and invalid UTF-8 escaped as \xNN (one printable line).
std::string OneLine(const std::string& text);

// Prints `error: <file>: <message>` and returns the exit code for the status.
int ReportError(const std::string& file, const Status& status);

// The --dim sizes for the symbols `model` has (api::DimsForModel, `file` named in its warning).
using DimSizes = api::DimSizes;
Result<DimSizes> DimsForModel(const std::string& file, const Model& model, DimSizes dims, bool strict);
// The --strict-dims flag, for commands that take --dim.
void AddStrictDimsOption(CLI::App& command, bool& strict);

}  // namespace fusionopt::cli
