// Small graph edits shared by the folding passes (fold-constants, fold-batchnorm,
// fold-scale-into-conv, matmul-add-to-gemm): what counts as a constant, how a computed value
// becomes an initializer under its own name, how a matched chain hands its result to the node
// that now computes it, and how the operands a rewrite stopped reading are cleaned up.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

// The same for a 1-D int64 tensor holding `values` (shapes, sizes, axes).
Value* AddInt64Initializer(Graph& graph, const std::string& base, const std::vector<int64_t>& values);

// A Split of `input` along `axis` into pieces of `sizes`, appended to the graph with fresh
// outputs: sizes as an input from opset 13, as the `split` attribute before.
Node* CreateSplit(Graph& graph, Value* input, int64_t axis, const std::vector<int64_t>& sizes, int64_t opset,
                  const std::string& name_stem);

// Replaces the computed value `value` (produced by a node of `graph`, not a graph output) by
// an initializer holding `tensor`, under the same name, and rewires every reader to it. The
// producer loses that output; the caller removes the producer once all its outputs are gone.
// Returns the new initializer.
Value* ReplaceByInitializer(Graph& graph, Value& value, TensorPtr tensor);

// Removes each of `values` that nothing reads any more: an initializer (not a graph input or
// output), or the output of a pure standard node none of whose outputs is read — then that
// node goes too, and its own operands are looked at the same way. The clean-up a rewrite owes
// the graph for the operands it stopped reading. Returns the nodes it removed (gone: for
// their identity only).
std::vector<const Node*> RemoveIfUnused(std::vector<Value*> values);

// A matched chain `head → absorbed[0] → ... → absorbed.back()` now computes, in `head` alone,
// what the chain computed: `head` becomes the producer of `result` (the chain's last output,
// which keeps its name, type and readers) at output `index`, and the absorbed nodes and
// `head`'s previous output there are removed. Every intermediate must be read only inside
// the chain.
void AdoptChainResult(Graph& graph, Node& head, int index, const std::vector<Node*>& absorbed, Value& result);

// `replacement` (a new node with an empty output `index`) computes `result`, the output of the
// last of `replaced` (a chain listed producer first, read only inside the chain apart from
// `result`): moves `result` to it and removes the chain.
void ReplaceChain(Graph& graph, Node& replacement, int index, const std::vector<Node*>& replaced, Value& result);

// Whether `value` is read exactly once, by `reader`, and is not a graph output.
bool OnlyReadBy(const Value& value, const Node& reader);

}  // namespace fusionopt::passes
