// The roofline + launch-overhead cost model (DESIGN.md §2, issue 5): what a kernel costs on a
// target, and whether fusing a group of nodes into one kernel pays.
//
// One kernel: time = max(FLOPs / peak, bytes / bandwidth) + launch overhead, where bytes are
// what it reads from and writes to global memory — its input values (initializers included)
// and outputs, each distinct value once. A fused kernel reads and writes only the values that
// cross the group's boundary; its intermediates stay on chip. It is memory-bound when the
// bytes term is the larger.
//
// FLOPs per op class (op_flops.cc has the table and the reasons for each weight):
//   MatMul 2·M·N·K (batched: per output element 2·K), Gemm 2·M·N·K (+ M·N with C),
//   Conv 2·out·(Cin/group)·kernel (+ out with bias), ConvTranspose 2·in·(Cout/group)·kernel,
//   Einsum 2·Π(sizes of every index); elementwise weight·elements (1 for arithmetic, 4 for
//   divide/sqrt, 8 for exp/log/tanh/sigmoid-class, 16 for GELU/Mish); reductions per input
//   element; Softmax 12 and LayerNormalization 8 per element; pools per output element ×
//   window; data movement, views and shape ops 0. Gather and Slice read only what they copy.
//
// Nodes that launch no kernel per inference — views, load-time constants, host shape
// arithmetic (ir/op_class.h FindLaunchFreeNodes) — cost nothing. An ai.fusionopt node calling
// a model-local function costs its body's FLOPs (body typed for the call, ir/function_body.h)
// over its own inputs and outputs, one launch.
//
// Symbolic dims take their size from a map (`--dim SYMBOL=N`), 1 when unlisted. A value with
// an unknown dim or dtype makes its kernel's cost unknown (KernelCost::known false, with the
// reason): no invented numbers.
//
// Register pressure of a fused kernel (EstimateRegisters): 16 registers for indexing plus the
// peak number of values live at once while the members run in order (external inputs from
// their first to their last reader in the group, intermediates until their last reader;
// 64-bit values take two), plus 4 scratch registers while a reduction or window member runs.
// A contraction's accumulator tile is not counted: its library sizes the tile to the
// registers left, and the epilogue runs on one accumulator at a time. Past the target's budget
// the fused kernel's roofline time is multiplied by estimate / budget — occupancy falls in
// proportion to registers per thread, and a memory-bound kernel's achieved bandwidth with it.
//
// An elementwise-only group evaluates every member over the group's one index space (the
// largest output): a smaller member is recomputed per element (fuse_elementwise.cc), and its
// FLOPs are counted that way.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/op_class.h"
#include "ir/status.h"
#include "passes/cost_model/target_profiles.h"

namespace fusionopt::passes {

namespace cost {
class ShapeLookup;
struct ConcreteValues;
}  // namespace cost

// Sizes of symbolic dims by symbol; a symbol not listed is 1.
using SymbolSizes = std::map<std::string, int64_t, std::less<>>;

// The size of a symbolic dim: the symbol's own entry, else — for a product the exporter wrote
// as the dim's name ("sequence*batch", "2*s0": torch.onnx's dynamo exporter names flattened
// dims so) — the product of its factors, integer literals or sized symbols; 1 when neither.
int64_t SizeOfSymbol(const SymbolSizes& sizes, std::string_view symbol);

// `SYMBOL=N` settings (N >= 1) as a map; a malformed one is a usage error naming it.
Result<SymbolSizes> ParseDimSettings(const std::vector<std::string>& settings);

// The symbols of the model's dims: every value of the main graph and its subgraphs.
std::set<std::string> SymbolsOf(const Model& model);

// A usage error when `dims` sizes a symbol the model does not have (a typo would otherwise
// change nothing, silently).
Status CheckDimSymbols(const Model& model, const SymbolSizes& dims);

enum class Bound { kMemory, kCompute };
std::string_view NameOf(Bound bound);

// The predicted cost of one kernel, or of several summed.
struct KernelCost {
  bool known = true;           // false: a shape or dtype is unknown, or the op has no formula
  std::string unknown_reason;  // why, when !known
  int64_t launches = 1;        // 0 for a launch-free node; the count, for sums
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  int64_t registers = 0;       // per-thread estimate of a fused kernel (0: library kernel)
  double register_penalty = 1; // factor on the roofline time, >= 1
  double seconds = 0;          // the prediction

  double bytes() const { return bytes_read + bytes_written; }
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0; }
};

// Adds `part` into `total`: FLOPs, bytes, launches and seconds sum; an unknown part makes the
// total unknown (keeping the first reason).
void Accumulate(KernelCost& total, const KernelCost& part);

// Every kernel one inference launches, as `inspect --cost` lists them.
struct CostedKernel {
  const Node* node = nullptr;
  std::string graph;        // "" for the main graph, else the subgraph's name
  KernelCost cost;
  bool fused_call = false;  // an ai.fusionopt node calling a model-local function
  KernelCost unfused;       // fused calls: the body's ops as separate kernels
};

