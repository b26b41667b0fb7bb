// Target profiles for the cost model (cost_model.h): what one machine does per second.
//
// A profile is the roofline of one device — peak fp32 FLOP/s and main-memory bandwidth — plus
// the fixed price of launching one kernel and the register budget a generated kernel may use
// per thread before it loses occupancy. The GPU profiles carry published datasheet figures
// (target_profiles.cc cites each); `cpu` is this machine, measured by a quick probe (a STREAM
// add for bandwidth, a oneDNN sgemm for FLOP/s, a chain of one-element ops through our own
// runtime for the per-kernel dispatch cost) and cached as JSON, so only the first use pays
// for the measurement.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"

namespace fusionopt::passes {

inline constexpr std::string_view kDefaultTarget = "h100";

struct TargetProfile {
  std::string name;                    // "h100", "cpu", ...
  std::string description;             // one line: the device and where its figures come from
  double peak_flops = 0;               // FLOP/s, fp32, without tensor cores
  double bandwidth = 0;                // bytes/s of main memory (HBM, GDDR or DRAM)
  double launch_overhead_s = 0;        // fixed cost of one kernel launch
  int64_t register_budget_per_thread = 0;
  bool measured = false;               // true for `cpu`: figures from the probe, not a datasheet

  // FLOP per byte where the compute roof meets the memory roof.
  double ridge_intensity() const { return bandwidth > 0 ? peak_flops / bandwidth : 0; }
};

// The profile names, in the order `--help` and errors list them.
std::vector<std::string> TargetProfileNames();

// A usage error naming the known profiles when `name` is none of them (no probe runs).
Status CheckTargetName(std::string_view name);

// The profile called `name`. `cpu` is read from the probe cache (cpu_profile.json in
// $XDG_CACHE_HOME/fusionopt, else ~/.cache/fusionopt), and measured and cached when the cache
// is missing, unreadable, older than a week or was measured with another thread count. An unknown name is a
// usage error listing the names.
Result<TargetProfile> FindTargetProfile(std::string_view name);

// Where the cpu probe's cache lives; empty when neither XDG_CACHE_HOME nor HOME is set (the
// probe then runs on every use).
std::string CpuProfileCachePath();
// fusionopt's cache folder: $XDG_CACHE_HOME/fusionopt, else ~/.cache/fusionopt; empty when
// neither is set. The CPU probe and the measured fusion decisions keep their caches there.
std::string CacheDirectory();

// Measures this machine now, with the OpenMP thread count the runtime would use, ignoring and
// not writing the cache (FindTargetProfile("cpu") does both).
TargetProfile ProbeCpuProfile();

}  // namespace fusionopt::passes
