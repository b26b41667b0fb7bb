// The folding passes' small graph edits (passes/util/fold_rewrites.h), asked directly: int64
// initializers and Splits of either opset form, a computed value made an initializer under its
// name, unused operands cleaned up (and what is kept), chains handed to one node, OnlyReadBy.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/util/fold_rewrites.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::OpTypes;
using pass_test::ParseInferred;

namespace {

// x·w + b then Relu over [2]; %m is also read by @other when `shared` is set.
std::unique_ptr<Model> Chain(bool shared = false) {
  return ParseInferred(std::string(R"(ir_version 8
opset "" 17
graph main (float[2] %x) -> (float[2] %y)
  init float[2] %w = [2.0, 3.0]
  init float[2] %b = [0.5, 0.25]
{
  %m = Mul(%x, %w) @head
  %s = Add(%m, %b) @add
  %y = Relu(%s) @relu
)") + (shared ? "  %o = Neg(%m) @other\n" : "") + "}\n");
}

}  // namespace

TEST_CASE("fold rewrites: int64 initializers and Split in both opset forms", "[passes]") {
  auto model = Chain();
  Graph& graph = *model->graph;
  Value* shape = AddInt64Initializer(graph, "w", {2, -1});  // "w" is taken
  CHECK(shape->name() == "w_1");
  CHECK(shape->dtype() == DataType::kInt64);
  CHECK(*shape->initializer()->AsInt64s() == std::vector<int64_t>{2, -1});
  CHECK(shape->initializer()->dims() == std::vector<int64_t>{2});

  Node* split13 = CreateSplit(graph, graph.FindValue("x"), 0, {1, 1}, 13, "split");
  CHECK(split13->name() == "split");
  CHECK(split13->outputs().size() == 2);
  CHECK(split13->output(0) == nullptr);  // fresh slots for the caller
  REQUIRE(split13->inputs().size() == 2);
  CHECK(split13->input(1)->name() == "split_sizes");
  CHECK(*split13->input(1)->initializer()->AsInt64s() == std::vector<int64_t>{1, 1});
  CHECK(split13->GetInt("axis", -1) == 0);
  CHECK(split13->FindAttribute("split") == nullptr);

  Node* split11 = CreateSplit(graph, graph.FindValue("x"), 0, {1, 1}, 11, "split");
  CHECK(split11->name() == "split_1");
  CHECK(split11->inputs().size() == 1);
  CHECK(split11->GetInts("split") == std::vector<int64_t>{1, 1});
}

TEST_CASE("fold rewrites: ReplaceByInitializer keeps the name and readers, RemoveIfUnused cleans up", "[passes]") {
  auto model = Chain();
  Graph& graph = *model->graph;
  Node* head = FindNode(graph, "head");
  Value* m = graph.FindValue("m");
  auto tensor = std::make_shared<Tensor>(Tensor::FromValues<float>(DataType::kFloat, {2}, {4.0f, 6.0f}));
  CHECK(ReplaceByInitializer(graph, *m, tensor) == m);
  CHECK(m->initializer() == tensor);
  CHECK(m->producer() == nullptr);
  CHECK(head->output(0) == nullptr);
  CHECK(FindNode(graph, "add")->input(0) == m);

  // The producer has no outputs left: removing it frees %w, which RemoveIfUnused drops; %x is
  // a graph input and stays, %m is still read and stays.
  graph.RemoveNode(head);
  CHECK(RemoveIfUnused({graph.FindValue("w"), graph.FindValue("x"), m}).empty());
  CHECK(graph.FindValue("w") == nullptr);
  CHECK(graph.FindValue("x") != nullptr);
  CHECK(graph.FindValue("m") == m);
}

TEST_CASE("fold rewrites: RemoveIfUnused removes dead producers back to the initializers", "[passes]") {
  auto model = Chain(/*shared=*/true);
  Graph& graph = *model->graph;
  // %o is read by nothing: @other goes; %m is still read by @add, so @head stays.
  CHECK(RemoveIfUnused({graph.FindValue("o")}).size() == 1);
  CHECK(OpTypes(graph) == std::vector<std::string>{"Mul", "Add", "Relu"});
  CHECK(graph.FindValue("w") != nullptr);
  // A graph output is never removed, nor what it reads.
  CHECK(RemoveIfUnused({graph.FindValue("y")}).empty());
  CHECK(OpTypes(graph) == std::vector<std::string>{"Mul", "Add", "Relu"});
}

TEST_CASE("fold rewrites: AdoptChainResult and ReplaceChain move the chain's result", "[passes]") {
  auto adopted = Chain();
  Graph& graph = *adopted->graph;
  Node* head = FindNode(graph, "head");
  Value* y = graph.FindValue("y");
  AdoptChainResult(graph, *head, 0, {FindNode(graph, "add"), FindNode(graph, "relu")}, *y);
  CHECK(OpTypes(graph) == std::vector<std::string>{"Mul"});
  CHECK(head->output(0) == y);
  CHECK(y->producer() == head);
  CHECK(graph.FindValue("m") == nullptr);
  CHECK(graph.FindValue("s") == nullptr);
  CHECK(graph.FindValue("b")->uses().empty());  // the caller's to clean up

  auto replaced = Chain();
  Graph& other = *replaced->graph;
  Node* replacement = other.CreateNode("LeakyRelu", "", {other.FindValue("x")}, {nullptr}, "fused");
  Value* result = other.FindValue("y");
  ReplaceChain(other, *replacement, 0,
               {FindNode(other, "head"), FindNode(other, "add"), FindNode(other, "relu")}, *result);
  CHECK(OpTypes(other) == std::vector<std::string>{"LeakyRelu"});
  CHECK(result->producer() == replacement);
  CHECK(other.FindValue("m") == nullptr);
}

TEST_CASE("fold rewrites: OnlyReadBy wants one read, by that node, and no graph output", "[passes]") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
graph main (float[2] %x) -> (float[2] %y, float[2] %a)
{
  %a = Neg(%x) @neg
  %t = Relu(%a) @relu
  %u = Add(%t, %t) @twice
  %v = Exp(%u) @exp
  %y = Sigmoid(%v) @sigmoid
}
)");
  Graph& graph = *model->graph;
  CHECK(OnlyReadBy(*graph.FindValue("u"), *FindNode(graph, "exp")));
  CHECK_FALSE(OnlyReadBy(*graph.FindValue("u"), *FindNode(graph, "sigmoid")));  // another reader
  CHECK_FALSE(OnlyReadBy(*graph.FindValue("t"), *FindNode(graph, "twice")));    // read twice
  CHECK_FALSE(OnlyReadBy(*graph.FindValue("a"), *FindNode(graph, "relu")));     // a graph output
}
