// fo_node_desc → one-node model → typed body (node_request.h).
#include "cuda_runtime/plugin/node_request.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "cuda_runtime/codegen/typed_body.h"
#include "ir/function_body.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"
#include "onnx_io/model_io.h"

namespace fusionopt::cuda {
namespace {

// IR 10 carries model-local functions with every field the project reads.
constexpr int64_t kRequestIrVersion = 10;
// Every tensor of the request is inline; external-data references (which a FunctionProto's
// Constant could hold) resolve under a folder that does not exist, so they fail to load
// instead of reading whatever lies next to the host process.
constexpr const char* kNoExternalDataDir = "/nonexistent/fusionopt-plugin-request";

std::string Ordinal(const char* role, size_t index) { return std::string(role) + " " + std::to_string(index); }

Status ValidateTensorDesc(const fo_tensor_desc& tensor, const std::string& where) {
  if (tensor.dtype == 0) {
    if (tensor.rank != 0) return InvalidModel(where + ": an omitted tensor (dtype 0) must have rank 0");
    return Status::Ok();
  }
  if (!IsKnownDataType(tensor.dtype)) {
    return InvalidModel(where + ": unknown dtype code " + std::to_string(tensor.dtype));
  }
  if (tensor.rank < 0) return InvalidModel(where + ": negative rank " + std::to_string(tensor.rank));
  if (tensor.rank > 0 && tensor.dims == nullptr) {
    return InvalidModel(where + ": rank " + std::to_string(tensor.rank) + " but dims is NULL");
  }
  int64_t elements = 1;
  for (int32_t d = 0; d < tensor.rank; ++d) {
    if (tensor.dims[d] < 0) {
      return InvalidModel(where + ": dim " + std::to_string(d) + " is " + std::to_string(tensor.dims[d]) +
                          " (dims must be static and >= 0)");
    }
    if (__builtin_mul_overflow(elements, tensor.dims[d], &elements)) {
      return InvalidModel(where + ": the element count overflows 64 bits");
    }
  }
  return Status::Ok();
}

Status ValidateDescFields(const fo_node_desc& desc) {
  if (desc.struct_size < sizeof(fo_node_desc)) {
    return InvalidModel("fo_node_desc.struct_size is " + std::to_string(desc.struct_size) + ", expected at least " +
                        std::to_string(sizeof(fo_node_desc)));
  }
  if (desc.node_proto == nullptr || desc.node_proto_size == 0) return InvalidModel("fo_node_desc.node_proto is empty");
  if (desc.node_proto_size > INT_MAX || desc.function_proto_size > INT_MAX) {
    return InvalidModel("fo_node_desc: a serialized proto of 2 GiB or more");
  }
  if ((desc.function_proto == nullptr) != (desc.function_proto_size == 0)) {
    return InvalidModel("fo_node_desc.function_proto and function_proto_size disagree (one is empty)");
  }
  if (desc.num_inputs > 0 && desc.inputs == nullptr) return InvalidModel("fo_node_desc.inputs is NULL");
  if (desc.num_outputs == 0 || desc.outputs == nullptr) return InvalidModel("fo_node_desc has no outputs");
  for (size_t i = 0; i < desc.num_inputs; ++i) {
    FUSIONOPT_RETURN_IF_ERROR(ValidateTensorDesc(desc.inputs[i], Ordinal("input", i)));
    const bool constant = desc.constant_inputs != nullptr && desc.constant_inputs[i] != nullptr;
    if (constant && desc.inputs[i].dtype == 0) return InvalidModel(Ordinal("input", i) + ": constant data for an omitted input");
    if (constant && desc.inputs[i].dtype == static_cast<int32_t>(DataType::kString)) {
      return Unsupported(Ordinal("input", i) + ": constant string tensors");
    }
  }
  for (size_t i = 0; i < desc.num_outputs; ++i) {
    FUSIONOPT_RETURN_IF_ERROR(ValidateTensorDesc(desc.outputs[i], Ordinal("output", i)));
  }
  return Status::Ok();
}

std::string CanonicalDomain(const std::string& domain) { return domain == "ai.onnx" ? std::string() : domain; }

void SetType(const fo_tensor_desc& tensor, onnx::TypeProto& type) {
  onnx::TypeProto::Tensor* tensor_type = type.mutable_tensor_type();
  tensor_type->set_elem_type(tensor.dtype);
  onnx::TensorShapeProto* shape = tensor_type->mutable_shape();  // present even for rank 0
  for (int32_t d = 0; d < tensor.rank; ++d) shape->add_dim()->set_dim_value(tensor.dims[d]);
}

// Names used by the node must be consistent: an input read twice needs one desc, and no
// name is both read and written.
Status CheckNames(const onnx::NodeProto& node, const fo_node_desc& desc) {
  std::map<std::string, size_t> first_use;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string& name = node.input(i);
    const bool omitted = desc.inputs[i].dtype == 0;
    if (name.empty() != omitted) {
      return InvalidModel(Ordinal("input", i) + (omitted ? " is named '" + name + "' but its desc has dtype 0 (omitted)"
                                                         : " is omitted in the NodeProto but its desc has a dtype"));
    }
    if (name.empty()) continue;
    auto [it, inserted] = first_use.emplace(name, i);
    if (inserted) continue;
    const fo_tensor_desc& a = desc.inputs[it->second];
    const fo_tensor_desc& b = desc.inputs[i];
    if (DescribeTensorDesc(a) != DescribeTensorDesc(b)) {
      return InvalidModel("input '" + name + "' is passed twice with different descs");
    }
  }
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string& name = node.output(i);
    if (name.empty() != (desc.outputs[i].dtype == 0)) {
      return InvalidModel(Ordinal("output", i) + ": the NodeProto and its desc disagree on whether it is omitted");
    }
    if (!name.empty() && first_use.count(name)) return InvalidModel("'" + name + "' is both an input and an output");
  }
  return Status::Ok();
}

