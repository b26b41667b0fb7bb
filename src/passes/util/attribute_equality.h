// Attributes compared by value: what makes two nodes the same computation (CSE) or two
// contractions interchangeable in one merged kernel (horizontal fusion).
#pragma once

#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

// The node's attributes ordered by name.
std::vector<const Attribute*> SortedAttributes(const Node& node);

// Same name, kind and value (floats bit for bit, tensors by content). Graph-valued attributes
// never compare equal: nodes holding subgraphs are never merged.
bool SameAttribute(const Attribute& a, const Attribute& b);

// The same attributes, in any order.
bool SameAttributes(const Node& a, const Node& b);

}  // namespace fusionopt::passes
