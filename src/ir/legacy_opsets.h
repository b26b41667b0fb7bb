// Default-domain opsets 1–6: refusing the legacy op versions that fusionopt would misread.
//
// Shape inference, the CPU kernels and the passes implement each op as the ONNX version in
// force at opset 7 defines it, plus the later versions they list in docs/ops.md. Most
// versions before opset 7 mean the same thing (they differ only in the `consumed_inputs`
// hint or in their type lists); a few differ in a default that the rules and kernels read
// per opset (Selu-1's coefficients, Concat-1's axis). The rest change what a node computes
// (broadcasting along an `axis`, arguments that later became inputs, training modes), and
// no consumer models them, so a node that uses one is refused with a Status naming the
// node, the op version and the legacy feature. docs/ops.md ("Opsets 1–6") has the decision
// for every op with a version before 7.
//
// Where it runs: the loader calls CheckLegacyOpsets on every model it builds, after shape
// inference (legacy broadcasting is decided by the input ranks). The loader is the one door
// every consumer of a model file comes through (inspect, optimize and its passes, run,
// verify), so none of them ever holds a legacy node it would misread. Graphs built in
// memory skip the loader; the kernels whose ops have refused legacy forms call
// CheckLegacyNode when they are created, so a Session never computes a legacy node wrongly.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt {

// The first default-domain opset whose op versions every consumer implements as defined.
constexpr int64_t kFirstUnrestrictedOpset = 7;

// Ok when the model's default-domain opset is 7 or newer, or when every default-domain node
// (subgraphs included) uses no refused legacy feature; otherwise the first offending node's
// Unsupported status, in graph order.
Status CheckLegacyOpsets(const Model& model);

// The same check for one node of the default domain under `opset` (other domains pass).
// Input ranks come from the values' types; an unknown rank that would decide the outcome is
// refused.
Status CheckLegacyNode(const Node& node, int64_t opset);

}  // namespace fusionopt
