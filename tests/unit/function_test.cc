// Model-local functions: FunctionProto -> Function -> FunctionProto, byte for byte, and the
// errors for functions the IR refuses.
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>

#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include "text_format/text_format.h"
#include "onnx_io/model_io.h"
#include "scratch_dir.h"

using namespace fusionopt;
namespace fs = std::filesystem;

namespace {

constexpr const char* kDomain = "com.test";

onnx::NodeProto* AddNode(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, const std::string& op_type,
                         const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                         const std::string& domain = "") {
  onnx::NodeProto* node = nodes.Add();
  node->set_op_type(op_type);
  if (!domain.empty()) node->set_domain(domain);
  for (const auto& input : inputs) node->add_input(input);
  for (const auto& output : outputs) node->add_output(output);
  return node;
}

void AddOpset(google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& opsets, const std::string& domain,
              int64_t version) {
  onnx::OperatorSetIdProto* opset = opsets.Add();
  opset->set_domain(domain);
  opset->set_version(version);
}

void SetFloatType(onnx::ValueInfoProto& info, const std::string& name, const std::vector<std::string>& dims) {
  info.set_name(name);
  auto* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  for (const auto& dim : dims) {
    auto* entry = tensor->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(dim[0]))) entry->set_dim_value(std::stoll(dim));
    else entry->set_dim_param(dim);
  }
}

// Scale(X, S) -> (Y), attribute alpha:
//   scaled = Mul(X, S); flag = Constant(true)
//   Y = If(flag) then: LeakyRelu(scaled) {alpha: ref alpha} else: Identity(scaled)
onnx::FunctionProto ScaleFunction() {
  onnx::FunctionProto function;
  function.set_name("Scale");
  function.set_domain(kDomain);
  function.set_doc_string("scales, then leaks");
  function.add_input("X");
  function.add_input("S");
  function.add_output("Y");
  function.add_attribute("alpha");
  AddOpset(*function.mutable_opset_import(), "", 17);
  AddNode(*function.mutable_node(), "Mul", {"X", "S"}, {"scaled"})->set_doc_string("body node doc");
  onnx::NodeProto* flag = AddNode(*function.mutable_node(), "Constant", {}, {"flag"});
  onnx::AttributeProto* value = flag->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  value->mutable_t()->add_int32_data(1);
  onnx::NodeProto* gate = AddNode(*function.mutable_node(), "If", {"flag"}, {"Y"});
  onnx::AttributeProto* then_branch = gate->add_attribute();
  then_branch->set_name("then_branch");
  then_branch->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* then_graph = then_branch->mutable_g();
  then_graph->set_name("then");
  onnx::NodeProto* leaky = AddNode(*then_graph->mutable_node(), "LeakyRelu", {"scaled"}, {"leaked"});
  onnx::AttributeProto* alpha = leaky->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_ref_attr_name("alpha");
  then_graph->add_output()->set_name("leaked");
  onnx::AttributeProto* else_branch = gate->add_attribute();
  else_branch->set_name("else_branch");
  else_branch->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* else_graph = else_branch->mutable_g();
  else_graph->set_name("else");
  AddNode(*else_graph->mutable_node(), "Identity", {"scaled"}, {"kept"});
  else_graph->add_output()->set_name("kept");
  return function;
}

// y = com.test::Scale(x, w) {alpha: 0.25}
onnx::ModelProto ModelCalling(std::vector<onnx::FunctionProto> functions, const std::string& callee = "Scale") {
  onnx::ModelProto model;
  model.set_ir_version(8);
  AddOpset(*model.mutable_opset_import(), "", 17);
  AddOpset(*model.mutable_opset_import(), kDomain, 1);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("main");
  SetFloatType(*graph->add_input(), "x", {"N", "4"});
  SetFloatType(*graph->add_input(), "w", {"4"});
  onnx::NodeProto* call = AddNode(*graph->mutable_node(), callee, {"x", "w"}, {"y"}, kDomain);
  call->set_name("call");
  onnx::AttributeProto* alpha = call->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.25f);
  graph->add_output()->set_name("y");
  for (auto& function : functions) *model.add_functions() = std::move(function);
  return model;
}

Result<std::unique_ptr<Model>> Load(const onnx::ModelProto& proto) {
  return LoadModelFromBytes(proto.SerializeAsString(), ".");
}

std::unique_ptr<Model> MustLoad(const onnx::ModelProto& proto) {
  auto model = Load(proto);
  INFO(model.status().message());
  REQUIRE(model.ok());
  return std::move(model).value();
}

