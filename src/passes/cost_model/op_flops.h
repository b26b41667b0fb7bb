// The cost model's per-op arithmetic (cost_model.h): sizes of values with their symbolic dims
// resolved, the bytes a node reads, and the FLOP formula of every standard op class.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>

#include "ir/graph.h"
#include "passes/cost_model/cost_model.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::passes::cost {

// A quantity that may be unknown, and why.
struct Amount {
  bool known = true;
  double value = 0;
  std::string why;

  static Amount Of(double value) { return Amount{true, value, {}}; }
  static Amount Unknown(std::string why) { return Amount{false, 0, std::move(why)}; }
};

// What inference found for the main graph's values at the symbols' sizes, by value name
// (CostModel::Concrete): shapes, and the content of shape arithmetic (Reshape targets).
struct ConcreteValues {
  std::unordered_map<std::string, Shape> shapes;
  std::map<std::string, KnownIntegers> integers;
};

// Where a value's dims come from: its own shape, symbols sized from the map (1 when
// unlisted); where that has an unknown dim or rank and the value belongs to the main graph,
// the shape inference found for it at those sizes (`concrete`, asked for only then).
class ShapeLookup {
 public:
  ShapeLookup(const SymbolSizes& symbols, const Graph* main_graph, std::function<const ConcreteValues*()> concrete)
      : symbols_(symbols), main_graph_(main_graph), concrete_(std::move(concrete)) {}

  Amount Elements(const Value* value) const { return DimsFrom(value, 0); }
  // One dim (a negative axis counts from the end).
  Amount Dim(const Value* value, int64_t axis) const;
  // The product of the dims from `first` on.
  Amount DimsFrom(const Value* value, size_t first) const;
  Amount Bytes(const Value* value) const;
  // The shape this lookup uses for `value`: null when even its rank is unknown.
  const Shape* ShapeOf(const Value& value) const;
  // The shape inference found at these sizes (every dim known) for a main-graph value, else
  // ShapeOf's: what a called body is typed with, so its Reshape targets resolve.
  const Shape* SizedShapeOf(const Value& value) const;
  // The content of a main-graph integer value computed from shapes, where known at these sizes.
  const KnownIntegers* IntegersOf(const Value& value) const;

 private:
  bool Resolved(const Shape& shape) const;
  Amount Product(const Value& value, size_t first, size_t last) const;

  const SymbolSizes& symbols_;
  const Graph* main_graph_;
  std::function<const ConcreteValues*()> concrete_;
};

// The bytes a node reads through input `index`: Gather and Slice read only what they copy.
Amount InputBytes(const Node& node, size_t index, const ShapeLookup& shapes);

// The FLOPs of a standard (not fused) node, by op class; unknown for ops without a formula.
Amount StandardFlops(const Node& node, const ShapeLookup& shapes);

}  // namespace fusionopt::passes::cost
