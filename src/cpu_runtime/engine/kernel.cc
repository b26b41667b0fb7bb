#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

std::string KernelInfo::Describe() const { return DescribeNode(node); }

Status KernelInfo::Error(const std::string& message) const {
  return InvalidModel(Describe() + ": " + message);
}

void KernelRegistry::Register(const std::string& domain, const std::string& op_type,
                              int64_t min_opset, int64_t max_opset, KernelFactory factory) {
  entries_[{domain, op_type}].push_back({min_opset, max_opset, std::move(factory)});
}

void KernelRegistry::Register(const std::string& domain, const std::vector<std::string>& op_types,
                              int64_t min_opset, int64_t max_opset, const KernelFactory& factory) {
  for (const auto& op_type : op_types) Register(domain, op_type, min_opset, max_opset, factory);
}

const KernelFactory* KernelRegistry::Find(const std::string& domain, const std::string& op_type,
                                          int64_t opset) const {
  auto it = entries_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == entries_.end()) return nullptr;
  for (const Entry& entry : it->second) {
    if (opset >= entry.min_opset && opset <= entry.max_opset) return &entry.factory;
  }
  return nullptr;
}

std::vector<std::string> KernelRegistry::OpTypes(const std::string& domain) const {
  std::vector<std::string> out;
  for (const auto& [key, entries] : entries_) {
    if (key.first == domain) out.push_back(key.second);
  }
  return out;
}

std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

}  // namespace fusionopt::cpu
