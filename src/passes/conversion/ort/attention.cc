// lower-for-ort, attention: a FusedAttention call as com.microsoft Attention (taking in the
// fused QKV projection before it) or MultiHeadAttention; see lower_for_ort.h for the rewrite
// and its limits.
#include <algorithm>
#include <array>
#include <cmath>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/conversion/ort/support.h"

namespace fusionopt::passes::ort_lowering {
namespace {

// The written ops' names are literals: GCC 12 misreads `std::string(kOrtDomain) + "::..."` passed on
// as out of bounds (-Warray-bounds).
static_assert(std::string_view(kOrtDomain) == "com.microsoft");

constexpr const char* kHeadsDependOnSizes = "the heads depend on the batch or sequence size";

// Why MultiHeadAttention cannot take this operand as [B,S,H·D] (empty when it can).
WhyNot WhyNotBsd(const AttentionOperand& operand, const char* which) {
  const std::string name(which);
  if (operand.layout != HeadLayout::kSplitHeads || !operand.split) return name + " is not split into heads inside the group";
  if (operand.rotary && (operand.rotary->op || operand.rotary->interleaved)) {
    return name + "'s rotary is the opset-23 RotaryEmbedding op or interleaved (only transformers' half rotation is written)";
  }
  return {};
}

// Why the rotary and repeat steps of Q, K and V are not the forms written around the kernel: Q
// and K rotated alike (or neither), V not; K and V repeated alike (or neither), Q not.
WhyNot WhyNotRotaryAndRepeat(const FusedAttention& attention) {
  if (attention.v.rotary || attention.q.repeat) return "V is rotated or Q is repeated";
  if (attention.q.rotary.has_value() != attention.k.rotary.has_value()) return "only one of Q and K is rotated";
  if (attention.k.repeat.has_value() != attention.v.repeat.has_value()) return "only one of K and V is repeated";
  return {};
}

class AttentionLowering {
 public:
  // `shared`: what an earlier layer already wrote (a mask's bias or expansion, rotary caches),
  // reused by every layer that reads the same source.
  AttentionLowering(Model& model, Graph& graph, Node& call, const FusedAttention& attention,
                    SharedValues& shared, TrialModels& trials, const OrtLoweringOptions& options)
      : model_(model), graph_(graph), call_(call), attention_(attention), shared_(shared), trials_(trials),
        options_(options) {}

  Outcome Run() {
    if (WhyNot why = WhyNotLowered()) return Kept(why);
    if (projection_ != nullptr) return WriteAttentionWithProjection();
    WriteRotaryAndRepeat();
    std::vector<Value*> inputs = {query_, key_, value_, nullptr, nullptr};
    if (mask_ != nullptr) inputs.push_back(mask_);
    ReplaceCallBy("MultiHeadAttention", inputs);
    return Written("com.microsoft::MultiHeadAttention", {}, because_);
  }

 private:
  WhyNot WhyNotLowered() {
    if (attention_.op) return "the core is a standard Attention node";
    // MultiHeadAttention adds one attention_bias; a bias before a Where mask replaced by its fill
    // is not one sum (the fill replaces the biased score), so the group stays portable.
    if (attention_.bias.present()) return "a score bias before the mask (ALiBi)";
    if (call_.outputs().size() != 1) return "the group has more than one result";
    if (WhyNot why = WhyNotKernelFloat(call_.output(0))) return why;
    packed_ = attention_.q.layout == HeadLayout::kView;
    if (packed_ && (attention_.q.rotary || attention_.k.rotary)) return "a rotary on a packed projection's views";
    if (packed_) {
      if (WhyNot why = ProvePackedOperands(attention_, call_, trials_, packing_)) return why;
    } else {
      const std::array<const AttentionOperand*, 3> operands = {&attention_.q, &attention_.k, &attention_.v};
      for (size_t i = 0; i < operands.size(); ++i) {
        const char* which = i == 0 ? "Q" : i == 1 ? "K" : "V";
        if (SplitOutside(*operands[i])) continue;
        if (WhyNot why = WhyNotBsd(*operands[i], which)) return why;
      }
    }
    if (WhyNot why = WhyNotRotaryAndRepeat(attention_)) return why;
    if (attention_.merge_perm != std::vector<int64_t>{0, 2, 1, 3} || !attention_.merge) {
      return "the heads are not merged back to [B,S,H*D] inside the group";
    }
    if (attention_.softmax_axis != -1 && attention_.softmax_axis != 3) return "the softmax is not over the keys";
    scale_ = attention_.q.prescale * attention_.k.prescale;
    if (attention_.scale) scale_ *= attention_.scale_divides ? 1.0 / *attention_.scale : *attention_.scale;
    if (!std::isfinite(scale_) || scale_ == 0) return "the scale is not a finite non-zero number";
    // Checks that need nothing written first come above; from here on a refusal may leave a
    // Split or an initializer behind, which LowerForOrt removes when nothing reads it.
    if (WhyNot why = ResolveOperands()) return why;
    if (WhyNot why = ResolveMerge()) return why;
    if (WhyNot why = packed_ ? UsePackedHeads() : ResolveHeads()) return why;
    if (WhyNot why = ResolveRotary()) return why;
    if (!attention_.q.rotary && !attention_.k.repeat) FindProjection();  // ORT's Attention rotates and repeats nothing
    if (projection_ != nullptr) ChooseKernel();
    return ResolveMask();
  }

