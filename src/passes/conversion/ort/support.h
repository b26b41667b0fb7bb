// What the --runtime ort lowering's files share (lower_for_ort.cc: the driver and GELU; norms.cc,
// attention.cc, rotary.cc, packed.cc and trial_layout.cc): how a fused call's outcome is reported,
// and the small questions they all ask of values and shapes.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/constant_value.h"
#include "ir/graph.h"
#include "passes/util/fold_rewrites.h"
#include "passes/conversion/ort/kernel_choice.h"
#include "passes/conversion/ort/trial_layout.h"
#include "patterns/attention/attention.h"
#include "patterns/composite/composite.h"

namespace fusionopt::passes::ort_lowering {

// What one fused call became, or why it stays: at most one of the two is set, neither when the
// decision waits (a group inlined for its GELU is lowered once the inlined values are typed).
struct Outcome {
  std::string written;
  WhyNot kept_because;
  std::string absorbed;  // a fused call before this one that the written kernel took in
  std::string because;   // why this kernel, where ORT had more than one (ort_kernel_choice.h)
};

inline Outcome Written(std::string_view op, std::string_view absorbed = {}, std::string_view because = {}) {
  return {std::string(op), {}, std::string(absorbed), std::string(because)};
}
inline Outcome Kept(WhyNot reason) { return {{}, std::move(reason), {}, {}}; }

inline bool IsFloat32(const Value* value) { return value != nullptr && value->dtype() == DataType::kFloat; }

// A value of a type the contrib kernels are written for: float32, or float16. The CUDA EP runs
// float16 natively; the CPU EP runs most of them in float32 between Casts it inserts, and that is
// still faster than the inlined ops (bench/ort_runtime.py --portable-side on the full-size fp16
// exports, both in one run: BERT 291 ms lowered against 296 ms inlined, GPT-2 307 against 336,
// LLaMA 156 against 198; docs/benchmarks.md).
inline bool IsKernelFloat(const Value* value) {
  return value != nullptr && (value->dtype() == DataType::kFloat || value->dtype() == DataType::kFloat16);
}

// Why a group of `value`'s type stays a function (empty when it qualifies).
inline WhyNot WhyNotKernelFloat(const Value* value) { return IsKernelFloat(value) ? WhyNot() : "not float32 or float16"; }

// A standard op written just before `before`, its one result a new value named from `stem`, of
// `dtype` and, where given, `shape` (LowerForOrt infers the rest once it is done).
inline Node* WriteOpBefore(Graph& graph, Node& before, const std::string& op, const std::vector<Value*>& inputs,
                           const std::string& stem, DataType dtype, std::optional<Shape> shape = std::nullopt) {
  Value* output = graph.CreateValue(graph.UniqueName(stem));
  output->type().dtype = dtype;
  output->type().shape = std::move(shape);
  Node* node = graph.CreateNode(op, "", inputs, {output}, graph.UniqueNodeName(stem));
  graph.MoveBefore(node, &before);
  return node;
}

// The graph value a body operand stands for at `call`: the call's argument, or the body's own
// constant as a new initializer.
inline Value* ArgumentFor(Graph& graph, const Node& call, int input, const TensorPtr& constant, const std::string& stem) {
  if (input >= 0) return call.input(static_cast<size_t>(input));
  if (constant != nullptr) return AddInitializer(graph, stem, constant);
  return nullptr;
}

// `product`'s partner in the standard binary Add `add` (either operand order), or nullptr.
inline const Value* OtherAddend(const Node& add, const Value* product) {
  if (add.op_type() != "Add" || !IsDefaultDomain(add) || add.inputs().size() != 2) return nullptr;
  if (add.input(0) == product) return add.input(1);
  if (add.input(1) == product) return add.input(0);
  return nullptr;
}

// The call's argument for one of its function body's formal inputs; nullptr for a value that is
// not a formal input.
inline Value* ArgumentOfFormal(const Function& function, const Node& call, const Value* formal) {
  const auto& formals = function.body->inputs();
  auto it = std::find(formals.begin(), formals.end(), formal);
  if (it == formals.end() || static_cast<size_t>(it - formals.begin()) >= call.inputs().size()) return nullptr;
  return call.input(static_cast<size_t>(it - formals.begin()));
}

// Dims two values provably share: equal known sizes or the same symbol.
inline bool SameDim(const Dim& a, const Dim& b) { return (a.is_known() || a.is_symbolic()) && a == b; }

inline std::optional<Dim> DimOf(const Value* value, size_t axis) {
  if (value == nullptr || !value->shape() || value->shape()->size() <= axis) return std::nullopt;
  return (*value->shape())[axis];
}

// Values written once and shared by every layer that reads the same source: keyed by the source
// and what was done to it ("bias": a Where condition made additive; "expand Sq Sk": a mask
// expanded to the scores' rows and columns, where both dims are provably the same; "rotary
// cache": a rotary table's half rows; the rotary position offset, keyed by nullptr).
using SharedValues = std::map<std::pair<Value*, std::string>, Value*>;

// Rotary embedding and grouped-query repeats around MultiHeadAttention (lower_for_ort_rotary.cc).
//
// Whether every row of `table` has equal halves over its last axis by construction: elementwise
// ops of one operand (Cos, Sin, Cast, Neg, Identity; Mul, Div, Add, Sub with a scalar constant)
// and Unsqueezes that keep the last axis, down to Concat(a, a) on the last axis, followed into
// fused calls' bodies. transformers' tables are Cos / Sin of Concat(freqs, freqs).
bool HalvesProvablyEqual(const Model& model, const Value* table);
// Why Q's (or K's) rotary by the [.,.,S,W] tables `cos` and `sin` cannot be ORT's RotaryEmbedding
// (empty when it can): the tables must be [1,1,S,W] of the operand's type with equal halves, W
// the features turned (`width`).
WhyNot WhyNotRotaryEmbedding(const Model& model, const Value* cos, const Value* sin, const Value* operand, int64_t width);
// The head size D and the prefix r of each head a rotary turns (r = D: all of it).
struct RotaryWidths {
  int64_t head = 0;
  int64_t turned = 0;
};
// RotaryEmbedding(operand [B,S,heads·D], [0], cos cache, sin cache) {num_heads, interleaved: 0,
// and rotary_embedding_dim r when r < D} before `before`: position s reads cache row s (the offset
// form of position_ids), the caches the [1,1,S,r] tables' first halves as [S, r/2], written once
// per table.
Value* WriteRotaryEmbedding(Graph& graph, Node& before, Value* operand, int64_t heads, Value* cos, Value* sin,
                            RotaryWidths widths, SharedValues& shared);
// `operand` [B,S,Hkv·D] with each head repeated `repeats` times, as [B,S,Hkv·n·D].
Value* WriteHeadRepeat(Graph& graph, Node& before, Value* operand, int64_t kv_heads, int64_t repeats, int64_t head_size);

// Q, K and V reached through layout chains over one packed [B,S,3·H·D] projection
// (lower_for_ort_packed.cc): which call input, the heads, and which third each reads.
struct PackedOperands {
  int input = -1;
  int64_t heads = 0, head_size = 0;
  std::array<int, 3> slots = {-1, -1, -1};  // Q, K, V
};
// Why the operands are not such slices (empty when they are; then `packed` is filled in).
WhyNot ProvePackedOperands(const FusedAttention& attention, const Node& call, TrialModels& trials,
                                PackedOperands& packed);

// A FusedAttention call as ORT's Attention (with its QKV projection) or MultiHeadAttention,
// the form picked per provider and key count (ort_kernel_choice.h). `shared`: what earlier
// layers already wrote (mask biases and expansions, rotary caches).
Outcome LowerAttention(Model& model, Graph& graph, Node& call, const FusedAttention& attention,
                       SharedValues& shared, TrialModels& trials, const OrtLoweringOptions& options);

// A fused LayerNorm or RMSNorm as Skip(Simplified)LayerNormalization, taking in the residual
// Add of its group or of the fused contraction that feeds it; an RMSNorm without a residual as
// the standard ops ORT fuses into SimplifiedLayerNormalization.
Outcome LowerNorm(Model& model, Graph& graph, Node& call, const FusedComposite& norm, OrtProvider provider);
// A standard LayerNormalization op (the dynamo exports write it; -O3 leaves it unfused) as
// SkipLayerNormalization when something before it can go into the kernel: a fused contraction's
// residual sum (pre-norm ViT, CLIP, Whisper; post-norm BERT), as for a fused LayerNorm there; or
// a residual Add of two values of one provable [B,S,H] shape (GPT-2's fp16 stream, where ORT's
// own SkipLayerNormFusion cannot prove the shapes), or of a [1,S,H] value to a [B,S,H] one (ViT's,
// CLIP's and GPT-2's position embeddings), which ORT's kernel broadcasts but its fusion does not
// match. Kept, with the reason, where its statistics are read, the shapes are not provable, or the
// provider runs the ops faster (float16 on the CPU EP); an empty Outcome where there is nothing
// before it to take in.
Outcome LowerStandardLayerNorm(Model& model, Graph& graph, Node& layer_norm, OrtProvider provider);

}  // namespace fusionopt::passes::ort_lowering
