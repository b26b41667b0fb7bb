// Helpers shared by the composite matchers (composite*.cc, attention*.cc); not part of the IR's API.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/constant_value.h"
#include "patterns/composite/composite.h"

namespace fusionopt::composite {

// Relative tolerance for a composite's constants: float32 rounding of the exact value (a few
// ulps), never a constant that is merely close.
inline constexpr double kConstantTolerance = 1e-6;

// The producer of `value` when it is an `op_type` op of the default domain.
Node* ProducerOp(const Value* value, std::string_view op_type);
// Matchers read constants under InitializerRule::kFeedsOverride: they do not see the model's
// IR version, and a fused group must not bake in what a feed may replace.
bool Near(double value, double expected);
// Near, for a constant stored as `stored_as`: float16 and bfloat16 constants are the exact value
// rounded to that type, so they match within half an ulp of it (2^-11 and 2^-8 of the value: a
// float16 export holds √2 as 1.4140625); any other type within kConstantTolerance.
bool Near(double value, double expected, DataType stored_as);
bool IsScalarConstantNear(const Value* value, double expected);
// `node` (a binary op) reads `value` at one input; the other input, or null.
Value* OtherOperand(const Node& node, const Value* value);
// The first reader of `value` that is an `op_type` op of the default domain.
Node* ReaderOp(const Value* value, std::string_view op_type);
// The first binary `op_type` reader of `value` whose other operand satisfies `other_matches`.
template <typename Predicate>
Node* ReaderOpWith(const Value* value, std::string_view op_type, Predicate other_matches) {
  if (value == nullptr) return nullptr;
  for (const Use& use : value->uses()) {
    if (!IsDefaultOp(use.node, op_type)) continue;
    Value* other = OtherOperand(*use.node, value);
    if (other != nullptr && other_matches(other)) return use.node;
  }
  return nullptr;
}
// The only reader of `value` when it has exactly one use and is no graph output.
Node* SoleReader(const Value* value);

// Recognising an outlined body (composite/composite.cc, attention/body.cc).
// The index of `value` among the body's formal inputs, or -1.
int BodyInputIndex(const Graph& body, const Value* value);
// What the body reads as `value`: a formal input, or a Constant node the body holds; absent
// (neither set) for a null value; nullopt for a value the body computes.
std::optional<CompositeOperand> BodyOperandOf(const Graph& body, const Value* value);
// The body is `members` and nothing else: every other node is a Constant whose outputs only
// members read (none is a body output).
bool BodyIsExactly(const Graph& body, const std::vector<Node*>& members);

// Failure with a near-miss reason ("<kind>: <reason>").
CompositeSearch NearMiss(CompositeKind kind, const WhyNot& reason);
// The match, unless an intermediate is read outside the pattern or is a graph output (a near
// miss then). Intermediates are the members' outputs other than the result and the residual
// prologue's sum.
CompositeSearch Checked(CompositeMatch match);

CompositeSearch MatchDecomposedNorm(Node& sqrt, int64_t opset);
CompositeSearch MatchNormOp(Node& norm);
CompositeSearch MatchSoftmax(Node& softmax, int64_t opset);
CompositeSearch MatchErfGelu(Node& erf);
CompositeSearch MatchTanhGelu(Node& tanh);
CompositeSearch MatchGeluOp(Node& gelu);
CompositeSearch MatchSilu(Node& sigmoid);

}  // namespace fusionopt::composite
