#include <catch2/catch.hpp>

#include "ir/graph.h"

using namespace fusionopt;

namespace {

// x -> Relu -> a -> Neg -> b ; graph output b
struct Chain {
  Graph graph;
  Value* x;
  Value* a;
  Value* b;
  Node* relu;
  Node* neg;
  Chain() {
    x = graph.CreateValue("x");
    graph.AddInput(x);
    a = graph.CreateValue("a");
    b = graph.CreateValue("b");
    relu = graph.CreateNode("Relu", "", {x}, {a}, "relu");
    neg = graph.CreateNode("Neg", "", {a}, {b}, "neg");
    graph.AddOutput(b);
  }
};

std::vector<std::string> NodeNames(const Graph& graph) {
  std::vector<std::string> names;
  for (const auto& node : graph.nodes()) names.push_back(node->name());
  return names;
}

}  // namespace

TEST_CASE("use lists and producers follow node creation", "[graph]") {
  Chain chain;
  REQUIRE(chain.a->producer() == chain.relu);
  REQUIRE(chain.a->producer_output_index() == 0);
  REQUIRE(chain.x->uses() == std::vector<Use>{{chain.relu, 0}});
  REQUIRE(chain.a->uses() == std::vector<Use>{{chain.neg, 0}});
  REQUIRE(chain.b->is_graph_output());
  REQUIRE_FALSE(chain.a->is_graph_output());
  REQUIRE(chain.x->is_graph_input());
}

TEST_CASE("ReplaceAllUses rewires consumers and graph outputs", "[graph]") {
  Chain chain;
  chain.graph.ReplaceAllUses(chain.b, chain.a);
  REQUIRE(chain.graph.outputs() == std::vector<Value*>{chain.a});
  chain.graph.RemoveNode(chain.neg);
  REQUIRE(chain.graph.num_nodes() == 1);
  REQUIRE(chain.a->uses().empty());
  REQUIRE(chain.graph.FindValue("b") == nullptr);  // the removed node's output is erased
}

TEST_CASE("ReplaceInput keeps use lists exact", "[graph]") {
  Chain chain;
  chain.neg->ReplaceInput(0, chain.x);
  REQUIRE(chain.a->uses().empty());
  REQUIRE(chain.x->uses().size() == 2);
  chain.neg->ReplaceInput(0, nullptr);
  REQUIRE(chain.x->uses().size() == 1);
}

TEST_CASE("topological sort is stable and fixes out-of-order nodes", "[graph]") {
  Graph graph;
  Value* x = graph.CreateValue("x");
  graph.AddInput(x);
  Value* a = graph.CreateValue("a");
  Value* b = graph.CreateValue("b");
  Value* c = graph.CreateValue("c");
  graph.CreateNode("Neg", "", {a}, {b}, "second");   // reads a before it is produced
  graph.CreateNode("Relu", "", {x}, {a}, "first");
  graph.CreateNode("Abs", "", {x}, {c}, "independent");
  REQUIRE(graph.SortTopologically().ok());
  REQUIRE(NodeNames(graph) == std::vector<std::string>{"first", "second", "independent"});

  // Already sorted: order unchanged.
  REQUIRE(graph.SortTopologically().ok());
  REQUIRE(NodeNames(graph) == std::vector<std::string>{"first", "second", "independent"});
}

TEST_CASE("topological sort reports a cycle with node names", "[graph]") {
  Graph graph;
  Value* a = graph.CreateValue("a");
  Value* b = graph.CreateValue("b");
  graph.CreateNode("Neg", "", {b}, {a}, "n1");
  graph.CreateNode("Neg", "", {a}, {b}, "n2");
  Status status = graph.SortTopologically();
  REQUIRE(status.code() == ErrorCode::kInvalidModel);
  REQUIRE_THAT(status.message(), Catch::Contains("cycle") && Catch::Contains("'n1'") &&
                                     Catch::Contains("'n2'"));
}

