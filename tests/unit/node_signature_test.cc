// Node input/output counts checked against the ONNX operator schemas on load
// (onnx_io/node_signature.h), and the elementwise engine's own operand-count gate for graphs
// that never went through the loader (the pipeline fuzzer's finding: a one-input Mul read a
// register that did not exist while constant folding).
#include <catch2/catch.hpp>

#include <string>

#include <onnx/onnx_pb.h>

#include "cpu_runtime/engine/session.h"
#include "text_format/text_format.h"
#include "onnx_io/model_io.h"
#include "passes/pipeline.h"

using namespace fusionopt;

namespace {

onnx::ValueInfoProto FloatVector(const std::string& name) {
  onnx::ValueInfoProto info;
  info.set_name(name);
  auto* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  tensor->mutable_shape()->add_dim()->set_dim_value(2);
  return info;
}

// A graph x -> (one node) -> y at `opset`; the node's inputs and outputs are the caller's.
onnx::ModelProto OneNode(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                         int64_t opset = 17, const std::string& domain = "") {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(opset);
  if (!domain.empty()) {
    auto* custom = model.add_opset_import();
    custom->set_domain(domain);
    custom->set_version(1);
  }
  auto* graph = model.mutable_graph();
  graph->set_name("g");
  *graph->add_input() = FloatVector("x");
  auto* node = graph->add_node();
  node->set_name("n");
  node->set_op_type(op);
  node->set_domain(domain);
  for (const auto& name : inputs) node->add_input(name);
  for (const auto& name : outputs) node->add_output(name);
  *graph->add_output() = FloatVector("y");
  return model;
}

Status LoadStatus(const onnx::ModelProto& proto) { return LoadModelFromBytes(proto.SerializeAsString(), ".").status(); }

}  // namespace

TEST_CASE("nodes with input or output counts outside their schema are refused by name", "[onnx_io]") {
  SECTION("a Mul with one input") {
    Status status = LoadStatus(OneNode("Mul", {"x"}, {"y"}));
    REQUIRE(status.code() == ErrorCode::kInvalidModel);
    REQUIRE(status.message() == "node 'n' (Mul) has 1 input; Mul-14 takes 2");
  }
  SECTION("a Mul with three inputs") {
    REQUIRE(LoadStatus(OneNode("Mul", {"x", "x", "x"}, {"y"})).message() ==
            "node 'n' (Mul) has 3 inputs; Mul-14 takes 2");
  }
  SECTION("a Relu with two outputs") {
    REQUIRE(LoadStatus(OneNode("Relu", {"x"}, {"y", "z"})).message() == "node 'n' (Relu) has 2 outputs; Relu-14 has 1");
  }
  SECTION("a Sum with no input") {
    REQUIRE(LoadStatus(OneNode("Sum", {}, {"y"})).message() == "node 'n' (Sum) has 0 inputs; Sum-13 takes at least 1");
  }
  SECTION("a required input left empty") {
    REQUIRE(LoadStatus(OneNode("Add", {"x", ""}, {"y"})).message() ==
            "node 'n' (Add) leaves input 1 ('B') empty; Add-14 requires it");
  }
  SECTION("the version that applies is the model's: Clip-6 takes its bounds as attributes") {
    REQUIRE(LoadStatus(OneNode("Clip", {"x", "x"}, {"y"}, 6)).message() ==
            "node 'n' (Clip) has 2 inputs; Clip-6 takes 1");
  }
  SECTION("a node inside an If branch") {
    onnx::ModelProto proto = OneNode("If", {"x"}, {"y"});
    auto* branch = proto.mutable_graph()->mutable_node(0)->add_attribute();
    branch->set_name("then_branch");
    branch->set_type(onnx::AttributeProto::GRAPH);
    auto* body = branch->mutable_g();
    body->set_name("then");
    auto* inner = body->add_node();
    inner->set_name("inner");
    inner->set_op_type("Div");
    inner->add_input("x");
    inner->add_output("t");
    *body->add_output() = FloatVector("t");
    REQUIRE_THAT(LoadStatus(proto).message(), Catch::Contains("node 'inner' (Div) has 1 input; Div-14 takes 2"));
  }
}