  // The features a rotary turns, a prefix of each head: the whole head, or a partial form's r
  // (the first size of its Split into [r, D − r], a constant here; even halves without sizes).
  std::optional<int64_t> TurnedWidth(const AttentionRotary& rotary) const {
    if (!rotary.partial) return head_size_;
    std::optional<std::vector<int64_t>> sizes;
    if (rotary.part_sizes.input >= 0) {
      sizes = ConstantInts(call_.input(static_cast<size_t>(rotary.part_sizes.input)), InitializerRuleOf(model_));
    } else if (rotary.part_sizes.constant != nullptr) {
      sizes = rotary.part_sizes.constant->AsInt64s();
    } else if (!rotary.part_attribute.empty()) {
      sizes = rotary.part_attribute;
    } else {
      sizes = std::vector<int64_t>{head_size_ / 2, head_size_ - head_size_ / 2};
    }
    if (!sizes || sizes->size() != 2 || (*sizes)[0] <= 0 || (*sizes)[0] % 2 != 0 || (*sizes)[1] < 0 ||
        (*sizes)[0] + (*sizes)[1] != head_size_) {
      return std::nullopt;
    }
    return sizes->front();
  }

  // Q's and K's rotary tables, checked for RotaryEmbedding, and the halves' split point. A
  // partial rotary is RotaryEmbedding's rotary_embedding_dim.
  WhyNot ResolveRotary() {
    if (!attention_.q.rotary) return {};
    for (const AttentionOperand* operand : {&attention_.q, &attention_.k}) {
      const AttentionRotary& rotary = *operand->rotary;
      if (rotary.before_heads) return "the rotary turns Q or K before the head split (tables [B,S,1,W])";
      std::optional<int64_t> turned = TurnedWidth(rotary);
      if (!turned) return "the rotary's part of each head is not a constant even prefix";
      if ((turned_width_ != 0 && *turned != turned_width_) || (rotary.half != 0 && rotary.half * 2 != *turned)) {
        return "Q's and K's rotaries turn different parts of each head";
      }
      turned_width_ = *turned;
      if (rotary.split_sizes >= 0) {
        std::optional<std::vector<int64_t>> sizes = ConstantInts(call_.input(static_cast<size_t>(rotary.split_sizes)), InitializerRuleOf(model_));
        if (!sizes || *sizes != std::vector<int64_t>{*turned / 2, *turned / 2}) return "the rotary halves are not constant equal halves";
      }
      Value* cos = call_.input(static_cast<size_t>(rotary.cos));
      Value* sin = call_.input(static_cast<size_t>(rotary.sin));
      if (WhyNot why = WhyNotRotaryEmbedding(model_, cos, sin, query_, *turned)) return why;
      (operand == &attention_.q ? q_tables_ : k_tables_) = {cos, sin};
    }
    return {};
  }

  // Q and K rotated, K and V repeated, ahead of the kernel: what the group did inside it.
  void WriteRotaryAndRepeat() {
    if (attention_.q.rotary) {
      query_ = WriteRotaryEmbedding(graph_, call_, query_, heads_, q_tables_.first, q_tables_.second,
                                    {head_size_, turned_width_}, shared_);
      key_ = WriteRotaryEmbedding(graph_, call_, key_, kv_heads_, k_tables_.first, k_tables_.second,
                                  {head_size_, turned_width_}, shared_);
    }
    if (attention_.k.repeat) {
      key_ = WriteHeadRepeat(graph_, call_, key_, kv_heads_, repeats_, head_size_);
      value_ = WriteHeadRepeat(graph_, call_, value_, kv_heads_, repeats_, head_size_);
    }
  }

