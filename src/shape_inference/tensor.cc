// Layout ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile, DepthToSpace,
// SpaceToDepth. Shape arguments come from constants or tracked symbolic data, so a Reshape
// fed by Shape → Gather → Concat keeps symbolic dims.
#include <algorithm>

#include "ir/permutation.h"
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

// Fills the single -1 of a Reshape target from the element count, which works with
// symbols as long as they cancel: [batch, seq, 64] -> [batch, seq, 4, -1] gives 16.
void InferMinusOne(const Shape& data, size_t infer_at, Shape& out) {
  DimProduct rest;
  for (size_t axis = 0; axis < out.size(); ++axis) {
    if (axis != infer_at) rest.Multiply(out[axis]);
  }
  std::optional<DimProduct> quotient = ProductOf(data, 0, data.size()).DividedBy(rest);
  if (quotient) out[infer_at] = quotient->ToDim();
}

struct ReshapeTarget {
  Shape dims;
  std::optional<size_t> infer_at;  // position of the -1
};

// The target with 0s copied from `data` and the -1 still unknown; nullopt after a warning.
std::optional<ReshapeTarget> ReadReshapeTarget(const InferenceContext& context,
                                               const SymbolicData& target, const Shape* data) {
  bool allow_zero = context.opset() >= 14 && context.node().GetInt("allowzero", 0) != 0;
  ReshapeTarget out;
  for (size_t axis = 0; axis < target.elements.size(); ++axis) {
    const SymbolicInt& element = target.elements[axis];
    if (!element.is_known()) {
      out.dims.push_back(element.is_symbolic() ? Dim::Symbol(element.symbol) : Dim::Unknown());
    } else if (*element.value == -1) {
      if (out.infer_at) {
        context.Warn("shape has more than one -1");
        return std::nullopt;
      }
      out.infer_at = axis;
      out.dims.push_back(Dim::Unknown());
    } else if (*element.value == 0 && !allow_zero) {
      if (data != nullptr && axis >= data->size()) {
        context.Warn("0 at position " + std::to_string(axis) + " has no input dim to copy");
        return std::nullopt;
      }
      out.dims.push_back(data != nullptr ? (*data)[axis] : Dim::Unknown());
    } else if (*element.value < 0) {
      context.Warn("invalid shape value " + std::to_string(*element.value));
      return std::nullopt;
    } else {
      out.dims.push_back(Dim::Known(*element.value));
    }
  }
  return out;
}

bool KnownCountsDiffer(const Shape& a, const Shape& b) {
  DimProduct left = ProductOf(a, 0, a.size());
  DimProduct right = ProductOf(b, 0, b.size());
  return left.symbols.empty() && right.symbols.empty() && !left.has_unknown && !right.has_unknown &&
         left.constant != right.constant;
}

void ReshapeRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  std::optional<SymbolicData> target = context.InputData(1);
  if (!target) {
    // A computed target still fixes the output rank through its length.
    if (context.InputRank(1) == 1u) {
      if (auto length = context.InputLength(1)) context.SetOutputRank(0, *length);
    }
    return;
  }
  const Shape* data = context.InputShape(0);
  std::optional<ReshapeTarget> out = ReadReshapeTarget(context, *target, data);
  if (!out) return;
  if (data != nullptr && out->infer_at) InferMinusOne(*data, *out->infer_at, out->dims);
  if (data != nullptr && !out->infer_at && KnownCountsDiffer(*data, out->dims)) {
    context.Warn("cannot reshape " + ShapeToString(*data) + " to " + ShapeToString(out->dims));
    return;
  }
  context.SetOutputShape(0, out->dims);
}