std::string LoadError(const onnx::ModelProto& proto) {
  auto model = Load(proto);
  REQUIRE_FALSE(model.ok());
  CHECK(model.status().code() == ErrorCode::kInvalidModel);
  CHECK(model.status().message().find('\n') == std::string::npos);
  return model.status().message();
}

std::string SavedBytes(const Model& model) {
  test_support::ScratchDir dir("function_test");
  auto report = SaveModel(model, (dir / "out.onnx").string());
  INFO(report.status().message());
  REQUIRE(report.ok());
  std::ifstream in(dir / "out.onnx", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::string> OpTypes(const Graph& graph) {
  std::vector<std::string> ops;
  for (const auto& node : graph.nodes()) ops.push_back(node->op_type());
  return ops;
}

std::vector<std::string> Names(const std::vector<Value*>& values) {
  std::vector<std::string> names;
  for (const Value* value : values) names.push_back(value->name());
  return names;
}

void AddUnknownField(onnx::FunctionProto& function, int number, const std::string& bytes) {
  function.GetReflection()->MutableUnknownFields(&function)->AddLengthDelimited(number, bytes);
}

}  // namespace

TEST_CASE("a FunctionProto loads as a Function whose body is a graph", "[function]") {
  auto model = MustLoad(ModelCalling({ScaleFunction()}));

  REQUIRE(model->functions.size() == 1);
  const Function& function = *model->functions[0];
  CHECK(function.domain == kDomain);
  CHECK(function.name == "Scale");
  CHECK(function.attribute_names == std::vector<std::string>{"alpha"});
  CHECK(function.OpsetFor("") == 17);
  CHECK_FALSE(function.OpsetFor(kDomain).has_value());
  CHECK(model->FindFunction(kDomain, "Scale") == &function);
  CHECK(model->FindFunction("", "Scale") == nullptr);

  const Graph& body = *function.body;
  CHECK(Names(body.inputs()) == std::vector<std::string>{"X", "S"});
  CHECK(Names(body.outputs()) == std::vector<std::string>{"Y"});
  CHECK(OpTypes(body) == std::vector<std::string>{"Mul", "Constant", "If"});
  // Formal parameters carry no type: each call brings its own.
  CHECK(body.inputs()[0]->dtype() == DataType::kUndefined);
  CHECK_FALSE(body.inputs()[0]->shape().has_value());
  CHECK(body.initializers().empty());

  // The If's branches read the body's `scaled`, and the use is recorded on it.
  const Node& gate = *body.nodes().back();
  const Graph& then_graph = *gate.FindAttribute("then_branch")->g;
  const Node& leaky = *then_graph.nodes().front();
  const Value* scaled = body.FindValue("scaled");
  CHECK(leaky.input(0) == scaled);
  CHECK(scaled->uses().size() == 2);  // LeakyRelu and Identity, one per branch
  const Attribute& alpha = leaky.attributes().at(0);
  CHECK(alpha.ref_attr_name == "alpha");
  CHECK(alpha.kind == AttributeKind::kFloat);

  // The doc string is not modelled, so it travels in the residual.
  CHECK_FALSE(function.residual.empty());
  CHECK(body.nodes().front()->residual().find("body node doc") != std::string::npos);
}

TEST_CASE("functions save back byte for byte", "[function]") {
  onnx::ModelProto proto = ModelCalling({ScaleFunction()});
  CHECK(SavedBytes(*MustLoad(proto)) == proto.SerializeAsString());

  SECTION("with the IR 10 fields our onnx.proto predates") {
    proto.set_ir_version(10);
    onnx::FunctionProto& function = *proto.mutable_functions(0);
    onnx::AttributeProto gain;  // attribute_proto: a formal attribute with a default
    gain.set_name("gain");
    gain.set_type(onnx::AttributeProto::FLOAT);
    gain.set_f(2.0f);
    AddUnknownField(function, 11, gain.SerializeAsString());
    onnx::ValueInfoProto x_info, scaled_info;
    SetFloatType(x_info, "X", {"N", "4"});
    SetFloatType(scaled_info, "scaled", {"N", "4"});
    AddUnknownField(function, 12, scaled_info.SerializeAsString());
    AddUnknownField(function, 12, x_info.SerializeAsString());
    AddUnknownField(function, 13, "fast");
    onnx::StringStringEntryProto metadata;
    metadata.set_key("origin");
    metadata.set_value("tests");
    AddUnknownField(function, 14, metadata.SerializeAsString());
    auto model = MustLoad(proto);

    // value_info types the body; the formal attribute with a default stays unmodelled.
    const Graph& body = *model->functions[0]->body;
    CHECK(body.inputs()[0]->dtype() == DataType::kFloat);
    CHECK(body.inputs()[0]->shape() == Shape{Dim::Symbol("N"), Dim::Known(4)});
    CHECK(body.inputs()[1]->dtype() == DataType::kUndefined);
    CHECK(body.FindValue("scaled")->dtype() == DataType::kFloat);
    CHECK(model->functions[0]->attribute_names == std::vector<std::string>{"alpha"});
    CHECK(SavedBytes(*model) == proto.SerializeAsString());
  }

  SECTION("with explicitly empty domains and a ref attribute without a type") {
    onnx::FunctionProto& function = *proto.mutable_functions(0);
    function.mutable_opset_import(0)->set_domain("");
    function.mutable_node(0)->set_domain("");
    auto* alpha = function.mutable_node(2)->mutable_attribute(0)->mutable_g()->mutable_node(0)->mutable_attribute(0);
    alpha->clear_type();
    auto model = MustLoad(proto);
    CHECK(SavedBytes(*model) == proto.SerializeAsString());
  }
}

TEST_CASE("a function built in memory saves as a valid FunctionProto", "[function]") {
  auto parsed = ParseModel(R"(ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[N,4] %x, float[4] %b) -> (float[N,4] %y) {
  %y = ai.fusionopt::FusedAddRelu(%x, %b)
}

function ai.fusionopt::FusedAddRelu (%a, %c) -> (%r) opset "" 17 {
  %t = Add(%a, %c)
  %r = Relu(%t)
}
)");
  REQUIRE(parsed.ok());
  const std::string saved = SavedBytes(**parsed);

  onnx::ModelProto proto;
  REQUIRE(proto.ParseFromString(saved));
  REQUIRE(proto.functions_size() == 1);
  const onnx::FunctionProto& function = proto.functions(0);
  CHECK(function.domain() == "ai.fusionopt");
  CHECK(function.name() == "FusedAddRelu");
  CHECK(std::vector<std::string>(function.input().begin(), function.input().end()) ==
        std::vector<std::string>{"a", "c"});
  CHECK(std::vector<std::string>(function.output().begin(), function.output().end()) ==
        std::vector<std::string>{"r"});
  REQUIRE(function.node_size() == 2);
  CHECK(function.node(0).op_type() == "Add");
  CHECK(function.node(1).input(0) == "t");
  REQUIRE(function.opset_import_size() == 1);
  CHECK(function.opset_import(0).version() == 17);
  CHECK_FALSE(function.has_doc_string());
  CHECK(function.attribute_size() == 0);

  // What was saved loads back to the same function and saves to the same bytes.
  auto reloaded = MustLoad(proto);
  REQUIRE(reloaded->functions.size() == 1);
  CHECK(OpTypes(*reloaded->functions[0]->body) == std::vector<std::string>{"Add", "Relu"});
  CHECK(SavedBytes(*reloaded) == saved);
}

