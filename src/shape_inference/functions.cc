// Shape inference through model-local functions: a call's outputs are typed by inferring
// the function's body with the call's argument types, data and attributes.
//
// The body is inferred on a copy, never in place: a function is shared by every call, and
// each call may bring other types. Results are memoized per function, argument types (and
// tracked data) and caller attributes, so a function called a hundred times with the same
// types is inferred once. A function that calls itself, directly or through others, would
// never finish; it is reported as an InvalidModel error naming the chain of calls.
#include <algorithm>
#include <cstring>

#include "ir/function_body.h"
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

std::string FunctionLabel(const Function& function) {
  return (function.domain.empty() ? "" : function.domain + "::") + function.name;
}

// ---------------------------------------------------------------- memo keys

void AppendType(const ValueType& type, std::string& key) {
  if (!type.is_tensor()) {
    key += "opaque:" + std::to_string(type.opaque_type.size()) + ":" + type.opaque_type;
    return;
  }
  key += std::to_string(static_cast<int>(type.dtype));
  if (!type.shape) {
    key += "*";
    return;
  }
  key += "[";
  for (const Dim& dim : *type.shape) {
    if (dim.is_known()) key += std::to_string(dim.value);
    else if (dim.is_symbolic()) key += "'" + std::to_string(dim.symbol.size()) + ":" + dim.symbol;
    else key += "?";
    key += ",";
  }
  key += "]";
}

void AppendData(const SymbolicData* data, std::string& key) {
  if (data == nullptr) return;
  key += data->is_scalar ? "=s(" : "=(";
  for (const SymbolicInt& element : data->elements) {
    if (element.is_known()) key += std::to_string(*element.value);
    else if (element.is_symbolic()) key += "'" + std::to_string(element.symbol.size()) + ":" + element.symbol;
    else key += "?";
    key += ",";
  }
  key += ")";
}

// Values by content; tensors and graphs by identity (equal content under another address
// only costs a second inference).
void AppendAttribute(const Attribute& attribute, std::string& key) {
  key += std::to_string(attribute.name.size()) + ":" + attribute.name + "#" +
         std::to_string(static_cast<int>(attribute.kind)) + "=";
  uint32_t bits = 0;
  std::memcpy(&bits, &attribute.f, sizeof(bits));
  key += std::to_string(attribute.i) + "," + std::to_string(bits) + "," +
         std::to_string(attribute.s.size()) + ":" + attribute.s;
  for (int64_t value : attribute.ints) key += "," + std::to_string(value);
  key += ";";
  for (float value : attribute.floats) {
    std::memcpy(&bits, &value, sizeof(bits));
    key += std::to_string(bits) + ",";
  }
  key += ";";
  for (const auto& text : attribute.strings) key += std::to_string(text.size()) + ":" + text;
  key += ";" + std::to_string(reinterpret_cast<uintptr_t>(attribute.t.get()));
  for (const auto& tensor : attribute.tensors) key += "," + std::to_string(reinterpret_cast<uintptr_t>(tensor.get()));
  key += ";" + std::to_string(reinterpret_cast<uintptr_t>(attribute.g.get()));
  for (const auto& graph : attribute.graphs) key += "," + std::to_string(reinterpret_cast<uintptr_t>(graph.get()));
  key += "|";
}

}  // namespace

const Function* InferenceState::CalledFunction(const Node& node) const {
  const Function* found = nullptr;
  for (const auto& function : model_.functions) {
    if (function->domain != node.domain() || function->name != node.op_type()) continue;
    // Overloads share a name, and the IR does not record which one a node binds to.
    if (found != nullptr) return nullptr;
    found = function.get();
  }
  return found;
}

void InferenceState::InferFunctionCall(Node& node, const Function& function) {
  auto& chain = calls_->in_progress;
  auto first = std::find(chain.begin(), chain.end(), &function);
  if (first != chain.end()) {
    if (calls_->error.ok()) {
      std::string names;
      for (auto it = first; it != chain.end(); ++it) names += FunctionLabel(**it) + " -> ";
      calls_->error = InvalidModel("function '" + FunctionLabel(function) + "' calls itself: " + names +
                                   FunctionLabel(function));
    }
    return;
  }
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(&function)) + "|";
  for (const Value* input : node.inputs()) {
    if (input != nullptr) {
      AppendType(input->type(), key);
      std::optional<SymbolicData> content = ContentOf(input);
      AppendData(content ? &*content : nullptr, key);
    }
    key += "|";
  }
  for (const Attribute& attribute : node.attributes()) AppendAttribute(attribute, key);
  auto cached = calls_->memo.find(key);
  if (cached == calls_->memo.end()) {
    cached = calls_->memo.emplace(key, InferFunctionBody(node, function)).first;
  }
  ApplyCallResult(node, cached->second);
}

FunctionCallResult InferenceState::InferFunctionBody(const Node& node, const Function& function) {
  std::unique_ptr<Graph> copy = InstantiateFunctionBody(function, node);
  Graph& body = *copy;
  InferenceState inner(model_, function, calls_);
  for (size_t i = 0; i < body.inputs().size() && i < node.inputs().size(); ++i) {
    const Value* argument = node.input(i);
    if (argument == nullptr) continue;
    Value& parameter = *body.inputs()[i];
    // The argument describes this call; a type the function declared is only a fallback.
    const ValueType& given = argument->type();
    if (!given.is_tensor() || given.dtype != DataType::kUndefined || given.shape) parameter.type() = given;
    // Constant arguments too: a Reshape target folded into an initializer still shapes the body.
    if (std::optional<SymbolicData> data = ContentOf(argument)) inner.SetData(&parameter, std::move(*data));
  }
  calls_->in_progress.push_back(&function);
  inner.InferGraph(body);
  calls_->in_progress.pop_back();

  FunctionCallResult result;
  for (const Value* output : body.outputs()) {
    result.outputs.push_back(output->type());
    const SymbolicData* data = inner.DataOf(output);
    result.data.push_back(data != nullptr ? std::optional<SymbolicData>(*data) : std::nullopt);
  }
  ShapeInferenceReport inner_report = inner.TakeReport();
  for (std::string& warning : inner_report.warnings) {
    Warn("function '" + FunctionLabel(function) + "': " + warning);
  }
  unsupported_.insert(inner_report.unsupported_ops.begin(), inner_report.unsupported_ops.end());
  return result;
}

void InferenceState::ApplyCallResult(Node& node, const FunctionCallResult& result) {
  const std::string where = NodeLabel(node);
  for (size_t i = 0; i < node.outputs().size() && i < result.outputs.size(); ++i) {
    Value* output = node.output(i);
    if (output == nullptr) continue;
    const ValueType& type = result.outputs[i];
    ValueType& current = output->type();
    if (!type.is_tensor()) {
      // Sequence and map types are taken whole when nothing is known yet.
      if (current.is_tensor() && current.dtype == DataType::kUndefined && !current.shape) {
        current = type;
        MarkImproved(*output);
      }
      continue;
    }
    MergeDtype(*output, type.dtype, where);
    if (type.shape) MergeShape(*output, *type.shape, where);
    if (result.data[i]) SetData(output, *result.data[i]);
  }
}

}  // namespace fusionopt::shape_inference
