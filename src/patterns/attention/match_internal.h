// What the attention matcher's three files share, and nothing outside them uses: match.cc (the
// core from the Softmax outwards, the combined Split, the mask and the head merge), operands.cc
// (each operand's walk from the core to its source) and shape_parts.cc (Reshape and Expand
// targets read as parts).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/why_not.h"
#include "patterns/attention/attention.h"

namespace fusionopt::attention_match {

enum class Role { kQuery, kKey, kValue };

struct OperandSearch {
  AttentionOperandMatch operand;
  WhyNot near_miss;
};

// Walks Q, K or V from the core's `reader` outwards to its source: transposes, scales, the head
// split, a rotary, a grouped-query repeat, or (with `views`) any chain of layout ops.
OperandSearch WalkOperand(Value* operand, Node& reader, Role role, bool key_transposed_by_core, bool views,
                          int64_t opset);

// The target entries `parts` spell, one per dim, when each part's length is known: constants
// by value, a dim by nullopt. Nullopt when a part's length is not known.
std::optional<std::vector<std::optional<int64_t>>> Entries(const std::vector<ShapePartMatch>& parts);

// The target `shape` of `reader` (a Reshape or Expand): absorbed with the chain that computes it
// when nothing else reads the chain, else read as values at run time.
HeadReshapeMatch ReadTarget(Value& shape, const Node& reader);

// A Reshape's target as ReadTarget reads it, with allowzero as the opset defines it.
HeadReshapeMatch ReadReshape(Node& reshape, int64_t opset);

}  // namespace fusionopt::attention_match