struct ModelCost {
  std::vector<CostedKernel> kernels;  // graph order; a subgraph's kernels after its owner, once
  int64_t launch_free_nodes = 0;      // nodes that launch nothing (not listed)
  KernelCost total;                   // the known kernels summed
  int64_t unknown_kernels = 0;        // kernels left out of `total`
  int64_t fused_calls = 0;
  KernelCost original_total;          // fused calls' bodies as separate kernels, the rest as is
  int64_t original_unknown_kernels = 0;
};

class CostModel {
 public:
  CostModel(const Model& model, TargetProfile profile, SymbolSizes symbols = {});
  ~CostModel();  // out of line: cost::ConcreteValues is complete only in cost_model.cc
  CostModel(CostModel&&) noexcept;

  const Model& model() const { return model_; }
  const TargetProfile& profile() const { return profile_; }
  const SymbolSizes& symbols() const { return symbols_; }

  // Memory- or compute-bound, by which roofline term is larger.
  Bound BoundOf(const KernelCost& cost) const;
  // max(flops / peak, bytes / bandwidth), no launch.
  double RooflineSeconds(double flops, double bytes) const;

  // `node` as its own kernel (0 and no launch when it is launch-free in its graph).
  KernelCost NodeCost(const Node& node) const;

  // The members (pure nodes of one graph, any order) as one fused kernel: FLOPs summed, bytes
  // of the values entering the group (each once; scalar constants compiled in are free) and
  // of the values it writes that are read outside it or are graph outputs; one launch; the
  // register penalty.
  KernelCost GroupCost(const std::vector<const Node*>& members) const;
  KernelCost GroupCost(const std::vector<Node*>& members) const;

  // The members each as its own kernel (launch-free ones cost nothing), summed.
  KernelCost SeparateCost(const std::vector<const Node*>& members) const;
  KernelCost SeparateCost(const std::vector<Node*>& members) const;

  // Registers per thread a fused kernel of the members needs (the header's heuristic).
  int64_t EstimateRegisters(const std::vector<const Node*>& members) const;

  // A node calling a model-local function: its body's ops as separate kernels, what the call
  // replaced. Unknown for other nodes or a body that cannot be typed.
  KernelCost UnfusedCallCost(const Node& call) const;

  // Every kernel of the model (main graph, then each subgraph once, after its owner).
  ModelCost CostOfModel() const;

  // Symbolic inference cannot follow every shape computation (a Slice clamped to a symbol's
  // size — min(64, sequence) — is no symbol), so where a main-graph value has an unknown dim
  // the model infers a copy of the graph with every symbol at its size and uses the shape
  // found there. That copy is made once; after the model changed, forget it.
  // (It also forgets the launch-free nodes it keeps per graph.)
  void ForgetConcreteShapes();

  // The launch-free nodes of `graph` (FindLaunchFreeNodes), computed once per graph revision:
  // a fusion pass judges a candidate per group, and a whole-graph pass per group would make
  // it quadratic.
  const LaunchFreeNodes& LaunchFreeIn(const Graph& graph) const;
  // Whether the kept result is current and none of `replaced` is launch-free: asked before a
  // rewrite that replaces those nodes while the rest of the graph reads the same values.
  // - Outlining replaces members by a fused node, which never runs ahead, so no other node's
  //   status changes: when true, OutlineGroup calls AdoptRevision after, with the revision it
  //   started from. (So does any change that leaves every status as it was, like a sort.)
  // - Other rewrites (merged contractions) call AdoptRewrite with the nodes they added, which
  //   classifies them and drops the `removed` ones (operands' producers nothing reads any
  //   more, which may have been launch-free); it forgets the graph's result instead when an
  //   added node is launch-free and a node outside `added` reads it (that node's status may
  //   have changed).
  bool ReplacingKeepsLaunchFree(const Graph& graph, const std::vector<Node*>& replaced) const;
  void AdoptRevision(const Graph& graph, uint64_t revision_before) const;
  // How many times LaunchFreeIn has scanned a whole graph (what the adoptions above save).
  int64_t launch_free_scans() const { return launch_free_scans_; }
  void AdoptRewrite(const Graph& graph, uint64_t revision_before, const std::vector<Node*>& added,
                    const std::vector<const Node*>& removed) const;

 private:
  cost::ShapeLookup Shapes() const;
  const cost::ConcreteValues& Concrete() const;
  // `depth` counts fused calls entered through bodies (a function calling itself stops).
  KernelCost CostWithin(const Node& node, const LaunchFreeNodes& free, int depth) const;
  KernelCost FusedCallCost(const Node& call, bool as_separate_kernels, int depth) const;
  KernelCost GroupCostAt(const std::vector<const Node*>& members, int depth) const;
  void CostGraph(const Graph& graph, const std::string& graph_name, ModelCost& result) const;
  void FinishKernel(KernelCost& cost) const;

  const Model& model_;
  TargetProfile profile_;
  SymbolSizes symbols_;
  mutable std::unique_ptr<cost::ConcreteValues> concrete_;  // Concrete(), once made
  struct LaunchFreeCache {
    uint64_t revision = 0;  // the graph's when computed (revisions start at 1)
    InitializerRule initializers = InitializerRule::kAllConstant;
    LaunchFreeNodes nodes;
  };
  mutable std::unordered_map<const Graph*, LaunchFreeCache> launch_free_;
  mutable int64_t launch_free_scans_ = 0;
};

}  // namespace fusionopt::passes
