// commute-transposes (O1): its rewrite, conditions and limits are in commute_transposes.h.
#include "passes/layout/commute_transposes.h"

#include <algorithm>
#include <cstring>

#include "ir/constant_value.h"
#include "ir/dtype.h"
#include "ir/op_class.h"
#include "ir/permutation.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"
#include "passes/util/shape_facts.h"

namespace fusionopt::passes {
namespace {

// The perm of a Transpose that keeps its last axis (rank >= 2), or nullopt.
std::optional<std::vector<int64_t>> LastAxisKeepingPerm(const Node& transpose) {
  const Attribute* perm = transpose.FindAttribute("perm");
  if (perm == nullptr || perm->kind != AttributeKind::kInts || perm->ints.size() < 2 || !IsPermutation(perm->ints)) {
    return std::nullopt;
  }
  const auto last = static_cast<int64_t>(perm->ints.size() - 1);
  if (perm->ints.back() != last) return std::nullopt;
  return perm->ints;
}

bool IsLayoutReader(const Use& use) {
  const Node& node = *use.node;
  if (!IsDefaultDomain(node) || use.input_index != 0) return false;
  const std::string& op = node.op_type();
  return op == "Reshape" || op == "Transpose" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten" ||
         op == "Gather" || op == "Split" || op == "Slice";
}

// Read by layout ops, and by Shape ops at most (which read no data).
bool ReadByLayoutOpsOnly(const Value& value) {
  auto shape_reader = [](const Use& use) { return IsDefaultOp(use.node, "Shape"); };
  return !value.is_graph_output() && std::any_of(value.uses().begin(), value.uses().end(), IsLayoutReader) &&
         std::all_of(value.uses().begin(), value.uses().end(),
                     [&](const Use& use) { return IsLayoutReader(use) || shape_reader(use); });
}

bool ProducedByLayoutOp(const Value& value) {
  const Node* producer = value.producer();
  if (producer == nullptr || !IsDefaultDomain(*producer)) return false;
  const std::string& op = producer->op_type();
  return op == "Reshape" || op == "Transpose" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten";
}

TensorPtr ConstantOf(const Value* value, const Model& model) {
  return value != nullptr ? ConstantValueOf(*value, InitializerRuleOf(model)) : nullptr;
}

// A constant that, added to a [..., N] tensor, varies along the last axis only.
bool IsLastAxisBias(const Value* value, const Model& model) {
  TensorPtr tensor = ConstantOf(value, model);
  if (tensor == nullptr) return false;
  const std::vector<int64_t>& dims = tensor->dims();
  return dims.size() <= 1 || std::all_of(dims.begin(), dims.end() - 1, [](int64_t dim) { return dim == 1; });
}

Value* NewValue(Graph& graph, const std::string& base, DataType dtype) {
  Value* value = graph.CreateValue(graph.UniqueName(base));
  value->type().dtype = dtype;
  return value;
}

Node* NewNode(Graph& graph, const char* op, const std::vector<Value*>& inputs, Value* output, const std::string& base) {
  return graph.CreateNode(op, "", inputs, {output}, UniqueNodeName(graph, base));
}


// ---- sinking -------------------------------------------------------------------------------

struct SinkMatch {
  Node* transpose = nullptr;
  std::vector<int64_t> perm;
  Node* matmul = nullptr;
  Node* bias_add = nullptr;  // optional
  std::vector<Node*> shape_readers;
};

std::optional<SinkMatch> MatchSink(Node& transpose, const Model& model) {
  SinkMatch match;
  match.transpose = &transpose;
  auto perm = LastAxisKeepingPerm(transpose);
  Value* transposed = transpose.output(0);
  if (!perm || transposed == nullptr || transposed->is_graph_output() || transpose.input(0) == nullptr) {
    return std::nullopt;
  }
  match.perm = *perm;
  for (const Use& use : transposed->uses()) {
    if (IsDefaultOp(use.node, "Shape") && use.node->graph() == transpose.graph()) {
      match.shape_readers.push_back(use.node);
    } else if (IsDefaultOp(use.node, "MatMul") && use.input_index == 0 && match.matmul == nullptr) {
      match.matmul = use.node;
    } else {
      return std::nullopt;
    }
  }
  if (match.matmul == nullptr || match.matmul->input(1) == nullptr) return std::nullopt;
  TensorPtr weight = ConstantOf(match.matmul->input(1), model);
  if (weight == nullptr || weight->dims().size() != 2 || match.matmul->input(1) == transposed) return std::nullopt;
  Value* product = match.matmul->output(0);
  if (product == nullptr || product->is_graph_output()) return std::nullopt;
  if (product->uses().size() == 1 && IsDefaultOp(product->uses().front().node, "Add")) {
    Node* add = product->uses().front().node;
    const Value* other = add->input(1 - static_cast<size_t>(product->uses().front().input_index));
    if (add->inputs().size() == 2 && other != product && IsLastAxisBias(other, model)) match.bias_add = add;
  }
  const Value& result = *(match.bias_add != nullptr ? match.bias_add : match.matmul)->output(0);
  if (!ReadByLayoutOpsOnly(result)) return std::nullopt;
  return match;
}

// Shape(Transpose(x, perm)){start, end} = Gather(Shape(x), perm[start:end]).
void RedirectShapeReader(Graph& graph, Node& shape, Value& input, const std::vector<int64_t>& perm) {
  const auto rank = static_cast<int64_t>(perm.size());
  auto clamp = [rank](int64_t axis) { return std::clamp(axis < 0 ? axis + rank : axis, int64_t{0}, rank); };
  const int64_t start = clamp(shape.GetInt("start", 0));
  const int64_t end = clamp(shape.GetInt("end", rank));
  std::vector<int64_t> picked;
  for (int64_t i = start; i < end; ++i) picked.push_back(perm[static_cast<size_t>(i)]);
  Value* full = NewValue(graph, input.name() + "_shape", DataType::kInt64);
  NewNode(graph, "Shape", {&input}, full, shape.name() + "_untransposed");
  Value* indices = AddInt64Initializer(graph, shape.name() + "_perm", picked);
  Node* gather = graph.CreateNode("Gather", "", {full, indices}, {nullptr}, UniqueNodeName(graph, shape.name() + "_gather"));
  graph.TransferProducer(shape.output(0), gather, 0);
  graph.RemoveNode(&shape);
}

void Sink(Graph& graph, const SinkMatch& match) {
  Value& input = *match.transpose->input(0);
  for (Node* shape : match.shape_readers) RedirectShapeReader(graph, *shape, input, match.perm);
  Node* last = match.bias_add != nullptr ? match.bias_add : match.matmul;
  Value* result = last->output(0);
  const DataType dtype = result->dtype();
  Value* product = NewValue(graph, match.matmul->output(0)->name() + "_untransposed", dtype);
  NewNode(graph, "MatMul", {&input, match.matmul->input(1)}, product, match.matmul->name());
  Value* unpermuted = product;
  if (match.bias_add != nullptr) {
    unpermuted = NewValue(graph, result->name() + "_untransposed", dtype);
    std::vector<Value*> operands = match.bias_add->inputs();
    std::replace(operands.begin(), operands.end(), match.matmul->output(0), product);
    NewNode(graph, "Add", operands, unpermuted, match.bias_add->name());
  }
  Node* moved = graph.CreateNode("Transpose", "", {unpermuted}, {nullptr}, UniqueNodeName(graph, match.transpose->name()));
  moved->SetAttribute(Attribute::Ints("perm", match.perm));
  graph.DetachProducer(result);
  graph.TransferProducer(result, moved, 0);
  if (match.bias_add != nullptr) graph.RemoveNode(match.bias_add);
  graph.RemoveNode(match.matmul);
  graph.RemoveNode(match.transpose);
}

// ---- hoisting ------------------------------------------------------------------------------

struct HoistMatch {
  Node* transpose = nullptr;
  std::vector<int64_t> perm;
  Node* reshape = nullptr;
  Node* contraction = nullptr;  // Gemm or MatMul
  std::vector<int64_t> leading_shape;  // the Reshape's output dims but the last, then K
};

// The Reshape shape operand for `dims` with the last replaced by `last`: known sizes, and -1
// for at most one unknown dim.
std::optional<std::vector<int64_t>> SpelledShape(const Shape& dims, int64_t last) {
  std::vector<int64_t> operand;
  int unknown = 0;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    if (dims[i].is_known() && dims[i].value == 0) return std::nullopt;
    if (!dims[i].is_known() && ++unknown > 1) return std::nullopt;
    operand.push_back(dims[i].is_known() ? dims[i].value : -1);
  }
  operand.push_back(last);
  return operand;
}

bool IsPlainGemm(const Node& gemm, const Model& model) {
  if (gemm.GetInt("transA", 0) != 0 || gemm.GetFloat("alpha", 1.0f) != 1.0f || gemm.GetFloat("beta", 1.0f) != 1.0f) {
    return false;
  }
  TensorPtr weight = ConstantOf(gemm.input(1), model);
  if (weight == nullptr || weight->dims().size() != 2) return false;
  return gemm.input(2) == nullptr || IsLastAxisBias(gemm.input(2), model);
}

std::optional<HoistMatch> MatchHoist(Node& transpose, const Graph& graph, const Model& model) {
  HoistMatch match;
  match.transpose = &transpose;
  auto perm = LastAxisKeepingPerm(transpose);
  Value* reshaped = transpose.input(0);
  if (!perm || reshaped == nullptr || !IsDefaultOp(reshaped->producer(), "Reshape") || !OnlyReadBy(*reshaped, transpose)) {
    return std::nullopt;
  }
  // Already next to layout ops: moving it would only trade them for the ones before.
  if (ReadByLayoutOpsOnly(*transpose.output(0))) return std::nullopt;
  match.perm = *perm;
  match.reshape = reshaped->producer();
  Value* product = match.reshape->input(0);
  if (product == nullptr || product->producer() == nullptr || product->producer()->graph() != &graph ||
      !OnlyReadBy(*product, *match.reshape)) {
    return std::nullopt;
  }
  Node* contraction = product->producer();
  const bool gemm = IsDefaultOp(contraction, "Gemm") && IsPlainGemm(*contraction, model);
  const bool matmul = IsDefaultOp(contraction, "MatMul") && ConstantOf(contraction->input(1), model) != nullptr &&
                      ConstantOf(contraction->input(1), model)->dims().size() == 2;
  if (!gemm && !matmul) return std::nullopt;
  match.contraction = contraction;
  const Value* activations = contraction->input(0);
  if (activations == nullptr || !ProducedByLayoutOp(*activations) || !activations->shape() ||
      activations->shape()->size() != 2 || !(*activations->shape())[1].is_known()) {
    return std::nullopt;
  }
  if (!product->shape() || product->shape()->size() != 2 || !reshaped->shape() ||
      reshaped->shape()->size() != match.perm.size() ||
      !ProvablySameDim(reshaped->shape()->back(), (*product->shape())[1])) {
    return std::nullopt;
  }
  auto leading = SpelledShape(*reshaped->shape(), (*activations->shape())[1].value);
  if (!leading) return std::nullopt;
  match.leading_shape = std::move(*leading);
  return match;
}

// A rank-2 constant transposed ([K,N] from Gemm's transB [N,K]).
TensorPtr TransposedMatrix(const Tensor& matrix) {
  const auto rows = static_cast<size_t>(matrix.dims()[0]), columns = static_cast<size_t>(matrix.dims()[1]);
  const size_t element = matrix.nbytes() / std::max<size_t>(rows * columns, 1);
  std::vector<uint8_t> bytes(matrix.nbytes());
  const uint8_t* source = matrix.bytes().data();
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < columns; ++c) {
      std::memcpy(&bytes[(c * rows + r) * element], &source[(r * columns + c) * element], element);
    }
  }
  return std::make_shared<Tensor>(Tensor::Owned(matrix.dtype(), {matrix.dims()[1], matrix.dims()[0]}, std::move(bytes)));
}