// [d0 ... d(axis-1), d(axis) ... dn] -> [d0 * ... * d(axis-1), d(axis) * ... * dn].
void FlattenRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  if (data == nullptr) {
    context.SetOutputRank(0, 2);
    return;
  }
  auto rank = static_cast<int64_t>(data->size());
  int64_t axis = context.node().GetInt("axis", 1);
  // Flatten's axis may equal the rank (everything goes to the first dim).
  std::optional<int64_t> split =
      axis == rank ? std::optional<int64_t>(rank) : NormalizeAxis(axis, rank);
  if (!split) {
    context.Warn("axis " + std::to_string(axis) + " is out of range for rank " +
                 std::to_string(rank));
    context.SetOutputRank(0, 2);
    return;
  }
  auto at = static_cast<size_t>(*split);
  context.SetOutputShape(
      0, {ProductOf(*data, 0, at).ToDim(), ProductOf(*data, at, data->size()).ToDim()});
}

void SqueezeRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  IntListArgument axes = context.ReadIntList("axes", 1, 13);
  if (data == nullptr) return;
  auto rank = static_cast<int64_t>(data->size());
  if (!axes.present) {
    // Without axes every size-1 dim goes; only known dims tell which those are.
    Shape out;
    for (const Dim& dim : *data) {
      if (!dim.is_known()) return;
      if (dim.value != 1) out.push_back(dim);
    }
    context.SetOutputShape(0, out);
    return;
  }
  if (!axes.values) {
    if (axes.length) context.SetOutputRank(0, rank - *axes.length);
    return;
  }
  std::optional<std::vector<int64_t>> normalized = NormalizeAxes(context, *axes.values, rank);
  if (!normalized) return;
  Shape out;
  for (int64_t axis = 0; axis < rank; ++axis) {
    const Dim& dim = (*data)[static_cast<size_t>(axis)];
    bool squeezed = std::find(normalized->begin(), normalized->end(), axis) != normalized->end();
    if (squeezed && dim.is_known() && dim.value != 1) {
      context.Warn("cannot squeeze axis " + std::to_string(axis) + " of size " +
                   std::to_string(dim.value));
      return;
    }
    if (!squeezed) out.push_back(dim);
  }
  context.SetOutputShape(0, out);
}

void UnsqueezeRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  IntListArgument axes = context.ReadIntList("axes", 1, 13);
  if (!axes.present) {
    context.Warn("axes are required");
    return;
  }
  if (data == nullptr || !axes.length) return;
  auto out_rank = static_cast<int64_t>(data->size()) + *axes.length;
  if (!axes.values) {
    context.SetOutputRank(0, out_rank);
    return;
  }
  std::optional<std::vector<int64_t>> normalized = NormalizeAxes(context, *axes.values, out_rank);
  if (!normalized) return;
  Shape out;
  auto next_input_dim = data->begin();
  for (int64_t axis = 0; axis < out_rank; ++axis) {
    bool inserted = std::find(normalized->begin(), normalized->end(), axis) != normalized->end();
    out.push_back(inserted ? Dim::Known(1) : *next_input_dim++);
  }
  context.SetOutputShape(0, out);
}

void TransposeRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  if (data == nullptr) return;
  std::vector<int64_t> perm(data->size());
  for (size_t axis = 0; axis < perm.size(); ++axis) {
    perm[axis] = static_cast<int64_t>(perm.size() - 1 - axis);  // default: reverse
  }
  if (auto given = context.node().GetInts("perm")) perm = *given;
  if (perm.size() != data->size() || !IsPermutation(perm)) {
    context.Warn("perm is not a permutation of the " + std::to_string(data->size()) + " input axes");
    return;
  }
  Shape out;
  for (int64_t axis : perm) out.push_back((*data)[static_cast<size_t>(axis)]);
  context.SetOutputShape(0, out);
}

