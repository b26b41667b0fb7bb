#include "passes/cleanup/util/no_op_rules.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "passes/util/bypass.h"
#include "passes/util/shape_facts.h"
#include "passes/util/fold_rewrites.h"
#include "patterns/attention/attention.h"

namespace fusionopt::passes {
namespace {

constexpr int64_t kToTheEnd = std::numeric_limits<int64_t>::max();

struct Site {
  const Node& node;
  const Model& model;
  int64_t opset;

  std::optional<std::vector<int64_t>> Ints(size_t input) const {
    return ConstantInts(node.input(input), InitializerRuleOf(model));
  }
  std::optional<std::vector<double>> Floats(size_t input) const {
    return ConstantFloats(node.input(input), InitializerRuleOf(model));
  }
};

using Rule = std::function<bool(const Site&)>;

const Shape* KnownRankShape(const Value* value) {
  return value != nullptr && value->type().is_tensor() && value->shape() ? &*value->shape() : nullptr;
}

bool AllEqual(const std::vector<int64_t>& values, int64_t expected) {
  return std::all_of(values.begin(), values.end(), [expected](int64_t v) { return v == expected; });
}

// The op's input and output 0 certainly have the same shape, and it only reinterprets or
// repeats elements in order (Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile): then the
// output is the input.
bool KeepsShape(const Site& site) {
  const Value* input = site.node.input(0);
  const Value* output = site.node.output(0);
  return input != nullptr && output != nullptr && input->dtype() == output->dtype() &&
         ProvablySameShape(*input, *output);
}

bool IsIdentityPerm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool TransposeKeepsOrder(const Site& site) {
  if (auto perm = site.node.GetInts("perm")) return IsIdentityPerm(*perm);
  // No perm reverses the dims: a no-op for scalars and vectors only.
  const Shape* shape = KnownRankShape(site.node.input(0));
  return site.node.FindAttribute("perm") == nullptr && shape != nullptr && shape->size() <= 1;
}

bool CastToOwnType(const Site& site) {
  const Value* input = site.node.input(0);
  if (input == nullptr || input->dtype() == DataType::kUndefined) return false;
  const Attribute* to = site.node.FindAttribute("to");
  return to != nullptr && to->kind == AttributeKind::kInt && to->i == static_cast<int64_t>(input->dtype());
}

bool CastLikeOwnType(const Site& site) {
  const Value* input = site.node.input(0);
  const Value* like = site.node.input(1);
  return input != nullptr && like != nullptr && input->dtype() != DataType::kUndefined &&
         input->dtype() == like->dtype();
}

// The Reshape target's entries, read as a constant or as the exporters' Concat chain: a constant
// entry, or the run-time size of a dim some value has (`dim`).
struct TargetEntry {
  int64_t constant = 0;
  std::optional<Dim> dim;
};

std::optional<std::vector<TargetEntry>> ReshapeTarget(const Site& site) {
  if (site.opset < 5 || site.node.input(1) == nullptr) return std::nullopt;
  std::vector<TargetEntry> entries;
  if (auto target = site.Ints(1)) {
    for (int64_t entry : *target) entries.push_back({entry, std::nullopt});
    return entries;
  }
  auto parts = ShapeParts(*site.node.input(1), nullptr);
  if (!parts) return std::nullopt;
  for (const ShapePartMatch& part : *parts) {
    if (part.kind == ShapePartMatch::Kind::kConstant) {
      for (int64_t entry : part.constant) entries.push_back({entry, std::nullopt});
      continue;
    }
    const Shape* shape = part.kind == ShapePartMatch::Kind::kDimOf ? KnownRankShape(part.value) : nullptr;
    const auto rank = shape != nullptr ? static_cast<int64_t>(shape->size()) : 0;
    const int64_t axis = part.axis < 0 ? part.axis + rank : part.axis;
    if (shape == nullptr || axis < 0 || axis >= rank) return std::nullopt;
    entries.push_back({0, (*shape)[static_cast<size_t>(axis)]});
  }
  return entries;
}

// Reshape to a shape that spells the input's own dims: equal sizes, 0 copying a dim (without
// allowzero), the size of a dim that is provably the input's, and at most one -1 standing for
// the dim left over. The -1 is the input's dim whenever the others are not 0; a run where one
// is 0 leaves the -1 undefined, and ONNX Runtime refuses that run of the original.
bool ReshapeToOwnShape(const Site& site) {
  if (KeepsShape(site)) return true;
  const Shape* shape = KnownRankShape(site.node.input(0));
  auto target = ReshapeTarget(site);
  if (shape == nullptr || !target || target->size() != shape->size()) return false;
  bool allow_zero = site.node.GetInt("allowzero", 0) != 0;
  int inferred_dims = 0;
  for (size_t i = 0; i < target->size(); ++i) {
    const TargetEntry& wanted = (*target)[i];
    const Dim& dim = (*shape)[i];
    if (wanted.dim) {
      if (!ProvablySameDim(*wanted.dim, dim)) return false;
    } else if (wanted.constant == -1) {
      ++inferred_dims;
    } else if (wanted.constant == 0 && !allow_zero) {
      continue;  // copies the input's dim
    } else if (!dim.is_known() || dim.value != wanted.constant) {
      return false;
    }
  }
  return inferred_dims <= 1;
}

// Expand by a shape of ones no longer than the input's rank broadcasts to the input's own
// shape, whatever its dims.
bool ExpandToOwnShape(const Site& site) {
  if (KeepsShape(site)) return true;
  const Shape* shape = KnownRankShape(site.node.input(0));
  auto target = site.Ints(1);
  return shape != nullptr && target && target->size() <= shape->size() && AllEqual(*target, 1);
}

bool TileOnce(const Site& site) {
  if (KeepsShape(site)) return true;
  auto repeats = site.opset >= 6 ? site.Ints(1) : std::nullopt;
  return repeats && AllEqual(*repeats, 1);
}

// Every axis the Slice touches keeps [0, dim) with step 1.
bool SliceKeepsAll(const Site& site) {
  const Shape* shape = KnownRankShape(site.node.input(0));
  if (shape == nullptr) return false;
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (site.opset < 10) {
    starts = site.node.GetInts("starts");
    ends = site.node.GetInts("ends");
    axes = site.node.GetInts("axes");
  } else {
    starts = site.Ints(1);
    ends = site.Ints(2);
    if (site.node.input(3) != nullptr && !(axes = site.Ints(3))) return false;
    if (site.node.input(4) != nullptr && !(steps = site.Ints(4))) return false;
  }
  if (!starts || !ends || starts->size() != ends->size()) return false;
  if ((axes && axes->size() != starts->size()) || (steps && steps->size() != starts->size())) return false;
  auto rank = static_cast<int64_t>(shape->size());
  for (size_t i = 0; i < starts->size(); ++i) {
    int64_t axis = axes ? (*axes)[i] : static_cast<int64_t>(i);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || (steps && (*steps)[i] != 1)) return false;
    const Dim& dim = (*shape)[static_cast<size_t>(axis)];
    int64_t start = (*starts)[i];
    int64_t end = (*ends)[i];
    bool from_first = start == 0 || (start < 0 && dim.is_known() && start + dim.value <= 0);
    bool to_last = end == kToTheEnd || (dim.is_known() && end >= dim.value);
    if (!from_first || !to_last) return false;
  }
  return true;
}

bool PadsNothing(const Site& site) {
  std::optional<std::vector<int64_t>> pads;
  if (site.opset >= 11) {
    pads = site.Ints(1);
  } else {
    pads = site.node.GetInts(site.opset >= 2 ? "pads" : "paddings");
  }
  return pads && AllEqual(*pads, 0);
}

bool SingleInput(const Site& site) {
  const auto& inputs = site.node.inputs();
  return inputs.size() == 1 && inputs[0] != nullptr;
}

// One output covering the whole axis: no split sizes, or one equal to the known dim.
bool SplitIntoOne(const Site& site) {
  if (site.node.outputs().size() != 1) return false;
  bool sizes_given = site.node.FindAttribute("split") != nullptr || site.node.input(1) != nullptr;
  return !sizes_given || KeepsShape(site);
}

// Resize to the input's own size samples every element at its own position, whatever the
// mode, except tf_crop_and_resize, which first crops to its region of interest.
bool ResizeByOne(const Site& site) {
  if (site.node.GetString("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") return false;
  size_t scales_index = site.opset >= 11 ? 2 : 1;
  auto scales = site.Floats(scales_index);
  if (scales && !scales->empty()) {
    return std::all_of(scales->begin(), scales->end(), [](double scale) { return scale == 1.0; });
  }
  const Shape* shape = KnownRankShape(site.node.input(0));
  auto sizes = site.opset >= 11 ? site.Ints(3) : std::nullopt;
  if (shape == nullptr || !sizes || sizes->size() != shape->size() || site.node.FindAttribute("axes")) return false;
  for (size_t i = 0; i < sizes->size(); ++i) {
    if (!(*shape)[i].is_known() || (*shape)[i].value != (*sizes)[i]) return false;
  }
  return true;
}

bool InferenceDropout(const Site& site) { return ClassifyOp(site.node) == OpClass::kView; }

bool Always(const Site&) { return true; }

const std::unordered_map<std::string_view, Rule>& Rules() {
  static const std::unordered_map<std::string_view, Rule> rules = {
      {"Identity", Always},            // y = x
      {"Dropout", InferenceDropout},   // inference: y = x, the mask unread
      {"Cast", CastToOwnType},         // Cast<float>(float x) = x
      {"CastLike", CastLikeOwnType},   // CastLike(x, like of x's dtype) = x
      {"Transpose", TransposeKeepsOrder},  // perm [0, 1, ..., r-1]
      {"Reshape", ReshapeToOwnShape},  // Reshape(x[N,64], [0, 64]) = x
      {"Flatten", KeepsShape},         // Flatten(x[6,4], axis 1) = x
      {"Squeeze", KeepsShape},         // nothing of size 1 to squeeze
      {"Unsqueeze", KeepsShape},
      {"Expand", ExpandToOwnShape},    // Expand(x[N,64], [1]) = x
      {"Tile", TileOnce},              // repeats all 1
      {"Slice", SliceKeepsAll},        // [0, INT64_MAX) step 1 on every axis
      {"Pad", PadsNothing},            // pads all 0, any mode
      {"Concat", SingleInput},         // Concat(x) = x
      {"Sum", SingleInput},            // Sum(x) = x, likewise Max, Min, Mean
      {"Max", SingleInput},
      {"Min", SingleInput},
      {"Mean", SingleInput},
      {"Split", SplitIntoOne},         // one output: the whole input
      {"Resize", ResizeByOne},         // scales all 1, or sizes equal to the input's dims
  };
  return rules;
}

}  // namespace

bool PassesInputThrough(const Node& node, const Model& model) {
  auto opset = model.OpsetFor("");
  auto rule = Rules().find(node.op_type());
  if (!opset || rule == Rules().end() || node.input(0) == nullptr || node.output(0) == nullptr) return false;
  return rule->second(Site{node, model, *opset});
}

}  // namespace fusionopt::passes
