// fold-constants (O1): its rewrite, conditions and limits are in fold_constants.h.
#include "passes/fold/fold_constants.h"

#include <algorithm>
#include <set>

#include "ir/constant_value.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"
#include "passes/fold/util/constant_evaluation.h"
#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

constexpr int kMaxSweeps = 4;
constexpr int64_t kDefaultMaxBytes = 1 << 20;
constexpr int64_t kDefaultMaxDequantizeElements = 1;

// What the pass does with a node that computes a constant: fold it into these tensors (one per
// output), or leave it, saying why. A node that computes no constant gets no decision.
using Decision = Decided<std::vector<TensorPtr>>;

TensorPtr Int64Tensor(std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  return std::make_shared<Tensor>(Tensor::FromValues<int64_t>(DataType::kInt64, std::move(dims), values));
}

// The dims a Shape node returns (its start/end window applied), each known or not; nullopt
// when the rank of its input is unknown.
std::optional<std::vector<Dim>> ShapeResult(const Node& shape) {
  const Value* data = shape.input(0);
  if (data == nullptr || !data->shape()) return std::nullopt;
  const Shape& dims = *data->shape();
  auto rank = static_cast<int64_t>(dims.size());
  auto clamp = [rank](int64_t position) { return std::clamp(position < 0 ? position + rank : position, int64_t{0}, rank); };
  int64_t start = clamp(shape.GetInt("start", 0));
  int64_t end = std::max(start, clamp(shape.GetInt("end", rank)));
  return std::vector<Dim>(dims.begin() + start, dims.begin() + end);
}

TensorPtr KnownDimsTensor(const std::vector<Dim>& dims) {
  std::vector<int64_t> values;
  for (const Dim& dim : dims) {
    if (!dim.is_known()) return nullptr;
    values.push_back(dim.value);
  }
  return Int64Tensor({static_cast<int64_t>(values.size())}, values);
}

// Gather(Shape(x), indices) picking only dims inference knows, though others are symbolic.
TensorPtr GatherOfKnownDims(const Node& gather, const Model& model) {
  const Value* data = gather.input(0);
  const Value* indices_value = gather.input(1);
  if (data == nullptr || indices_value == nullptr || data->producer() == nullptr) return nullptr;
  const Node& shape = *data->producer();
  if (shape.op_type() != "Shape" || !IsDefaultDomain(shape)) return nullptr;
  std::optional<std::vector<Dim>> dims = ShapeResult(shape);
  TensorPtr indices = ConstantValueOf(*indices_value, InitializerRuleOf(model));
  if (!dims || indices == nullptr) return nullptr;
  int64_t axis = gather.GetInt("axis", 0);
  if (axis != 0 && axis != -1) return nullptr;
  std::optional<std::vector<int64_t>> positions = indices->AsInt64s();
  if (!positions || (indices->dtype() != DataType::kInt64 && indices->dtype() != DataType::kInt32)) return nullptr;
  auto count = static_cast<int64_t>(dims->size());
  std::vector<int64_t> values;
  for (int64_t position : *positions) {
    if (position < -count || position >= count) return nullptr;
    const Dim& dim = (*dims)[static_cast<size_t>(position < 0 ? position + count : position)];
    if (!dim.is_known()) return nullptr;
    values.push_back(dim.value);
  }
  return Int64Tensor(indices->dims(), values);
}

// Slice(Shape(x), start, end) (one axis, step 1) picking only dims inference knows: the
// exporters' Shape(k)[-1:] and [:-2] (torchvision's 1/√D, the dynamo exporter's views).
TensorPtr SliceOfKnownDims(const Node& slice, const Model& model) {
  const Value* data = slice.input(0);
  if (data == nullptr || data->producer() == nullptr || slice.inputs().size() < 3) return nullptr;
  const Node& shape = *data->producer();
  if (shape.op_type() != "Shape" || !IsDefaultDomain(shape)) return nullptr;
  std::optional<std::vector<Dim>> dims = ShapeResult(shape);
  if (!dims) return nullptr;
  auto single = [&](size_t input) -> std::optional<int64_t> {
    if (input >= slice.inputs().size() || slice.input(input) == nullptr) return std::nullopt;
    TensorPtr tensor = ConstantValueOf(*slice.input(input), InitializerRuleOf(model));
    std::optional<std::vector<int64_t>> values = tensor ? tensor->AsInt64s() : std::nullopt;
    if (!values || values->size() != 1) return std::nullopt;
    return values->front();
  };
  std::optional<int64_t> start = single(1), end = single(2);
  if (!start || !end) return nullptr;
  if (slice.inputs().size() > 3 && slice.input(3) != nullptr && single(3) != 0 && single(3) != -1) return nullptr;
  if (slice.inputs().size() > 4 && slice.input(4) != nullptr && single(4) != 1) return nullptr;
  const auto count = static_cast<int64_t>(dims->size());
  auto clamp = [count](int64_t position) {
    if (position < 0) position += count;
    return std::clamp<int64_t>(position, 0, count);
  };
  const int64_t first = clamp(*start), last = std::max(first, clamp(*end));
  return KnownDimsTensor(std::vector<Dim>(dims->begin() + first, dims->begin() + last));
}

