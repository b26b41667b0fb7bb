// Bypassing nodes without renaming the model's interface (passes/util/bypass.h): readers read
// the input; a graph output's name moves to the input's producer where it can, and the node
// stays where it cannot.
#include <catch2/catch.hpp>

#include "ir/verifier.h"
#include "pass_test_support.h"
#include "passes/util/bypass.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::OpTypes;
using pass_test::Parse;

namespace {

std::unique_ptr<Model> Chain(const std::string& outputs) {
  return Parse(R"(ir_version 8
opset "" 17
graph main (float[4] %x) -> ()" + outputs + R"()
{
  %t = Relu(%x) @relu
  %y = Identity(%t) @identity
  %z = Neg(%y) @neg
}
)");
}

}  // namespace

TEST_CASE("BypassChain: the readers of the chain's output read its input", "[passes]") {
  auto model = Chain("float[4] %z");
  Graph& graph = *model->graph;
  Node* identity = FindNode(graph, "identity");
  REQUIRE(BypassChain(graph, {identity}, *identity->input(0), *identity->output(0)));
  CHECK(OpTypes(graph) == std::vector<std::string>{"Relu", "Neg"});
  CHECK(FindNode(graph, "neg")->input(0)->name() == "t");
  CHECK(VerifyModel(*model).ok());
}

TEST_CASE("BypassChain: a graph output keeps its name, written by the input's producer", "[passes]") {
  auto model = Chain("float[4] %y, float[4] %z");
  Graph& graph = *model->graph;
  Node* identity = FindNode(graph, "identity");
  REQUIRE(CanProduceInstead(graph, *identity->input(0)));
  REQUIRE(BypassChain(graph, {identity}, *identity->input(0), *identity->output(0)));
  CHECK(OpTypes(graph) == std::vector<std::string>{"Relu", "Neg"});
  CHECK(FindNode(graph, "relu")->output(0)->name() == "y");  // the interface's name survives
  CHECK(FindNode(graph, "neg")->input(0)->name() == "y");
  CHECK(VerifyModel(*model).ok());
}

TEST_CASE("BypassChain: a graph output over a graph input cannot move, and nothing changes", "[passes]") {
  auto model = Parse(R"(ir_version 8
opset "" 17
graph main (float[4] %x) -> (float[4] %y)
{
  %y = Identity(%x) @identity
}
)");
  Graph& graph = *model->graph;
  Node* identity = FindNode(graph, "identity");
  CHECK_FALSE(CanProduceInstead(graph, *identity->input(0)));
  CHECK_FALSE(BypassChain(graph, {identity}, *identity->input(0), *identity->output(0)));
  CHECK(OpTypes(graph) == std::vector<std::string>{"Identity"});
}