  // Attention taking in the projection, or MultiHeadAttention after it, by what the provider
  // runs faster at this key count (ort_kernel_choice.h).
  void ChooseKernel() {
    std::optional<Dim> keys = DimOf(key_, 1);
    AttentionKernelChoice choice =
        ChooseAttentionKernel(options_.provider, keys ? LengthOf(*keys, options_.dims) : std::nullopt);
    because_ = std::move(choice.because);
    if (!choice.take_in_projection) projection_ = nullptr;
  }

  // Attention(x, W, b[, , , bias]): the projection's MatMul and bias Add and the attention in
  // one kernel, which packs W once when ORT creates the session.
  Outcome WriteAttentionWithProjection() {
    const std::string absorbed = projection_->name();
    std::vector<Value*> inputs = {projection_x_, projection_w_, projection_b_};
    if (mask_ != nullptr) inputs.insert(inputs.end(), {nullptr, nullptr, mask_});
    ReplaceCallBy("Attention", inputs);  // the Split written for Q, K and V, and the projection, are left unread
    return Written("com.microsoft::Attention", absorbed, because_);
  }

  // `op` (num_heads, scale) in the call's place, writing its [B,S,H·D] result; where the group
  // merged the heads straight to [B·S, H·D] (GPT-2's Conv1D reads 2-D), through a Reshape to
  // the target the group computed.
  void ReplaceCallBy(const std::string& op, const std::vector<Value*>& inputs) {
    Node* lowered = graph_.CreateNode(op, kOrtDomain, inputs, {nullptr}, graph_.UniqueNodeName(call_.name() + "/" + op));
    lowered->SetAttribute(Attribute::Int("num_heads", heads_));
    lowered->SetAttribute(Attribute::Float("scale", static_cast<float>(scale_)));
    graph_.MoveBefore(lowered, &call_);
    Value* result = call_.output(static_cast<size_t>(attention_.result_output));
    if (merge_target_ == nullptr) {
      graph_.TransferProducer(result, lowered, 0);
    } else {
      Value* context = graph_.CreateValue(graph_.UniqueName(call_.name() + "_context"));
      context->type().dtype = ElementType();
      context->type().shape = Shape{*DimOf(inputs[0], 0), *DimOf(inputs[0], 1), *DimOf(query_, 2)};
      graph_.TransferProducer(context, lowered, 0);
      Node* reshape = graph_.CreateNode("Reshape", "", {context, merge_target_}, {nullptr},
                                        graph_.UniqueNodeName(call_.name() + "/merge"));
      graph_.MoveBefore(reshape, &call_);
      graph_.TransferProducer(result, reshape, 0);
    }
    graph_.RemoveNode(&call_);
  }

  // The combined Q, K, V projection as ORT's Attention takes it: an ai.fusionopt call whose
  // body is MatMul(x, W) + b, or GPT-2's Gemm over x's rows put back to [B,S,N], W a
  // [D_in, 3·H·D] and b a [3·H·D] initializer, read by nothing but this attention, split into
  // equal Q, K, V in that order.
  void FindProjection() {
    if (combined_ == nullptr || slots_ != std::array<int, 3>{0, 1, 2}) return;
    Node* producer = combined_->producer();
    if (producer == nullptr || combined_->is_graph_output()) return;
    for (const Use& use : combined_->uses()) {
      if (use.node != split_ && !OnlyFeedsCall(*use.node)) return;
    }
    const bool flattened = producer->op_type() == "Reshape" && IsDefaultDomain(*producer);
    std::optional<std::array<Value*, 3>> parts = flattened ? FlattenedGemmParts(*producer) : ProjectionParts(*producer);
    if (!parts) return;
    auto [x, w, b] = *parts;
    const int64_t width = 3 * heads_ * (DimOf(query_, 2) ? DimOf(query_, 2)->value / heads_ : 0);
    if (x == nullptr || x->dtype() != ElementType() || !x->shape() || x->shape()->size() != 3 || w == nullptr || b == nullptr) return;
    if (w->initializer() == nullptr || b->initializer() == nullptr || w->initializer()->dims().size() != 2 ||
        w->initializer()->dims()[1] != width || b->initializer()->dims() != std::vector<int64_t>{width}) {
      return;
    }
    if (!SameDim(*DimOf(key_, 2), *DimOf(query_, 2)) || !SameDim(*DimOf(value_, 2), *DimOf(query_, 2))) return;
    projection_ = flattened ? producer->input(0)->producer() : producer;
    projection_x_ = x;
    projection_w_ = w;
    projection_b_ = b;
  }

