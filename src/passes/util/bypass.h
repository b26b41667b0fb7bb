// Taking nodes out of the data path without renaming anything the model's interface shows:
// shared by eliminate-no-ops, merge-reshapes and eliminate-common-subexpressions.
//
// A node that provably passes its input through is bypassed: its readers read the input.
// When its output is a graph output, that name must survive (graph outputs are never
// renamed), so the value moves instead: the node computing the input writes the
// graph-output value in its place and the input's readers follow —
//
//   %t = Relu(%x)                               %y = Relu(%x)
//   %y = Identity(%t)     (%y graph output)  →  %z = Neg(%y)
//   %z = Neg(%t)
//
// — possible only when the input is computed by a node of the same graph and is itself no
// graph input, initializer or graph output; otherwise the node stays.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

// Whether `kept` could take over the producer of `doomed` (see ProduceInstead).
bool CanProduceInstead(const Graph& graph, const Value& doomed);

// `doomed`'s producer writes `kept` instead (`kept`'s previous producer, if any, loses that
// output and must be removed by the caller), every reader of `doomed` reads `kept`, and
// `doomed` disappears. Requires CanProduceInstead(graph, doomed).
void ProduceInstead(Graph& graph, Value& doomed, Value& kept);

// Removes `chain` (nodes listed producer first, each intermediate read only by the next
// node) whose last output `output` equals `input` (read by the first node): readers of
// `output` read `input`. Outputs of the chain other than the intermediates and `output` must
// be unread. Operands the chain read besides `input` are removed when nothing else reads
// them. Returns false, changing nothing, when `output` is a graph output whose name cannot
// move to `input`'s producer.
bool BypassChain(Graph& graph, const std::vector<Node*>& chain, Value& input, Value& output);

}  // namespace fusionopt::passes
