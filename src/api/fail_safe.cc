#include "api/fail_safe.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace fusionopt::api {
namespace {

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

void PerturbFirstOutput(cpu::KernelContext& context) {
  if (context.outputs.empty()) return;
  cpu::RtTensor& output = context.outputs.front();
  if (output.dtype() != DataType::kFloat) return;
  // The kernel may have written into a buffer it shares with nothing else; a copy keeps the
  // perturbation away from any input it aliases.
  cpu::RtTensor copy = cpu::RtTensor::Allocate(output.dtype(), output.dims());
  for (int64_t i = 0; i < output.NumElements(); ++i) copy.data<float>()[i] = output.data<float>()[i] + 1.0f;
  output = copy;
}

std::function<void(const Node&, cpu::KernelContext&)> PlantedWrongKernel() {
  const char* target = std::getenv(kPlantWrongKernelVariable);
  if (target == nullptr || *target == '\0') return nullptr;
  spdlog::warn("{} is set: the CPU kernel of fused node '{}' is made wrong for this check (a test hook)",
               kPlantWrongKernelVariable, target);
  std::string name = target;
  return [name](const Node& call, cpu::KernelContext& context) {
    if (call.name() == name) PerturbFirstOutput(context);
  };
}

void Log(const verify::FusionCheckReport& report, bool announce_match) {
  if (report.initial_difference.empty()) {
    spdlog::log(announce_match ? spdlog::level::info : spdlog::level::debug, "verify: the optimized model matches the original ({} input sets: seeded within tolerance, "
                 "large values and masks without new NaN/Inf; {} fused calls)",
                 report.input_sets, report.fused_calls);
    return;
  }
  // A model that still differs is the caller's one-line error (which counts what was undone).
  if (!report.matches) return;
  spdlog::warn("verify: the optimized model differs from the original: {}", report.initial_difference);
  for (const auto& undone : report.undone) {
    spdlog::warn("verify: undid fused node '{}' ({}; original nodes {}): {}", undone.node, undone.function,
                 Joined(undone.members), undone.difference);
  }
  spdlog::warn("verify: with {} fusion(s) undone the model matches the original ({} checks)", report.undone.size(),
               report.checks);
}

}  // namespace

Result<verify::FusionCheckReport> RunFailSafeCheck(const Model& original, Model& optimized,
                                                   std::vector<std::vector<cpu::NamedTensor>> feeds,
                                                   const cpu::Tolerance& tolerance, int threads, bool announce_match) {
  verify::FusionCheckOptions options;
  options.feeds = std::move(feeds);
  options.tolerance = tolerance;
  options.threads = threads;
  options.fused_output_hook = PlantedWrongKernel();
  FUSIONOPT_ASSIGN_OR_RETURN(verify::FusionCheckReport report, verify::CheckAndRepairFusions(original, optimized, options));
  Log(report, announce_match);
  return report;
}

Status StillDiffers(const verify::FusionCheckReport& report) {
  std::string undone = report.undone.empty() ? "" : " after undoing " + std::to_string(report.undone.size()) + " fusion(s)";
  std::string stuck;
  for (const auto& call : report.not_undone) stuck += (stuck.empty() ? "; could not undo " : ", ") + call;
  return Status(ErrorCode::kMismatch, "the optimized model differs from the original" + undone + ": " +
                                          report.remaining_difference + stuck);
}

}  // namespace fusionopt::api
