// The shape inference driver: walks graphs in order, dispatches each node to its rule and
// merges the proposals into the values (see shape_inference.h for the merge contract).
#include "shape_inference/shape_inference.h"

#include "shape_inference/context.h"
#include "ir/constant_value.h"

namespace fusionopt {
namespace shape_inference {
namespace {

// Used when a model lacks an opset import for the default domain (invalid, but inference
// never fails): the newest version the rules know.
constexpr int64_t kNewestDefaultOpset = 23;

std::string CanonicalDomain(std::string_view domain) {
  return domain == "ai.onnx" ? std::string() : std::string(domain);
}

std::string UnsupportedKey(const Node& node, std::optional<int64_t> opset) {
  std::string domain = node.domain().empty() ? "ai.onnx" : node.domain();
  return domain + "::" + node.op_type() + "@" + (opset ? std::to_string(*opset) : "?");
}

std::string DescribeDtype(DataType dtype) { return std::string(NameOf(dtype)); }

std::string DescribeDim(const Dim& dim) {
  if (dim.is_known()) return std::to_string(dim.value);
  return dim.is_symbolic() ? "'" + dim.symbol + "'" : "?";
}

// ONNX's shape inference names each dim it cannot relate to the inputs "unk__N"; quantizers and
// onnx.shape_inference write these into value_info. Such a name says only "some size", so the
// model's own symbols (or an expression of them, "4*batch") refine it; keeping the placeholder
// would hide from every pass that, say, a Reshape's output is [batch,4,8,sequence].
bool IsGeneratedPlaceholder(const Dim& dim) {
  return dim.is_symbolic() && dim.symbol.starts_with("unk__");
}

bool RefinesPlaceholder(const Dim& declared, const Dim& inferred) {
  return IsGeneratedPlaceholder(declared) && inferred.is_symbolic() &&
         !IsGeneratedPlaceholder(inferred);
}

}  // namespace

// ---------------------------------------------------------------- registry

void RuleRegistry::AddTypeRule(std::string_view domain,
                               std::initializer_list<std::string_view> op_types, Rule rule) {
  for (std::string_view op_type : op_types) {
    entries_[{CanonicalDomain(domain), std::string(op_type)}].type = rule;
  }
}

void RuleRegistry::AddDataRule(std::string_view domain,
                               std::initializer_list<std::string_view> op_types, Rule rule) {
  for (std::string_view op_type : op_types) {
    entries_[{CanonicalDomain(domain), std::string(op_type)}].data = rule;
  }
}

const RuleRegistry::Entry* RuleRegistry::Find(std::string_view domain,
                                              std::string_view op_type) const {
  auto it = entries_.find({CanonicalDomain(domain), std::string(op_type)});
  return it == entries_.end() ? nullptr : &it->second;
}

const RuleRegistry& Rules() {
  static const RuleRegistry registry = [] {
    RuleRegistry built;
    RegisterElementwiseRules(built);
    RegisterNormalizationRules(built);
    RegisterConvPoolRules(built);
    RegisterMatMulRules(built);
    RegisterTensorRules(built);
    RegisterSlicingRules(built);
    RegisterIndexingRules(built);
    RegisterGeneratorRules(built);
    RegisterResizeRules(built);
    RegisterReduceRules(built);
    RegisterControlFlowRules(built);
    RegisterDataPropagationRules(built);
    RegisterContribRules(built);
    RegisterAttentionRules(built);
    RegisterQuantizationRules(built);
    return built;
  }();
  return registry;
}

// ---------------------------------------------------------------- state

void InferenceState::InferGraph(Graph& graph) {
  for (Value* initializer : graph.initializers()) TypeInitializer(*initializer);
  for (const auto& node : graph.nodes()) InferNode(*node);
}

void InferenceState::TypeInitializer(Value& value) {
  const Tensor& tensor = *value.initializer();
  Shape shape;
  for (int64_t size : tensor.dims()) shape.push_back(Dim::Known(size));
  const std::string where = "initializer '" + value.name() + "'";
  MergeDtype(value, tensor.dtype(), where);
  MergeShape(value, shape, where);
}

std::optional<int64_t> InferenceState::OpsetFor(std::string_view domain) const {
  return function_ != nullptr ? function_->OpsetFor(domain) : model_.OpsetFor(domain);
}

void InferenceState::InferNode(Node& node) {
  std::optional<int64_t> opset = OpsetFor(node.domain());
  const RuleRegistry::Entry* entry = Rules().Find(node.domain(), node.op_type());
  if (entry == nullptr || entry->type == nullptr) {
    if (const Function* function = CalledFunction(node)) {
      InferFunctionCall(node, *function);
      return;
    }
    unsupported_.insert(UnsupportedKey(node, opset));
    // Bodies of unknown ops still hold ordinary nodes worth typing.
    for (Graph* subgraph : node.Subgraphs()) InferGraph(*subgraph);
    return;
  }
  int64_t fallback_opset = CanonicalDomain(node.domain()).empty() ? kNewestDefaultOpset : 1;
  InferenceContext context(node, opset.value_or(fallback_opset), *this);
  entry->type(context);
  if (entry->data != nullptr) entry->data(context);
}

void InferenceState::MergeDtype(Value& value, DataType dtype, const std::string& where) {
  if (dtype == DataType::kUndefined || !value.type().is_tensor()) return;
  DataType& current = value.type().dtype;
  if (current == DataType::kUndefined) {
    current = dtype;
    MarkImproved(value);
  } else if (current != dtype) {
    Warn(where + ": value '" + value.name() + "' is declared " + DescribeDtype(current) +
         " but inferred " + DescribeDtype(dtype) + "; keeping the declared type");
  }
}

void InferenceState::MergeShape(Value& value, const Shape& shape, const std::string& where) {
  if (!value.type().is_tensor()) return;
  std::optional<Shape>& current = value.type().shape;
  if (!current) {
    current = shape;
    MarkImproved(value);
    return;
  }
  if (current->size() != shape.size()) {
    Warn(where + ": value '" + value.name() + "' is declared with rank " +
         std::to_string(current->size()) + " but inferred " + ShapeToString(shape) +
         "; keeping the declared shape");
    return;
  }
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    Dim& declared = (*current)[axis];
    const Dim& inferred = shape[axis];
    if (declared.is_known()) {
      if (inferred.is_known() && inferred.value != declared.value) {
        Warn(where + ": value '" + value.name() + "' declares dim " + std::to_string(axis) +
             " as " + DescribeDim(declared) + " but inference gives " + DescribeDim(inferred) +
             "; keeping " + DescribeDim(declared));
      }
    } else if (inferred.is_known() || (!declared.is_symbolic() && inferred.is_symbolic()) ||
               RefinesPlaceholder(declared, inferred)) {
      // A declared symbol names a size the exporter did not know; a proven size refines it, as
      // ONNX's own inference merges dims (TorchScript names output dims it could have known).
      // The model's declaration itself is kept as written.
      declared = inferred;
      MarkImproved(value);
    }
  }
}

void InferenceState::MarkImproved(Value& value) { improved_.insert(&value); }

const SymbolicData* InferenceState::DataOf(const Value* value) const {
  auto it = data_.find(value);
  return it == data_.end() ? nullptr : &it->second;
}

std::optional<SymbolicData> InferenceState::ContentOf(const Value* value) const {
  if (value == nullptr) return std::nullopt;
  if (const SymbolicData* tracked = DataOf(value)) return *tracked;
  TensorPtr constant = ConstantValueOf(*value, Initializers());
  if (constant == nullptr || constant->dims().size() > 1 ||
      constant->NumElements() > static_cast<int64_t>(kMaxSymbolicElements)) {
    return std::nullopt;
  }
  auto ints = constant->AsInt64s();
  if (!ints) return std::nullopt;
  SymbolicData data;
  data.is_scalar = constant->dims().empty();
  for (int64_t element : *ints) data.elements.push_back(SymbolicInt::Known(element));
  return data;
}

void InferenceState::SetData(const Value* value, SymbolicData data) {
  data_[value] = std::move(data);
}

ShapeInferenceReport InferenceState::TakeReport() {
  report_.unsupported_ops.assign(unsupported_.begin(), unsupported_.end());
  report_.values_inferred = static_cast<int64_t>(improved_.size());
  report_.error = calls_->error;
  for (const auto& [value, data] : data_) {
    KnownIntegers known{data.is_scalar, {}};
    for (const SymbolicInt& element : data.elements) {
      if (!element.is_known()) break;
      known.values.push_back(*element.value);
    }
    if (known.values.size() == data.elements.size()) report_.known_integers.emplace(value->name(), std::move(known));
  }
  return std::move(report_);
}

}  // namespace shape_inference

ShapeInferenceReport InferShapes(Graph& graph, const Model& model) {
  shape_inference::InferenceState state(model);
  state.InferGraph(graph);
  return state.TakeReport();
}

ShapeInferenceReport ReinferShapes(Model& model) {
  for (const auto& node : model.graph->nodes()) {
    for (Value* output : node->outputs()) {
      if (output != nullptr) output->type().shape.reset();
    }
  }
  for (Value* output : model.graph->outputs()) {
    if (!output->is_graph_input() && !output->is_initializer()) output->type().shape.reset();
  }
  return InferShapes(model);
}

ShapeInferenceReport InferShapes(Model& model) {
  if (model.graph == nullptr) return {};
  return InferShapes(*model.graph, model);
}

}  // namespace fusionopt
