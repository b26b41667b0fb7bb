// Generated CUDA C++ → PTX / CUBIN with NVRTC, with an on-disk cache so a model's kernels are
// compiled once per machine, not once per process. Needs the NVRTC library only — no GPU —
// so CI compiles every generated kernel (tests/cuda).
//
// The cache key is a hash of everything that changes the output: the source, the target
// architecture, the options and NVRTC's version. Entries are written atomically (temp file,
// rename); an unreadable or corrupt entry is recompiled and replaced, never trusted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/status.h"

namespace fusionopt::cuda {

struct CompileOptions {
  int sm_arch = 90;          // compute capability × 10: 80 (A100), 90 (H100/H200), ...
  bool cubin = false;        // also produce CUBIN for exactly sm_arch (needs no device either)
  bool fast_math = false;    // --use_fast_math; off: results must match the CPU runtime
  std::string cache_dir;     // "" disables the disk cache
  std::vector<std::string> extra_options;  // passed to NVRTC verbatim
};

struct CompiledModule {
  std::string ptx;
  std::string cubin;          // empty unless CompileOptions::cubin
  std::string log;            // NVRTC's log (warnings), possibly empty
  bool from_cache = false;    // true when read from the disk cache
};

// Compiles `source` (one translation unit; `name` labels it in errors and the log).
// A compile error is an InternalError carrying NVRTC's log (generated code that
// does not compile is our bug, and the log is what a bug report needs).
Result<CompiledModule> CompileCuda(const std::string& source, const std::string& name, const CompileOptions& options);

// The default cache folder: $XDG_CACHE_HOME/fusionopt/cuda, else ~/.cache/fusionopt/cuda;
// "" when neither variable is usable.
std::string DefaultCudaCacheDir();

// NVRTC's version as "major.minor".
std::string NvrtcVersion();

}  // namespace fusionopt::cuda
