// Session: a model prepared for execution on the CPU.
//
// Create() prepares the main graph (graph_executor.h): a kernel for every node, including the
// nodes of If/Loop/Scan bodies (an unsupported op anywhere fails here, naming op, domain,
// opset and node), constants wrapped. Run() executes nodes in topological order with shapes
// taken from the actual inputs, releasing each intermediate after its last reader so its
// buffer is reused.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cpu_runtime/engine/graph_executor.h"
#include "cpu_runtime/engine/rt_tensor.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cpu {

struct SessionOptions {
  int threads = 0;  // 0: all cores
  // Nodes calling fused functions run as fused kernels; false runs each body op by op (the
  // reference the fused kernels are checked against; see function_call.h).
  bool fused_kernels = true;
  // Which fused calls run as fused kernels (null: all); see PrepareContext::run_fused.
  std::function<bool(const Node& call)> run_fused = {};
  // Test hook (null in production): PrepareContext::fused_output_hook.
  std::function<void(const Node& call, KernelContext& context)> fused_output_hook = {};
  // Convolutions and pools hand activations to each other in their own layouts
  // (PrepareContext::conv_layouts); false keeps every value row-major, as does
  // FUSIONOPT_CPU_LAYOUTS=row-major in the environment.
  bool conv_layouts = true;
};

struct NamedTensor {
  std::string name;
  RtTensor tensor;
};

// Matches `feeds` by name to `inputs`, the graph inputs a caller may feed (initializers among
// them: a feed overrides one): the position in `inputs` of each feed, in feed order. A name the
// model lacks, a name fed twice, a dtype, rank or known dim that contradicts the declaration,
// and an input neither fed nor an initializer are errors naming the input. Every runtime's
// session checks its feeds with this.
Result<std::vector<size_t>> MatchFeeds(const std::vector<const Value*>& inputs, const std::vector<NamedTensor>& feeds);

class Session {
 public:
  // The session refers to the model's nodes and values: the Model must outlive it.
  static Result<std::unique_ptr<Session>> Create(const Model& model, const SessionOptions& options = {});
  ~Session();

  // Graph inputs the caller must feed (initializers excluded), with their declared types.
  const std::vector<const Value*>& inputs() const;
  const std::vector<const Value*>& outputs() const;

  // Runs once; outputs in graph-output order. Feeds are matched by name; a missing input, an
  // unknown name, or a dtype/rank/dim that contradicts the declaration is an error naming it.
  Result<std::vector<NamedTensor>> Run(const std::vector<NamedTensor>& feeds, RunStats* stats = nullptr);

 private:
  struct Plan;
  explicit Session(std::unique_ptr<Plan> plan);
  std::unique_ptr<Plan> plan_;
};

}  // namespace fusionopt::cpu