TEST_CASE("overloads of one function load side by side; true duplicates do not", "[function]") {
  onnx::FunctionProto first = ScaleFunction();
  onnx::FunctionProto second = ScaleFunction();
  AddUnknownField(first, 13, "v1");
  AddUnknownField(second, 13, "v2");
  onnx::ModelProto proto = ModelCalling({first, second});
  proto.set_ir_version(10);
  CHECK(MustLoad(proto)->functions.size() == 2);

  AddUnknownField(*proto.mutable_functions(1), 13, "v1");  // the last value wins: now v1 twice
  CHECK(LoadError(proto) == "function 'com.test::Scale' (overload 'v1') is defined more than once");

  CHECK(LoadError(ModelCalling({ScaleFunction(), ScaleFunction()})) ==
        "function 'com.test::Scale' is defined more than once");
}

TEST_CASE("invalid functions are refused with one line naming the function", "[function]") {
  onnx::FunctionProto function = ScaleFunction();

  SECTION("a body node reads a name nothing defines") {
    function.mutable_node(0)->set_input(1, "nope");
    CHECK(LoadError(ModelCalling({function})) ==
          "function 'com.test::Scale': node (Mul) reads 'nope', which no node, input or initializer defines");
  }
  SECTION("a body cannot read the main graph's values") {
    function.mutable_node(0)->set_input(1, "w");
    CHECK(LoadError(ModelCalling({function})).find("reads 'w', which no node") != std::string::npos);
  }
  SECTION("an output nothing produces") {
    function.set_output(0, "missing");
    CHECK(LoadError(ModelCalling({function})) == "function 'com.test::Scale': output 'missing' is not produced by any node");
  }
  SECTION("an input listed twice") {
    function.set_input(1, "X");
    CHECK(LoadError(ModelCalling({function})) == "function 'com.test::Scale': input 'X' is listed more than once");
  }
  SECTION("a cycle in the body") {
    function.mutable_node(0)->set_input(1, "Y");  // Mul reads the If's output, which reads Mul's
    std::string error = LoadError(ModelCalling({function}));
    CHECK(error.rfind("function 'com.test::Scale': graph 'Scale' has a cycle through nodes", 0) == 0);
  }
  SECTION("a body node whose domain the function does not import") {
    function.mutable_node(0)->set_domain("com.other");
    CHECK(LoadError(ModelCalling({function})).find("function 'com.test::Scale': node (com.other::Mul) uses domain "
                                                   "'com.other' that has no opset_import") == 0);
  }
  SECTION("a function without a name") {
    function.clear_name();
    CHECK(LoadError(ModelCalling({function})) == "function 'com.test::': a model-local function has no name");
  }
}