TEST_CASE("counts the schema allows load, and ops the library cannot judge are left alone", "[onnx_io]") {
  SECTION("optional inputs omitted or left empty") {
    REQUIRE(LoadStatus(OneNode("Clip", {"x"}, {"y"})).ok());
    REQUIRE(LoadStatus(OneNode("Clip", {"x", "", "x"}, {"y"})).ok());
  }
  SECTION("optional outputs omitted") {
    REQUIRE(LoadStatus(OneNode("Dropout", {"x"}, {"y"})).ok());
    REQUIRE(LoadStatus(OneNode("Dropout", {"x"}, {"y", "mask"})).ok());
  }
  SECTION("variadic inputs") { REQUIRE(LoadStatus(OneNode("Sum", {"x", "x", "x", "x"}, {"y"})).ok()); }
  SECTION("a newer opset than the library knows: ReduceMean-18 reads axes as an input") {
    onnx::ModelProto proto = OneNode("ReduceMean", {"x", "axes"}, {"y"}, 18);
    auto* axes = proto.mutable_graph()->add_initializer();
    axes->set_name("axes");
    axes->set_data_type(onnx::TensorProto::INT64);
    axes->add_dims(1);
    axes->add_int64_data(0);
    REQUIRE(LoadStatus(proto).ok());
  }
  SECTION("ops of other domains") { REQUIRE(LoadStatus(OneNode("Frob", {"x", "x", "x"}, {"y"}, 17, "com.example")).ok()); }
}

// A graph built without the loader (IR text, a pass's rewrite) reaches the engine unchecked:
// the kernels, fused programs and fusion checks share ElementwiseExpr's gate.
TEST_CASE("the elementwise engine refuses a node with the wrong operand count", "[cpu]") {
  const char* kOneInputMul = R"(
ir_version 8
opset "" 17
graph t (float[2] %x) -> (float[2] %y)
{
  %c = Constant() {value: tensor float[2] [1.0, 2.0]} @c
  %m = Mul(%c) @m
  %y = Add(%x, %m) @a
}
)";
  auto model = ParseModel(kOneInputMul);
  REQUIRE(model.ok());
  auto session = cpu::Session::Create(**model);
  REQUIRE(session.status().code() == ErrorCode::kInvalidModel);
  REQUIRE_THAT(session.status().message(), Catch::Contains("'m'") && Catch::Contains("has 1 input; Mul takes 2"));

  // O3 folds, fuses and outlines around it without reading past its operands; the node stays.
  passes::PipelineOptions options;
  options.level = 3;
  options.target = "h100";
  options.check_each_pass = true;
  auto report = passes::RunPipeline(**model, options);
  REQUIRE(report.ok());
  const Node* mul = nullptr;
  for (const auto& node : (*model)->graph->nodes()) {
    if (node->name() == "m") mul = node.get();
  }
  REQUIRE(mul != nullptr);
  REQUIRE(mul->op_type() == "Mul");

  auto where = ParseModel(R"(
ir_version 8
opset "" 17
graph t (bool[2] %b, float[2] %x) -> (float[2] %y)
{
  %y = Where(%b, %x) @w
}
)");
  REQUIRE(where.ok());
  REQUIRE_THAT(cpu::Session::Create(**where).status().message(), Catch::Contains("has 2 inputs; Where takes 3"));

  auto good = ParseModel(R"(
ir_version 8
opset "" 17
graph t (float[2] %x) -> (float[2] %y)
{
  %y = Clip(%x, , %x) @clip
}
)");
  REQUIRE(good.ok());
  REQUIRE(cpu::Session::Create(**good).ok());
}