// A node that reads one value twice (Mul(x, x)) gets a separate name for each later read,
// each its own input of the request model: the host passes the same pointer for both, and
// single-op bodies (typed_body.cc) copy the node's inputs one value per position.
void GiveRepeatedInputsOwnNames(onnx::NodeProto& node) {
  std::set<std::string> used(node.input().begin(), node.input().end());
  used.insert(node.output().begin(), node.output().end());
  std::set<std::string> seen;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string name = node.input(i);
    if (name.empty() || seen.insert(name).second) continue;
    std::string renamed = name + "_read" + std::to_string(i);
    while (used.count(renamed)) renamed += "_";
    used.insert(renamed);
    node.set_input(i, renamed);
  }
}

void AddOpsets(const onnx::NodeProto& node, const onnx::FunctionProto* function, int64_t default_opset,
               onnx::ModelProto& model) {
  std::set<std::string> imported;
  auto import = [&](const std::string& domain, int64_t version) {
    if (!imported.insert(CanonicalDomain(domain)).second) return;
    onnx::OperatorSetIdProto* opset = model.add_opset_import();
    opset->set_domain(CanonicalDomain(domain));
    opset->set_version(version);
  };
  import("", default_opset);
  import(std::string(kFusionDomain), 1);
  import(node.domain(), 1);
  if (function != nullptr) {
    for (const auto& opset : function->opset_import()) import(opset.domain(), opset.version());
  }
}

