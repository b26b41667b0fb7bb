// FunctionProto ⇄ Function (see function_codec.h).
#include "onnx_io/function_codec.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include <google/protobuf/unknown_field_set.h>

#include "onnx_io/proto_codec.h"

namespace fusionopt {
namespace {

// FunctionProto fields of IR version 10 that our onnx.proto predates: protobuf keeps them as
// unknown fields (so the residual carries them), and the loader reads these two itself.
constexpr int kValueInfoField = 12;
constexpr int kOverloadField = 13;

void ClearFunctionModelled(onnx::FunctionProto& proto) {
  proto.clear_input();
  proto.clear_output();
  proto.clear_attribute();
  proto.clear_node();
  proto.clear_opset_import();
  // name and domain stay, as for nodes: the saver writes them only when they changed, which
  // keeps an explicitly empty domain exactly as the file had it.
}

std::string FunctionLabel(const std::string& domain, const std::string& name) {
  return (domain.empty() ? "" : domain + "::") + name;
}

std::string Describe(const onnx::FunctionProto& proto) {
  return "function '" + FunctionLabel(proto.domain(), proto.name()) + "'";
}

std::vector<std::string> UnknownLengthDelimited(const onnx::FunctionProto& proto, int number) {
  std::vector<std::string> out;
  const google::protobuf::UnknownFieldSet& fields = proto.unknown_fields();
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& field = fields.field(i);
    if (field.number() == number && field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      out.push_back(field.length_delimited());
    }
  }
  return out;
}

// The last occurrence wins, as protobuf does for a singular field.
std::string OverloadOf(const onnx::FunctionProto& proto) {
  std::vector<std::string> values = UnknownLengthDelimited(proto, kOverloadField);
  return values.empty() ? std::string() : values.back();
}

Result<std::map<std::string, onnx::ValueInfoProto>> DeclaredValueInfo(
    const onnx::FunctionProto& proto, std::vector<std::string>& order) {
  std::map<std::string, onnx::ValueInfoProto> declared;
  for (const std::string& bytes : UnknownLengthDelimited(proto, kValueInfoField)) {
    onnx::ValueInfoProto info;
    if (!info.ParseFromString(bytes)) return InvalidModel("value_info is not a valid ValueInfoProto");
    std::string name = info.name();
    if (!declared.emplace(name, std::move(info)).second) {
      return InvalidModel("value_info for '" + name + "' appears more than once");
    }
    order.push_back(name);
  }
  return declared;
}

// A ValueInfoProto for a formal parameter: the declared one when value_info has it.
void AddParameter(const std::string& name, std::map<std::string, onnx::ValueInfoProto>& declared,
                  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& list) {
  onnx::ValueInfoProto* entry = list.Add();
  auto it = declared.find(name);
  if (it == declared.end()) {
    entry->set_name(name);
    return;
  }
  entry->Swap(&it->second);
  declared.erase(it);
}

Status CheckParameterNames(const onnx::FunctionProto& proto) {
  std::set<std::string> inputs;
  for (const auto& name : proto.input()) {
    if (!inputs.insert(name).second) return InvalidModel("input '" + name + "' is listed more than once");
  }
  std::set<std::string> produced(inputs);
  for (const auto& node : proto.node()) produced.insert(node.output().begin(), node.output().end());
  std::set<std::string> outputs;
  for (const auto& name : proto.output()) {
    if (!outputs.insert(name).second) return InvalidModel("output '" + name + "' is listed more than once");
    if (name.empty() || produced.count(name) == 0) {
      return InvalidModel("output '" + name + "' is not produced by any node");
    }
  }
  return Status::Ok();
}

// The body as the GraphProto the loader's graph decoding reads: formal parameters as inputs
// and outputs (typed where value_info declares them), the rest of value_info as value_info.
// Moves the nodes out of `proto`.
Result<onnx::GraphProto> BodyAsGraph(onnx::FunctionProto& proto) {
  FUSIONOPT_RETURN_IF_ERROR(CheckParameterNames(proto));
  std::vector<std::string> order;
  FUSIONOPT_ASSIGN_OR_RETURN(auto declared, DeclaredValueInfo(proto, order));
  onnx::GraphProto body;
  for (const auto& name : proto.input()) AddParameter(name, declared, *body.mutable_input());
  for (const auto& name : proto.output()) AddParameter(name, declared, *body.mutable_output());
  for (const auto& name : order) {
    auto it = declared.find(name);
    if (it != declared.end()) body.add_value_info()->Swap(&it->second);
  }
  body.mutable_node()->Swap(proto.mutable_node());
  return body;
}

Result<std::unique_ptr<Function>> DecodeFunction(onnx::FunctionProto& proto, const BodyDecoder& decode_body) {
  if (proto.name().empty()) return InvalidModel("a model-local function has no name");
  auto function = std::make_unique<Function>();
  function->domain = proto.domain();
  function->name = proto.name();
  function->attribute_names.assign(proto.attribute().begin(), proto.attribute().end());
  std::set<std::string> domains;
  for (const auto& opset : proto.opset_import()) {
    function->opsets.push_back(DecodeOpset(opset));
    if (!domains.insert(opset.domain() == "ai.onnx" ? "" : opset.domain()).second) {
      return InvalidModel("opset_import lists domain '" + opset.domain() + "' twice");
    }
  }
  function->residual = ResidualOf<onnx::FunctionProto>(proto, ClearFunctionModelled);
  FUSIONOPT_ASSIGN_OR_RETURN(onnx::GraphProto body, BodyAsGraph(proto));
  // Named while it is built, so the graph decoding's errors ("graph 'F' has a cycle") say
  // which body; unnamed after, like every body (a FunctionProto has no graph name to save).
  body.set_name(proto.name());
  FUSIONOPT_ASSIGN_OR_RETURN(function->body, decode_body(body, *function));
  function->body->set_name("");
  return function;
}

using FunctionIndex = std::multimap<std::pair<std::string, std::string>, const Function*>;

// Model-local functions called from `graph` or its subgraphs. All overloads of a name count:
// which one a call binds to does not change whether the calls can loop.
void CollectCallees(const Graph& graph, const FunctionIndex& index, std::set<const Function*>& callees) {
  for (const auto& node : graph.nodes()) {
    auto [first, last] = index.equal_range({node->domain(), node->op_type()});
    for (auto it = first; it != last; ++it) callees.insert(it->second);
    for (const Graph* subgraph : node->Subgraphs()) CollectCallees(*subgraph, index, callees);
  }
}

// Depth-first search of the call graph; `path` holds the functions being visited. Calls
// nested deeper than kMaxCallDepth are refused: shape inference and the runtime expand calls
// recursively, and a chain of thousands of functions would exhaust their stack (and this one).
class RecursionCheck {
 public:
  static constexpr size_t kMaxCallDepth = 256;