TEST_CASE("a function calling itself, directly or through others, is refused", "[function]") {
  auto calling = [](const std::string& name, const std::string& callee) {
    onnx::FunctionProto function;
    function.set_name(name);
    function.set_domain(kDomain);
    function.add_input("X");
    function.add_input("S");
    function.add_output("Y");
    AddOpset(*function.mutable_opset_import(), "", 17);
    AddOpset(*function.mutable_opset_import(), kDomain, 1);
    AddNode(*function.mutable_node(), callee, {"X", "S"}, {"Y"}, kDomain);
    return function;
  };
  CHECK(LoadError(ModelCalling({calling("Scale", "Scale")})) ==
        "function 'com.test::Scale' calls itself: com.test::Scale -> com.test::Scale");
  CHECK(LoadError(ModelCalling({calling("Scale", "Helper"), calling("Helper", "Leaf"), calling("Leaf", "Helper")})) ==
        "function 'com.test::Helper' calls itself: com.test::Helper -> com.test::Leaf -> com.test::Helper");

  // A chain without a loop is fine, whatever the order of definition.
  onnx::FunctionProto leaf = ScaleFunction();
  leaf.set_name("Leaf");
  auto model = MustLoad(ModelCalling({calling("Scale", "Helper"), calling("Helper", "Leaf"), leaf}));
  CHECK(model->functions.size() == 3);
}

TEST_CASE("function bodies keep their tensors inline when the graph's go to external data", "[function]") {
  auto parsed = ParseModel(R"(ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[512] %x) -> (%y) {
  %y = ai.fusionopt::AddBias(%x)
}

function ai.fusionopt::AddBias (%a) -> (%r) opset "" 17 {
  %bias = Constant() {value: tensor float[1] [0.5]}
  %r = Add(%a, %bias)
}
)");
  REQUIRE(parsed.ok());
  Model& model = **parsed;
  std::vector<float> values(512, 0.25f);
  auto big = std::make_shared<const Tensor>(Tensor::FromValues(DataType::kFloat, {512}, values));
  Value* weights = model.graph->CreateValue("weights");
  model.graph->SetInitializer(weights, big);
  model.functions[0]->body->nodes().front()->mutable_attributes()[0].t = big;

  test_support::ScratchDir dir("function_external");
  SaveOptions options;
  options.external_data = true;
  auto report = SaveModel(model, (dir / "out.onnx").string(), options);
  REQUIRE(report.ok());
  CHECK(report->external_bytes == 512 * sizeof(float));  // the initializer only

  onnx::ModelProto saved;
  std::ifstream in(dir / "out.onnx", std::ios::binary);
  REQUIRE(saved.ParseFromIstream(&in));
  CHECK(saved.graph().initializer(0).data_location() == onnx::TensorProto::EXTERNAL);
  const onnx::TensorProto& constant = saved.functions(0).node(0).attribute(0).t();
  CHECK(constant.data_location() == onnx::TensorProto::DEFAULT);
  CHECK(constant.raw_data().size() == 512 * sizeof(float));
}
