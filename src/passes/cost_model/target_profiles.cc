#include "passes/cost_model/target_profiles.h"

#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cpu_runtime/engine/session.h"
#include "ir/atomic_file.h"
#include "text_format/text_format.h"

namespace fusionopt::passes {
namespace {

// A kernel launch on a CUDA GPU: the host-side launch call plus the gap between two dependent
// kernels on one stream costs a few microseconds whatever the kernel does (DESIGN.md §2:
// "µs-scale"). 5 µs is the figure the O3 decisions use for every GPU profile; a profile
// parameter, so a target with CUDA graphs (about 1–2 µs) can carry its own.
constexpr double kGpuLaunchOverheadSeconds = 5e-6;

// Registers per thread at which a kernel still keeps half the threads an SM can hold
// resident: 65,536 32-bit registers per SM on all four parts (CUDA C Programming Guide,
// "Technical Specifications per Compute Capability"), 1,024 resident threads per SM on Turing
// (compute capability 7.5) and 2,048 on Ampere GA100 (8.0) and Hopper (9.0). Past this a
// generated kernel loses occupancy, and with it the memory requests in flight that hide
// latency.
constexpr int64_t kRegistersPerSm = 65536;
constexpr int64_t HalfOccupancyBudget(int64_t resident_threads) { return kRegistersPerSm / (resident_threads / 2); }

std::vector<TargetProfile> GpuProfiles() {
  return {
      // NVIDIA T4 Tensor Core GPU datasheet: "Single-Precision 8.1 TFLOPS", "GPU Memory 16 GB
      // GDDR6, 320+ GB/s" (GDDR6, not HBM).
      {"t4", "NVIDIA T4 (datasheet: 8.1 TFLOP/s fp32, 320 GB/s GDDR6)", 8.1e12, 320e9, kGpuLaunchOverheadSeconds,
       HalfOccupancyBudget(1024), false},
      // NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4),
      // A100 80GB SXM: "FP32 19.5 TFLOPS", "GPU Memory Bandwidth 2,039 GB/s".
      {"a100", "NVIDIA A100 80GB SXM4 (datasheet: 19.5 TFLOP/s fp32, 2039 GB/s HBM2e)", 19.5e12, 2039e9,
       kGpuLaunchOverheadSeconds, HalfOccupancyBudget(2048), false},
      // NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: "FP32 67 teraFLOPS", "GPU memory
      // bandwidth 3.35TB/s" (HBM3).
      {"h100", "NVIDIA H100 SXM5 (datasheet: 67 TFLOP/s fp32, 3350 GB/s HBM3)", 67e12, 3350e9,
       kGpuLaunchOverheadSeconds, HalfOccupancyBudget(2048), false},
      // NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: "FP32 67 TFLOPS" (the H100's GH100
      // compute), "GPU Memory Bandwidth 4.8TB/s" (HBM3e).
      {"h200", "NVIDIA H200 SXM (datasheet: 67 TFLOP/s fp32, 4800 GB/s HBM3e)", 67e12, 4800e9,
       kGpuLaunchOverheadSeconds, HalfOccupancyBudget(2048), false},
  };
}

constexpr std::string_view kCpu = "cpu";
constexpr int kCacheFormat = 2;  // 2: with probed_at
// A probe taken while other work loaded the machine under-reads it (seen here: 27 against 114
// GFLOP/s); an age limit bounds how long such a reading steers -O3 and the roofline.
constexpr double kCacheMaxAgeSeconds = 7 * 24 * 3600.0;

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double Seconds(std::chrono::steady_clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

// The best of `repeats` timed calls: the least disturbed by other work on the machine.
template <typename F>
double BestSeconds(int repeats, F&& body) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    body();
    best = std::min(best, Seconds(std::chrono::steady_clock::now() - start));
  }
  return best;
}

// STREAM's add, c = a + b, over arrays well beyond the last-level cache: three arrays of
// 8 Mi floats (96 MiB) each pass, counted as STREAM counts (two reads and one write per
// element; the write-allocate read is not counted).
double MeasureBandwidth() {
  constexpr int64_t kElements = int64_t{8} << 20;
  std::vector<float> a(kElements, 1.0f), b(kElements, 2.0f), c(kElements, 0.0f);
  auto add = [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kElements; ++i) c[i] = a[i] + b[i];
  };
  add();  // first touch, page faults
  double seconds = BestSeconds(4, add);
  return 3.0 * sizeof(float) * kElements / seconds;
}

// oneDNN's sgemm on 512³ (what our contractions call), 2·512³ FLOP per call.
double MeasureFlops() {
  constexpr dnnl_dim_t kSize = 512;
  std::vector<float> a(kSize * kSize, 0.5f), b(kSize * kSize, 0.25f), c(kSize * kSize, 0.0f);
  auto gemm = [&] {
    dnnl_sgemm('N', 'N', kSize, kSize, kSize, 1.0f, a.data(), kSize, b.data(), kSize, 0.0f, c.data(), kSize);
  };
  gemm();  // oneDNN's first call picks and JIT-compiles its kernel
  double seconds = BestSeconds(5, gemm);
  return 2.0 * kSize * kSize * kSize / seconds;
}

// A chain of `length` Relus over one float.
std::string ReluChain(int length) {
  std::ostringstream text;
  text << "ir_version 8\nopset \"\" 17\ngraph probe (float[1] %v0) -> (float[1] %v" << length << ")\n{\n";
  for (int i = 0; i < length; ++i) text << "  %v" << i + 1 << " = Relu(%v" << i << ")\n";
  text << "}\n";
  return text.str();
}

