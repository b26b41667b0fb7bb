// lower-for-ort, norms: a fused LayerNorm or RMSNorm as ORT's Skip(Simplified)LayerNormalization
// (its residual Add inside the group, or at the end of the fused contraction that feeds it; a
// standard LayerNormalization op after such a contraction, or after adding [1,S,H] position
// embeddings or a residual of its own shape, too), or
// an RMSNorm with no residual as the standard ops ORT's own SimplifiedLayerNormFusion matches;
// see lower_for_ort.h for the rewrite and its limits.
#include <algorithm>

#include "ir/op_class.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/conversion/ort/support.h"
#include "patterns/composite/composite.h"

namespace fusionopt::passes::ort_lowering {
namespace {

// A fused contraction whose last op adds the residual stream, the norm's only way to see its
// skip input once -O3 has moved the residual Add into the MatMul's epilogue:
//   body: %p = MatMul(%a, %W) [; %p = Add(%p, %bias)]; %sum = Add(%p, %residual)
// with W a 2-D and bias a 1-D initializer, and the sum as wide as the residual (no broadcast).
struct ResidualContraction {
  Node* call = nullptr;
  Value* a = nullptr;
  Value* weight = nullptr;
  Value* bias = nullptr;  // nullptr: no bias Add
  Value* residual = nullptr;
};

std::optional<ResidualContraction> ResidualContractionOf(const Model& model, const Value* sum) {
  Node* call = sum != nullptr ? sum->producer() : nullptr;
  if (call == nullptr || call->domain() != kFusionDomain || call->outputs().size() != 1) return std::nullopt;
  const Function* function = model.FindFunction(call->domain(), call->op_type());
  if (function == nullptr || function->body == nullptr) return std::nullopt;
  std::vector<const Node*> body;
  for (const auto& node : function->body->nodes()) body.push_back(node.get());
  if (body.size() != 2 && body.size() != 3) return std::nullopt;
  const Node& matmul = *body.front();
  if (matmul.op_type() != "MatMul" || !IsDefaultDomain(matmul)) return std::nullopt;
  ResidualContraction found{call};
  found.a = ArgumentOfFormal(*function, *call, matmul.input(0));
  found.weight = ArgumentOfFormal(*function, *call, matmul.input(1));
  const Value* running = matmul.output(0);
  if (body.size() == 3) {
    const Value* bias_formal = OtherAddend(*body[1], running);
    found.bias = bias_formal != nullptr ? ArgumentOfFormal(*function, *call, bias_formal) : nullptr;
    if (found.bias == nullptr || found.bias->initializer() == nullptr || found.bias->initializer()->dims().size() != 1) {
      return std::nullopt;
    }
    running = body[1]->output(0);
  }
  const Value* residual_formal = OtherAddend(*body.back(), running);
  found.residual = residual_formal != nullptr ? ArgumentOfFormal(*function, *call, residual_formal) : nullptr;
  if (found.residual == nullptr || found.residual->initializer() != nullptr) return std::nullopt;
  if (found.weight == nullptr || found.weight->initializer() == nullptr || found.weight->initializer()->dims().size() != 2) {
    return std::nullopt;
  }
  // The MatMul's own result must already be the sum's [B,S,N]: a rank-3 input sharing B and S.
  if (!IsKernelFloat(sum) || found.a == nullptr || found.a->dtype() != sum->dtype() || !found.a->shape() || found.a->shape()->size() != 3 ||
      !sum->shape() || sum->shape()->size() != 3 || !found.residual->shape() || *found.residual->shape() != *sum->shape()) {
    return std::nullopt;
  }
  for (size_t axis : {0, 1}) {
    if (!SameDim((*found.a->shape())[axis], (*sum->shape())[axis])) return std::nullopt;
  }
  const Dim channels = (*sum->shape())[2];
  if (!SameDim(Dim::Known(found.weight->initializer()->dims()[1]), channels)) return std::nullopt;
  // The kernel's bias input is one value per channel: [N], not a [1] that broadcasts.
  if (found.bias != nullptr && !SameDim(Dim::Known(found.bias->initializer()->dims()[0]), channels)) return std::nullopt;
  return found;
}

// Whether `skip` is [1,S,H] against `x`'s [B,S,H]: the one broadcast ORT's kernel takes (a
// ViT's or CLIP's position embeddings added to every image's tokens).
bool SkipBroadcastsOverBatch(const Value* x, const Value* skip) {
  if (!x->shape() || !skip->shape() || x->shape()->size() != 3 || skip->shape()->size() != 3) return false;
  const Shape& big = *x->shape();
  const Shape& small = *skip->shape();
  return small[0].is_known() && small[0].value == 1 && SameDim(small[1], big[1]) && SameDim(small[2], big[2]);
}

// The checks every Skip*Normalization shares: float32 or float16 [B,S,H] input (float16 not on
// the CPU EP, where the ops are faster) and skip of one
// shape (or, with `batch_broadcast`, a [1,S,H] skip), a norm over the last axis, 1-D gamma and beta.
WhyNot WhyNotSkipNorm(OrtProvider provider, const FusedComposite& norm, const Value* x, const Value* skip,
                           const Value* gamma, const Value* beta, bool batch_broadcast = false) {
  if (WhyNot why = WhyNotKernelFloat(x)) return why;
  if (WhyNot why = WhyNotSkipNormKernel(provider, x->dtype())) return why;
  if (skip == nullptr || skip->dtype() != x->dtype() || gamma == nullptr) return "the residual's type is not the input's, or no gamma";
  const bool same = x->shape() && skip->shape() && x->shape()->size() == 3 && *x->shape() == *skip->shape();
  if (!same && !(batch_broadcast && SkipBroadcastsOverBatch(x, skip))) {
    return "the input and the residual are not provably one [B,S,H] shape";
  }
  const std::optional<int64_t> axis = NormalizedAxis(norm.axis, 3);
  if (!axis || *axis != 2) return "the norm is not over the last axis";
  if (!gamma->shape() || gamma->shape()->size() != 1 || (beta != nullptr && (!beta->shape() || beta->shape()->size() != 1))) {
    return "gamma or beta is not 1-D";
  }
  return {};
}

// Skip(Simplified)LayerNormalization(x, skip, gamma[, beta][, bias]) in `call`'s place: output 0
// the norm's result, output 3 the residual sum x + skip [+ bias] (when `sum` is given).
Node* WriteSkipNorm(Graph& graph, Node& call, const FusedComposite& norm, std::vector<Value*> operands, Value* beta,
                    Value* bias, Value* sum) {
  const bool layer = norm.kind == CompositeKind::kLayerNorm;
  if (layer && (beta != nullptr || bias != nullptr)) operands.push_back(beta);
  if (bias != nullptr) operands.push_back(bias);
  const std::string op = layer ? "SkipLayerNormalization" : "SkipSimplifiedLayerNormalization";
  Node* lowered = graph.CreateNode(op, kOrtDomain, operands, std::vector<Value*>(4, nullptr),
                                   graph.UniqueNodeName(call.name() + "/" + op));
  lowered->SetAttribute(Attribute::Float("epsilon", static_cast<float>(norm.epsilon)));
  graph.MoveBefore(lowered, &call);
  graph.TransferProducer(call.output(static_cast<size_t>(norm.result_output)), lowered, 0);
  if (sum != nullptr) graph.TransferProducer(sum, lowered, 3);
  return lowered;
}

// A norm whose input is the residual sum a fused contraction computes: the contraction keeps
// its MatMul, and the bias and residual Adds move into the norm's kernel, which also returns
// the sum for the stream's other readers.
Outcome LowerAfterContraction(Graph& graph, Node& call, const FusedComposite& norm, const ResidualContraction& producer,
                              Value* gamma, Value* beta, OrtProvider provider) {
  Value* sum = producer.call->output(0);
  if (WhyNot why = WhyNotSkipNorm(provider, norm, sum, producer.residual, gamma, beta)) return Kept(why);
  Value* product = graph.CreateValue(graph.UniqueName(producer.call->name() + "_product"));
  product->type().dtype = sum->dtype();
  product->type().shape = sum->shape();
  Node* matmul = graph.CreateNode("MatMul", "", {producer.a, producer.weight}, {product},
                                  graph.UniqueNodeName(producer.call->name() + "/MatMul"));
  graph.MoveBefore(matmul, &call);
  const std::string absorbed = producer.call->name();
  Node* lowered = WriteSkipNorm(graph, call, norm, {product, producer.residual, gamma}, beta, producer.bias, sum);
  graph.RemoveNode(&call);
  graph.RemoveNode(producer.call);  // readers of the sum placed before the norm: LowerForOrt's sort moves them
  return Written(std::string(kOrtDomain) + "::" + lowered->op_type(), absorbed);
}

// x / Sqrt(ReduceMean(Pow(x, 2)) + eps) * gamma over the last axis: the spelling ORT's
// SimplifiedLayerNormFusion turns into one SimplifiedLayerNormalization kernel (it does not
// match the Reciprocal form transformers writes, nor this group inlined as written).
Outcome WriteRmsNormForOrtFusion(Model& model, Graph& graph, Node& call, const FusedComposite& norm, Value* x, Value* gamma) {
  if (gamma == nullptr) return Kept("no gamma inside the group (an fp16 export scales after casting back)");
  if (!IsFloat32(x) || !IsFloat32(gamma)) return Kept("not float32 (the spelling ORT fuses is written with float32 scalars)");
  const std::optional<int64_t> axis = x->shape() ? NormalizedAxis(norm.axis, static_cast<int64_t>(x->shape()->size())) : std::nullopt;
  if (!axis || *axis != static_cast<int64_t>(x->shape()->size()) - 1) return Kept("the norm is not over the last axis");
  auto scalar = [&](float value, const char* stem) {
    return AddInitializer(graph, call.name() + stem,
                          std::make_shared<const Tensor>(Tensor::FromValues<float>(DataType::kFloat, {}, {value})));
  };
  auto op = [&](const char* type, std::vector<Value*> inputs) {
    return WriteOpBefore(graph, call, type, inputs, call.name() + "_" + type, DataType::kFloat);
  };
  Value* squares = op("Pow", {x, scalar(2.0f, "_two")})->output(0);
  Node* mean = model.OpsetFor("").value_or(0) >= 18 ? op("ReduceMean", {squares, AddInt64Initializer(graph, call.name() + "_axes", {-1})})
                                                     : op("ReduceMean", {squares});
  if (mean->inputs().size() == 1) mean->SetAttribute(Attribute::Ints("axes", {-1}));
  mean->SetAttribute(Attribute::Int("keepdims", 1));
  Value* deviation = op("Sqrt", {op("Add", {mean->output(0), scalar(static_cast<float>(norm.epsilon), "_epsilon")})->output(0)})->output(0);
  Value* normalized = op("Div", {x, deviation})->output(0);
  Node* scaled = graph.CreateNode("Mul", "", {normalized, gamma}, {nullptr}, graph.UniqueNodeName(call.name() + "/Mul"));
  graph.MoveBefore(scaled, &call);
  graph.TransferProducer(call.output(static_cast<size_t>(norm.result_output)), scaled, 0);
  graph.RemoveNode(&call);
  return Written("SimplifiedLayerNormalization (standard ops ORT fuses)");
}

}  // namespace

Outcome LowerNorm(Model& model, Graph& graph, Node& call, const FusedComposite& norm, OrtProvider provider) {
  Value* x = ArgumentFor(graph, call, norm.x.input, norm.x.constant, call.name() + "_x");
  Value* gamma = ArgumentFor(graph, call, norm.gamma.input, norm.gamma.constant, call.name() + "_gamma");
  Value* beta = ArgumentFor(graph, call, norm.beta.input, norm.beta.constant, call.name() + "_beta");
  if (norm.residual.present()) {
    Value* skip = ArgumentFor(graph, call, norm.residual.input, norm.residual.constant, call.name() + "_skip");
    if (WhyNot why = WhyNotSkipNorm(provider, norm, x, skip, gamma, beta)) return Kept(why);
    Value* sum = norm.residual_sum_output >= 0 ? call.output(static_cast<size_t>(norm.residual_sum_output)) : nullptr;
    Node* lowered = WriteSkipNorm(graph, call, norm, {x, skip, gamma}, beta, nullptr, sum);
    graph.RemoveNode(&call);
    return Written(std::string(kOrtDomain) + "::" + lowered->op_type());
  }
  if (std::optional<ResidualContraction> producer = ResidualContractionOf(model, x)) {
    return LowerAfterContraction(graph, call, norm, *producer, gamma, beta, provider);
  }
  if (norm.kind == CompositeKind::kRmsNorm) return WriteRmsNormForOrtFusion(model, graph, call, norm, x, gamma);
  return Kept("a LayerNorm without a residual (ORT fuses it from the inlined ops)");
}

// The prologue Add(x, skip) in the kernel: skip of x's own [B,S,H] shape, or [1,S,H] against
// x's [B,S,H] (position embeddings). ORT's SkipLayerNormFusion takes the Add in only where its
// own shape inference proves the shapes equal, which the exporters' run-time Reshape targets
// defeat (GPT-2's Conv1D puts its rows back through one); ours proves them. The sum, where the
// residual stream reads on, is the kernel's output 3.
Outcome LowerAfterResidualAdd(Graph& graph, Node& layer_norm, const FusedComposite& norm, const CompositeMatch& match,
                              OrtProvider provider) {
  WhyNot why;
  for (auto [x, skip] : {std::pair{match.x, match.residual}, {match.residual, match.x}}) {
    why = WhyNotSkipNorm(provider, norm, x, skip, match.gamma, match.beta, /*batch_broadcast=*/true);
    if (why) continue;
    Value* sum = match.residual_sum;
    const bool sum_read_on = sum->uses().size() > 1 || sum->is_graph_output();
    Node* lowered = WriteSkipNorm(graph, layer_norm, norm, {x, skip, match.gamma}, match.beta, nullptr,
                                  sum_read_on ? sum : nullptr);
    graph.RemoveNode(&layer_norm);
    graph.RemoveNode(match.residual_add);
    return Written(std::string(kOrtDomain) + "::" + lowered->op_type());
  }
  return Kept(why);
}

Outcome LowerStandardLayerNorm(Model& model, Graph& graph, Node& layer_norm, OrtProvider provider) {
  if (layer_norm.op_type() != "LayerNormalization" || !IsDefaultDomain(layer_norm)) return {};
  const CompositeSearch search = MatchCompositeAt(layer_norm, model.OpsetFor("").value_or(0));
  if (!search.match) {
    return !search.near_miss ? Outcome{} : Kept(search.near_miss);  // e.g. its statistics are read
  }
  const CompositeMatch& match = *search.match;
  FusedComposite norm;
  norm.kind = CompositeKind::kLayerNorm;
  norm.standard_op = true;
  norm.axis = match.axis;
  norm.epsilon = match.epsilon;
  if (match.residual_add != nullptr) return LowerAfterResidualAdd(graph, layer_norm, norm, match, provider);
  if (std::optional<ResidualContraction> producer = ResidualContractionOf(model, match.x)) {
    return LowerAfterContraction(graph, layer_norm, norm, *producer, match.gamma, match.beta, provider);
  }
  return {};  // nothing before it to take in
}

}  // namespace fusionopt::passes::ort_lowering
