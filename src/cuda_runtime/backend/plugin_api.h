// fusionopt's handle on libfusionopt_cuda.so: the library is loaded at run time (dlopen) and
// used only through its C ABI (include/fusionopt/plugin.h) — the same way any host embeds it —
// so the fusionopt binary neither links CUDA nor needs it installed to run on the CPU.
//
// Where the library is looked for, first found wins: $FUSIONOPT_CUDA_LIBRARY (a path), the
// folder of the running executable, then the dynamic loader's search path.
#pragma once

#include <memory>
#include <string>

#include "fusionopt/plugin.h"
#include "ir/status.h"

namespace fusionopt::cuda {

struct PluginApi {
  std::string path;  // the file that was loaded
  decltype(&fo_abi_version) abi_version = nullptr;
  decltype(&fo_status_name) status_name = nullptr;
  decltype(&fo_last_error_message) last_error_message = nullptr;
  decltype(&fo_context_create) context_create = nullptr;
  decltype(&fo_context_destroy) context_destroy = nullptr;
  decltype(&fo_context_describe) context_describe = nullptr;
  decltype(&fo_context_stream) context_stream = nullptr;
  decltype(&fo_context_counters) context_counters = nullptr;
  decltype(&fo_context_reset_counters) context_reset_counters = nullptr;
  decltype(&fo_context_build_stats) context_build_stats = nullptr;
  decltype(&fo_node_supported) node_supported = nullptr;
  decltype(&fo_kernel_build) kernel_build = nullptr;
  decltype(&fo_kernel_destroy) kernel_destroy = nullptr;
  decltype(&fo_kernel_workspace_size) kernel_workspace_size = nullptr;
  decltype(&fo_kernel_launch_count) kernel_launch_count = nullptr;
  decltype(&fo_kernel_describe) kernel_describe = nullptr;
  decltype(&fo_kernel_enqueue) kernel_enqueue = nullptr;
  decltype(&fo_device_alloc) device_alloc = nullptr;
  decltype(&fo_device_free) device_free = nullptr;
  decltype(&fo_copy_to_device) copy_to_device = nullptr;
  decltype(&fo_copy_to_host) copy_to_host = nullptr;
  decltype(&fo_copy_device_to_device) copy_device_to_device = nullptr;
  decltype(&fo_synchronize) synchronize = nullptr;
  decltype(&fo_timer_start) timer_start = nullptr;
  decltype(&fo_timer_stop) timer_stop = nullptr;
  decltype(&fo_graph_begin_capture) graph_begin_capture = nullptr;
  decltype(&fo_graph_end_capture) graph_end_capture = nullptr;
  decltype(&fo_graph_replay) graph_replay = nullptr;
  decltype(&fo_graph_discard) graph_discard = nullptr;
  decltype(&fo_graph_end_capture_new) graph_end_capture_new = nullptr;
  decltype(&fo_graph_launch) graph_launch = nullptr;
  decltype(&fo_graph_destroy) graph_destroy = nullptr;

  // A failed call's status as a Status: the library's message, with `what` in front.
  Status Check(fo_status status, const std::string& what) const;
};

// The loaded library (loaded once per process, never unloaded); Unsupported with the reason
// (not found, a missing symbol, another ABI version) when there is none to use.
Result<const PluginApi*> LoadPluginApi();

}  // namespace fusionopt::cuda
