// Compact graph building for the shape inference tests: shapes are written the way
// ShapeToString prints them ("[batch,3,?]"), and a value's type reads back as
// "float[batch,3,?]" (or "float[*]" when the rank is unknown).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::testing {

inline Shape ParseShape(std::string_view text) {
  Shape shape;
  std::string_view body = text.substr(1, text.size() - 2);
  while (!body.empty()) {
    size_t comma = body.find(',');
    std::string_view item = body.substr(0, comma);
    if (item == "?") {
      shape.push_back(Dim::Unknown());
    } else if (item.find_first_not_of("0123456789") == std::string_view::npos) {
      shape.push_back(Dim::Known(std::stoll(std::string(item))));
    } else {
      shape.push_back(Dim::Symbol(std::string(item)));
    }
    body = comma == std::string_view::npos ? std::string_view() : body.substr(comma + 1);
  }
  return shape;
}

inline std::string TypeOf(const Value* value) {
  std::string dtype(NameOf(value->dtype()));
  return dtype + (value->shape() ? ShapeToString(*value->shape()) : "[*]");
}

// A copyable attribute description (Attribute itself is move-only: it may own a graph).
struct AttrSpec {
  Attribute Make() const {
    Attribute attribute;
    attribute.name = name;
    attribute.kind = kind;
    attribute.i = i;
    attribute.s = s;
    attribute.t = t;
    attribute.ints = ints;
    attribute.floats = floats;
    return attribute;
  }

  std::string name;
  AttributeKind kind = AttributeKind::kUndefined;
  int64_t i = 0;
  std::string s;
  TensorPtr t;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

inline AttrSpec IntAttr(std::string name, int64_t value) {
  AttrSpec spec;
  spec.name = std::move(name);
  spec.kind = AttributeKind::kInt;
  spec.i = value;
  return spec;
}

inline AttrSpec IntsAttr(std::string name, std::vector<int64_t> values) {
  AttrSpec spec;
  spec.name = std::move(name);
  spec.kind = AttributeKind::kInts;
  spec.ints = std::move(values);
  return spec;
}

inline AttrSpec FloatsAttr(std::string name, std::vector<float> values) {
  AttrSpec spec;
  spec.name = std::move(name);
  spec.kind = AttributeKind::kFloats;
  spec.floats = std::move(values);
  return spec;
}

inline AttrSpec StringAttr(std::string name, std::string value) {
  AttrSpec spec;
  spec.name = std::move(name);
  spec.kind = AttributeKind::kString;
  spec.s = std::move(value);
  return spec;
}

inline AttrSpec TensorAttr(std::string name, Tensor tensor) {
  AttrSpec spec;
  spec.name = std::move(name);
  spec.kind = AttributeKind::kTensor;
  spec.t = std::make_shared<Tensor>(std::move(tensor));
  return spec;
}

// Attaches `body` to `node` as graph attribute `name`.
inline void SetGraphAttribute(Node* node, std::string name, std::unique_ptr<Graph> body) {
  body->AttachTo(node);
  Attribute attribute;
  attribute.name = std::move(name);
  attribute.kind = AttributeKind::kGraph;
  attribute.g = std::move(body);
  node->SetAttribute(std::move(attribute));
}

inline Tensor Int64Tensor(std::vector<int64_t> values, std::vector<int64_t> dims) {
  return Tensor::FromValues<int64_t>(DataType::kInt64, std::move(dims), values);
}

inline Tensor Int64Vector(std::vector<int64_t> values) {
  auto count = static_cast<int64_t>(values.size());
  return Int64Tensor(std::move(values), {count});
}

inline Tensor FloatVector(std::vector<float> values) {
  auto count = static_cast<int64_t>(values.size());
  return Tensor::FromValues<float>(DataType::kFloat, {count}, values);
}

// A model with one graph and a default-domain opset; values are created on demand.
class TestGraph {
 public:
  explicit TestGraph(int64_t opset = 17) {
    ImportOpset("", opset);
    model_.graph = std::make_unique<Graph>();
  }

  void ImportOpset(const std::string& domain, int64_t version) {
    OpsetImport opset;
    opset.domain = domain;
    opset.version = version;
    model_.opsets.push_back(opset);
  }

  Model& model() { return model_; }
  Graph& graph() { return *model_.graph; }

  // `shape` "" leaves the rank unknown.
  Value* Input(const std::string& name, DataType dtype, std::string_view shape) {
    Value* value = graph().CreateValue(name);
    value->type().dtype = dtype;
    if (!shape.empty()) value->type().shape = ParseShape(shape);
    graph().AddInput(value);
    return value;
  }

  // An initializer without any type set: inference types it from the tensor.
  Value* Initializer(const std::string& name, Tensor tensor) {
    Value* value = graph().CreateValue(name);
    graph().SetInitializer(value, std::make_shared<Tensor>(std::move(tensor)));
    return value;
  }

  Value* Ints(const std::string& name, std::vector<int64_t> values) {
    return Initializer(name, Int64Vector(std::move(values)));
  }

  // Creates the node with fresh outputs named `outputs` ("" leaves that output absent).
  Node* Op(const std::string& op_type, const std::vector<Value*>& inputs,
           const std::vector<std::string>& outputs, const std::vector<AttrSpec>& attributes = {},
           const std::string& domain = "") {
    std::vector<Value*> created;
    for (const std::string& name : outputs) {
      created.push_back(name.empty() ? nullptr : graph().CreateValue(name));
    }
    Node* node = graph().CreateNode(op_type, domain, inputs, created,
                                    "/" + op_type + "_" + std::to_string(++count_));
    for (const AttrSpec& attribute : attributes) node->SetAttribute(attribute.Make());
    return node;
  }

  // Single-output shorthand: returns the output value.
  Value* Apply(const std::string& op_type, const std::vector<Value*>& inputs,
               const std::string& output, const std::vector<AttrSpec>& attributes = {}) {
    return Op(op_type, inputs, {output}, attributes)->output(0);
  }

  ShapeInferenceReport Infer() { return InferShapes(model_); }

 private:
  Model model_;
  int count_ = 0;
};

}  // namespace fusionopt::testing