  // Whether `node` is the call or reads nothing but values only the call reads in the end (a
  // Shape of the projection computing the call's head split, in TorchScript exports): it is dead
  // once the call is replaced.
  bool OnlyFeedsCall(const Node& node, int depth = 0) const {
    if (&node == &call_) return true;
    if (depth > 8 || !node.Subgraphs().empty()) return false;
    for (const Value* output : node.outputs()) {
      if (output == nullptr) continue;
      if (output->is_graph_output()) return false;
      for (const Use& use : output->uses()) {
        if (!OnlyFeedsCall(*use.node, depth + 1)) return false;
      }
    }
    return true;
  }

  // x, W and b of a projection MatMul(x, W) + b: an ai.fusionopt call whose body is those two ops.
  std::optional<std::array<Value*, 3>> ProjectionParts(const Node& producer) const {
    if (producer.domain() != kFusionDomain) return std::nullopt;
    const Function* function = model_.FindFunction(producer.domain(), producer.op_type());
    if (function == nullptr || function->body == nullptr || function->body->num_nodes() != 2) return std::nullopt;
    const Node& matmul = *function->body->nodes().front();
    const Node& add = *function->body->nodes().back();
    if (matmul.op_type() != "MatMul" || !IsDefaultDomain(matmul)) return std::nullopt;
    auto formal = [&](const Value* value) { return ArgumentOfFormal(*function, producer, value); };
    const Value* bias_formal = OtherAddend(add, matmul.output(0));
    return std::array<Value*, 3>{formal(matmul.input(0)), formal(matmul.input(1)),
                                 bias_formal != nullptr ? formal(bias_formal) : nullptr};
  }

  // x, W and b of GPT-2's Conv1D, Reshape(Gemm(Reshape(x, [-1, K]), W, b), [B, S, N]) for a
  // [B,S,K] x: the rows flattened, projected and put back in place, which is MatMul(x, W) + b
  // when the result's B and S are provably x's (a [M, K] Reshape of a [B,S,K] x is [B·S, K]).
  std::optional<std::array<Value*, 3>> FlattenedGemmParts(const Node& unflatten) const {
    const Value* projected = unflatten.input(0);
    const Node* gemm = projected->producer();
    if (gemm == nullptr || gemm->op_type() != "Gemm" || !IsDefaultDomain(*gemm) || gemm->inputs().size() != 3) return std::nullopt;
    if (projected->uses().size() != 1 || projected->is_graph_output()) return std::nullopt;
    if (gemm->GetInt("transA", 0) != 0 || gemm->GetInt("transB", 0) != 0 || gemm->GetFloat("alpha", 1.0f) != 1.0f ||
        gemm->GetFloat("beta", 1.0f) != 1.0f) {
      return std::nullopt;
    }
    const Value* rows = gemm->input(0);
    const Node* flatten = rows->producer();
    if (flatten == nullptr || flatten->op_type() != "Reshape" || !IsDefaultDomain(*flatten)) return std::nullopt;
    Value* x = flatten->input(0);
    if (!x->shape() || x->shape()->size() != 3 || !rows->shape() || rows->shape()->size() != 2) return std::nullopt;
    const Dim width = (*x->shape())[2];
    if (!width.is_known() || (*rows->shape())[1] != width) return std::nullopt;
    if (!PutBackAsRowsOf(unflatten, *x)) return std::nullopt;
    return std::array<Value*, 3>{x, gemm->input(1), gemm->input(2)};
  }

  // Whether the projected rows are put back to x's own B and S: the result's dims provably
  // equal x's, or the target spelled from Shape(x)'s first two dims (TorchScript, where shape
  // inference may not know them).
  bool PutBackAsRowsOf(const Node& unflatten, const Value& x) const {
    const Shape& rows_of = *x.shape();
    if (SameDim(*DimOf(combined_, 0), rows_of[0]) && SameDim(*DimOf(combined_, 1), rows_of[1])) return true;
    if (unflatten.input(1) == nullptr) return false;
    std::optional<std::vector<ShapePartMatch>> parts = ShapeParts(*unflatten.input(1), nullptr);
    if (!parts || parts->size() != 3 || (*parts)[2].kind != ShapePartMatch::Kind::kConstant) return false;
    for (int64_t axis : {0, 1}) {
      const ShapePartMatch& part = (*parts)[static_cast<size_t>(axis)];
      if (part.kind != ShapePartMatch::Kind::kDimOf || part.value != &x || part.axis != axis) return false;
    }
    return true;
  }

