// The C API of include/fusionopt/runtime.h over api::Session and api::Optimize.
//
// Every entry point runs its body through Guarded: a Status becomes the returned code and the
// thread's last error, and any exception (a bug, or the allocator failing) becomes
// FUSIONOPT_INTERNAL with its message, so nothing unwinds into a C caller.
#include "fusionopt/runtime.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/c_handles.h"
#include "api/optimize.h"
#include "api/session.h"
#include "onnx_io/model_io.h"

#ifndef FUSIONOPT_VERSION
#define FUSIONOPT_VERSION "0.0.0"
#endif

struct fusionopt_buffer {
  std::string bytes;
};


namespace {

using fusionopt::ErrorCode;
using fusionopt::Result;
using fusionopt::Status;
using fusionopt::UsageError;

// A declared value with the C strings and arrays fusionopt_value_info points into.
struct ValueInfoStore {
  std::string name;
  int32_t dtype = 0;
  int32_t rank = -1;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;
  std::vector<const char*> symbol_pointers;

  explicit ValueInfoStore(const fusionopt::api::ValueInfo& info)
      : name(info.name),
        dtype(static_cast<int32_t>(info.dtype)),
        rank(info.has_shape ? static_cast<int32_t>(info.dims.size()) : -1),
        dims(info.dims),
        symbols(info.symbols) {
    for (const std::string& symbol : symbols) symbol_pointers.push_back(symbol.c_str());
  }
  // The pointers above point into this object's own strings: it must not move once filled.
  ValueInfoStore(const ValueInfoStore&) = delete;

  void Fill(fusionopt_value_info* info) const {
    info->name = name.c_str();
    info->dtype = dtype;
    info->rank = rank;
    info->dims = dims.data();
    info->dim_symbols = symbol_pointers.data();
  }
};

}  // namespace

struct fusionopt_session {
  std::unique_ptr<fusionopt::api::Session> session;
  int32_t cuda_device = 0;  // the device ordinal of a CUDA session (for its values)
  std::string description;
  std::vector<std::unique_ptr<ValueInfoStore>> inputs;
  std::vector<std::unique_ptr<ValueInfoStore>> outputs;
};

namespace {

std::string& LastError() {
  thread_local std::string message;
  return message;
}

fusionopt_status Fail(const Status& status) {
  LastError() = status.message();
  return static_cast<fusionopt_status>(status.code());
}

template <typename Body>
fusionopt_status Guarded(Body&& body) {
  LastError().clear();
  try {
    Status status = body();
    return status.ok() ? FUSIONOPT_OK : Fail(status);
  } catch (const std::bad_alloc&) {
    return Fail(Status(ErrorCode::kInternal, "out of memory"));
  } catch (const std::exception& error) {
    return Fail(Status(ErrorCode::kInternal, std::string("internal error: ") + error.what()));
  } catch (...) {
    return Fail(Status(ErrorCode::kInternal, "internal error: an unknown exception"));
  }
}

Status NotNull(const void* pointer, const char* what) {
  return pointer != nullptr ? Status::Ok() : UsageError(std::string(what) + " is NULL");
}

// ---- options_json -> OptimizeRequest

template <typename T>
Status Read(const nlohmann::json& value, const char* key, T& into) {
  try {
    into = value.get<T>();
  } catch (const nlohmann::json::exception&) {
    return UsageError(std::string("option '") + key + "' has the wrong type: " + value.dump());
  }
  return Status::Ok();
}

Result<fusionopt::api::OptimizeRequest> RequestFromJson(const char* options_json) {
  fusionopt::api::OptimizeRequest request;
  if (options_json == nullptr || *options_json == '\0') return request;
  nlohmann::json options = nlohmann::json::parse(options_json, nullptr, /*allow_exceptions=*/false);
  if (options.is_discarded() || !options.is_object()) return UsageError("options are not a JSON object");
  for (const auto& [key, value] : options.items()) {
    if (key == "level") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "level", request.level));
    } else if (key == "runtime") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "runtime", request.runtime));
    } else if (key == "target") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "target", request.target));
    } else if (key == "dims") {
      std::map<std::string, int64_t> dims;
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "dims", dims));
      for (const auto& [symbol, size] : dims) request.dims.push_back(symbol + "=" + std::to_string(size));
    } else if (key == "strict_dims") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "strict_dims", request.strict_dims));
    } else if (key == "verify") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "verify", request.verify));
    } else if (key == "verify_runs") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "verify_runs", request.verify_runs));
    } else if (key == "verify_seed") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "verify_seed", request.verify_seed));
    } else if (key == "rtol") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "rtol", request.tolerance.rtol));
    } else if (key == "atol") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "atol", request.tolerance.atol));
    } else if (key == "disable") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "disable", request.disabled));
    } else if (key == "only") {
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "only", request.only));
    } else if (key == "pass_options") {
      std::map<std::string, std::string> settings;
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "pass_options", settings));
      for (const auto& [name, setting] : settings) request.pass_options.push_back(name + "=" + setting);
    } else if (key == "max_horizontal") {
      int64_t members = 0;
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "max_horizontal", members));
      if (members < 2 || members > 64) return UsageError("max_horizontal must be 2 to 64, not " + std::to_string(members));
      request.max_horizontal = members;
    } else if (key == "fusion_timing") {
      bool timing = true;
      FUSIONOPT_RETURN_IF_ERROR(Read(value, "fusion_timing", timing));
      request.no_fusion_timing = !timing;
    } else {
      return UsageError("unknown option '" + key + "'");
    }
  }
  if (request.tolerance.rtol < 0 || request.tolerance.atol < 0) return UsageError("rtol and atol must be 0 or more");
  return request;
}