Result<std::string> BuildModelBytes(const onnx::NodeProto& node, const onnx::FunctionProto* function,
                                    const fo_node_desc& desc) {
  onnx::ModelProto model;
  model.set_ir_version(kRequestIrVersion);
  model.set_producer_name("libfusionopt_cuda");
  AddOpsets(node, function, desc.default_opset, model);
  if (function != nullptr) *model.add_functions() = *function;
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("fo_node_request");
  *graph->add_node() = node;
  std::set<std::string> declared;
  for (size_t i = 0; i < desc.num_inputs; ++i) {
    const std::string& name = node.input(static_cast<int>(i));
    if (name.empty() || !declared.insert(name).second) continue;
    const fo_tensor_desc& tensor = desc.inputs[i];
    const void* constant = desc.constant_inputs != nullptr ? desc.constant_inputs[i] : nullptr;
    if (constant == nullptr) {
      onnx::ValueInfoProto* input = graph->add_input();
      input->set_name(name);
      SetType(tensor, *input->mutable_type());
      continue;
    }
    // From IR 4 on an initializer that is not a graph input is a constant no caller overrides,
    // which is what makes the body fold it.
    onnx::TensorProto* initializer = graph->add_initializer();
    initializer->set_name(name);
    initializer->set_data_type(tensor.dtype);
    uint64_t elements = 1;
    for (int32_t d = 0; d < tensor.rank; ++d) {
      initializer->add_dims(tensor.dims[d]);
      elements *= static_cast<uint64_t>(tensor.dims[d]);
    }
    initializer->set_raw_data(constant, ByteSizeOf(static_cast<DataType>(tensor.dtype), elements));
  }
  for (size_t i = 0; i < desc.num_outputs; ++i) {
    const std::string& name = node.output(static_cast<int>(i));
    if (name.empty()) continue;
    // Untyped: inference computes the output types, and ReconcileOutputs checks the descs
    // against them (or adopts a desc where inference cannot tell).
    graph->add_output()->set_name(name);
  }
  return model.SerializeAsString();
}

Status ParseProtos(const fo_node_desc& desc, onnx::NodeProto& node, std::optional<onnx::FunctionProto>& function) {
  if (!node.ParseFromArray(desc.node_proto, static_cast<int>(desc.node_proto_size))) {
    return InvalidModel("node_proto is not a serialized onnx.NodeProto");
  }
  if (static_cast<size_t>(node.input_size()) != desc.num_inputs) {
    return InvalidModel("num_inputs is " + std::to_string(desc.num_inputs) + " but the NodeProto has " +
                        std::to_string(node.input_size()) + " inputs");
  }
  if (static_cast<size_t>(node.output_size()) != desc.num_outputs) {
    return InvalidModel("num_outputs is " + std::to_string(desc.num_outputs) + " but the NodeProto has " +
                        std::to_string(node.output_size()) + " outputs");
  }
  if (desc.function_proto == nullptr) {
    if (node.domain() == kFusionDomain) {
      return InvalidModel("the node calls " + node.domain() + "::" + node.op_type() + " but no function_proto was given");
    }
    return Status::Ok();
  }
  function.emplace();
  if (!function->ParseFromArray(desc.function_proto, static_cast<int>(desc.function_proto_size))) {
    return InvalidModel("function_proto is not a serialized onnx.FunctionProto");
  }
  if (CanonicalDomain(function->domain()) != CanonicalDomain(node.domain()) || function->name() != node.op_type()) {
    return InvalidModel("function_proto defines " + function->domain() + "::" + function->name() + " but the node calls " +
                        node.domain() + "::" + node.op_type());
  }
  return Status::Ok();
}

std::string DescribeType(const ValueType& type) {
  std::string text(NameOf(type.dtype));
  return text + (type.shape ? ShapeToString(*type.shape) : "[?]");
}

bool StaticallyTyped(const ValueType& type) {
  if (type.dtype == DataType::kUndefined || !type.shape) return false;
  for (const Dim& dim : *type.shape) {
    if (!dim.is_known()) return false;
  }
  return true;
}

bool Matches(const ValueType& computed, const fo_tensor_desc& expected) {
  bool same = static_cast<int32_t>(computed.dtype) == expected.dtype && computed.shape &&
              computed.shape->size() == static_cast<size_t>(expected.rank);
  for (int32_t d = 0; same && d < expected.rank; ++d) same = (*computed.shape)[d].value == expected.dims[d];
  return same;
}

ValueType TypeOf(const fo_tensor_desc& tensor) {
  ValueType type;
  type.dtype = static_cast<DataType>(tensor.dtype);
  type.shape.emplace();
  for (int32_t d = 0; d < tensor.rank; ++d) type.shape->push_back(Dim::Known(tensor.dims[d]));
  return type;
}

Status CheckOutput(const ValueType& computed, const fo_tensor_desc& expected, size_t index) {
  if (Matches(computed, expected)) return Status::Ok();
  return InvalidModel(Ordinal("output", index) + ": the node computes " + DescribeType(computed) +
                      " but the desc says " + DescribeTensorDesc(expected));
}

