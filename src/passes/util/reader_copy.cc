#include "passes/util/reader_copy.h"

namespace fusionopt::passes {

Node* CopyForReader(Graph& graph, const Node& node, Node& reader) {
  Value* output = node.output(0);
  Value* copy = graph.CreateValue(graph.UniqueName(output->name()));
  copy->type() = output->type();
  Node* clone = graph.CreateNode(node.op_type(), node.domain(), node.inputs(), {copy},
                                 graph.UniqueNodeName(node.name().empty() ? node.op_type() : node.name()));
  for (const Attribute& attribute : node.attributes()) clone->SetAttribute(attribute.CopyWithoutGraphs());
  graph.MoveBefore(clone, &reader);
  for (size_t i = 0; i < reader.inputs().size(); ++i) {
    if (reader.input(i) == output) reader.ReplaceInput(static_cast<int>(i), copy);
  }
  return clone;
}

}  // namespace fusionopt::passes
