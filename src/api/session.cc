#include "api/session.h"

#include <fmt/format.h>

#include "cuda_runtime/backend/cuda_session.h"
#include "ir/graph.h"

namespace fusionopt::api {

ValueInfo Describe(const Value& value) {
  ValueInfo info;
  info.name = value.name();
  info.dtype = value.dtype();
  if (const std::optional<Shape>& shape = value.shape()) {
    info.has_shape = true;
    for (const Dim& dim : *shape) {
      info.dims.push_back(dim.is_known() ? dim.value : -1);
      info.symbols.push_back(dim.is_symbolic() ? dim.symbol : "");
    }
  }
  return info;
}

Session::Session(std::unique_ptr<Model> model, SessionConfig config)
    : model_(std::move(model)), config_(std::move(config)) {}

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Create(std::unique_ptr<Model> model, const SessionConfig& config) {
  if (model == nullptr || model->graph == nullptr) return InvalidModel("no model");
  if (config.threads < 0) return UsageError("threads must be 0 (every core) or more, not " + std::to_string(config.threads));
  std::unique_ptr<Session> session(new Session(std::move(model), config));
  const Model& owned = *session->model_;
  if (config.backend == Backend::kCpu) {
    cpu::SessionOptions options;
    options.threads = config.threads;
    options.fused_kernels = config.fused_kernels;
    FUSIONOPT_ASSIGN_OR_RETURN(session->cpu_, cpu::Session::Create(owned, options));
    session->input_values_ = session->cpu_->inputs();
  } else {
    if (config.cuda_device < 0) return UsageError("CUDA device " + std::to_string(config.cuda_device) + " does not exist");
    cuda::CudaSessionOptions options;
    options.device = config.cuda_device;
    options.cuda_graph = config.cuda_graph;
    FUSIONOPT_ASSIGN_OR_RETURN(session->cuda_, cuda::CudaSession::Create(owned, options));
    session->input_values_ = session->cuda_->inputs();
  }
  for (const Value* input : session->input_values_) session->inputs_.push_back(Describe(*input));
  for (const Value* output : owned.graph->outputs()) session->outputs_.push_back(Describe(*output));
  return session;
}

std::string Session::Description() const {
  if (cuda_ != nullptr) return cuda_->DeviceDescription();
  return config_.threads == 0 ? std::string("CPU runtime, every core") : fmt::format("CPU runtime, {} threads", config_.threads);
}

void* Session::CudaStream() const { return cuda_ != nullptr ? cuda_->Stream() : nullptr; }

Result<std::vector<cpu::NamedTensor>> Session::Run(const std::vector<cpu::NamedTensor>& feeds, RunCounts* counts,
                                                   cpu::RunStats* cpu_stats) {
  if (cpu_ == nullptr) return Run(feeds, Placement{}, counts);
  cpu::RunStats stats;
  if (cpu_stats != nullptr) stats = *cpu_stats;  // carries the profile hooks in
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<cpu::NamedTensor> outputs, cpu_->Run(feeds, &stats));
  if (counts != nullptr) counts->kernels_launched = stats.kernels_launched;
  if (cpu_stats != nullptr) *cpu_stats = stats;
  return outputs;
}

Status Session::CheckPlacement(const std::vector<cpu::NamedTensor>& feeds, const Placement& placement) const {
  if (placement.feeds.size() > feeds.size()) {
    return UsageError(fmt::format("{} feed placements for {} feeds", placement.feeds.size(), feeds.size()));
  }
  if (cuda_ != nullptr) return Status::Ok();
  for (size_t i = 0; i < placement.feeds.size(); ++i) {
    if (placement.feeds[i] == Memory::kCuda) {
      return UsageError("input '" + feeds[i].name + "' is in CUDA memory; a CPU session reads host memory");
    }
  }
  if (placement.outputs == Memory::kCuda) {
    return UsageError("a CPU session returns its outputs in host memory, not CUDA memory");
  }
  return Status::Ok();
}

Result<std::vector<cpu::NamedTensor>> Session::Run(const std::vector<cpu::NamedTensor>& feeds, const Placement& placement,
                                                   RunCounts* counts) {
  FUSIONOPT_RETURN_IF_ERROR(CheckPlacement(feeds, placement));
  if (cpu_ != nullptr) return Run(feeds, counts, nullptr);
  // The CUDA backend plans from the feeds' shapes: check them against the declarations first,
  // with the CPU runtime's words (only dtypes and dims are read: feeds may be device memory).
  FUSIONOPT_RETURN_IF_ERROR(cpu::MatchFeeds(cuda_->inputs(), feeds).status());
  cuda::RunPlacement where;
  for (Memory memory : placement.feeds) where.feeds_on_device.push_back(memory == Memory::kCuda);
  where.outputs_on_device = placement.outputs == Memory::kCuda;
  cuda::CudaRunStats stats;
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<cpu::NamedTensor> outputs, cuda_->Run(feeds, &stats, where));
  if (counts != nullptr) {
    counts->kernels_launched = stats.kernels_launched;
    counts->replayed_graph = stats.replayed_graph;
    counts->device_ms = stats.device_ms;
  }
  return outputs;
}

}  // namespace fusionopt::api
