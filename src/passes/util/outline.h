// Outlining: how every fusion pass turns a group of nodes into one fused node
// (DESIGN.md §4).
//
//   %t = Mul(%x, %s)                         %y = ai.fusionopt::FusedMulAddRelu(%x, %s, %b)
//   %u = Add(%t, %b)             →                  {fused_nodes = ["mul", "add", "relu"]}
//   %y = Relu(%u)                            function ai.fusionopt::FusedMulAddRelu(%x0, %x1, %x2) -> (%y0)
//                                            { the three original ops, renamed canonically }
//
// The fused node reads the group's external inputs (in first-use order) and writes the
// group's values that are read outside it or are graph outputs (same Value objects: names,
// types and readers are untouched). Scalar constants the group reads are copied into the
// body as Constant nodes, so they are compiled into the kernel instead of passed at run time.
// The body is canonical (values renamed x0.., c0.., t0.., y0..), so identical groups share one
// function. The node records the replaced nodes' names in its `fused_nodes` attribute
// (declared by the function, unused by its body), so a reader of the model can trace every
// kernel back to the original nodes.
//
// Legality the outliner checks itself (each a rejection reason, not a crash): the members are
// pure nodes of one graph without subgraphs, and the group is convex — no path leaves the
// group and re-enters it, which would make the fused node depend on itself.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/pass.h"

namespace fusionopt::passes {

inline constexpr const char* kFusedNodesAttribute = "fused_nodes";

struct FusionGroup {
  std::vector<Node*> nodes;  // the members, any order
  std::string kind;          // "elementwise", "contraction_epilogue", "layernorm", ... (report only)
  std::string name;          // function name stem, e.g. "FusedConvAddRelu"
  // Scalar constants go into the body as Constant nodes (compiled into the kernel). A quantized
  // unit passes its scales and zero points as arguments instead: every tensor of a quantized
  // model has its own, so copied in they would give each unit a function of its own.
  bool copy_scalar_constants = true;
};

// A scalar constant (that callers cannot override) the outliner copies into a body as a
// Constant node rather than passing it as an argument; null for any other value.
TensorPtr InlinableConstant(const Value& value);

// Whether something other than `members` reads `value`, or it is a graph output: then a
// group writing it must give it as a result.
bool ReadOutside(const Value& value, const std::unordered_set<const Node*>& members);

// Why `nodes` cannot be outlined, or an empty string when it can.
WhyNot WhyNotOutlinable(const std::vector<Node*>& nodes);

// Whether some path from a member leaves the group and comes back to a member.
bool LeavesAndReenters(const std::vector<Node*>& nodes);

// The body OutlineGroup would give `nodes` (in graph order), without changing the graph: what a
// pass checks a runtime will recognise before it outlines.
std::unique_ptr<Graph> OutlinedBody(const std::vector<Node*>& nodes);

// Replaces the group by one ai.fusionopt node and records the fusion in `context`. The group
// must be outlinable (checked: a pass asks WhyNotOutlinable first and reports the reason).
Node* OutlineGroup(Graph& graph, const FusionGroup& group, PassContext& context);

// `stem`, or `stem_1`, `stem_2`, ... : the first name no node of `graph` has
// (Graph::UniqueNodeName: amortized constant time).
std::string UniqueNodeName(const Graph& graph, const std::string& stem);

// Those of `nodes` that belong to the first one's graph, each once, in graph order (sorted
// by Graph::OrderKey: the time depends on the number of nodes, not on the graph).
std::vector<const Node*> InGraphOrder(const std::vector<const Node*>& nodes);
std::vector<Node*> InGraphOrder(const std::vector<Node*>& nodes);

// Whether `body_node`, a node of a body OutlineGroup built, is a scalar Constant the outliner
// copied in (named "c0", "c1", ... by BuildBody) rather than one of the group's members. The
// members are the other nodes, in the order of the call's fused_nodes names.
bool IsCopiedConstant(const Node& body_node);

// The replaced nodes' names a fused node carries (empty for other nodes).
std::vector<std::string> FusedNodeNames(const Node& node);

}  // namespace fusionopt::passes
