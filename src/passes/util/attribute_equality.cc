#include "passes/util/attribute_equality.h"

#include <algorithm>
#include <bit>

namespace fusionopt::passes {
namespace {

bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  auto same_bits = [](float x, float y) { return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y); };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_bits);
}

bool SameTensor(const TensorPtr& a, const TensorPtr& b) { return a && b && a->ContentEquals(*b); }

}  // namespace

std::vector<const Attribute*> SortedAttributes(const Node& node) {
  std::vector<const Attribute*> sorted;
  for (const Attribute& attribute : node.attributes()) sorted.push_back(&attribute);
  std::sort(sorted.begin(), sorted.end(), [](const Attribute* a, const Attribute* b) { return a->name < b->name; });
  return sorted;
}

bool SameAttribute(const Attribute& a, const Attribute& b) {
  if (a.name != b.name || a.kind != b.kind || a.ref_attr_name != b.ref_attr_name) return false;
  switch (a.kind) {
    case AttributeKind::kInt: return a.i == b.i;
    case AttributeKind::kFloat: return std::bit_cast<uint32_t>(a.f) == std::bit_cast<uint32_t>(b.f);
    case AttributeKind::kString: return a.s == b.s;
    case AttributeKind::kInts: return a.ints == b.ints;
    case AttributeKind::kFloats: return SameFloats(a.floats, b.floats);
    case AttributeKind::kStrings: return a.strings == b.strings;
    case AttributeKind::kTensor: return SameTensor(a.t, b.t);
    case AttributeKind::kTensors:
      return a.tensors.size() == b.tensors.size() &&
             std::equal(a.tensors.begin(), a.tensors.end(), b.tensors.begin(), SameTensor);
    case AttributeKind::kOpaque:
    case AttributeKind::kUndefined: return a.residual == b.residual;
    case AttributeKind::kGraph:
    case AttributeKind::kGraphs: return false;
  }
  return false;
}

bool SameAttributes(const Node& a, const Node& b) {
  if (a.attributes().size() != b.attributes().size()) return false;
  std::vector<const Attribute*> first = SortedAttributes(a);
  std::vector<const Attribute*> second = SortedAttributes(b);
  for (size_t i = 0; i < first.size(); ++i) {
    if (!SameAttribute(*first[i], *second[i])) return false;
  }
  return true;
}

}  // namespace fusionopt::passes