// Where inference typed an output statically the desc must agree; where it could not (an
// output shape read from a runtime tensor), the desc's type is the node's.
Status ReconcileOutputs(Node& node, const fo_node_desc& desc) {
  for (size_t i = 0; i < desc.num_outputs; ++i) {
    Value* output = node.output(i);
    if (output == nullptr) continue;
    if (StaticallyTyped(output->type())) {
      FUSIONOPT_RETURN_IF_ERROR(CheckOutput(output->type(), desc.outputs[i], i));
    } else {
      output->type() = TypeOf(desc.outputs[i]);
    }
  }
  return Status::Ok();
}

Status CheckOutputs(const Graph& body, const fo_node_desc& desc) {
  for (size_t i = 0; i < desc.num_outputs && i < body.outputs().size(); ++i) {
    if (desc.outputs[i].dtype == 0) continue;
    FUSIONOPT_RETURN_IF_ERROR(CheckOutput(body.outputs()[i]->type(), desc.outputs[i], i));
  }
  return Status::Ok();
}

// A function body that does not type usually has a reason inference found (inputs that do not
// broadcast inside it); the model-level inference only sees the call, so the body is
// inferred again here to say which.
Status WithBodyShapeFinding(const Model& model, const Node& node, const Status& status) {
  const Function* function = model.FindFunction(node.domain(), node.op_type());
  if (status.code() != ErrorCode::kUnsupported || function == nullptr || function->body == nullptr) return status;
  std::unique_ptr<Graph> body = InstantiateFunctionBody(*function, node);
  for (size_t i = 0; i < body->inputs().size() && i < node.inputs().size(); ++i) {
    if (node.input(i) != nullptr) body->inputs()[i]->type() = node.input(i)->type();
  }
  ShapeInferenceReport inference = InferShapes(*body, model);
  if (inference.warnings.empty()) return status;
  return Status(status.code(), status.message() + " (shapes: " + inference.warnings.front() + ")");
}

}  // namespace

std::string DescribeTensorDesc(const fo_tensor_desc& tensor) {
  if (tensor.dtype == 0) return "omitted";
  std::string text = IsKnownDataType(tensor.dtype) ? std::string(NameOf(static_cast<DataType>(tensor.dtype)))
                                                   : "dtype" + std::to_string(tensor.dtype);
  text += "[";
  for (int32_t d = 0; d < tensor.rank && tensor.dims != nullptr; ++d) {
    text += (d ? "," : "") + std::to_string(tensor.dims[d]);
  }
  return text + "]";
}

void NormalizeRowAxis(const fo_node_desc& original, NormalizedDesc& normalized) {
  normalized.desc = original;
  onnx::NodeProto node;
  if (original.num_inputs < 1 || original.num_outputs < 1 ||
      !node.ParseFromArray(original.node_proto, static_cast<int>(original.node_proto_size))) {
    return;  // parsing reports it
  }
  const std::string op = node.op_type();
  if ((!node.domain().empty() && node.domain() != "ai.onnx") || (op != "Softmax" && op != "LogSoftmax" && op != "Hardmax")) {
    return;
  }
  const fo_tensor_desc& x = original.inputs[0];
  const fo_tensor_desc& y = original.outputs[0];
  if (x.rank != y.rank || !std::equal(x.dims, x.dims + x.rank, y.dims)) return;
  int64_t axis = original.default_opset >= 13 ? -1 : 1;
  for (const auto& attribute : node.attribute()) {
    if (attribute.name() == "axis") axis = attribute.i();
  }
  if (axis < 0) axis += x.rank;
  if (axis < 0 || axis >= x.rank - 1) return;
  // Before opset 13 the op normalizes the flattened block of every axis from `axis` on, which
  // is one contiguous row whatever those dims are; from 13 on, `axis` alone, which is a row only
  // when unit dims follow it (else the lines family runs it along its stride).
  int64_t row = 1;
  for (int64_t d = axis; d < x.rank; ++d) row *= x.dims[d];
  if (original.default_opset >= 13 && row != x.dims[axis]) return;
  normalized.row_dims.assign(x.dims, x.dims + axis);
  normalized.row_dims.push_back(row);
  normalized.inputs.assign(original.inputs, original.inputs + original.num_inputs);
  normalized.outputs.assign(original.outputs, original.outputs + original.num_outputs);
  normalized.inputs[0].rank = normalized.outputs[0].rank = static_cast<int32_t>(axis + 1);
  normalized.inputs[0].dims = normalized.outputs[0].dims = normalized.row_dims.data();
  for (auto& attribute : *node.mutable_attribute()) {
    if (attribute.name() == "axis") attribute.set_i(axis);  // a negative axis would count from the new rank
  }
  normalized.node_proto = node.SerializeAsString();
  normalized.desc.node_proto = normalized.node_proto.data();
  normalized.desc.node_proto_size = normalized.node_proto.size();
  normalized.desc.inputs = normalized.inputs.data();
  normalized.desc.outputs = normalized.outputs.data();
}

