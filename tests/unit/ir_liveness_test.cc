// Liveness: when each value of a graph is last needed, the one analysis behind buffer reuse in
// the CPU executor (its releases) and the CUDA session (its storage pool).
#include <catch2/catch.hpp>

#include "ir/liveness.h"
#include "text_format/text_format.h"

using namespace fusionopt;

namespace {

std::unique_ptr<Model> Parse(const std::string& graph) {
  auto model = ParseModel("ir_version 8\nopset \"\" 17\n" + graph);
  INFO(model.status().message());
  REQUIRE(model.ok());
  return std::move(*model);
}

const Value& Named(const Model& model, const std::string& name) {
  const Value* value = model.graph->FindValue(name);
  REQUIRE(value != nullptr);
  return *value;
}

std::vector<std::string> Names(const std::vector<const Value*>& values) {
  std::vector<std::string> names;
  for (const Value* value : values) names.push_back(value->name());
  return names;
}

// 0: a = Relu(x)   1: b = Reshape(a)   2: c = Neg(x)   3: unread = Exp(c)   4: y = Add(b, c)
const char* kChain = R"(graph g (float[2,3] %x) -> (float[6] %y)
  init int64[1] %flat = [6]
{
  %a = Relu(%x)
  %b = Reshape(%a, %flat)
  %c = Neg(%x)
  %unread = Exp(%c)
  %y = Add(%b, %c)
})";

}  // namespace

TEST_CASE("Liveness: last readers, unread values at their writer, graph outputs to the end", "[ir]") {
  auto model = Parse(kChain);
  const Liveness liveness(*model->graph);
  CHECK(liveness.LastUse(Named(*model, "x")) == 2);
  CHECK(liveness.LastUse(Named(*model, "a")) == 1);
  CHECK(liveness.LastUse(Named(*model, "c")) == 4);
  CHECK(liveness.LastUse(Named(*model, "unread")) == 3);
  CHECK(liveness.LastUse(Named(*model, "y")) == Liveness::kToTheEnd);
  CHECK(Names(liveness.DyingAt(4)) == std::vector<std::string>{"c", "b"});
  CHECK(liveness.DyingAt(0).empty());
}

TEST_CASE("Liveness: a view keeps its input's storage alive as long as the view is read", "[ir]") {
  auto model = Parse(kChain);
  const Liveness views(*model->graph, [](const Node& node) { return node.op_type() == "Reshape"; });
  CHECK(views.LastUse(Named(*model, "a")) == 4);  // b, a view of a, is read by the Add
  CHECK(views.LastUse(Named(*model, "b")) == 4);
  CHECK(Names(views.DyingAt(1)) == std::vector<std::string>{"flat"});
}

TEST_CASE("Liveness: what a subgraph reads from outside is needed by the node that holds it", "[ir]") {
  auto model = Parse(R"(graph g (bool[] %c, float[4] %x) -> (float[4] %y) {
  %t = Sigmoid(%x)
  %y = If(%c) {then_branch: graph yes () -> (float[4] %m) {
    %m = Mul(%x, %t)
  }, else_branch: graph no () -> (float[4] %s) {
    %s = Sqrt(%t)
  }}
})");
  const Liveness liveness(*model->graph);
  CHECK(liveness.LastUse(Named(*model, "t")) == 1);
  CHECK(liveness.LastUse(Named(*model, "x")) == 1);
  CHECK(Names(liveness.DyingAt(1)) == std::vector<std::string>{"x", "c", "t"});
}