std::string BaseDir(const char* base_dir) { return base_dir == nullptr ? std::string() : std::string(base_dir); }

Result<fusionopt::api::Session*> CreateSession(std::unique_ptr<fusionopt::Model> model,
                                               const fusionopt_session_options* options, fusionopt_session** out) {
  fusionopt_session_options chosen = fusionopt_session_options_default();
  if (options != nullptr) {
    if (options->struct_size < offsetof(fusionopt_session_options, fused_kernels) + sizeof(int32_t)) {
      return UsageError("fusionopt_session_options.struct_size " + std::to_string(options->struct_size) +
                        " is smaller than the fields this library reads");
    }
    chosen = *options;
  }
  fusionopt::api::SessionConfig config;
  if (chosen.device != FUSIONOPT_DEVICE_CPU && chosen.device != FUSIONOPT_DEVICE_CUDA) {
    return UsageError("device " + std::to_string(chosen.device) + " is neither FUSIONOPT_DEVICE_CPU nor _CUDA");
  }
  config.backend = chosen.device == FUSIONOPT_DEVICE_CUDA ? fusionopt::api::Backend::kCuda : fusionopt::api::Backend::kCpu;
  config.threads = chosen.threads;
  config.cuda_device = chosen.cuda_device;
  config.cuda_graph = chosen.cuda_graph != 0;
  config.fused_kernels = chosen.fused_kernels != 0;
  FUSIONOPT_ASSIGN_OR_RETURN(auto session, fusionopt::api::Session::Create(std::move(model), config));
  auto handle = std::make_unique<fusionopt_session>();
  handle->description = session->Description();
  for (const auto& info : session->inputs()) handle->inputs.push_back(std::make_unique<ValueInfoStore>(info));
  for (const auto& info : session->outputs()) handle->outputs.push_back(std::make_unique<ValueInfoStore>(info));
  handle->session = std::move(session);
  handle->cuda_device = chosen.cuda_device;
  fusionopt::api::Session* created = handle->session.get();
  *out = handle.release();
  return created;
}

Result<fusionopt::DataType> DtypeOf(int32_t code, const std::string& name) {
  const auto dtype = static_cast<fusionopt::DataType>(code);
  // Strings have no plain buffer form; the 4- and 2-bit types are packed as in ONNX's raw data.
  if (!fusionopt::IsKnownDataType(code) || fusionopt::BitsOf(dtype) == 0) {
    return UsageError("input '" + name + "' has dtype code " + std::to_string(code) +
                      ", which is not an ONNX tensor type this API takes");
  }
  return dtype;
}