  explicit RecursionCheck(const Model& model) {
    for (const auto& function : model.functions) {
      index_.emplace(std::pair(function->domain, function->name), function.get());
    }
  }

  Status Visit(const Function* function) {
    if (done_.count(function) > 0) return Status::Ok();
    auto on_path = std::find(path_.begin(), path_.end(), function);
    if (on_path != path_.end()) return CycleError(on_path);
    if (path_.size() >= kMaxCallDepth) {
      return Unsupported(DescribeFunction(*path_.front()) + " nests function calls more than " +
                         std::to_string(kMaxCallDepth) + " deep");
    }
    path_.push_back(function);
    std::set<const Function*> callees;
    CollectCallees(*function->body, index_, callees);
    for (const Function* callee : callees) FUSIONOPT_RETURN_IF_ERROR(Visit(callee));
    path_.pop_back();
    done_.insert(function);
    return Status::Ok();
  }

 private:
  Status CycleError(std::vector<const Function*>::const_iterator first) const {
    std::string chain;
    for (auto it = first; it != path_.end(); ++it) chain += FunctionLabel((*it)->domain, (*it)->name) + " -> ";
    chain += FunctionLabel((*first)->domain, (*first)->name);
    return InvalidModel(DescribeFunction(**first) + " calls itself: " + chain);
  }

  FunctionIndex index_;
  std::vector<const Function*> path_;
  std::set<const Function*> done_;
};

}  // namespace

OpsetImport DecodeOpset(const onnx::OperatorSetIdProto& proto) {
  onnx::OperatorSetIdProto residual = proto;
  residual.clear_version();
  return {proto.domain(), proto.version(), residual.SerializeAsString()};
}

void EncodeOpset(const OpsetImport& opset, onnx::OperatorSetIdProto& proto) {
  RestoreResidual(opset.residual, proto);
  if (proto.domain() != opset.domain) proto.set_domain(opset.domain);
  proto.set_version(opset.version);
}

std::string DescribeFunction(const Function& function) {
  return "function '" + FunctionLabel(function.domain, function.name) + "'";
}

Status DecodeFunctions(onnx::ModelProto& proto, const BodyDecoder& decode_body, Model& model) {
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (auto& function_proto : *proto.mutable_functions()) {
    std::string overload = OverloadOf(function_proto);
    if (!seen.emplace(function_proto.domain(), function_proto.name(), overload).second) {
      return InvalidModel(Describe(function_proto) + (overload.empty() ? "" : " (overload '" + overload + "')") +
                          " is defined more than once");
    }
    auto function = DecodeFunction(function_proto, decode_body);
    if (!function.ok()) return function.status().WithContext(Describe(function_proto));
    model.functions.push_back(std::move(function).value());
  }
  RecursionCheck check(model);
  for (const auto& function : model.functions) FUSIONOPT_RETURN_IF_ERROR(check.Visit(function.get()));
  return Status::Ok();
}

void EncodeFunctionSignature(const Function& function, onnx::FunctionProto& proto) {
  RestoreResidual(function.residual, proto);
  if (proto.name() != function.name) proto.set_name(function.name);
  if (proto.domain() != function.domain) proto.set_domain(function.domain);
  for (const Value* input : function.body->inputs()) proto.add_input(input->name());
  for (const Value* output : function.body->outputs()) proto.add_output(output->name());
  for (const auto& attribute : function.attribute_names) proto.add_attribute(attribute);
  for (const auto& opset : function.opsets) EncodeOpset(opset, *proto.add_opset_import());
}

}  // namespace fusionopt
