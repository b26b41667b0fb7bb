#include "cuda_runtime/backend/plugin_api.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace fusionopt::cuda {
namespace {

constexpr const char* kLibraryName = "libfusionopt_cuda.so";

std::vector<std::string> CandidatePaths() {
  std::vector<std::string> paths;
  if (const char* explicit_path = std::getenv("FUSIONOPT_CUDA_LIBRARY"); explicit_path && *explicit_path) {
    paths.push_back(explicit_path);
    return paths;  // an explicit choice is not second-guessed
  }
  std::error_code error;
  std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    paths.push_back((executable.parent_path() / kLibraryName).string());  // the build folder
#ifdef FUSIONOPT_INSTALL_LIBDIR
    // An installed tree: PREFIX/bin/fusionopt and PREFIX/<libdir>/libfusionopt_cuda.so.
    paths.push_back((executable.parent_path().parent_path() / FUSIONOPT_INSTALL_LIBDIR / kLibraryName).string());
#endif
  }
  paths.push_back(kLibraryName);  // the loader's search path
  return paths;
}

template <typename Function>
bool Resolve(void* library, const char* name, Function& slot, std::string& missing) {
  slot = reinterpret_cast<Function>(dlsym(library, name));
  if (slot == nullptr && missing.empty()) missing = name;
  return slot != nullptr;
}

Result<PluginApi> Bind(void* library, std::string path) {
  PluginApi api;
  api.path = std::move(path);
  std::string missing;
#define FUSIONOPT_RESOLVE(field) Resolve(library, "fo_" #field, api.field, missing)
  FUSIONOPT_RESOLVE(abi_version);
  FUSIONOPT_RESOLVE(status_name);
  FUSIONOPT_RESOLVE(last_error_message);
  FUSIONOPT_RESOLVE(context_create);
  FUSIONOPT_RESOLVE(context_destroy);
  FUSIONOPT_RESOLVE(context_describe);
  FUSIONOPT_RESOLVE(context_stream);
  FUSIONOPT_RESOLVE(context_counters);
  FUSIONOPT_RESOLVE(context_reset_counters);
  FUSIONOPT_RESOLVE(context_build_stats);
  FUSIONOPT_RESOLVE(node_supported);
  FUSIONOPT_RESOLVE(kernel_build);
  FUSIONOPT_RESOLVE(kernel_destroy);
  FUSIONOPT_RESOLVE(kernel_workspace_size);
  FUSIONOPT_RESOLVE(kernel_launch_count);
  FUSIONOPT_RESOLVE(kernel_describe);
  FUSIONOPT_RESOLVE(kernel_enqueue);
  FUSIONOPT_RESOLVE(device_alloc);
  FUSIONOPT_RESOLVE(device_free);
  FUSIONOPT_RESOLVE(copy_to_device);
  FUSIONOPT_RESOLVE(copy_to_host);
  FUSIONOPT_RESOLVE(copy_device_to_device);
  FUSIONOPT_RESOLVE(synchronize);
  FUSIONOPT_RESOLVE(timer_start);
  FUSIONOPT_RESOLVE(timer_stop);
  FUSIONOPT_RESOLVE(graph_begin_capture);
  FUSIONOPT_RESOLVE(graph_end_capture);
  FUSIONOPT_RESOLVE(graph_replay);
  FUSIONOPT_RESOLVE(graph_discard);
  FUSIONOPT_RESOLVE(graph_end_capture_new);
  FUSIONOPT_RESOLVE(graph_launch);
  FUSIONOPT_RESOLVE(graph_destroy);
#undef FUSIONOPT_RESOLVE
  if (!missing.empty()) return Unsupported(api.path + " lacks " + missing + ": not a fusionopt CUDA plugin of this version");
  if (api.abi_version() != FO_PLUGIN_ABI_VERSION) {
    return Unsupported(api.path + " has ABI version " + std::to_string(api.abi_version()) + ", this fusionopt needs " +
                       std::to_string(FO_PLUGIN_ABI_VERSION));
  }
  return api;
}

Result<PluginApi> LoadOnce() {
  std::string failures;
  for (const std::string& path : CandidatePaths()) {
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      failures += (failures.empty() ? "" : "; ") + std::string(why ? why : path);
      continue;
    }
    return Bind(library, path);  // a library that loads but does not bind is reported, not skipped
  }
  return Unsupported("no CUDA plugin library: " + failures);
}

}  // namespace

Status PluginApi::Check(fo_status status, const std::string& what) const {
  if (status == FO_OK) return Status::Ok();
  std::string message = what + ": " + status_name(status) + ": " + last_error_message();
  switch (status) {
    case FO_INVALID_ARGUMENT: return InvalidModel(message);
    case FO_UNSUPPORTED: case FO_CUDA_ERROR: return Unsupported(message);
    default: return InternalError(message);
  }
}

Result<const PluginApi*> LoadPluginApi() {
  static std::once_flag once;
  static Result<PluginApi>* loaded = nullptr;
  std::call_once(once, [] { loaded = new Result<PluginApi>(LoadOnce()); });  // lives as long as the process
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

}  // namespace fusionopt::cuda