// The caller's tensor as a runtime tensor over the same memory (no copy; the runtime never
// writes into its feeds).
Result<fusionopt::cpu::NamedTensor> Feed(const fusionopt_tensor& tensor) {
  if (tensor.name == nullptr) return UsageError("an input tensor has no name");
  const std::string name = tensor.name;
  if (tensor.rank < 0 || (tensor.rank > 0 && tensor.dims == nullptr)) {
    return UsageError("input '" + name + "' has rank " + std::to_string(tensor.rank) + " and no dims");
  }
  FUSIONOPT_ASSIGN_OR_RETURN(fusionopt::DataType dtype, DtypeOf(tensor.dtype, name));
  std::vector<int64_t> dims(tensor.dims, tensor.dims + tensor.rank);
  uint64_t count = 1;
  for (int64_t dim : dims) {
    if (dim < 0) return UsageError("input '" + name + "' has a negative dim");
    count *= static_cast<uint64_t>(dim);
  }
  if (count > 0 && tensor.data == nullptr) return UsageError("input '" + name + "' has no data");
  auto* bytes = static_cast<uint8_t*>(const_cast<void*>(tensor.data));
  std::shared_ptr<uint8_t> storage(bytes, [](uint8_t*) {});
  return fusionopt::cpu::NamedTensor{name, fusionopt::cpu::RtTensor(dtype, std::move(dims), std::move(storage))};
}

// Whether `output` shares its bytes with anything but itself: a feed (a model that returns an
// input, or a view of one) or another holder of its storage (a constant, another output).
bool SharesMemory(const fusionopt::cpu::RtTensor& output, const std::vector<fusionopt::cpu::NamedTensor>& feeds) {
  if (output.storage().use_count() > 1) return true;
  for (const auto& feed : feeds) {
    const uint8_t* begin = feed.tensor.raw();
    if (begin == nullptr || output.raw() == nullptr) continue;
    if (output.raw() >= begin && output.raw() < begin + feed.tensor.nbytes()) return true;
  }
  return false;
}

// A host output the caller owns outright, so it may write into it (through DLPack) and keep it
// after the feeds are gone: one that shares memory is copied.
fusionopt::cpu::RtTensor Owned(const fusionopt::cpu::RtTensor& output, const std::vector<fusionopt::cpu::NamedTensor>& feeds) {
  if (!SharesMemory(output, feeds)) return output;
  fusionopt::cpu::RtTensor copy = fusionopt::cpu::RtTensor::Allocate(output.dtype(), output.dims());
  if (output.nbytes() > 0) std::memcpy(copy.raw(), output.raw(), output.nbytes());
  return copy;
}

// Fills `info` with the declared input or output at `index` of `values`.
Status DescribeValue(const std::vector<std::unique_ptr<ValueInfoStore>>& values, const char* what, size_t index,
                     fusionopt_value_info* info) {
  FUSIONOPT_RETURN_IF_ERROR(NotNull(info, "info"));
  if (index >= values.size()) {
    return UsageError(std::string(what) + " " + std::to_string(index) + " of " + std::to_string(values.size()));
  }
  values[index]->Fill(info);
  return Status::Ok();
}

// Which graph output each requested one is (all of them, in order, for NULL names), checked
// before anything runs.
Result<std::vector<size_t>> PickOutputs(const fusionopt::api::Session& session, const char* const* output_names,
                                        size_t output_count) {
  const auto& declared = session.outputs();
  if (output_names == nullptr && output_count != declared.size()) {
    return UsageError("the model has " + std::to_string(declared.size()) + " outputs, not " + std::to_string(output_count));
  }
  std::vector<size_t> picked;
  for (size_t i = 0; i < output_count; ++i) {
    if (output_names == nullptr) {
      picked.push_back(i);
      continue;
    }
    if (output_names[i] == nullptr) return UsageError("output name " + std::to_string(i) + " is NULL");
    size_t at = 0;
    while (at < declared.size() && declared[at].name != output_names[i]) ++at;
    if (at == declared.size()) return UsageError(std::string("the model has no output named '") + output_names[i] + "'");
    picked.push_back(at);
  }
  return picked;
}

Result<fusionopt::api::Memory> MemoryOf(int32_t code, const std::string& what) {
  if (code == FUSIONOPT_MEMORY_HOST) return fusionopt::api::Memory::kHost;
  if (code == FUSIONOPT_MEMORY_CUDA) return fusionopt::api::Memory::kCuda;
  return UsageError(what + " has memory kind " + std::to_string(code) + ", neither FUSIONOPT_MEMORY_HOST nor _CUDA");
}