// Expand broadcasts the input against the target shape (numpy rules, both directions).
void ExpandRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  std::optional<SymbolicData> target = context.InputData(1);
  if (data == nullptr) return;
  if (!target) {
    std::optional<int64_t> length = context.InputLength(1);
    if (!length || context.InputRank(1) != 1u || *length > kMaxRank) return;
    // Only input dims other than 1 survive an unknown target.
    size_t rank = std::max(data->size(), static_cast<size_t>(*length));
    Shape out = UnknownDims(rank);
    for (size_t i = 0; i < data->size(); ++i) {
      const Dim& dim = (*data)[data->size() - 1 - i];
      if (dim.is_known() && dim.value != 1) out[rank - 1 - i] = dim;
    }
    context.SetOutputShape(0, out);
    return;
  }
  Shape target_shape;
  for (const SymbolicInt& element : target->elements) {
    target_shape.push_back(element.is_known()      ? KnownOrUnknown(element.value)
                           : element.is_symbolic() ? Dim::Symbol(element.symbol)
                                                   : Dim::Unknown());
  }
  std::optional<Shape> out = BroadcastShapes(*data, target_shape);
  if (!out) {
    context.Warn("input shape " + ShapeToString(*data) + " cannot expand to " +
                 ShapeToString(target_shape));
    return;
  }
  context.SetOutputShape(0, *out);
}

void TileRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  if (data == nullptr) return;
  std::optional<SymbolicData> repeats = context.InputData(1);
  // Tile-1 repeats the one axis that input 2 names: only the rank is certain.
  if (!repeats || context.opset() < 6) {
    context.SetOutputRank(0, static_cast<int64_t>(data->size()));
    return;
  }
  if (repeats->elements.size() != data->size()) {
    context.Warn("repeats has " + std::to_string(repeats->elements.size()) + " entries for rank " +
                 std::to_string(data->size()));
    return;
  }
  // A repeat count read from a shape (Tile(probe, [batch, 1, 1])) multiplies symbolically.
  Shape out;
  for (size_t axis = 0; axis < data->size(); ++axis) {
    const SymbolicInt& times = repeats->elements[axis];
    if (times.is_known() && *times.value < 0) {
      out.push_back(Dim::Unknown());
      continue;
    }
    DimProduct product;
    product.Multiply((*data)[axis]);
    product.Multiply(times.is_known() ? Dim::Known(*times.value) : times.is_symbolic() ? Dim::Symbol(times.symbol) : Dim::Unknown());
    const Dim dim = product.ToDim();
    out.push_back(dim.is_known() ? KnownOrUnknown(dim.value) : dim);
  }
  context.SetOutputShape(0, out);
}

Dim DivideDim(const InferenceContext& context, const Dim& dim, int64_t divisor) {
  if (!dim.is_known()) return Dim::Unknown();
  if (dim.value % divisor != 0) {
    context.Warn("size " + std::to_string(dim.value) + " is not divisible by " +
                 std::to_string(divisor));
    return Dim::Unknown();
  }
  return Dim::Known(dim.value / divisor);
}

// DepthToSpace: [N, C, H, W] -> [N, C / b², H * b, W * b]; SpaceToDepth is the inverse.
void DepthSpaceRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  if (data == nullptr) return;
  int64_t block = context.node().GetInt("blocksize", 0);
  constexpr int64_t kLargestBlock = 1 << 16;  // keeps block * block far from overflow
  if (data->size() != 4 || block <= 0 || block > kLargestBlock) {
    context.Warn("needs a 4-D input and a positive blocksize");
    return;
  }
  const Shape& x = *data;
  if (context.node().op_type() == "DepthToSpace") {
    context.SetOutputShape(0, {x[0], DivideDim(context, x[1], block * block),
                               MultiplyDims(x[2], block), MultiplyDims(x[3], block)});
  } else {
    context.SetOutputShape(0, {x[0], MultiplyDims(x[1], block * block),
                               DivideDim(context, x[2], block), DivideDim(context, x[3], block)});
  }
}

}  // namespace

void RegisterTensorRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"Reshape"}, ReshapeRule);
  registry.AddTypeRule("", {"Flatten"}, FlattenRule);
  registry.AddTypeRule("", {"Squeeze"}, SqueezeRule);
  registry.AddTypeRule("", {"Unsqueeze"}, UnsqueezeRule);
  registry.AddTypeRule("", {"Transpose"}, TransposeRule);
  registry.AddTypeRule("", {"Expand"}, ExpandRule);
  registry.AddTypeRule("", {"Tile"}, TileRule);
  registry.AddTypeRule("", {"DepthToSpace", "SpaceToDepth"}, DepthSpaceRule);
}

}  // namespace fusionopt::shape_inference
