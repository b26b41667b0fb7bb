// Syntax tree -> graph: the second step of ParseModel (see parser.cc).
//
// Definitions come first (inputs, initializers, node outputs, `value` lines), in the order
// the ONNX loader creates them, then uses are resolved; a subgraph is built once every name
// of its enclosing graphs exists.
#include <map>

#include "text_format/internal.h"

namespace fusionopt::text_detail {
namespace {

std::string Display(std::string_view name) { return "'%" + std::string(name) + "'"; }

bool SameType(const ValueType& a, const ValueType& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.opaque_type == b.opaque_type;
}

bool HasTypeInfo(const ValueType& type) {
  return !type.is_tensor() || type.dtype != DataType::kUndefined || type.shape.has_value();
}

// The text states a type: it is both what the IR knows and what the model declares.
void SetDeclaredType(Value& value, const ValueType& type) {
  value.type() = type;
  value.set_declared_type(type);
}

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string_view text) : text_(text) {}

  Status Build(GraphSyntax& syntax, Graph& graph) {
    graph.set_name(syntax.name);
    FUSIONOPT_RETURN_IF_ERROR(DefineInputs(syntax, graph));
    FUSIONOPT_RETURN_IF_ERROR(DefineInitializers(syntax, graph));
    std::vector<std::pair<Graph*, GraphSyntax*>> subgraphs;
    std::vector<Node*> nodes;
    for (NodeSyntax& node_syntax : syntax.nodes) {
      FUSIONOPT_ASSIGN_OR_RETURN(Node* node, DefineNode(node_syntax, graph, subgraphs));
      nodes.push_back(node);
    }
    FUSIONOPT_RETURN_IF_ERROR(ConnectOutputs(syntax, graph));
    FUSIONOPT_RETURN_IF_ERROR(DeclareValues(syntax, graph));
    // Every name of this graph now exists, so subgraphs can resolve what they read from it
    // and are checked against redefining it.
    for (auto& [subgraph, subgraph_syntax] : subgraphs) {
      FUSIONOPT_RETURN_IF_ERROR(Build(*subgraph_syntax, *subgraph));
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      FUSIONOPT_RETURN_IF_ERROR(ConnectInputs(syntax.nodes[i], *nodes[i]));
    }
    return Status::Ok();
  }

 private:
  Status ErrorAt(size_t offset, const std::string& message) const {
    return text_detail::ErrorAt(text_, offset, message);
  }

  // Names are unique across a graph and the graphs enclosing it.
  Result<Value*> Define(Graph& graph, const NameRef& ref) {
    if (ref.name.empty()) return ErrorAt(ref.offset, "a value name must not be empty");
    if (Value* existing = graph.LookupValue(ref.name)) {
      return ErrorAt(ref.offset, "value " + Display(ref.name) + " is already defined at line " +
                                     std::to_string(LineOf(text_, defined_at_[existing])));
    }
    Value* value = graph.CreateValue(ref.name);
    defined_at_[value] = ref.offset;
    return value;
  }

  Result<Value*> Resolve(const Graph& graph, const NameRef& ref) const {
    Value* value = graph.LookupValue(ref.name);
    if (value == nullptr) return ErrorAt(ref.offset, "undefined value " + Display(ref.name));
    return value;
  }

  Status DefineInputs(const GraphSyntax& syntax, Graph& graph) {
    for (const TypedName& input : syntax.inputs) {
      FUSIONOPT_ASSIGN_OR_RETURN(Value* value, Define(graph, input.ref));
      if (input.type) SetDeclaredType(*value, *input.type);
      graph.AddInput(value);
    }
    return Status::Ok();
  }

  // An initializer may name a graph input (a default value the caller can override); the
  // input keeps its declared type.
  Status DefineInitializers(const GraphSyntax& syntax, Graph& graph) {
    for (const InitSyntax& init : syntax.initializers) {
      Value* value = graph.FindValue(init.ref.name);
      if (value == nullptr || !value->is_graph_input() || value->is_initializer()) {
        FUSIONOPT_ASSIGN_OR_RETURN(value, Define(graph, init.ref));
        value->type().dtype = init.tensor->dtype();
        Shape shape;
        for (int64_t dim : init.tensor->dims()) shape.push_back(Dim::Known(dim));
        value->type().shape = std::move(shape);
      }
      graph.SetInitializer(value, init.tensor);
    }
    return Status::Ok();
  }

