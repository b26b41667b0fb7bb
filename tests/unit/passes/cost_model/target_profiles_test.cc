// Target profiles (passes/cost_model/target_profiles.h): the names, the usage error for an
// unknown one, the datasheet figures of the GPU profiles, where the cache folder is by
// environment, and the cpu profile read from its cache in a scratch folder or measured again.
#include <catch2/catch.hpp>

#include <omp.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "passes/cost_model/target_profiles.h"
#include "scoped_env.h"
#include "scratch_dir.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using test_support::ScopedEnv;
using test_support::ScratchDir;

namespace {

// A cpu probe cache as FindTargetProfile writes it, probed `age_s` seconds ago with `threads`.
void WriteCache(const std::filesystem::path& path, int threads, double age_s) {
  std::filesystem::create_directories(path.parent_path());
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::ostringstream json;
  json.precision(17);
  json << "{\"format\": 2, \"threads\": " << threads << ", \"probed_at\": " << now - age_s
       << ", \"peak_flops\": 1.5e11, \"bandwidth\": 2.5e10, \"launch_overhead_s\": 3e-7, "
       << "\"register_budget_per_thread\": 256}\n";
  std::ofstream(path) << json.str();
}

}  // namespace

TEST_CASE("target profiles: the names, and the usage error for any other", "[cost]") {
  CHECK(TargetProfileNames() == std::vector<std::string>{"t4", "a100", "h100", "h200", "cpu"});
  CHECK(CheckTargetName("a100").ok());
  CHECK(CheckTargetName("cpu").ok());
  Status unknown = CheckTargetName("A100");  // names are case-sensitive
  CHECK(unknown.code() == ErrorCode::kUsage);
  CHECK(unknown.message() == "unknown target 'A100' (targets: t4, a100, h100, h200, cpu)");
  auto missing = FindTargetProfile("");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "unknown target '' (targets: t4, a100, h100, h200, cpu)");
}

TEST_CASE("target profiles: the GPU profiles carry their datasheet figures", "[cost]") {
  auto t4 = FindTargetProfile("t4");
  REQUIRE(t4.ok());
  CHECK(t4->name == "t4");
  CHECK(t4->description == "NVIDIA T4 (datasheet: 8.1 TFLOP/s fp32, 320 GB/s GDDR6)");
  CHECK(t4->peak_flops == 8.1e12);
  CHECK(t4->bandwidth == 320e9);
  CHECK(t4->launch_overhead_s == 5e-6);
  CHECK(t4->register_budget_per_thread == 128);  // 65536 registers over 512 threads
  CHECK_FALSE(t4->measured);
  CHECK(t4->ridge_intensity() == Approx(25.3125));

  auto a100 = FindTargetProfile("a100");
  REQUIRE(a100.ok());
  CHECK(a100->bandwidth == 2039e9);
  CHECK(a100->register_budget_per_thread == 64);  // 65536 over 1024
  CHECK(FindTargetProfile("h200")->peak_flops == 67e12);

  TargetProfile blank;
  CHECK(blank.ridge_intensity() == 0);  // no bandwidth: no ridge
}

TEST_CASE("target profiles: the cache folder follows XDG_CACHE_HOME, then HOME", "[cost]") {
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/var/cache/test");
    ScopedEnv home("HOME", "/home/someone");
    CHECK(CacheDirectory() == "/var/cache/test/fusionopt");
    CHECK(CpuProfileCachePath() == "/var/cache/test/fusionopt/cpu_profile.json");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/cache");  // not absolute: ignored
    ScopedEnv home("HOME", "/home/someone");
    CHECK(CacheDirectory() == "/home/someone/.cache/fusionopt");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", "");
    CHECK(CacheDirectory().empty());
    CHECK(CpuProfileCachePath().empty());
  }
}

TEST_CASE("target profiles: cpu is read from a fresh cache of this thread count", "[cost]") {
  ScratchDir scratch("target_profiles_cache");
  ScopedEnv xdg("XDG_CACHE_HOME", scratch.path().c_str());
  REQUIRE(CpuProfileCachePath() == (scratch / "fusionopt" / "cpu_profile.json").string());
  const int threads = omp_get_max_threads();
  WriteCache(CpuProfileCachePath(), threads, /*age_s=*/60);
  auto cpu = FindTargetProfile("cpu");
  REQUIRE(cpu.ok());
  CHECK(cpu->name == "cpu");
  CHECK(cpu->measured);
  CHECK(cpu->peak_flops == 1.5e11);
  CHECK(cpu->bandwidth == 2.5e10);
  CHECK(cpu->launch_overhead_s == 3e-7);
  CHECK(cpu->register_budget_per_thread == 256);
  CHECK(cpu->description == "this machine, measured (" + std::to_string(threads) +
                                " threads: STREAM add, oneDNN sgemm 512^3, runtime dispatch)");
}

TEST_CASE("target profiles: a cache of another thread count is measured again and rewritten", "[cost]") {
  ScratchDir scratch("target_profiles_probe");
  ScopedEnv xdg("XDG_CACHE_HOME", scratch.path().c_str());
  WriteCache(CpuProfileCachePath(), omp_get_max_threads() + 1, /*age_s=*/60);
  auto measured = FindTargetProfile("cpu");
  REQUIRE(measured.ok());
  CHECK(measured->measured);
  CHECK(measured->peak_flops != 1.5e11);  // not the cache's figures
  CHECK(measured->peak_flops > 0);
  CHECK(measured->bandwidth > 0);
  CHECK(measured->launch_overhead_s >= 1e-7);
  CHECK(measured->register_budget_per_thread >= 16);
  // The probe's figures were cached: the next use reads them back unchanged.
  auto cached = FindTargetProfile("cpu");
  REQUIRE(cached.ok());
  CHECK(cached->peak_flops == measured->peak_flops);
  CHECK(cached->bandwidth == measured->bandwidth);
  CHECK(cached->launch_overhead_s == measured->launch_overhead_s);
  CHECK(cached->register_budget_per_thread == measured->register_budget_per_thread);
}