TEST_CASE("outer-scope reads order the owning node after the producer", "[graph]") {
  Graph graph;
  Value* cond = graph.CreateValue("cond");
  graph.AddInput(cond);
  Value* outer = graph.CreateValue("outer");
  Value* result = graph.CreateValue("result");
  Node* if_node = graph.CreateNode("If", "", {cond}, {result}, "if");
  Attribute branch;
  branch.name = "then_branch";
  branch.kind = AttributeKind::kGraph;
  branch.g = std::make_unique<Graph>();
  branch.g->AttachTo(if_node);
  Value* inner = branch.g->CreateValue("inner");
  branch.g->CreateNode("Identity", "", {outer}, {inner}, "reads_outer");
  branch.g->AddOutput(inner);
  if_node->mutable_attributes().push_back(std::move(branch));
  graph.CreateNode("Relu", "", {cond}, {outer}, "producer");

  REQUIRE(outer->uses().size() == 1);
  REQUIRE(outer->uses()[0].node->graph() != &graph);
  REQUIRE(graph.SortTopologically().ok());
  REQUIRE(NodeNames(graph) == std::vector<std::string>{"producer", "if"});
  REQUIRE(if_node->Subgraphs().size() == 1);
  REQUIRE(if_node->Subgraphs()[0]->LookupValue("outer") == outer);
  REQUIRE(if_node->Subgraphs()[0]->FindValue("outer") == nullptr);
}

TEST_CASE("UniqueName avoids names of enclosing scopes", "[graph]") {
  Chain chain;
  REQUIRE(chain.graph.UniqueName("fresh") == "fresh");
  REQUIRE(chain.graph.UniqueName("a") == "a_1");
  chain.graph.CreateValue("a_1");
  REQUIRE(chain.graph.UniqueName("a") == "a_2");
}

TEST_CASE("value_info declarations keep their order", "[graph]") {
  Chain chain;
  chain.b->MarkDeclared();  // an output: not an intermediate
  chain.a->MarkDeclared();
  Value* extra = chain.graph.CreateValue("extra");
  extra->MarkDeclared();
  auto values = chain.graph.IntermediateValuesInOrder();
  REQUIRE(values == std::vector<Value*>{chain.a, extra});
}

TEST_CASE("Model::OpsetFor treats ai.onnx as the default domain", "[graph]") {
  Model model;
  model.opsets = {{"ai.onnx", 17, {}}, {"com.microsoft", 1, {}}};
  REQUIRE(model.OpsetFor("") == 17);
  REQUIRE(model.OpsetFor("com.microsoft") == 1);
  REQUIRE_FALSE(model.OpsetFor("com.other").has_value());
}

TEST_CASE("UniqueNodeName takes the first free suffix, freed names included", "[graph]") {
  Chain chain;
  CHECK(chain.graph.UniqueNodeName("fused") == "fused");
  Value* c = chain.graph.CreateValue("c");
  Value* d = chain.graph.CreateValue("d");
  Value* e = chain.graph.CreateValue("e");
  Node* first = chain.graph.CreateNode("Relu", "", {chain.b}, {c}, chain.graph.UniqueNodeName("fused"));
  Node* second = chain.graph.CreateNode("Relu", "", {c}, {d}, chain.graph.UniqueNodeName("fused"));
  Node* third = chain.graph.CreateNode("Relu", "", {d}, {e}, chain.graph.UniqueNodeName("fused"));
  CHECK(first->name() == "fused");
  CHECK(second->name() == "fused_1");
  CHECK(third->name() == "fused_2");
  CHECK(chain.graph.UniqueNodeName("fused") == "fused_3");
  // A name freed below the search's position is found again, by removal or by renaming.
  chain.graph.RemoveNode(third);
  second->set_name("other");
  CHECK(chain.graph.UniqueNodeName("fused") == "fused_1");
  CHECK(chain.graph.UniqueNodeName("other") == "other_1");
  first->set_name("fused_01");  // not a suffix UniqueNodeName makes: "fused" is free, "fused_01" taken
  CHECK(chain.graph.UniqueNodeName("fused") == "fused");
  CHECK(chain.graph.UniqueNodeName("fused_01") == "fused_01_1");
  CHECK(chain.graph.UniqueNodeName("relu") == "relu_1");
}

TEST_CASE("revision changes with the graph's structure, not with reads", "[graph]") {
  Chain chain;
  uint64_t start = chain.graph.revision();
  CHECK(chain.graph.NodeAfter(chain.relu) == chain.neg);
  CHECK(chain.graph.NodeBefore(chain.neg) == chain.relu);
  CHECK(chain.graph.NodeBefore(chain.relu) == nullptr);
  CHECK(chain.graph.UniqueNodeName("neg") == "neg_1");
  CHECK(chain.graph.revision() == start);
  chain.neg->ReplaceInput(0, chain.x);
  uint64_t rewired = chain.graph.revision();
  CHECK(rewired != start);
  chain.graph.RemoveNode(chain.relu);
  CHECK(chain.graph.revision() != rewired);
  // Revisions are unique across graphs: a new graph never repeats an old one's.
  Graph other;
  CHECK(other.revision() != start);
  CHECK(other.revision() != chain.graph.revision());
}

