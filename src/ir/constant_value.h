// The constant a value holds at compile time, if any: an initializer's tensor or a Constant
// node's value (whichever attribute spells it). Shape inference, the runtimes and the passes
// all ask this question; this is the one answer, and each caller names the rule it reads under.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusionopt {

// Whether an initializer that is also a graph input is a constant. From IR version 4 on, such an
// initializer is only a default that a feed may replace (ONNX's IR spec; ONNX Runtime honours
// it), so a rewrite that baked its value in would answer wrongly for that feed.
enum class InitializerRule {
  kFeedsOverride,  // an initializer that is also a graph input is not a constant
  kAllConstant,    // every initializer is: IR version 1-3, or inside a body (no graph inputs there)
};

// The rule of a model: by its IR version, and kFeedsOverride where the version is unknown (0),
// since nothing proves the older rule there.
InitializerRule InitializerRuleOf(int64_t ir_version);
inline InitializerRule InitializerRuleOf(const Model& model) { return InitializerRuleOf(model.ir_version); }

// A Constant node's value; null for other nodes and for sparse_value.
TensorPtr ConstantNodeValue(const Node& node);

TensorPtr ConstantValueOf(const Value& value, InitializerRule rule);

// An integer constant of rank 0 or 1 (an axis list, a shape, indices, sizes), widened to int64;
// nullopt for a null value, a computed one, a float or bool tensor, or a higher rank.
std::optional<std::vector<int64_t>> ConstantInts(const Value* value, InitializerRule rule);

// A floating-point constant of rank 0 or 1 (scales, bounds), widened to double.
std::optional<std::vector<double>> ConstantFloats(const Value* value, InitializerRule rule);

// A one-element numeric constant of any rank, as a double.
std::optional<double> ConstantScalar(const Value* value, InitializerRule rule);

// `value` becomes an initializer holding `tensor`, its type the tensor's, so later rewrites in
// the same pass can read it before shape inference runs again.
void SetTensorInitializer(Graph& graph, Value* value, TensorPtr tensor);
// A fresh initializer of `graph` named after `base` (made unique).
Value* AddInitializer(Graph& graph, const std::string& base, TensorPtr tensor);

// The floating-point dtypes constants are computed in (in double) and written back as:
// float, float16, bfloat16, double.
bool IsFloatingPointForFolding(DataType dtype);

// `values` as a tensor of a floating-point `dtype` (IsFloatingPointForFolding), each
// element rounded once from double to the nearest representable value (ties to even).
TensorPtr MakeFloatingTensor(DataType dtype, std::vector<int64_t> dims, const std::vector<double>& values);

}  // namespace fusionopt