Result<ParsedNode> ParseNodeDesc(const fo_node_desc& original, NormalizedDesc& normalized) {
  FUSIONOPT_RETURN_IF_ERROR(ValidateDescFields(original));
  if (original.default_opset <= 0) return InvalidModel("default_opset must be positive");
  NormalizeRowAxis(original, normalized);
  const fo_node_desc& desc = normalized.desc;
  onnx::NodeProto node;
  std::optional<onnx::FunctionProto> function;
  FUSIONOPT_RETURN_IF_ERROR(ParseProtos(desc, node, function));
  // The resize generator reads attributes with today's meaning; before opset 11 the same
  // attributes map coordinates another way (resize_codegen.h).
  if ((node.op_type() == "Resize" && desc.default_opset < 11) || node.op_type() == "Upsample") {
    return Unsupported(node.op_type() + " before opset 11 has no CUDA kernel (its coordinate mapping differs)");
  }
  FUSIONOPT_RETURN_IF_ERROR(CheckNames(node, desc));
  GiveRepeatedInputsOwnNames(node);
  FUSIONOPT_ASSIGN_OR_RETURN(std::string bytes, BuildModelBytes(node, function ? &*function : nullptr, desc));
  ParsedNode parsed;
  LoadOptions load;
  load.infer_shapes = false;  // inferred below, where its findings are kept
  FUSIONOPT_ASSIGN_OR_RETURN(parsed.model, LoadModelFromBytes(std::move(bytes), kNoExternalDataDir, load));
  // Inference never fails; what it finds wrong in a one-node model (inputs that do not
  // broadcast, a wrong axis) is wrong with the node as described.
  ShapeInferenceReport inference = InferShapes(*parsed.model);
  FUSIONOPT_RETURN_IF_ERROR(inference.error);
  if (!inference.warnings.empty()) return Unsupported("shapes: " + inference.warnings.front());
  if (parsed.model->graph->num_nodes() != 1) return InternalError("the request model lost its node");
  Node* decoded = parsed.model->graph->nodes().front().get();
  FUSIONOPT_RETURN_IF_ERROR(ReconcileOutputs(*decoded, desc));
  parsed.node = decoded;
  parsed.name = node.name().empty() ? node.op_type() : node.name();
  return parsed;
}

Result<std::unique_ptr<Graph>> TypedBodyFor(const ParsedNode& parsed, const fo_node_desc& desc) {
  auto typed = TypedBodyOf(*parsed.model, *parsed.node);
  if (!typed.ok()) return WithBodyShapeFinding(*parsed.model, *parsed.node, typed.status());
  std::unique_ptr<Graph> body = std::move(typed).value();
  if (body->inputs().size() != desc.num_inputs || body->outputs().size() != desc.num_outputs) {
    return Unsupported("the typed body of " + parsed.name + " has " + std::to_string(body->inputs().size()) +
                         " inputs and " + std::to_string(body->outputs().size()) + " outputs; the node has " +
                         std::to_string(desc.num_inputs) + " and " + std::to_string(desc.num_outputs));
  }
  FUSIONOPT_RETURN_IF_ERROR(CheckOutputs(*body, desc));
  return body;
}

}  // namespace fusionopt::cuda