// The node's single result when it depends only on dims inference knows; null otherwise.
TensorPtr StaticShapeResult(const Node& node, const Model& model) {
  if (node.op_type() == "Shape") {
    std::optional<std::vector<Dim>> dims = ShapeResult(node);
    return dims ? KnownDimsTensor(*dims) : nullptr;
  }
  if (node.op_type() == "Size") {
    std::optional<std::vector<int64_t>> dims = node.input(0) ? KnownDims(*node.input(0)) : std::nullopt;
    if (!dims) return nullptr;
    int64_t size = 1;
    for (int64_t dim : *dims) size *= dim;
    return Int64Tensor({}, {size});
  }
  if (node.op_type() == "Gather") return GatherOfKnownDims(node, model);
  if (node.op_type() == "Slice") return SliceOfKnownDims(node, model);
  return nullptr;
}

// Dead nodes are eliminate-dead-code's business, not a fold.
bool AnyOutputRead(const Node& node) {
  return std::any_of(node.outputs().begin(), node.outputs().end(), [](const Value* output) {
    return output != nullptr && (!output->uses().empty() || output->is_graph_output());
  });
}

bool WritesGraphOutput(const Node& node) {
  return std::any_of(node.outputs().begin(), node.outputs().end(),
                     [](const Value* output) { return output != nullptr && output->is_graph_output(); });
}

class Folder {
 public:
  Folder(Model& model, PassContext& context, int64_t max_bytes, int64_t max_dequantize_elements)
      : model_(model), context_(context), max_bytes_(max_bytes), max_dequantize_elements_(max_dequantize_elements) {}

  bool FoldGraph(Graph& graph) {
    std::vector<Node*> order;
    for (const auto& node : graph.nodes()) order.push_back(node.get());
    bool changed = false;
    // Folding removes only the folded node and producers before it, never a later node.
    for (Node* node : order) {
      std::optional<Decision> decision = Decide(*node);
      if (!decision) continue;
      if (*decision) {
        Apply(graph, *node, **decision);
        changed = true;
      } else if (reported_.insert(node).second) {
        context_.Rejected(*node, decision->why_not());
      }
    }
    return changed;
  }

 private:
  std::optional<Decision> Decide(const Node& node) const {
    if (!IsDefaultDomain(node) || ConstantNodeValue(node) != nullptr || !AnyOutputRead(node)) return std::nullopt;
    TensorPtr shape_result = StaticShapeResult(node, model_);
    std::vector<TensorPtr> inputs;
    bool all_constant = true;
    for (const Value* input : node.inputs()) {
      inputs.push_back(input != nullptr ? ConstantValueOf(*input, InitializerRuleOf(model_)) : nullptr);
      if (input != nullptr && inputs.back() == nullptr) all_constant = false;
    }
    if (shape_result == nullptr && !all_constant) return std::nullopt;
    if (WritesGraphOutput(node)) return WhyNot("an output is a graph output");
    if (shape_result != nullptr) return Decision(std::vector<TensorPtr>{shape_result});
    if (!node.Subgraphs().empty()) return WhyNot("op with subgraphs");
    if (!IsPure(node)) return WhyNot("not a pure op (random, opaque or training mode)");
    // A quantized weight's dequantization is how the model stores it: folded, the weight would
    // be float (four times the bytes) and the integer kernels could not read it. A scalar's
    // is not a weight: folded, the elementwise program around it reads only 8-bit inputs and
    // can run as a table.
    if (node.op_type() == "DequantizeLinear" && !IsSmallDequantize(node)) {
      return WhyNot("a dequantized constant stays quantized");
    }
    return Evaluate(node, inputs);
  }

