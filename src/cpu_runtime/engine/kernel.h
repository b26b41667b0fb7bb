// The kernel interface and registry of the CPU runtime.
//
// A kernel is created once per node when a Session is prepared (so unsupported ops and bad
// attributes fail before anything runs) and computes the node's outputs from its inputs on
// each run. Constant inputs (initializers, Constant nodes) are visible at creation time so
// kernels can pre-pack weights.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cpu_runtime/engine/allocator.h"
#include "cpu_runtime/engine/rt_tensor.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cpu {

class Kernel;

struct KernelContext {
  std::vector<const RtTensor*> inputs;  // nullptr for an omitted optional input
  std::vector<RtTensor> outputs;        // sized to the node's outputs; the kernel fills them
  Allocator* allocator = nullptr;
  // Set before each run; a kernel that only made views of its inputs this time (a Split into
  // contiguous slices) clears it, so the run counts no launch.
  bool launched = true;
  // Set when every reader of output 0 reads convolution layouts (rt_tensor.h): a kernel
  // whose primitive writes that layout may then leave output 0 in it.
  bool conv_layout_output = false;

  size_t num_inputs() const { return inputs.size(); }
  const RtTensor* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  bool has_input(size_t i) const { return input(i) != nullptr && input(i)->defined(); }
  RtTensor& Output(size_t i, DataType dtype, std::vector<int64_t> dims) {
    outputs[i] = allocator->Allocate(dtype, std::move(dims));
    return outputs[i];
  }
};

// What a kernel factory sees: the node, its opset, and constant inputs where known.
struct KernelInfo {
  const Node& node;
  int64_t opset = 0;
  std::vector<TensorPtr> constant_inputs;  // per input; null when computed at run time

  const TensorPtr& constant_input(size_t i) const {
    static const TensorPtr kNone;
    return i < constant_inputs.size() ? constant_inputs[i] : kNone;
  }
  // "node 'name' (Op)": the prefix of every error a kernel reports.
  std::string Describe() const;
  Status Error(const std::string& message) const;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status Compute(KernelContext& context) = 0;
  // Views (Reshape, Squeeze, Identity, ...) and host-side shape arithmetic launch nothing.
  virtual bool LaunchesKernel() const { return true; }
  // True for kernels (convolutions, pooling) that take any input in a convolution layout — using it
  // as is or reordering it themselves — and honour KernelContext::conv_layout_output.
  virtual bool ReadsConvLayouts() const { return false; }
};

using KernelFactory = std::function<Result<std::unique_ptr<Kernel>>(const KernelInfo&)>;

class KernelRegistry {
 public:
  // The registry with every built-in kernel (see registry.cc).
  static const KernelRegistry& BuiltIn();

  // Registers `factory` for `op_type` in `domain` for opsets [min_opset, max_opset].
  void Register(const std::string& domain, const std::string& op_type, int64_t min_opset,
                int64_t max_opset, KernelFactory factory);
  void Register(const std::string& domain, const std::vector<std::string>& op_types,
                int64_t min_opset, int64_t max_opset, const KernelFactory& factory);
  const KernelFactory* Find(const std::string& domain, const std::string& op_type,
                            int64_t opset) const;
  std::vector<std::string> OpTypes(const std::string& domain) const;

 private:
  struct Entry {
    int64_t min_opset;
    int64_t max_opset;
    KernelFactory factory;
  };
  std::map<std::pair<std::string, std::string>, std::vector<Entry>> entries_;
};

constexpr int64_t kAnyOpset = 1000;

// Helper for the common "create this kernel class from the info" factory.
template <typename K>
KernelFactory Make() {
  return [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    auto kernel = std::make_unique<K>();
    Status status = kernel->Init(info);
    if (!status.ok()) return status;
    return std::unique_ptr<Kernel>(std::move(kernel));
  };
}

// Normalises a possibly negative axis against `rank`; nullopt when out of range.
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

}  // namespace fusionopt::cpu
