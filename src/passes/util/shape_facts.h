// What shape inference proves about shapes for every run, whatever the symbolic dims turn
// out to be: the question a fusion asks before it lets one loop cover several ops.
//
// A dim is certain when it is a known size, or a symbol that another dim shares (shape
// inference gives one symbol to dims it knows are equal). An unknown dim ("?") proves
// nothing, not even equality with itself — but the graph can: RuntimeShapes follows
// elementwise ops, whose output has the shape of any input the others broadcast into, so
// %y = Relu(Add(%x, %bias[64])) has %x's shape even when %x is [batch,?,64].
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

// The same known size, or the same symbol.
bool ProvablySameDim(const Dim& a, const Dim& b);

// The same rank and, dim by dim, ProvablySameDim.
bool ProvablySameShape(const Shape& a, const Shape& b);
// The same, on two values' inferred shapes (false when either rank is unknown).
bool ProvablySameShape(const Value& a, const Value& b);

// `from` broadcasts (numpy, aligned right) to exactly `to`: it is no longer, and each of its
// dims is the matching dim of `to` or a known 1.
bool ProvablyBroadcastsTo(const Shape& from, const Shape& to);

// The Reshape shape operand (allowzero 0) that turns an input of shape `input` into `target` at
// every run: known sizes as they are (a known 0 is never spelled: 0 means "copy"), 0 for a symbol
// the input has at the same position, and one -1 only beside known sizes (a copied dim of 0 would
// leave it undefined). Nullopt when Reshape cannot spell `target` so.
std::optional<std::vector<int64_t>> ReshapeOperand(const Shape& input, const Shape& target);

// The tensor shape of `value`, or null when its rank is unknown or it is not a tensor.
const Shape* KnownRankShape(const Value& value);

// Which values of one graph provably have the same shape at run time. A snapshot: ask it
// before rewriting the graph, not after.
class RuntimeShapes {
 public:
  explicit RuntimeShapes(const Graph& graph);

  // ProvablySameShape on the inferred shapes, or derived through the graph.
  bool Same(const Value& a, const Value& b) const;
  // ProvablyBroadcastsTo on the inferred shapes, or the same shape derived through the graph.
  bool BroadcastsTo(const Value& from, const Value& to) const;

 private:
  const Value* Root(const Value* value) const;

  // An elementwise op's output -> the input whose shape it provably has.
  std::unordered_map<const Value*, const Value*> same_as_;
};

}  // namespace fusionopt::passes