void Hoist(Graph& graph, const HoistMatch& match, const Model& model) {
  Node& contraction = *match.contraction;
  Value& activations = *contraction.input(0);
  Value* result = match.transpose->output(0);
  const DataType dtype = result->dtype();
  // Reshaped from before the view that flattened them (the head merge), whose dims still name
  // the symbols the -1 stands for: shape inference then proves the dims the next rewrites need.
  Value* source = &activations;
  if (IsDefaultOp(activations.producer(), "Reshape") && activations.producer()->input(0) != nullptr) {
    source = activations.producer()->input(0);
  }
  Value* split = NewValue(graph, activations.name() + "_unflattened", activations.dtype());
  NewNode(graph, "Reshape", {source, AddInt64Initializer(graph, match.reshape->name() + "_shape", match.leading_shape)}, split,
          match.reshape->name());
  Value* permuted = NewValue(graph, activations.name() + "_transposed", activations.dtype());
  NewNode(graph, "Transpose", {split}, permuted, match.transpose->name())->SetAttribute(Attribute::Ints("perm", match.perm));
  Value* weight = contraction.input(1);
  if (contraction.op_type() == "Gemm" && contraction.GetInt("transB", 0) != 0) {
    weight = AddInitializer(graph, weight->name() + "_transposed", TransposedMatrix(*ConstantOf(weight, model)));
  }
  Value* bias = contraction.op_type() == "Gemm" ? contraction.input(2) : nullptr;
  Node* matmul = graph.CreateNode("MatMul", "", {permuted, weight}, {nullptr}, UniqueNodeName(graph, contraction.name()));
  Node* last = matmul;
  if (bias != nullptr) {
    Value* product = NewValue(graph, result->name() + "_product", dtype);
    graph.TransferProducer(product, matmul, 0);
    last = graph.CreateNode("Add", "", {product, bias}, {nullptr}, UniqueNodeName(graph, contraction.name() + "_bias"));
  }
  std::vector<Value*> operands = {contraction.input(1), match.reshape->input(1), &activations};
  if (bias != nullptr) operands.push_back(bias);
  graph.DetachProducer(result);
  graph.TransferProducer(result, last, 0);
  graph.RemoveNode(match.transpose);
  graph.RemoveNode(match.reshape);
  graph.RemoveNode(&contraction);
  RemoveIfUnused(std::move(operands));
}

}  // namespace

Result<bool> CommuteTransposes::RunOnGraph(Graph& graph, PassContext& context) {
  const Model& model = context.model();
  std::vector<Node*> transposes;
  for (const auto& node : graph.nodes()) {
    if (IsDefaultOp(node.get(), "Transpose")) transposes.push_back(node.get());
  }
  bool changed = false;
  for (Node* transpose : transposes) {
    if (auto sink = MatchSink(*transpose, model)) {
      Sink(graph, *sink);
      context.Count("transposes_sunk");
    } else if (auto hoist = MatchHoist(*transpose, graph, model)) {
      Hoist(graph, *hoist, model);
      context.Count("transposes_hoisted");
    } else {
      continue;
    }
    context.Matched();
    changed = true;
  }
  if (changed) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