TEST_CASE("UniqueName finds names freed below its search again", "[graph]") {
  Chain chain;
  Graph& graph = chain.graph;
  std::vector<Value*> made;
  for (int i = 0; i < 4; ++i) made.push_back(graph.CreateValue(graph.UniqueName("w")));
  CHECK(made[3]->name() == "w_3");
  CHECK(graph.UniqueName("w") == "w_4");
  graph.EraseValue(made[1]);  // "w_1" is free again: the first free suffix
  CHECK(graph.UniqueName("w") == "w_1");
  graph.CreateValue("w_1");
  graph.EraseValue(made[0]);  // the base itself
  CHECK(graph.UniqueName("w") == "w");
  // A node's outputs free their names with it.
  Value* out = graph.CreateValue(graph.UniqueName("a"));
  CHECK(out->name() == "a_1");
  Node* node = graph.CreateNode("Neg", "", {chain.b}, {out}, "n");
  graph.RemoveNode(node);
  CHECK(graph.UniqueName("a") == "a_1");
}

TEST_CASE("order keys follow every change of the node order", "[graph]") {
  Chain chain;
  Graph& graph = chain.graph;
  auto keys_increase = [&] {
    const Node* previous = nullptr;
    for (const auto& node : graph.nodes()) {
      if (previous != nullptr && !(graph.OrderKey(previous) < graph.OrderKey(node.get()))) return false;
      previous = node.get();
    }
    return true;
  };
  REQUIRE(graph.OrderKey(chain.relu) < graph.OrderKey(chain.neg));
  // 200 nodes moved one after another between relu and neg: the gap there halves each time
  // and runs out after 32, so the graph is renumbered along the way.
  Value* input = chain.x;
  for (int i = 0; i < 200; ++i) {
    Value* output = graph.CreateValue("m" + std::to_string(i));
    Node* node = graph.CreateNode("Relu", "", {input}, {output}, "m" + std::to_string(i));
    graph.MoveBefore(node, chain.neg);
    REQUIRE(keys_increase());
    input = output;
  }
  CHECK(graph.NodeBefore(chain.neg)->name() == "m199");
  // Moved to the front, to the end, and sorted back.
  graph.MoveBefore(chain.neg, graph.nodes().front().get());
  CHECK(keys_increase());
  graph.MoveBefore(chain.relu, nullptr);
  CHECK(keys_increase());
  REQUIRE(graph.SortTopologically().ok());
  CHECK(keys_increase());
  CHECK(graph.OrderKey(chain.relu) < graph.OrderKey(chain.neg));  // neg reads relu's result
  CHECK(graph.NodeAfter(chain.relu) == chain.neg);
}

TEST_CASE("IsDefaultDomain and IsDefaultOp read either spelling of the default domain", "[graph]") {
  Graph graph;
  Value* x = graph.CreateValue("x");
  graph.AddInput(x);
  Node* plain = graph.CreateNode("Relu", "", {x}, {graph.CreateValue("a")}, "plain");
  Node* spelled = graph.CreateNode("Relu", "ai.onnx", {x}, {graph.CreateValue("b")}, "spelled");
  Node* custom = graph.CreateNode("Relu", "com.example", {x}, {graph.CreateValue("c")}, "custom");
  CHECK(IsDefaultDomain(*plain));
  CHECK(IsDefaultDomain(*spelled));
  CHECK_FALSE(IsDefaultDomain(*custom));
  CHECK(IsDefaultOp(spelled, "Relu"));
  CHECK_FALSE(IsDefaultOp(plain, "Neg"));
  CHECK_FALSE(IsDefaultOp(custom, "Relu"));
  CHECK_FALSE(IsDefaultOp(nullptr, "Relu"));
}

TEST_CASE("KnownDims: the numbers when every dim is known, nullopt for a symbol, an unknown dim or rank", "[graph]") {
  CHECK(KnownDims(Shape{Dim::Known(2), Dim::Known(0), Dim::Known(5)}) == std::vector<int64_t>{2, 0, 5});
  CHECK(KnownDims(Shape{}) == std::vector<int64_t>{});  // a scalar
  CHECK_FALSE(KnownDims(Shape{Dim::Known(2), Dim::Symbol("N")}));
  CHECK_FALSE(KnownDims(Shape{Dim::Unknown(), Dim::Known(3)}));

  Graph graph;
  Value* typed = graph.CreateValue("typed");
  typed->type().shape = Shape{Dim::Known(4), Dim::Known(8)};
  CHECK(KnownDims(*typed) == std::vector<int64_t>{4, 8});
  CHECK_FALSE(KnownDims(*graph.CreateValue("untyped")));  // unknown rank
}
