// Reductions: Reduce* (axes attribute, or input from opset 13 for ReduceSum and 18 for the
// others, with noop_with_empty_axes) and ArgMax/ArgMin (one axis, int64 output).
#include <algorithm>
#include <numeric>

#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

Shape ReducedShape(const Shape& input, const std::vector<int64_t>& axes, bool keep_dims) {
  Shape out;
  for (size_t axis = 0; axis < input.size(); ++axis) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(axis)) != axes.end();
    if (!reduced) {
      out.push_back(input[axis]);
    } else if (keep_dims) {
      out.push_back(Dim::Known(1));
    }
  }
  return out;
}

int64_t AxesInputSince(const std::string& op_type) { return op_type == "ReduceSum" ? 13 : 18; }

void ReduceRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Node& node = context.node();
  int64_t since = AxesInputSince(node.op_type());
  IntListArgument axes = context.ReadIntList("axes", 1, since);
  bool keep_dims = node.GetInt("keepdims", 1) != 0;
  bool noop_without_axes = context.opset() >= since && node.GetInt("noop_with_empty_axes", 0);
  const Shape* input = context.InputShape(0);
  if (input == nullptr) return;
  auto rank = static_cast<int64_t>(input->size());
  if (axes.present && !axes.values) {
    // Computed axes: kept dims keep the rank; dropped ones need the number of axes.
    if (keep_dims) {
      context.SetOutputRank(0, rank);
    } else if (axes.length && *axes.length > 0) {
      context.SetOutputRank(0, rank - *axes.length);
    }
    return;
  }
  std::vector<int64_t> reduced = axes.values.value_or(std::vector<int64_t>{});
  if (reduced.empty()) {
    if (noop_without_axes) {
      context.SetOutputShape(0, *input);
      return;
    }
    reduced.resize(input->size());
    std::iota(reduced.begin(), reduced.end(), 0);
  }
  std::optional<std::vector<int64_t>> normalized = NormalizeAxes(context, reduced, rank);
  if (!normalized) return;
  context.SetOutputShape(0, ReducedShape(*input, *normalized, keep_dims));
}

void ArgReduceRule(InferenceContext& context) {
  context.SetOutputDtype(0, DataType::kInt64);
  const Shape* input = context.InputShape(0);
  if (input == nullptr) return;
  int64_t requested = context.node().GetInt("axis", 0);
  std::optional<int64_t> axis = NormalizeAxis(requested, static_cast<int64_t>(input->size()));
  if (!axis) {
    context.Warn("axis " + std::to_string(requested) + " is out of range for rank " +
                 std::to_string(input->size()));
    return;
  }
  bool keep_dims = context.node().GetInt("keepdims", 1) != 0;
  context.SetOutputShape(0, ReducedShape(*input, {*axis}, keep_dims));
}

}  // namespace

void RegisterReduceRules(RuleRegistry& registry) {
  registry.AddTypeRule("",
                       {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
                        "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"},
                       ReduceRule);
  registry.AddTypeRule("", {"ArgMax", "ArgMin"}, ArgReduceRule);
}

}  // namespace fusionopt::shape_inference