  // MultiHeadAttention writes [B,S,H·D]. A group whose merge reshapes to another shape (rank 2
  // here) gets a Reshape to the target it computed, which must then be one value or constants.
  WhyNot ResolveMerge() {
    const Value* result = call_.output(static_cast<size_t>(attention_.result_output));
    if (result->shape() && result->shape()->size() == 3) return {};
    if (!result->shape() || result->shape()->size() != 2) return "the merged context's rank is unknown or not 2 or 3";
    const std::vector<AttentionShapePart>& parts = attention_.merge->parts;
    if (parts.size() == 1 && parts[0].kind == ShapePartMatch::Kind::kValues && parts[0].input >= 0) {
      merge_target_ = call_.input(static_cast<size_t>(parts[0].input));
      return {};
    }
    std::vector<int64_t> constant;
    for (const AttentionShapePart& part : parts) {
      if (part.kind != ShapePartMatch::Kind::kConstant) return "the merge's target is computed inside the group";
      constant.insert(constant.end(), part.constant.begin(), part.constant.end());
    }
    merge_target_ = AddInt64Initializer(graph_, call_.name() + "_merge_shape", constant);
    return {};
  }

  // H, D and each K/V head's repeats from the layout the kernels read the operands with
  // (trial_layout.h), at two trial sizes of every open dim: a head count that depends on them is
  // no attribute. The first pair of sizes at which both layouts exist decides. Q's heads are H;
  // K and V have H, or H / n where they are repeated n times.
  WhyNot ResolveHeads() {
    WhyNot first_failure;
    for (const std::array<int64_t, 2>& pair : kTrialOpenDims) {
      Decided<AttentionLayout> layout = HeadsAt(pair);
      if (layout) return UseHeads(*layout);
      if (layout.why_not() == kHeadsDependOnSizes) return layout.why_not();
      if (!first_failure) first_failure = layout.why_not();
    }
    return first_failure;
  }

  // The layout at both sizes of `pair`, when the two agree on every operand's heads, head size
  // and repeat (one layout when the model leaves no dim open).
  Decided<AttentionLayout> HeadsAt(const std::array<int64_t, 2>& pair) {
    std::optional<AttentionLayout> first;
    for (int64_t size : pair) {
      const TrialSizes sizes = trials_.EveryOpenDimAt(size);
      Decided<AttentionLayout> layout = LayoutAt(attention_, call_, trials_, sizes);
      if (!layout) return layout.why_not();
      if (first && !SameHeads(*first, *layout)) return WhyNot(kHeadsDependOnSizes);
      first = std::move(*layout);
      if (sizes.empty()) break;  // nothing left open: one layout
    }
    return std::move(*first);
  }

  WhyNot UseHeads(const AttentionLayout& layout) {
    const OperandLayout &q = layout.q, &k = layout.k, &v = layout.v;
    if (q.columns != k.columns || q.columns != v.columns) return "Q, K and V differ in head size";
    if (k.heads != v.heads || k.group != v.group) return "K and V are repeated differently";
    if (k.group != 1 && !attention_.k.repeat) return "Q, K and V differ in heads";  // one K head broadcast (MQA)
    heads_ = q.heads;
    kv_heads_ = k.heads;
    repeats_ = k.group;
    head_size_ = q.columns;
    if (q.group != 1 || kv_heads_ * repeats_ != heads_) return "Q, K and V differ in heads";
    for (auto [value, heads] : {std::pair{query_, heads_}, {key_, kv_heads_}, {value_, kv_heads_}}) {
      const std::optional<Dim> width = DimOf(value, 2);
      if (width && width->is_known() && width->value != heads * head_size_) return "the head split does not cover the operand's width";
    }
    return {};
  }

  static bool SameHeads(const AttentionLayout& a, const AttentionLayout& b) {
    auto heads = [](const OperandLayout& operand) { return std::array{operand.heads, operand.columns, operand.group}; };
    return heads(a.q) == heads(b.q) && heads(a.k) == heads(b.k) && heads(a.v) == heads(b.v);
  }

