// The legacy-version table: for each op whose versions before the one every consumer
// implements change what a node computes, the feature that is refused. Ops whose older
// versions mean the same (or whose different defaults the rules and kernels read per opset)
// have no row here; docs/ops.md ("Opsets 1–6") lists every decision with its reason.
#include "ir/legacy_opsets.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ir/why_not.h"

namespace fusionopt {
namespace {

// The legacy feature a node uses, worded for the error ("uses <feature>"); empty when none.
using FeatureCheck = WhyNot (*)(const Node& node);

struct LegacyRule {
  std::string_view op_type;
  std::vector<int64_t> legacy_versions;  // since-versions older than `implemented_since`
  int64_t implemented_since;             // the oldest version every consumer implements
  FeatureCheck refused_feature;
};

std::optional<int64_t> RankOf(const Value* value) {
  if (value == nullptr || !value->type().is_tensor() || !value->shape()) return {};
  return static_cast<int64_t>(value->shape()->size());
}

std::string FormatFloat(float value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// With broadcast=1, legacy broadcasting lays B's dims over A's from `axis` (from the end
// when axis is absent). Numpy broadcasting aligns B with the end of A, so the two agree
// exactly when axis is absent or is rank(A) - rank(B). Without broadcast=1 the legacy
// shapes must be equal, where numpy agrees too.
WhyNot AxisBroadcast(const Node& node) {
  if (node.GetInt("broadcast", 0) == 0) return {};
  const Attribute* axis = node.FindAttribute("axis");
  if (axis == nullptr || axis->kind != AttributeKind::kInt) return {};
  const std::string feature = "broadcast=1 with axis=" + std::to_string(axis->i);
  std::optional<int64_t> rank_a = RankOf(node.input(0));
  std::optional<int64_t> rank_b = RankOf(node.input(1));
  if (!rank_a || !rank_b) {
    return feature + " on inputs of unknown rank (legacy broadcasting from an axis)";
  }
  if (axis->i == *rank_a - *rank_b) return {};
  return feature + " (legacy broadcasting: B's " + std::to_string(*rank_b) +
         " dims start at axis " + std::to_string(axis->i) + " of A's " +
         std::to_string(*rank_a) + ", where numpy broadcasting aligns them with A's last dims)";
}

WhyNot TrainingMode(const Node& node) {
  if (node.GetInt("is_test", 0) != 0) return {};
  return "is_test=0 (training mode, the default before opset 7)";
}

WhyNot ShapeAttribute(const Node&) {
  return "the `shape` attribute (the target shape is input 1 from Reshape-5 on)";
}

WhyNot TypeNameTo(const Node& node) {
  const Attribute* to = node.FindAttribute("to");
  if (to == nullptr || to->kind != AttributeKind::kString) return {};
  return "`to` as the type name '" + to->s + "' (an enum value from Cast-6 on)";
}

WhyNot TilesAndAxisInputs(const Node&) {
  return "the `tiles` and `axis` inputs (one axis repeated; Tile-6 takes repeats per axis)";
}

WhyNot LegacySplit(const Node& node) {
  if (node.input(1) != nullptr) return WhyNot("the split lengths as input 1");
  if (node.FindAttribute("axis") == nullptr) {
    return WhyNot("no `axis` attribute (Split-1 defines no default axis)");
  }
  return {};
}

WhyNot PaddingsAttribute(const Node&) {
  return "the `paddings` attribute (whose layout Pad-1's own example contradicts)";
}

WhyNot ScaleAttributes(const Node&) {
  return "the `height_scale`/`width_scale` attributes (scales per axis from Upsample-7 on)";
}

// Version 1 of the Lp pools reads p as a float; an integral one means what p means later.
WhyNot NonIntegralP(const Node& node) {
  const Attribute* p = node.FindAttribute("p");
  if (p == nullptr || p->kind != AttributeKind::kFloat) return {};
  if (std::isfinite(p->f) && std::trunc(p->f) == p->f) return {};
  return "p=" + FormatFloat(p->f) + " (an Lp norm of non-integral p)";
}

WhyNot LegacyLpPool(const Node& node) {
  if (node.FindAttribute("kernel_shape") == nullptr) {
    return WhyNot("no `kernel_shape` (LpPool-1 leaves the window undefined)");
  }
  return NonIntegralP(node);
}

const std::vector<LegacyRule>& Rules() {
  static const std::vector<LegacyRule> rules = {
      {"Add", {1, 6}, 7, AxisBroadcast},
      {"Sub", {1, 6}, 7, AxisBroadcast},
      {"Mul", {1, 6}, 7, AxisBroadcast},
      {"Div", {1, 6}, 7, AxisBroadcast},
      {"Pow", {1}, 7, AxisBroadcast},
      {"And", {1}, 7, AxisBroadcast},
      {"Or", {1}, 7, AxisBroadcast},
      {"Xor", {1}, 7, AxisBroadcast},
      {"Equal", {1}, 7, AxisBroadcast},
      {"Greater", {1}, 7, AxisBroadcast},
      {"Less", {1}, 7, AxisBroadcast},
      {"BatchNormalization", {1, 6}, 7, TrainingMode},
      {"Dropout", {1, 6}, 7, TrainingMode},
      {"Reshape", {1}, 5, ShapeAttribute},
      {"Cast", {1}, 6, TypeNameTo},
      {"Tile", {1}, 6, TilesAndAxisInputs},
      {"Split", {1}, 2, LegacySplit},
      {"Pad", {1}, 2, PaddingsAttribute},
      {"Upsample", {1}, 7, ScaleAttributes},
      {"LpPool", {1}, 2, LegacyLpPool},
      {"GlobalLpPool", {1}, 2, NonIntegralP},
  };
  return rules;
}

const LegacyRule* FindRule(std::string_view op_type) {
  const auto& rules = Rules();
  auto it = std::find_if(rules.begin(), rules.end(),
                         [&](const LegacyRule& rule) { return rule.op_type == op_type; });
  return it == rules.end() ? nullptr : &*it;
}

// The highest legacy since-version not newer than `opset`.
std::optional<int64_t> VersionInForce(const LegacyRule& rule, int64_t opset) {
  std::optional<int64_t> version;
  for (int64_t since : rule.legacy_versions) {
    if (since <= opset) version = since;
  }
  return version;
}

Status CheckGraph(const Graph& graph, int64_t opset) {
  for (const auto& node : graph.nodes()) {
    FUSIONOPT_RETURN_IF_ERROR(CheckLegacyNode(*node, opset));
    for (const Graph* subgraph : node->Subgraphs()) {
      FUSIONOPT_RETURN_IF_ERROR(CheckGraph(*subgraph, opset));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckLegacyNode(const Node& node, int64_t opset) {
  const bool default_domain = IsDefaultDomain(node);
  if (!default_domain || opset >= kFirstUnrestrictedOpset) return Status::Ok();
  const LegacyRule* rule = FindRule(node.op_type());
  if (rule == nullptr || opset >= rule->implemented_since) return Status::Ok();
  std::optional<int64_t> version = VersionInForce(*rule, opset);
  if (!version) return Status::Ok();  // the op does not exist yet at this opset
  const WhyNot feature = rule->refused_feature(node);
  if (!feature) return Status::Ok();
  return Unsupported(DescribeNode(node) + ": " + node.op_type() + "-" + std::to_string(*version) +
                     " uses " + feature.reason() + ", which fusionopt does not support (default-domain opset " +
                     std::to_string(opset) + ")");
}

Status CheckLegacyOpsets(const Model& model) {
  std::optional<int64_t> opset = model.OpsetFor("");
  if (!opset || *opset >= kFirstUnrestrictedOpset || model.graph == nullptr) return Status::Ok();
  return CheckGraph(*model.graph, *opset);
}

}  // namespace fusionopt
