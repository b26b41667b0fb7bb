// Numpy broadcasting over symbolic shapes.
#include "shape_inference/shape_inference.h"
#include "shape_inference/context.h"

namespace fusionopt {
namespace {

bool IsOne(const Dim& dim) { return dim.is_known() && dim.value == 1; }

// nullopt when both sizes are known, differ, and neither is 1.
std::optional<Dim> BroadcastDim(const Dim& a, const Dim& b) {
  if (IsOne(a)) return b;
  if (IsOne(b)) return a;
  if (a.is_known() && b.is_known()) {
    if (a.value != b.value) return std::nullopt;
    return a;
  }
  // A known size other than 1 fixes the result: the other side must be that size or 1.
  if (a.is_known()) return a;
  if (b.is_known()) return b;
  if (a.is_symbolic() && a == b) return a;
  return Dim::Unknown();
}

}  // namespace

std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const Shape& longer = a.size() >= b.size() ? a : b;
  const Shape& shorter = a.size() >= b.size() ? b : a;
  size_t offset = longer.size() - shorter.size();
  Shape result(longer.begin(), longer.begin() + static_cast<std::ptrdiff_t>(offset));
  for (size_t i = 0; i < shorter.size(); ++i) {
    std::optional<Dim> dim = BroadcastDim(longer[offset + i], shorter[i]);
    if (!dim) return std::nullopt;
    result.push_back(*dim);
  }
  return result;
}

namespace shape_inference {

std::optional<Shape> BroadcastInputs(InferenceContext& context, const std::vector<size_t>& inputs) {
  std::optional<Shape> result;
  for (size_t input : inputs) {
    const Shape* shape = context.InputShape(input);
    if (shape == nullptr) return std::nullopt;
    if (!result) {
      result = *shape;
      continue;
    }
    std::optional<Shape> combined = BroadcastShapes(*result, *shape);
    if (!combined) {
      context.Warn("input shapes " + ShapeToString(*result) + " and " + ShapeToString(*shape) +
                   " do not broadcast");
      return std::nullopt;
    }
    result = std::move(combined);
  }
  return result;
}

}  // namespace shape_inference
}  // namespace fusionopt