  // Q, K and V as [B,S,H·D] graph values: the call's arguments, or a Split of the combined
  // projection written before the call.
  WhyNot ResolveOperands() {
    if (packed_) {
      Value* source = call_.input(static_cast<size_t>(packing_.input));
      const int64_t third = packing_.heads * packing_.head_size;
      if (WhyNot why = SplitInto(source, {third, third, third}, packing_.slots)) return why;
    } else if (!attention_.combined) {
      query_ = AsBsd(attention_.q);
      key_ = AsBsd(attention_.k);
      value_ = AsBsd(attention_.v);
    } else if (WhyNot why = SplitCombined()) {
      return why;
    }
    for (const Value* operand : {query_, key_, value_}) {
      if (operand->dtype() != ElementType()) return "Q, K or V is not of the context's type";
      if (!operand->shape() || operand->shape()->size() != 3) return "Q, K or V is not a rank-3 [B,S,H*D] value";
    }
    return {};
  }

  // Whether the export split this operand into heads outside the group: a [B,S,H,D] input with
  // known H and D, transposed to heads-first inside (TorchScript's T5 where a Shape node outside
  // reads the split).
  bool SplitOutside(const AttentionOperand& operand) const {
    if (attention_.combined || operand.layout != HeadLayout::kSplitHeads || operand.split || operand.input < 0) return false;
    if (operand.rotary || operand.repeat) return false;
    const Value* input = call_.input(static_cast<size_t>(operand.input));
    if (!input->shape() || input->shape()->size() != 4) return false;
    const Dim& heads = (*input->shape())[2];
    const Dim& size = (*input->shape())[3];
    return heads.is_known() && size.is_known() && heads.value > 0 && size.value > 0;
  }

  // The operand's input as [B,S,H·D]: as it is, or (split into heads outside) reshaped to it
  // before the call.
  Value* AsBsd(const AttentionOperand& operand) {
    Value* input = call_.input(static_cast<size_t>(operand.input));
    if (!SplitOutside(operand)) return input;
    const Shape& shape = *input->shape();
    Node* reshape = graph_.CreateNode("Reshape", "", {input, AddInt64Initializer(graph_, call_.name() + "_bsd", {0, 0, -1})},
                                      {nullptr}, graph_.UniqueNodeName(call_.name() + "/merge_heads"));
    Value* merged = graph_.CreateValue(graph_.UniqueName(input->name() + "_bsd"));
    merged->type().dtype = input->dtype();
    if (shape[2].is_known() && shape[3].is_known()) merged->type().shape = Shape{shape[0], shape[1], Dim::Known(shape[2].value * shape[3].value)};
    graph_.TransferProducer(merged, reshape, 0);
    graph_.MoveBefore(reshape, &call_);
    return merged;
  }

  WhyNot SplitCombined() {
    Value* combined = call_.input(static_cast<size_t>(attention_.combined_input));
    if (combined == nullptr || !combined->shape() || combined->shape()->size() != 3) return "the combined projection is not rank 3";
    if (attention_.split_axis != -1 && attention_.split_axis != 2) return "the combined projection is not split on its last axis";
    std::optional<std::vector<int64_t>> sizes;
    if (attention_.split_sizes.constant != nullptr) {
      sizes = attention_.split_sizes.constant->AsInt64s();
    } else if (attention_.split_sizes.input >= 0) {
      sizes = ConstantInts(call_.input(static_cast<size_t>(attention_.split_sizes.input)), InitializerRuleOf(model_));
    } else if (!attention_.split_attribute.empty()) {
      sizes = attention_.split_attribute;
    } else if (const Dim width = (*combined->shape())[2]; width.is_known() && attention_.split_outputs > 0 &&
                                                          width.value % attention_.split_outputs == 0) {
      sizes = std::vector<int64_t>(static_cast<size_t>(attention_.split_outputs), width.value / attention_.split_outputs);
    }
    if (!sizes || static_cast<int>(sizes->size()) != attention_.split_outputs) return "the Split's sizes are not constants";
    return SplitInto(combined, *sizes, {attention_.q.split_output, attention_.k.split_output, attention_.v.split_output});
  }