  Result<Node*> DefineNode(NodeSyntax& syntax, Graph& graph,
                           std::vector<std::pair<Graph*, GraphSyntax*>>& subgraphs) {
    std::vector<Value*> outputs;
    for (const NameRef& ref : syntax.outputs) {
      Value* value = nullptr;
      if (!ref.name.empty()) {
        FUSIONOPT_ASSIGN_OR_RETURN(value, Define(graph, ref));
      }
      outputs.push_back(value);
    }
    Node* node = graph.CreateNode(syntax.op_type, syntax.domain, {}, outputs, syntax.name);
    for (AttributeSyntax& attribute_syntax : syntax.attributes) {
      Attribute attribute = std::move(attribute_syntax.attribute);
      for (auto& graph_syntax : attribute_syntax.graphs) {
        auto subgraph = std::make_unique<Graph>();
        subgraph->AttachTo(node);
        subgraphs.emplace_back(subgraph.get(), graph_syntax.get());
        if (attribute.kind == AttributeKind::kGraph) {
          attribute.g = std::move(subgraph);
        } else {
          attribute.graphs.push_back(std::move(subgraph));
        }
      }
      node->mutable_attributes().push_back(std::move(attribute));
    }
    return node;
  }

  Status ConnectOutputs(const GraphSyntax& syntax, Graph& graph) {
    for (const TypedName& output : syntax.outputs) {
      if (output.ref.name.empty()) return ErrorAt(output.ref.offset, "a graph output needs a name");
      FUSIONOPT_ASSIGN_OR_RETURN(Value* value, Resolve(graph, output.ref));
      if (output.type) {
        const auto& declared = value->declared_type();
        if (declared && HasTypeInfo(*declared) && !SameType(*declared, *output.type)) {
          return ErrorAt(output.ref.offset, "graph output " + Display(output.ref.name) +
                                                " has a different type where it is declared");
        }
        SetDeclaredType(*value, *output.type);
      }
      graph.AddOutput(value);
    }
    return Status::Ok();
  }

  // `value` lines are ONNX value_info: types of intermediates, in declaration order. Like
  // the loader, a line naming a value nothing defines declares that value.
  Status DeclareValues(const GraphSyntax& syntax, Graph& graph) {
    for (const TypedName& declaration : syntax.value_declarations) {
      const NameRef& ref = declaration.ref;
      Value* value = graph.FindValue(ref.name);
      if (value == nullptr) {
        FUSIONOPT_ASSIGN_OR_RETURN(value, Define(graph, ref));
      } else if (value->is_graph_input() || value->is_graph_output()) {
        return ErrorAt(ref.offset, Display(ref.name) + " is a graph input or output; its type "
                                                       "belongs in the graph's signature");
      } else if (value->has_declared_type()) {
        return ErrorAt(ref.offset, "the type of " + Display(ref.name) + " is declared twice");
      }
      if (declaration.type) SetDeclaredType(*value, *declaration.type);
      value->MarkDeclared();
    }
    return Status::Ok();
  }

  Status ConnectInputs(const NodeSyntax& syntax, Node& node) {
    for (const NameRef& ref : syntax.inputs) {
      Value* value = nullptr;
      if (!ref.name.empty()) {
        FUSIONOPT_ASSIGN_OR_RETURN(value, Resolve(*node.graph(), ref));
      }
      node.AddInput(value);
    }
    return Status::Ok();
  }

  std::string_view text_;
  std::map<const Value*, size_t> defined_at_;
};

}  // namespace

Status BuildGraph(std::string_view text, GraphSyntax& syntax, Graph& graph) {
  return GraphBuilder(text).Build(syntax, graph);
}

}  // namespace fusionopt::text_detail