// What our CPU runtime spends per node beyond the node's arithmetic: chains of 33 and 1
// one-element Relus timed through a Session, the difference per extra node (the run's own
// fixed cost — feeds, outputs — cancels out).
double MeasureDispatchSeconds() {
  constexpr int kLong = 33;
  auto time_chain = [](int length) -> double {
    auto model = ParseModel(ReluChain(length));
    FUSIONOPT_CHECK(model.ok(), "the probe's model parses: " + model.status().message());
    auto session = cpu::Session::Create(**model);
    FUSIONOPT_CHECK(session.ok(), "the probe's model runs: " + session.status().message());
    cpu::RtTensor input = cpu::RtTensor::Allocate(DataType::kFloat, {1});
    input.data<float>()[0] = 0.5f;
    std::vector<cpu::NamedTensor> feeds = {{"v0", input}};
    auto run = [&] {
      auto outputs = (*session)->Run(feeds);
      FUSIONOPT_CHECK(outputs.ok(), "the probe's model runs: " + outputs.status().message());
    };
    run();
    return BestSeconds(50, run);
  };
  double per_node = (time_chain(kLong) - time_chain(1)) / (kLong - 1);
  // A clock too coarse to see the difference still leaves a launch cost of a few hundred ns.
  return std::max(per_node, 1e-7);
}

// The engine's tile registers (fuse_elementwise.cc: 512 lanes of 8 bytes) that fit in one
// core's L2 cache; sysconf may not know the size, then 1 MiB.
int64_t CpuRegisterBudget() {
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  int64_t bytes = l2 > 0 ? l2 : int64_t{1} << 20;
  return std::max<int64_t>(16, bytes / (512 * 8));
}

std::string CpuDescription(int threads) {
  return "this machine, measured (" + std::to_string(threads) + " threads: STREAM add, oneDNN sgemm 512^3, runtime dispatch)";
}

std::optional<TargetProfile> ReadCache(const std::string& path, int threads) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!cache.is_object()) return std::nullopt;
  auto number = [&](const char* key) -> double {
    auto it = cache.find(key);
    return it != cache.end() && it->is_number() ? it->get<double>() : -1.0;
  };
  if (number("format") != kCacheFormat || number("threads") != threads) return std::nullopt;
  const double age = NowSeconds() - number("probed_at");
  if (number("probed_at") <= 0 || age < 0 || age > kCacheMaxAgeSeconds) return std::nullopt;
  TargetProfile profile{std::string(kCpu), CpuDescription(threads), number("peak_flops"), number("bandwidth"),
                        number("launch_overhead_s"), static_cast<int64_t>(number("register_budget_per_thread")),
                        true};
  if (!(profile.peak_flops > 0 && profile.bandwidth > 0 && profile.launch_overhead_s > 0 &&
        profile.register_budget_per_thread > 0)) {
    return std::nullopt;
  }
  return profile;
}

// A cache that cannot be written is no error: the next use measures again.
void WriteCache(const std::string& path, const TargetProfile& profile, int threads) {
  nlohmann::json cache = {{"format", kCacheFormat},
                          {"threads", threads},
                          {"probed_at", NowSeconds()},
                          {"peak_flops", profile.peak_flops},
                          {"bandwidth", profile.bandwidth},
                          {"launch_overhead_s", profile.launch_overhead_s},
                          {"register_budget_per_thread", profile.register_budget_per_thread}};
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  if (error) return;
  (void)WriteFileAtomically(path, cache.dump(2) + "\n");
}

std::string NameList() {
  std::string names;
  for (const std::string& name : TargetProfileNames()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

std::vector<std::string> TargetProfileNames() {
  std::vector<std::string> names;
  for (const TargetProfile& profile : GpuProfiles()) names.push_back(profile.name);
  names.emplace_back(kCpu);
  return names;
}

Status CheckTargetName(std::string_view name) {
  std::vector<std::string> names = TargetProfileNames();
  if (std::find(names.begin(), names.end(), name) != names.end()) return Status::Ok();
  return UsageError("unknown target '" + std::string(name) + "' (targets: " + NameList() + ")");
}

std::string CacheDirectory() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  // The XDG spec: a relative XDG_CACHE_HOME is invalid and ignored.
  if (xdg != nullptr && fs::path(xdg).is_absolute()) return (fs::path(xdg) / "fusionopt").string();
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return (fs::path(home) / ".cache" / "fusionopt").string();
  return "";
}

std::string CpuProfileCachePath() {
  const std::string directory = CacheDirectory();
  return directory.empty() ? "" : (std::filesystem::path(directory) / "cpu_profile.json").string();
}

TargetProfile ProbeCpuProfile() {
  int threads = omp_get_max_threads();
  return TargetProfile{std::string(kCpu), CpuDescription(threads), MeasureFlops(), MeasureBandwidth(),
                       MeasureDispatchSeconds(), CpuRegisterBudget(), true};
}

Result<TargetProfile> FindTargetProfile(std::string_view name) {
  FUSIONOPT_RETURN_IF_ERROR(CheckTargetName(name));
  for (const TargetProfile& profile : GpuProfiles()) {
    if (profile.name == name) return profile;
  }
  int threads = omp_get_max_threads();
  std::string path = CpuProfileCachePath();
  if (!path.empty()) {
    if (std::optional<TargetProfile> cached = ReadCache(path, threads)) return *cached;
  }
  TargetProfile measured = ProbeCpuProfile();
  if (!path.empty()) WriteCache(path, measured, threads);
  return measured;
}

}  // namespace fusionopt::passes