  // Q, K and V as the pieces `slots` of `combined` split on its last axis by `sizes`, written
  // before the call.
  WhyNot SplitInto(Value* combined, const std::vector<int64_t>& sizes, std::array<int, 3> slots) {
    if (!combined->shape() || combined->shape()->size() != 3) return "the combined projection is not rank 3";
    const int64_t opset = model_.OpsetFor("").value_or(0);
    Node* split = CreateSplit(graph_, combined, -1, sizes, opset, call_.name() + "/Split");
    std::vector<Value*> pieces;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Value* piece = graph_.CreateValue(graph_.UniqueName(call_.name() + "_qkv"));
      piece->type().dtype = combined->dtype();
      piece->type().shape = Shape{(*combined->shape())[0], (*combined->shape())[1], Dim::Known(sizes[i])};
      graph_.TransferProducer(piece, split, static_cast<int>(i));
      pieces.push_back(piece);
    }
    graph_.MoveBefore(split, &call_);
    split_ = split;
    combined_ = combined;
    slots_ = sizes.size() == 3 ? slots : std::array<int, 3>{-1, -1, -1};
    query_ = pieces.at(static_cast<size_t>(slots[0]));
    key_ = pieces.at(static_cast<size_t>(slots[1]));
    value_ = pieces.at(static_cast<size_t>(slots[2]));
    return {};
  }

  // The heads the packed chains were proven to split into (lower_for_ort_packed.cc).
  WhyNot UsePackedHeads() {
    heads_ = kv_heads_ = packing_.heads;
    head_size_ = packing_.head_size;
    repeats_ = 1;
    return {};
  }

  // MultiHeadAttention's attention_bias must be [B|1, H|1, Sq, Sk] exactly (ORT refuses a
  // mask that broadcasts over the queries), so the last two dims are proven equal to Q's and
  // K's sequence dims.
  WhyNot ResolveMask() {
    if (attention_.mask_kind == AttentionMaskKind::kNone) return {};
    mask_ = ArgumentFor(graph_, call_, attention_.mask.input, attention_.mask.constant, call_.name() + "_mask");
    if (mask_ == nullptr || !mask_->shape() || mask_->shape()->size() != 4) return "the mask is not rank 4";
    if (attention_.mask_kind == AttentionMaskKind::kBoolean) {
      if (WhyNot why = BiasFromCondition()) return why;
    }
    if (mask_->dtype() != ElementType()) return "the additive mask is not of the scores' type";
    const Dim sq = *DimOf(query_, 1), sk = *DimOf(key_, 1);  // rank 3: ResolveOperands checked
    if (!SameDim(*DimOf(mask_, 2), sq) || !SameDim(*DimOf(mask_, 3), sk)) ExpandToScores(sq, sk);
    // The original broadcasts the mask to [B,H,Sq,Sk], so an unknown head dim is 1 or H.
    const Dim heads = (*mask_->shape())[1];
    if (heads.is_known() && heads.value != 1 && heads.value != heads_) return "the additive mask's head dim is not 1 or H";
    return {};
  }

  // A mask the scores broadcast over its rows or columns (BERT's extended mask [B,1,1,Sk]), or
  // whose dims are not known to be the scores' (TorchScript exports), expanded to [., ., Sq, Sk]
  // (ORT's attention_bias must have exactly those): Expand(mask, Concat([1, 1], Shape(Q)[1:2],
  // Shape(K)[1:2])). Shared by the layers after this one when Sq and Sk are provably theirs too.
  void ExpandToScores(const Dim& sq, const Dim& sk) {
    const bool shareable = (sq.is_known() || sq.is_symbolic()) && (sk.is_known() || sk.is_symbolic());
    const std::pair<Value*, std::string> key{mask_, "expand " + ShapeToString({sq, sk})};
    if (shareable) {
      if (Value* known = shared_[key]; known != nullptr) {
        mask_ = known;
        return;
      }
    }
    auto node = [&](const char* op, std::vector<Value*> inputs, const char* stem, DataType dtype, Shape shape) {
      return WriteOpBefore(graph_, call_, op, inputs, call_.name() + stem, dtype, std::move(shape));
    };
    // Rows and columns from the projection's input when the Split goes away with it (Q, K and V
    // all come from it then).
    auto sequence_of = [&](Value* operand, const char* stem) {
      Node* dim = node("Shape", {projection_ != nullptr ? projection_x_ : operand}, stem, DataType::kInt64, {Dim::Known(1)});
      dim->SetAttribute(Attribute::Int("start", 1));
      dim->SetAttribute(Attribute::Int("end", 2));
      return dim->output(0);
    };
    Node* target = node("Concat", {AddInt64Initializer(graph_, call_.name() + "_ones", {1, 1}), sequence_of(query_, "_query_rows"), sequence_of(key_, "_key_columns")},
                        "_bias_shape", DataType::kInt64, {Dim::Known(4)});
    target->SetAttribute(Attribute::Int("axis", 0));
    Shape expanded = *mask_->shape();
    expanded[2] = sq;
    expanded[3] = sk;
    Node* expand = node("Expand", {mask_, target->output(0)}, "_attention_bias", mask_->dtype(), expanded);
    if (shareable) shared_[key] = expand->output(0);
    mask_ = expand->output(0);
  }

