// CompileCuda with NVRTC and the disk cache (nvrtc_compiler.h).
//
// NVRTC (CUDA 13) has no built-in cuda_fp16.h / cuda_bf16.h, so the toolkit's include folder
// is passed with -I: from $CUDA_HOME or $CUDA_PATH, else next to the loaded libnvrtc
// (lib64/../include, the toolkit's own layout), else /usr/local/cuda/include. The folder is part
// of the cache key like every other option.
#include "cuda_runtime/compile/nvrtc_compiler.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cuda_runtime/compile/compile_cache.h"
#include "cuda_runtime/compile/sha256.h"

namespace fusionopt::cuda {
namespace {

namespace fs = std::filesystem;

bool HasFp16Header(const fs::path& folder) {
  std::error_code error;
  return fs::exists(folder / "cuda_fp16.h", error);
}

std::string FindToolkitIncludeFolder() {
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(variable);
    if (root != nullptr && *root != '\0' && HasFp16Header(fs::path(root) / "include")) {
      return (fs::path(root) / "include").string();
    }
  }
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code error;
    fs::path library = fs::canonical(info.dli_fname, error);
    if (!error && HasFp16Header(library.parent_path().parent_path() / "include")) {
      return (library.parent_path().parent_path() / "include").string();
    }
  }
  if (HasFp16Header("/usr/local/cuda/include")) return "/usr/local/cuda/include";
  return "";
}

const std::string& ToolkitIncludeFolder() {
  static const std::string folder = FindToolkitIncludeFolder();
  return folder;
}

std::vector<std::string> NvrtcOptions(const CompileOptions& options) {
  const std::string arch = std::to_string(options.sm_arch);
  std::vector<std::string> flags = {"--std=c++17", "-default-device",
                                    // sm_XX yields CUBIN and PTX from one compile; compute_XX only PTX
                                    options.cubin ? "--gpu-architecture=sm_" + arch : "--gpu-architecture=compute_" + arch};
  if (!ToolkitIncludeFolder().empty()) flags.push_back("-I" + ToolkitIncludeFolder());
  if (options.fast_math) flags.push_back("--use_fast_math");
  flags.insert(flags.end(), options.extra_options.begin(), options.extra_options.end());
  return flags;
}

std::string CacheKey(const std::string& source, const std::vector<std::string>& flags) {
  std::string material = "nvrtc " + NvrtcVersion() + '\0';
  for (const std::string& flag : flags) material += flag + '\0';
  return Sha256Hex(material + source);
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* program) const {
    nvrtcDestroyProgram(program);
    delete program;
  }
};

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

Status NvrtcError(const char* call, nvrtcResult result, const std::string& name) {
  return InternalError(std::string(call) + " failed for '" + name + "': " + nvrtcGetErrorString(result));
}

Result<CacheEntry> Compile(const std::string& source, const std::string& name, const std::vector<std::string>& flags,
                           bool cubin) {
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram(nullptr));
  const std::string file = name + ".cu";
  nvrtcResult result = nvrtcCreateProgram(program.get(), source.c_str(), file.c_str(), 0, nullptr, nullptr);
  if (result != NVRTC_SUCCESS) return NvrtcError("nvrtcCreateProgram", result, name);
  std::vector<const char*> arguments;
  for (const std::string& flag : flags) arguments.push_back(flag.c_str());
  result = nvrtcCompileProgram(*program, static_cast<int>(arguments.size()), arguments.data());
  CacheEntry entry;
  entry.log = ProgramLog(*program);
  if (result != NVRTC_SUCCESS) {
    return InternalError("NVRTC could not compile '" + name + "' (" + flags[2] + "): " + nvrtcGetErrorString(result) +
                         "\n" + entry.log);
  }
  size_t size = 0;
  if ((result = nvrtcGetPTXSize(*program, &size)) != NVRTC_SUCCESS) return NvrtcError("nvrtcGetPTXSize", result, name);
  entry.ptx.resize(size);
  if ((result = nvrtcGetPTX(*program, entry.ptx.data())) != NVRTC_SUCCESS) return NvrtcError("nvrtcGetPTX", result, name);
  while (!entry.ptx.empty() && entry.ptx.back() == '\0') entry.ptx.pop_back();
  if (cubin) {
    if ((result = nvrtcGetCUBINSize(*program, &size)) != NVRTC_SUCCESS) return NvrtcError("nvrtcGetCUBINSize", result, name);
    entry.cubin.resize(size);
    if ((result = nvrtcGetCUBIN(*program, entry.cubin.data())) != NVRTC_SUCCESS) {
      return NvrtcError("nvrtcGetCUBIN", result, name);
    }
  }
  return entry;
}

}  // namespace

Result<CompiledModule> CompileCuda(const std::string& source, const std::string& name, const CompileOptions& options) {
  if (options.sm_arch < 50 || options.sm_arch > 200) {
    return InvalidModel("sm_arch " + std::to_string(options.sm_arch) + " is not a CUDA compute capability x 10");
  }
  const std::vector<std::string> flags = NvrtcOptions(options);
  std::string entry_path;
  if (!options.cache_dir.empty()) {
    const std::string key = CacheKey(source, flags);
    entry_path = CacheEntryPath(options.cache_dir, key);
    if (std::optional<CacheEntry> cached = ReadCacheEntry(entry_path, key)) {
      return CompiledModule{std::move(cached->ptx), std::move(cached->cubin), std::move(cached->log), true};
    }
    FUSIONOPT_ASSIGN_OR_RETURN(CacheEntry compiled, Compile(source, name, flags, options.cubin));
    Status written = WriteCacheEntry(entry_path, key, compiled);
    CompiledModule module{std::move(compiled.ptx), std::move(compiled.cubin), std::move(compiled.log), false};
    // A cache that cannot be written costs later compiles, not this one's result.
    if (!written.ok()) module.log += (module.log.empty() ? "" : "\n") + ("not cached: " + written.message());
    return module;
  }
  FUSIONOPT_ASSIGN_OR_RETURN(CacheEntry compiled, Compile(source, name, flags, options.cubin));
  return CompiledModule{std::move(compiled.ptx), std::move(compiled.cubin), std::move(compiled.log), false};
}

std::string DefaultCudaCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return (fs::path(xdg) / "fusionopt" / "cuda").string();
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home == '/') return (fs::path(home) / ".cache" / "fusionopt" / "cuda").string();
  return "";
}

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace fusionopt::cuda
