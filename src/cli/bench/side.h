// One side of `fusionopt bench`'s comparison — the original or the optimized model in a session
// on the CPU runtime or the CUDA backend — and how a side is run, checked against the other, timed
// and summarised. command.cc drives two sides (or four, --compare-levels); profile.h profiles one.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/session.h"
#include "cli/bench/bench.h"
#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/backend/cuda_session.h"
#include "passes/cost_model/cost_model.h"

namespace fusionopt::cli {

// A progress bar on stderr for the timed loop, only when stderr is a terminal and the run has
// lasted a second (short runs and logs stay clean). Fraction from --iters, or --time elapsed.
class ProgressBar {
 public:
  ProgressBar() : enabled_(::isatty(STDERR_FILENO) != 0), started_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { Clear(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  // Erases the bar, so what is printed next starts on a clean line.
  void Clear() {
    if (shown_) std::fprintf(stderr, "\r%*s\r", kWidth + 16, "");
    shown_ = false;
  }
  void Update(double fraction) {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    if (elapsed < 1.0 || elapsed - drawn_at_ < 0.1) return;  // redraw ten times a second at most
    drawn_at_ = elapsed;
    const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kWidth);
    std::fprintf(stderr, "\rbench [%s%s] %3d%%", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), static_cast<int>(fraction * 100));
    std::fflush(stderr);
    shown_ = true;
  }

 private:
  static constexpr int kWidth = 40;
  bool enabled_;
  bool shown_ = false;
  double drawn_at_ = -1;  // seconds after the start of the last redraw
  std::chrono::steady_clock::time_point started_;
};

// One side of the comparison: a session on the CPU runtime or the CUDA backend, and what its
// runs measured.
struct Side {
  std::unique_ptr<api::Session> session;
  std::vector<double> latencies_ms;
  cpu::RunStats stats;            // CPU: of the last timed inference
  api::RunCounts counts;          // of the last inference (CUDA: its GPU time too)
  cuda::CudaPlanSummary cuda_plan;
  std::optional<uint64_t> kernels_executed;  // CUDA: CUPTI's count for one inference

  const Model& model() const { return session->model(); }
  bool on_cuda() const { return session->backend() == api::Backend::kCuda; }
  const std::vector<const Value*>& inputs() const { return session->input_values(); }
};

// The share of the timed loop done after `i` rounds.
double LoopFraction(const BenchOptions& options, int i, std::chrono::steady_clock::time_point started);

// One inference of `side`: its counts go to the side, its CPU statistics to `stats`.
Result<std::vector<cpu::NamedTensor>> RunOnce(Side& side, const std::vector<cpu::NamedTensor>& feeds,
                                              cpu::RunStats& stats);

// The optimized model's outputs against the original's on the same inputs. On CUDA the
// original's are first checked against the CPU runtime's, the oracle: two sides agreeing on the
// GPU prove nothing if the GPU computes both wrong.
Status CheckOutputsMatch(Side& original, Side& optimized, const std::vector<cpu::NamedTensor>& feeds);

// Symbol sizes for the cost model, read off the fed inputs' dims (a symbol seen in several
// places takes its first size).
passes::SymbolSizes SymbolsFromFeeds(const Side& side, const std::vector<cpu::NamedTensor>& feeds);

// A session for `model` on the CPU runtime or (with `cuda`) the CUDA backend.
Result<Side> PrepareSide(std::unique_ptr<Model> model, const BenchOptions& options, bool cuda);

// CUDA: the plan's figures, and CUPTI's count of the kernels one inference executes (a
// separate counting session, so the timed runs carry no CUPTI overhead).
Status PlanAndCount(Side& side, const std::vector<cpu::NamedTensor>& feeds);

// On CUDA the latency is the GPU's time for the kernels (CUDA events), not the host's wall
// time around copies of inputs and outputs that both sides pay alike.
Status TimeOne(Side& side, const std::vector<cpu::NamedTensor>& feeds, bool record);

// Warm-up, then the timed inferences, one per side in turn; the side that goes first
// alternates so neither always runs on a cache the other just warmed.
Status MeasureInterleaved(const BenchOptions& options, Side& original, Side& optimized,
                          const std::vector<cpu::NamedTensor>& feeds);

// What the side's runs measured, for the report.
SideFigures FiguresOf(const Side& side);

}  // namespace fusionopt::cli