  // Where(cond, s, fill) before the softmax as s + Where(cond, 0, fill): the same wherever a
  // row keeps a key, and, because the fill is so negative that adding a score rounds back to it,
  // also on rows that mask every key (both give the uniform row). A fill that is -inf or
  // merely large (-1e4, older exports) would differ there, so it stays a function.
  WhyNot BiasFromCondition() {
    if (mask_->dtype() != DataType::kBool) return "the Where mask's condition is not boolean";
    if (ElementType() != DataType::kFloat) return "a Where mask on scores that are not float32 (no float32-minimum fill)";
    if (!std::isfinite(attention_.fill) || attention_.fill > -1e30) {
      return "the Where mask's fill is not a finite float32 minimum (an additive bias would differ on fully masked rows)";
    }
    if (Value* known = shared_[{mask_, "bias"}]; known != nullptr) {
      mask_ = known;
      return {};
    }
    auto scalar = [&](double value, const char* stem) {
      return AddInitializer(graph_, call_.name() + stem,
                            std::make_shared<const Tensor>(Tensor::FromValues<float>(DataType::kFloat, {}, {static_cast<float>(value)})));
    };
    Value* kept = scalar(0.0, "_kept"), *masked = scalar(attention_.fill, "_masked");
    Value* bias = graph_.CreateValue(graph_.UniqueName(call_.name() + "_attention_bias"));
    bias->type().dtype = DataType::kFloat;
    bias->type().shape = mask_->shape();
    std::vector<Value*> inputs = attention_.fill_when_true ? std::vector<Value*>{mask_, masked, kept}
                                                           : std::vector<Value*>{mask_, kept, masked};
    Node* where = graph_.CreateNode("Where", "", inputs, {bias}, graph_.UniqueNodeName(call_.name() + "/attention_bias"));
    // Right after the condition's producer (or first), so every layer reading it can use it.
    Node* producer = mask_->producer();
    Node* after = producer != nullptr ? graph_.NodeAfter(producer) : graph_.nodes().front().get();
    graph_.MoveBefore(where, after != nullptr ? after : &call_);
    shared_[{mask_, "bias"}] = bias;
    mask_ = bias;
    return {};
  }

  // The scores', context's and operands' element type: the group's result's.
  DataType ElementType() const { return call_.output(0)->dtype(); }

  Model& model_;
  Graph& graph_;
  Node& call_;
  const FusedAttention& attention_;
  SharedValues& shared_;
  TrialModels& trials_;
  Value* query_ = nullptr;
  Value* key_ = nullptr;
  Value* value_ = nullptr;
  Value* mask_ = nullptr;
  Value* merge_target_ = nullptr;
  Node* split_ = nullptr;       // the Split written for a combined projection
  const OrtLoweringOptions& options_;
  bool packed_ = false;      // Q, K and V are layout chains over one packed projection
  PackedOperands packing_;   // what lower_for_ort_packed.cc proved of them
  Value* combined_ = nullptr;  // the value split into Q, K and V
  std::array<int, 3> slots_ = {-1, -1, -1};  // which of its three pieces Q, K and V are
  std::string because_;  // why Attention or MultiHeadAttention, where both could be written
  Node* projection_ = nullptr;  // the fused MatMul + bias that ORT's Attention takes in
  Value* projection_x_ = nullptr;
  Value* projection_w_ = nullptr;
  Value* projection_b_ = nullptr;
  int64_t heads_ = 0;
  int64_t kv_heads_ = 0;   // K's and V's heads before any repeat
  int64_t repeats_ = 1;    // how many times each K/V head is repeated
  int64_t head_size_ = 0;
  std::pair<Value*, Value*> q_tables_, k_tables_;  // the rotary's cos and sin
  int64_t turned_width_ = 0;                        // the features of each head the rotary turns
  double scale_ = 1.0;
};
}  // namespace

Outcome LowerAttention(Model& model, Graph& graph, Node& call, const FusedAttention& attention,
                       SharedValues& shared, TrialModels& trials, const OrtLoweringOptions& options) {
  return AttentionLowering(model, graph, call, attention, shared, trials, options).Run();
}

}  // namespace fusionopt::passes::ort_lowering