  bool IsSmallDequantize(const Node& node) const {
    std::optional<std::vector<int64_t>> dims = node.output(0) ? KnownDims(*node.output(0)) : std::nullopt;
    if (!dims) return false;
    int64_t count = 1;
    for (int64_t dim : *dims) count *= dim;
    return count <= max_dequantize_elements_;
  }

  Decision Evaluate(const Node& node, const std::vector<TensorPtr>& inputs) const {
    if (!RuntimeHasKernel(node, model_)) return WhyNot("no CPU kernel for the op at this opset");
    uint64_t input_bytes = 0;
    std::set<const Tensor*> counted;
    for (const TensorPtr& input : inputs) {
      if (input == nullptr) continue;
      if (input->dtype() == DataType::kString) return WhyNot("string tensors");
      if (counted.insert(input.get()).second) input_bytes += input->nbytes();
    }
    uint64_t output_bytes = 0;
    for (const Value* output : node.outputs()) {
      if (output == nullptr) continue;
      if (output->dtype() == DataType::kString) return WhyNot("string tensors");
      std::optional<std::vector<int64_t>> dims = KnownDims(*output);
      if (!dims || output->dtype() == DataType::kUndefined) return WhyNot("result shape not static");
      uint64_t count = 1;
      for (int64_t dim : *dims) count *= static_cast<uint64_t>(dim);
      output_bytes += ByteSizeOf(output->dtype(), count);
    }
    if (output_bytes > static_cast<uint64_t>(max_bytes_) && output_bytes > input_bytes) {
      return WhyNot("result larger than max-bytes");
    }
    Result<std::vector<TensorPtr>> results = EvaluateNode(node, model_, inputs);
    if (!results.ok()) return WhyNot("the CPU runtime cannot evaluate it");
    for (size_t i = 0; i < node.outputs().size(); ++i) {
      const Value* output = node.output(i);
      if (output == nullptr) continue;
      const Tensor& result = *(*results)[i];
      if (result.dtype() != output->dtype() || result.dims() != *KnownDims(*output)) {
        return WhyNot("evaluated type differs from the inferred one");
      }
    }
    return Decision(std::move(results).value());
  }

  void Apply(Graph& graph, Node& node, const std::vector<TensorPtr>& tensors) {
    for (size_t i = 0; i < node.outputs().size(); ++i) {
      Value* output = node.output(i);
      if (output == nullptr || output->uses().empty()) continue;
      ReplaceByInitializer(graph, *output, tensors[i]);
      context_.Count("initializers_created");
    }
    std::vector<Value*> operands(node.inputs().begin(), node.inputs().end());
    graph.RemoveNode(&node);
    RemoveIfUnused(std::move(operands));
    context_.Matched();
    context_.Count("nodes_folded");
  }

  Model& model_;
  PassContext& context_;
  int64_t max_bytes_;
  int64_t max_dequantize_elements_;
  std::set<const Node*> reported_;  // a node left alone is reported once, not once per sweep
};

}  // namespace

std::vector<PassOptionInfo> FoldConstants::options() const {
  return {{"max-bytes", std::to_string(kDefaultMaxBytes),
           "largest folded result (bytes) that may be bigger than the constants it is computed from"},
          {"max-dequantize-elements", std::to_string(kDefaultMaxDequantizeElements),
           "largest constant DequantizeLinear result (elements) folded to float; larger ones stay quantized"}};
}

Result<bool> FoldConstants::Run(Model& model, PassContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t max_bytes, context.IntOption("max-bytes"));
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t max_dequantize_elements, context.IntOption("max-dequantize-elements"));
  if (max_bytes < 0) return UsageError("option fold-constants.max-bytes must not be negative");
  if (max_dequantize_elements < 0) {
    return UsageError("option fold-constants.max-dequantize-elements must not be negative");
  }
  Folder folder(model, context, max_bytes, max_dequantize_elements);
  bool changed = false;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    std::vector<Graph*> graphs = GraphsInnermostFirst(*model.graph);
    bool swept_change = false;
    for (auto it = graphs.rbegin(); it != graphs.rend(); ++it) swept_change = folder.FoldGraph(**it) || swept_change;
    if (!swept_change) break;
    changed = true;
    InferShapes(model);
  }
  return changed;
}

}  // namespace fusionopt::passes
