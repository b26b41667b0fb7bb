// The attention ops of opset 23 and RMSNormalization: Y of Attention is Q's layout with V's head
// size ([B,Hq,Sq,Dv], or [B,Sq,Hq·Dv] for 3-D operands split by q_num_heads / kv_num_heads);
// present_key / present_value are [B,Hkv,P+Skv,D] (P the past's length); qk_matmul_output is
// [B,Hq,Sq,P+Skv]. RotaryEmbedding and RMSNormalization keep X's type and shape.
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

void LikeInput(InferenceContext& context) { PropagateInput(context, 0, 0); }

// The [B,H,S,D] view of a 4-D operand, or of a 3-D one split into `heads`; nullopt when neither.
std::optional<Shape> HeadsFirst(InferenceContext& context, const Shape* shape, int64_t heads) {
  if (shape == nullptr) return std::nullopt;
  if (shape->size() == 4) return *shape;
  if (shape->size() != 3 || heads <= 0) return std::nullopt;
  const std::optional<int64_t> width = KnownSize((*shape)[2]);
  Dim depth = Dim::Unknown();
  if (width) {
    if (*width % heads != 0) {
      context.Warn("a hidden size of " + std::to_string(*width) + " does not split into " + std::to_string(heads) + " heads");
      return std::nullopt;
    }
    depth = Dim::Known(*width / heads);
  }
  return Shape{(*shape)[0], Dim::Known(heads), (*shape)[1], depth};
}

// Keys of the present cache: the past's length plus the new keys', when both are known.
Dim PresentLength(const Shape* past, const Dim& keys) {
  if (past == nullptr) return keys;
  if (past->size() != 4) return Dim::Unknown();
  std::optional<int64_t> a = KnownSize((*past)[2]), b = KnownSize(keys);
  return a && b ? Dim::Known(*a + *b) : Dim::Unknown();
}

void AttentionRule(InferenceContext& context) {
  const DataType dtype = context.InputDtype(0);
  const Node& node = context.node();
  const int64_t q_heads = node.GetInt("q_num_heads", 0), kv_heads = node.GetInt("kv_num_heads", 0);
  const Shape* q_shape = context.InputShape(0);
  std::optional<Shape> q = HeadsFirst(context, q_shape, q_heads);
  std::optional<Shape> k = HeadsFirst(context, context.InputShape(1), kv_heads);
  std::optional<Shape> v = HeadsFirst(context, context.InputShape(2), kv_heads);
  std::optional<Shape> y;
  if (q && v) {
    if (q_shape->size() == 4) {
      y = Shape{(*q)[0], (*q)[1], (*q)[2], (*v)[3]};
    } else {
      y = Shape{(*q)[0], (*q)[2], KnownSize((*v)[3]) ? MultiplyDims((*v)[3], q_heads) : Dim::Unknown()};
    }
  }
  context.SetOutputType(0, dtype, y);
  const Shape* past_key = context.InputShape(4);
  const Shape* past_value = context.InputShape(5);
  if (k) context.SetOutputType(1, dtype, Shape{(*k)[0], (*k)[1], PresentLength(past_key, (*k)[2]), (*k)[3]});
  if (v) context.SetOutputType(2, dtype, Shape{(*v)[0], (*v)[1], PresentLength(past_value, (*v)[2]), (*v)[3]});
  if (q && k) context.SetOutputType(3, dtype, Shape{(*q)[0], (*q)[1], (*q)[2], PresentLength(past_key, (*k)[2])});
}

}  // namespace

void RegisterAttentionRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"Attention"}, AttentionRule);
  registry.AddTypeRule("", {"RotaryEmbedding", "RMSNormalization"}, LikeInput);
}

}  // namespace fusionopt::shape_inference