Result<fusionopt::api::Placement> PlacementOf(const fusionopt_run_options* options, size_t input_count) {
  fusionopt::api::Placement placement;
  if (options == nullptr) return placement;
  if (options->struct_size < offsetof(fusionopt_run_options, output_memory) + sizeof(int32_t)) {
    return UsageError("fusionopt_run_options.struct_size " + std::to_string(options->struct_size) +
                      " is smaller than the fields this library reads");
  }
  for (size_t i = 0; options->input_memory != nullptr && i < input_count; ++i) {
    FUSIONOPT_ASSIGN_OR_RETURN(auto memory, MemoryOf(options->input_memory[i], "input " + std::to_string(i)));
    placement.feeds.push_back(memory);
  }
  FUSIONOPT_ASSIGN_OR_RETURN(placement.outputs, MemoryOf(options->output_memory, "output_memory"));
  return placement;
}

}  // namespace

extern "C" {

uint32_t fusionopt_api_version(void) { return FUSIONOPT_RUNTIME_API_VERSION; }

const char* fusionopt_version(void) { return FUSIONOPT_VERSION; }

const char* fusionopt_status_name(fusionopt_status status) {
  switch (status) {
    case FUSIONOPT_OK: return "FUSIONOPT_OK";
    case FUSIONOPT_INVALID_MODEL: return "FUSIONOPT_INVALID_MODEL";
    case FUSIONOPT_USAGE: return "FUSIONOPT_USAGE";
    case FUSIONOPT_IO: return "FUSIONOPT_IO";
    case FUSIONOPT_UNSUPPORTED: return "FUSIONOPT_UNSUPPORTED";
    case FUSIONOPT_MISMATCH: return "FUSIONOPT_MISMATCH";
    case FUSIONOPT_INTERNAL: return "FUSIONOPT_INTERNAL";
  }
  return "FUSIONOPT_UNKNOWN_STATUS";
}

const char* fusionopt_last_error(void) { return LastError().c_str(); }

void fusionopt_set_log_level(int32_t level) {
  static const spdlog::level::level_enum kLevels[] = {spdlog::level::err, spdlog::level::warn, spdlog::level::info,
                                                      spdlog::level::debug};
  spdlog::set_level(kLevels[std::clamp(level, 0, 3)]);
}

const void* fusionopt_buffer_data(const fusionopt_buffer* buffer) {
  return buffer == nullptr ? nullptr : buffer->bytes.data();
}
size_t fusionopt_buffer_size(const fusionopt_buffer* buffer) { return buffer == nullptr ? 0 : buffer->bytes.size(); }
void fusionopt_buffer_free(fusionopt_buffer* buffer) { delete buffer; }

fusionopt_status fusionopt_optimize(const void* model, size_t model_size, const char* base_dir, const char* options_json,
                                    fusionopt_buffer** optimized, fusionopt_buffer** report_json) {
  return Guarded([&]() -> Status {
    FUSIONOPT_RETURN_IF_ERROR(NotNull(model, "model"));
    FUSIONOPT_RETURN_IF_ERROR(NotNull(optimized, "optimized"));
    *optimized = nullptr;
    if (report_json != nullptr) *report_json = nullptr;
    FUSIONOPT_ASSIGN_OR_RETURN(auto request, RequestFromJson(options_json));
    const std::string bytes(static_cast<const char*>(model), model_size);
    auto parse = [&]() { return fusionopt::LoadModelFromBytes(bytes, BaseDir(base_dir)); };
    FUSIONOPT_ASSIGN_OR_RETURN(auto loaded, parse());
    FUSIONOPT_ASSIGN_OR_RETURN(auto outcome, fusionopt::api::Optimize(*loaded, request, parse, "model bytes"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::string serialized, fusionopt::SerializeModel(*loaded));
    *optimized = new fusionopt_buffer{std::move(serialized)};
    if (report_json != nullptr) *report_json = new fusionopt_buffer{std::move(outcome.report_json)};
    return Status::Ok();
  });
}

fusionopt_status fusionopt_optimize_file(const char* input_path, const char* output_path, const char* options_json,
                                         int32_t external_data, fusionopt_buffer** report_json) {
  return Guarded([&]() -> Status {
    FUSIONOPT_RETURN_IF_ERROR(NotNull(input_path, "input_path"));
    FUSIONOPT_RETURN_IF_ERROR(NotNull(output_path, "output_path"));
    if (report_json != nullptr) *report_json = nullptr;
    std::error_code error;
    if (std::filesystem::exists(output_path, error) && std::filesystem::equivalent(input_path, output_path, error)) {
      return UsageError(std::string(output_path) + ": refusing to overwrite the input model; choose another output path");
    }
    FUSIONOPT_ASSIGN_OR_RETURN(auto request, RequestFromJson(options_json));
    const std::string input = input_path;
    auto loaded = fusionopt::LoadModel(input);
    if (!loaded.ok()) return loaded.status().WithContext(input);
    auto outcome = fusionopt::api::Optimize(**loaded, request, [&] { return fusionopt::LoadModel(input); }, input);
    if (!outcome.ok()) return outcome.status().WithContext(input);
    fusionopt::SaveOptions save;
    save.external_data = external_data != 0;
    FUSIONOPT_RETURN_IF_ERROR(fusionopt::SaveModel(**loaded, output_path, save).status().WithContext(output_path));
    if (report_json != nullptr) *report_json = new fusionopt_buffer{std::move(outcome->report_json)};
    return Status::Ok();
  });
}

fusionopt_session_options fusionopt_session_options_default(void) {
  fusionopt_session_options options{};
  options.struct_size = sizeof(fusionopt_session_options);
  options.device = FUSIONOPT_DEVICE_CPU;
  options.threads = 0;
  options.cuda_device = 0;
  options.cuda_graph = 0;
  options.fused_kernels = 1;
  return options;
}

fusionopt_status fusionopt_session_create(const char* model_path, const fusionopt_session_options* options,
                                          fusionopt_session** session) {
  return Guarded([&]() -> Status {
    FUSIONOPT_RETURN_IF_ERROR(NotNull(model_path, "model_path"));
    FUSIONOPT_RETURN_IF_ERROR(NotNull(session, "session"));
    *session = nullptr;
    auto model = fusionopt::LoadModel(model_path);
    if (!model.ok()) return model.status().WithContext(model_path);
    return CreateSession(std::move(*model), options, session).status().WithContext(model_path);
  });
}

fusionopt_status fusionopt_session_create_from_bytes(const void* model, size_t model_size, const char* base_dir,
                                                     const fusionopt_session_options* options,
                                                     fusionopt_session** session) {
  return Guarded([&]() -> Status {
    FUSIONOPT_RETURN_IF_ERROR(NotNull(model, "model"));
    FUSIONOPT_RETURN_IF_ERROR(NotNull(session, "session"));
    *session = nullptr;
    FUSIONOPT_ASSIGN_OR_RETURN(
        auto loaded, fusionopt::LoadModelFromBytes(std::string(static_cast<const char*>(model), model_size), BaseDir(base_dir)));
    return CreateSession(std::move(loaded), options, session).status();
  });
}

void fusionopt_session_destroy(fusionopt_session* session) { delete session; }

const char* fusionopt_session_describe(const fusionopt_session* session) {
  return session == nullptr ? "" : session->description.c_str();
}

size_t fusionopt_session_input_count(const fusionopt_session* session) {
  return session == nullptr ? 0 : session->inputs.size();
}
size_t fusionopt_session_output_count(const fusionopt_session* session) {
  return session == nullptr ? 0 : session->outputs.size();
}

fusionopt_status fusionopt_session_input(const fusionopt_session* session, size_t index, fusionopt_value_info* info) {
  return Guarded([&]() -> Status {
    FUSIONOPT_RETURN_IF_ERROR(NotNull(session, "session"));
    return DescribeValue(session->inputs, "input", index, info);
  });
}

fusionopt_status fusionopt_session_output(const fusionopt_session* session, size_t index, fusionopt_value_info* info) {
  return Guarded([&]() -> Status {
    FUSIONOPT_RETURN_IF_ERROR(NotNull(session, "session"));
    return DescribeValue(session->outputs, "output", index, info);
  });
}

const char* fusionopt_value_name(const fusionopt_value* value) { return value == nullptr ? "" : value->name.c_str(); }
int32_t fusionopt_value_dtype(const fusionopt_value* value) {
  return value == nullptr ? 0 : static_cast<int32_t>(value->tensor.dtype());
}
int32_t fusionopt_value_rank(const fusionopt_value* value) {
  return value == nullptr ? 0 : static_cast<int32_t>(value->tensor.rank());
}
const int64_t* fusionopt_value_dims(const fusionopt_value* value) {
  return value == nullptr ? nullptr : value->tensor.dims().data();
}
const void* fusionopt_value_data(const fusionopt_value* value) {
  return value == nullptr || value->tensor.NumElements() == 0 ? nullptr : value->tensor.raw();
}
size_t fusionopt_value_bytes(const fusionopt_value* value) { return value == nullptr ? 0 : value->tensor.nbytes(); }
void fusionopt_value_view_of(const fusionopt_value* value, fusionopt_value_view* view) {
  if (view == nullptr) return;
  *view = fusionopt_value_view{fusionopt_value_name(value),  fusionopt_value_dtype(value), fusionopt_value_rank(value),
                               fusionopt_value_dims(value),  fusionopt_value_data(value),  fusionopt_value_bytes(value)};
}
int32_t fusionopt_value_memory(const fusionopt_value* value) {
  return value == nullptr ? FUSIONOPT_MEMORY_HOST : value->memory;
}
void fusionopt_value_free(fusionopt_value* value) { delete value; }

fusionopt_status fusionopt_value_to_dlpack(const fusionopt_value* value, void** dl_managed_tensor) {
  return Guarded([&]() -> Status {
    FUSIONOPT_RETURN_IF_ERROR(NotNull(value, "value"));
    FUSIONOPT_RETURN_IF_ERROR(NotNull(dl_managed_tensor, "dl_managed_tensor"));
    return fusionopt::api::LendAsDlpack(*value, dl_managed_tensor);
  });
}

fusionopt_run_options fusionopt_run_options_default(void) {
  fusionopt_run_options options{};
  options.struct_size = sizeof(fusionopt_run_options);
  options.input_memory = nullptr;
  options.output_memory = FUSIONOPT_MEMORY_HOST;
  return options;
}

void* fusionopt_session_cuda_stream(const fusionopt_session* session) {
  return session == nullptr ? nullptr : session->session->CudaStream();
}

fusionopt_status fusionopt_session_run(fusionopt_session* session, const fusionopt_tensor* inputs, size_t input_count,
                                       const char* const* output_names, size_t output_count, fusionopt_value** outputs) {
  return fusionopt_session_run_with_options(session, nullptr, inputs, input_count, output_names, output_count, outputs);
}

fusionopt_status fusionopt_session_run_with_options(fusionopt_session* session, const fusionopt_run_options* options,
                                                    const fusionopt_tensor* inputs, size_t input_count,
                                                    const char* const* output_names, size_t output_count,
                                                    fusionopt_value** outputs) {
  return Guarded([&]() -> Status {
    FUSIONOPT_RETURN_IF_ERROR(NotNull(session, "session"));
    if (input_count > 0) FUSIONOPT_RETURN_IF_ERROR(NotNull(inputs, "inputs"));
    if (output_count > 0) FUSIONOPT_RETURN_IF_ERROR(NotNull(outputs, "outputs"));
    FUSIONOPT_ASSIGN_OR_RETURN(fusionopt::api::Placement placement, PlacementOf(options, input_count));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<size_t> picked, PickOutputs(*session->session, output_names, output_count));
    std::vector<fusionopt::cpu::NamedTensor> feeds;
    for (size_t i = 0; i < input_count; ++i) {
      FUSIONOPT_ASSIGN_OR_RETURN(auto feed, Feed(inputs[i]));
      feeds.push_back(std::move(feed));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(auto results, session->session->Run(feeds, placement));
    const bool on_device = placement.outputs == fusionopt::api::Memory::kCuda;
    std::vector<std::unique_ptr<fusionopt_value>> values;
    for (size_t at : picked) {
      auto value = std::make_unique<fusionopt_value>();
      value->name = results[at].name;
      // Device outputs are fresh buffers of their own (CudaSession::Run).
      value->tensor = on_device ? results[at].tensor : Owned(results[at].tensor, feeds);
      value->memory = on_device ? FUSIONOPT_MEMORY_CUDA : FUSIONOPT_MEMORY_HOST;
      value->device = session->cuda_device;
      values.push_back(std::move(value));
    }
    for (size_t i = 0; i < values.size(); ++i) outputs[i] = values[i].release();
    return Status::Ok();
  });
}

}  // extern "C"
