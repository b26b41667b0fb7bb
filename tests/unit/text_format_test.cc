#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "text_format/text_format.h"

using namespace fusionopt;

namespace {

std::unique_ptr<Model> MustParse(std::string_view text) {
  auto parsed = ParseModel(text);
  INFO(parsed.status().message());
  REQUIRE(parsed.ok());
  return std::move(parsed).value();
}

std::string ParseError(std::string_view text) {
  auto parsed = ParseModel(text);
  REQUIRE_FALSE(parsed.ok());
  REQUIRE(parsed.status().code() == ErrorCode::kInvalidModel);
  return parsed.status().message();
}

std::string NameOrEmpty(const Value* value) {
  return value == nullptr ? "<omitted>" : value->name();
}

std::vector<std::string> Names(const std::vector<Value*>& values) {
  std::vector<std::string> names;
  for (const Value* value : values) names.push_back(NameOrEmpty(value));
  return names;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

bool SameTensor(const TensorPtr& a, const TensorPtr& b) {
  return (a == nullptr) == (b == nullptr) && (a == nullptr || a->ContentEquals(*b));
}

void ExpectSameValueInfo(const Value* a, const Value* b) {
  INFO("value " << NameOrEmpty(a));
  REQUIRE(NameOrEmpty(a) == NameOrEmpty(b));
  if (a == nullptr) return;
  CHECK(a->dtype() == b->dtype());
  CHECK(a->shape() == b->shape());
  CHECK(a->type().opaque_type == b->type().opaque_type);
  CHECK(a->uses().size() == b->uses().size());
  CHECK(a->producer_output_index() == b->producer_output_index());
  CHECK(SameTensor(a->initializer(), b->initializer()));
}

void ExpectSameGraph(const Graph& a, const Graph& b);

void ExpectSameAttribute(const Attribute& a, const Attribute& b) {
  INFO("attribute " << a.name);
  REQUIRE(a.name == b.name);
  REQUIRE(a.kind == b.kind);
  CHECK(a.i == b.i);
  CHECK(SameBits(a.f, b.f));
  CHECK(a.s == b.s);
  CHECK(a.ints == b.ints);
  REQUIRE(a.floats.size() == b.floats.size());
  for (size_t i = 0; i < a.floats.size(); ++i) CHECK(SameBits(a.floats[i], b.floats[i]));
  CHECK(a.strings == b.strings);
  CHECK(SameTensor(a.t, b.t));
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) CHECK(SameTensor(a.tensors[i], b.tensors[i]));
  CHECK(a.ref_attr_name == b.ref_attr_name);
  if (a.kind == AttributeKind::kOpaque) CHECK(a.residual == b.residual);
  REQUIRE((a.g == nullptr) == (b.g == nullptr));
  if (a.g) ExpectSameGraph(*a.g, *b.g);
  REQUIRE(a.graphs.size() == b.graphs.size());
  for (size_t i = 0; i < a.graphs.size(); ++i) ExpectSameGraph(*a.graphs[i], *b.graphs[i]);
}

// Structural equality that does not go through the printer.
void ExpectSameGraph(const Graph& a, const Graph& b) {
  INFO("graph " << a.name());
  REQUIRE(a.name() == b.name());
  REQUIRE(Names(a.inputs()) == Names(b.inputs()));
  REQUIRE(Names(a.outputs()) == Names(b.outputs()));
  REQUIRE(Names(a.initializers()) == Names(b.initializers()));
  REQUIRE(Names(a.IntermediateValuesInOrder()) == Names(b.IntermediateValuesInOrder()));
  for (size_t i = 0; i < a.inputs().size(); ++i) ExpectSameValueInfo(a.inputs()[i], b.inputs()[i]);
  for (size_t i = 0; i < a.outputs().size(); ++i) {
    ExpectSameValueInfo(a.outputs()[i], b.outputs()[i]);
  }
  for (size_t i = 0; i < a.initializers().size(); ++i) {
    ExpectSameValueInfo(a.initializers()[i], b.initializers()[i]);
  }
  REQUIRE(a.num_nodes() == b.num_nodes());
  auto node_b = b.nodes().begin();
  for (const auto& node_a : a.nodes()) {
    const Node& other = **node_b++;
    INFO("node " << node_a->op_type() << " " << node_a->name());
    CHECK(node_a->op_type() == other.op_type());
    CHECK(node_a->domain() == other.domain());
    CHECK(node_a->name() == other.name());
    REQUIRE(Names(node_a->inputs()) == Names(other.inputs()));
    REQUIRE(Names(node_a->outputs()) == Names(other.outputs()));
    for (size_t i = 0; i < node_a->outputs().size(); ++i) {
      ExpectSameValueInfo(node_a->outputs()[i], other.outputs()[i]);
    }
    REQUIRE(node_a->attributes().size() == other.attributes().size());
    for (size_t i = 0; i < node_a->attributes().size(); ++i) {
      ExpectSameAttribute(node_a->attributes()[i], other.attributes()[i]);
    }
  }
}

// Every input slot is recorded on its value's use list and every use points back; every
// output knows its producer. Checked through all subgraphs.
void ExpectWired(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const Value* input = node->inputs()[i];
      if (input == nullptr) continue;
      const auto& uses = input->uses();
      CHECK(std::count(uses.begin(), uses.end(), Use{node.get(), static_cast<int>(i)}) == 1);
    }
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* output = node->outputs()[i];
      if (output == nullptr) continue;
      CHECK(output->producer() == node.get());
      CHECK(output->producer_output_index() == static_cast<int>(i));
    }
    for (const Graph* subgraph : node->Subgraphs()) {
      CHECK(subgraph->parent() == &graph);
      CHECK(subgraph->owner_node() == node.get());
      ExpectWired(*subgraph);
    }
  }
  for (const Value* value : graph.AllValues()) {
    for (const Use& use : value->uses()) CHECK(use.node->input(use.input_index) == value);
  }
}

// Print(Parse(text)) == text, and parsing the printed text again gives the same graph.
void ExpectCanonical(const std::string& text) {
  auto model = MustParse(text);
  ExpectWired(*model->graph);
  const std::string printed = PrintModel(*model);
  REQUIRE(printed == text);
  auto reparsed = MustParse(printed);
  ExpectSameGraph(*model->graph, *reparsed->graph);
}

Node* NodeNamed(const Graph& graph, std::string_view op_type) {
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == op_type) return node.get();
  }
  FAIL("no node " << op_type);
  return nullptr;
}

TensorPtr Floats(std::vector<int64_t> dims, const std::vector<float>& values) {
  return std::make_shared<const Tensor>(
      Tensor::FromValues(DataType::kFloat, std::move(dims), values));
}

}  // namespace

// ---------------------------------------------------------------- printing

TEST_CASE("a small graph prints exactly", "[text]") {
  Model model;
  model.ir_version = 8;
  model.opsets = {{"", 17}};
  model.graph = std::make_unique<Graph>();
  Graph& graph = *model.graph;
  graph.set_name("tiny");
  Value* x = graph.CreateValue("x");
  x->type() = ValueType{DataType::kFloat, Shape{Dim::Symbol("N"), Dim::Known(4)}, {}, {}};
  graph.AddInput(x);
  Value* bias = graph.CreateValue("b");
  bias->type() = ValueType{DataType::kFloat, Shape{Dim::Known(4)}, {}, {}};
  graph.SetInitializer(bias, Floats({4}, {0.5f, -1.0f, 2.0f, 0.1f}));
  Value* sum = graph.CreateValue("/block.0/Add_output_0");
  Value* mask = graph.CreateValue("mask");
  Value* y = graph.CreateValue("y");
  y->type() = x->type();
  graph.CreateNode("Add", "", {x, bias}, {sum}, "/block.0/Add");
  Node* dropout = graph.CreateNode("Dropout", "", {sum, nullptr}, {y, mask});
  Attribute ratio;
  ratio.name = "ratio";
  ratio.kind = AttributeKind::kFloat;
  ratio.f = 0.25f;
  dropout->SetAttribute(std::move(ratio));
  graph.AddOutput(y);

  REQUIRE(PrintModel(model) ==
          "ir_version 8\n"
          "opset \"\" 17\n"
          "graph tiny (float[N,4] %x) -> (float[N,4] %y)\n"
          "  init float[4] %b = [0.5, -1.0, 2.0, 0.1]\n"
          "{\n"
          "  %/block.0/Add_output_0 = Add(%x, %b) @/block.0/Add\n"
          "  %y, %mask = Dropout(%/block.0/Add_output_0,) {ratio: 0.25}\n"
          "}\n");
  // PrintGraph is the same block without the model header.
  REQUIRE(PrintGraph(graph).rfind("graph tiny (float[N,4] %x)", 0) == 0);
}

TEST_CASE("large tensors print elided and the parser refuses them", "[text]") {
  const std::string text =
      "graph g () -> (float[5] %w)\n"
      "  init float[5] %w = [1.0, 2.0, 3.0, 4.0, 5.0]\n"
      "{\n"
      "}\n";
  auto model = MustParse(text);
  REQUIRE(PrintGraph(*model->graph, PrintOptions{5}).find("= [1.0, 2.0, 3.0, 4.0, 5.0]") !=
          std::string::npos);
  REQUIRE(PrintGraph(*model->graph, PrintOptions{-1}).find("= [1.0, 2.0") != std::string::npos);
  const std::string elided = PrintGraph(*model->graph, PrintOptions{4});
  REQUIRE(elided ==
          "graph g () -> (float[5] %w)\n"
          "  init float[5] %w = <elided 20 bytes>\n"
          "{\n"
          "}\n");
  REQUIRE(ParseError(elided) ==
          "line 2, column 22: the printer elided this tensor's contents, so they cannot be "
          "read back; print it with a larger PrintOptions::max_literal_elements");
  REQUIRE(ParseError("graph g () -> () {\n  %c = Constant() {value: tensor float[2] <elided 8 "
                     "bytes>}\n}\n")
              .rfind("line 2, column 43: the printer elided", 0) == 0);
}

// ---------------------------------------------------------------- round trips

TEST_CASE("text round trips: a conv stem with header, initializers and value_info", "[text]") {
  ExpectCanonical(
      "ir_version 8\n"
      "opset \"\" 17\n"
      "opset \"com.microsoft\" 1\n"
      "producer \"fusionopt-tests\" \"0.1\"\n"
      "graph main (float[N,3,8,8] %x, float[?,4] %y2) -> (float[N,4,4,4] %out, float[?,4] %y2)\n"
      "  init float[4,3,1,1] %w = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]\n"
      "  init float[4] %b = [0.1, 0.2, 0.3, -0.25]\n"
      "  value float[N,4,4,4] %conv_out\n"
      "{\n"
      "  %conv_out = Conv(%x, %w, %b) {kernel_shape: [1, 1], strides: [2, 2], pads: [0, 0, 0, 0]} "
      "@/stem/Conv\n"
      "  %a, %mask = Dropout(%conv_out) {ratio: 0.5}\n"
      "  %out = com.microsoft::Gelu(%a)\n"
      "}\n");
}

TEST_CASE("text round trips: odd value, node, graph, op and attribute names", "[text]") {
  ExpectCanonical(
      "ir_version 8\n"
      "graph \"my graph\" (float[2] %\"input 0\", float[2] %/encoder/layer.0/Add_output_0) -> "
      "(float[2] %\"out\\\"put\\n\", %\"\xc3\xbcn\xc3\xaf\") {\n"
      "  %\"out\\\"put\\n\" = Add(%\"input 0\", %/encoder/layer.0/Add_output_0) @\"node #1\"\n"
      "  %\"\xc3\xbcn\xc3\xaf\" = \"weird.domain-x\"::\"My Op\"(%\"out\\\"put\\n\") "
      "@-odd:name.0\n"
      "  %\"tab\\there\" = ai.onnx.ml::Foo(%\"\xc3\xbcn\xc3\xaf\") {\"attr name\": 1, _x.y: 2}\n"
      "}\n");
}

TEST_CASE("text round trips: symbolic dims, scalars, unknown ranks and opaque types", "[text]") {
  ExpectCanonical(
      "ir_version 8\n"
      "graph types (float[\"batch size\",3,?] %a, int64[] %k, float %r, undefined[2] %u, "
      "%untyped, opaque \"0a0b\" %seq) -> (int64[] %k, float %r) {\n"
      "}\n");
  auto model = MustParse("graph types (float[\"batch size\",3,?] %a, float %r) -> () {\n}\n");
  const Value* a = model->graph->inputs()[0];
  REQUIRE(a->shape() == Shape{Dim::Symbol("batch size"), Dim::Known(3), Dim::Unknown()});
  REQUIRE_FALSE(model->graph->inputs()[1]->shape().has_value());
  REQUIRE(a->declared_type().has_value());
}

TEST_CASE("text round trips: omitted inputs and outputs, nodes without outputs", "[text]") {
  ExpectCanonical(
      "ir_version 8\n"
      "graph slots (float[1,3,4,4] %x, float[4] %scales) -> (%r, %c) {\n"
      "  %r = Resize(%x, , %scales)\n"
      "  %a, , %c = Split(%x) {axis: 1, num_outputs: 3}\n"
      "  %p, = Dropout(%a)\n"
      "  %q = Clip(%p, ,)\n"
      "  %\"\" = Foo(%\"\")\n"
      "  %\"\", %\"\" = Bar()\n"
      "  Print(%q)\n"
      "  , %t = Baz(%q)\n"
      "}\n");
  auto model = MustParse(
      "graph slots (float %x, float %s) -> () {\n"
      "  %r = Resize(%x, , %s)\n  %a, , %c = Split(%x)\n  %\"\" = Foo(%\"\")\n  Print(%r)\n}\n");
  const Graph& graph = *model->graph;
  Node* resize = NodeNamed(graph, "Resize");
  REQUIRE(resize->inputs().size() == 3);
  REQUIRE(resize->input(1) == nullptr);
  REQUIRE(graph.FindValue("s")->uses() == std::vector<Use>{{resize, 2}});
  Node* split = NodeNamed(graph, "Split");
  REQUIRE(Names(split->outputs()) == std::vector<std::string>{"a", "<omitted>", "c"});
  REQUIRE(split->output(2)->producer_output_index() == 2);
  Node* foo = NodeNamed(graph, "Foo");
  REQUIRE(foo->inputs() == std::vector<Value*>{nullptr});
  REQUIRE(foo->outputs() == std::vector<Value*>{nullptr});
  REQUIRE(NodeNamed(graph, "Print")->outputs().empty());
}

TEST_CASE("text round trips: every attribute kind", "[text]") {
  ExpectCanonical(
      "ir_version 8\n"
      "graph attrs (float[2] %x) -> (float[2] %y) {\n"
      "  %y = Custom(%x) {i: -7, f: 0.1, f_neg_zero: -0.0, f_tiny: 1e-45, f_inf: inf, "
      "f_ninf: -inf, f_nan: nan, f_big: 3.4028235e+38, f_int: 3.0, "
      "s: \"a\\\"b\\\\c\\n\\t\\x01\", empty_s: \"\", "
      "ints: [1, -2, 9223372036854775807, -9223372036854775808], floats: [1.0, 2.5, -3e-05], "
      "strings: [\"x\", \"\"], no_ints: ints[], no_floats: floats[], no_strings: strings[], "
      "no_tensors: tensors[], no_graphs: graphs[], t: tensor float[2] [1.0, 2.0], "
      "ts: [tensor int64[] [3], tensor string[1] [\"s\"]], r: ref float alpha, "
      "op: opaque \"0a03616263\", u: undefined}\n"
      "}\n");
  auto model = MustParse(
      "graph g () -> () {\n  Custom() {i: 2, f: 2.0, fs: floats[1, 2], e: 1e3, l: [1, 2.5]}\n}\n");
  const auto& attributes = model->graph->nodes().front()->attributes();
  REQUIRE(attributes[0].kind == AttributeKind::kInt);
  REQUIRE(attributes[0].i == 2);
  REQUIRE(attributes[1].kind == AttributeKind::kFloat);
  REQUIRE(attributes[1].f == 2.0f);
  REQUIRE(attributes[2].kind == AttributeKind::kFloats);
  REQUIRE(attributes[2].floats == std::vector<float>{1.0f, 2.0f});
  REQUIRE(attributes[3].kind == AttributeKind::kFloat);
  REQUIRE(attributes[3].f == 1000.0f);
  REQUIRE(attributes[4].kind == AttributeKind::kFloats);  // one float makes the list floats
}

TEST_CASE("text round trips: subgraphs reading outer values defined later", "[text]") {
  const std::string text =
      "ir_version 8\n"
      "opset \"\" 17\n"
      "graph main (bool[] %cond, float[2] %x) -> (float[2] %y) {\n"
      "  %y = If(%cond) {then_branch: graph then_body () -> (float[2] %t1) {\n"
      "    %t1 = Add(%x, %late)\n"
      "  }, else_branch: graph else_body () -> (float[2] %e1)\n"
      "    init float[1] %c = [2.0]\n"
      "    value float[2] %e0\n"
      "  {\n"
      "    %e0 = Mul(%x, %c)\n"
      "    %e1 = If(%cond) {then_branch: graph () -> (float[2] %e0) {\n"
      "    }, else_branch: graph inner () -> (%i) {\n"
      "      %i = Neg(%late)\n"
      "    }}\n"
      "  }}\n"
      "  %late = Relu(%x)\n"
      "  Multi() {bodies: [graph a () -> () {\n"
      "  }, graph b (float %z) -> (float %z) {\n"
      "  }]}\n"
      "}\n";
  ExpectCanonical(text);
  auto model = MustParse(text);
  const Graph& main = *model->graph;
  Node* if_node = NodeNamed(main, "If");
  const Graph& then_body = *if_node->FindAttribute("then_branch")->g;
  const Graph& else_body = *if_node->FindAttribute("else_branch")->g;
  REQUIRE(then_body.parent() == &main);
  REQUIRE(then_body.owner_node() == if_node);
  Node* add = NodeNamed(then_body, "Add");
  Value* late = main.FindValue("late");
  REQUIRE(add->input(1) == late);  // the outer value itself, not a copy
  REQUIRE(then_body.FindValue("late") == nullptr);
  REQUIRE(late->producer() == NodeNamed(main, "Relu"));
  // The outer value records its readers in every nesting level.
  const Graph& inner = *NodeNamed(else_body, "If")->FindAttribute("else_branch")->g;
  REQUIRE(late->uses().size() == 2);
  REQUIRE(late->uses()[0].node == add);
  REQUIRE(late->uses()[1].node == NodeNamed(inner, "Neg"));
  REQUIRE(main.FindValue("x")->uses().size() == 3);  // Add, Mul, Relu
  const auto& bodies = NodeNamed(main, "Multi")->FindAttribute("bodies")->graphs;
  REQUIRE(bodies.size() == 2);
  REQUIRE(bodies[1]->outputs()[0] == bodies[1]->inputs()[0]);
}

TEST_CASE("text round trips: tensor literals of every type", "[text]") {
  ExpectCanonical(
      "ir_version 8\n"
      "graph tensors () -> ()\n"
      "  init double[2] %d = [0.1, -1e+300]\n"
      "  init float16[4] %h = [0.1, 6.55e+04, -inf, 6e-08]\n"
      "  init bfloat16[3] %bf = [1.0, -2.5, 0.5]\n"
      "  init int8[2] %i8 = [-128, 127]\n"
      "  init int16[2] %i16 = [-32768, 32767]\n"
      "  init int32[2] %i32 = [-2147483648, 2147483647]\n"
      "  init int64[2] %i64 = [-9223372036854775808, 9223372036854775807]\n"
      "  init uint8[2] %u8 = [0, 255]\n"
      "  init uint16[1] %u16 = [65535]\n"
      "  init uint32[1] %u32 = [4294967295]\n"
      "  init uint64[1] %u64 = [18446744073709551615]\n"
      "  init bool[3] %flags = [1, 0, 1]\n"
      "  init string[2,1] %names = [\"a b\", \"\\\"q\\\"\"]\n"
      "  init float8e4m3fn[3] %f8 = raw \"00387f\"\n"
      "  init complex64[1] %cx = raw \"0000803f00000040\"\n"
      "  init float[0] %empty = []\n"
      "  init float[] %scalar = [3.5]\n"
      "{\n"
      "}\n");
  auto model = MustParse(
      "graph g () -> ()\n"
      "  init float16[5] %h = [0.1, 65504, 65520, 1e-8, 6e-8]\n"
      "  init bfloat16[1] %b = [0.1]\n"
      "  init int64[2] %shape = [1, -1]\n"
      "{\n}\n");
  const Graph& graph = *model->graph;
  auto half = graph.FindValue("h")->initializer()->values<uint16_t>();
  // Round to nearest even; 65520 is the first value that rounds to infinity.
  REQUIRE(std::vector<uint16_t>(half.begin(), half.end()) ==
          std::vector<uint16_t>{0x2e66, 0x7bff, 0x7c00, 0x0000, 0x0001});
  REQUIRE(graph.FindValue("b")->initializer()->values<uint16_t>()[0] == 0x3dcd);
  const Value* shape = graph.FindValue("shape");
  REQUIRE(shape->initializer()->AsInt64s() == std::vector<int64_t>{1, -1});
  REQUIRE(shape->dtype() == DataType::kInt64);
  REQUIRE(shape->shape() == Shape{Dim::Known(2)});
}

TEST_CASE("text round trips: initializers as inputs, outputs naming inputs", "[text]") {
  ExpectCanonical(
      "ir_version 8\n"
      "graph io (float[3] %x, float[3] %bias) -> (float[3] %x, float[3] %bias, float[2] %c, "
      "float[3] %sum)\n"
      "  init float[3] %bias = [1.0, 2.0, 3.0]\n"
      "  init float[2] %c = [0.5, 0.25]\n"
      "{\n"
      "  %sum = Add(%x, %bias)\n"
      "}\n");
  auto model = MustParse(
      "graph io (float[3] %x, float[3] %bias) -> (float[3] %x)\n"
      "  init float[3] %bias = [1.0, 2.0, 3.0]\n{\n}\n");
  const Graph& graph = *model->graph;
  REQUIRE(graph.inputs()[1] == graph.initializers()[0]);
  REQUIRE(graph.inputs()[1]->is_graph_input());
  REQUIRE(graph.outputs()[0] == graph.inputs()[0]);
}

TEST_CASE("text round trips: value declarations, model header, written node order", "[text]") {
  ExpectCanonical(
      "ir_version 8\n"
      "graph decls (float[2] %x) -> (float[2] %y)\n"
      "  init float[2] %w = [1.0, 2.0]\n"
      "  value float[2] %h\n"
      "  value float[2] %w\n"
      "  value int64 %orphan\n"
      "{\n"
      "  %y = Relu(%h)\n"
      "  %h = Mul(%x, %w)\n"
      "}\n");
  ExpectCanonical(
      "ir_version 9\n"
      "opset \"\" 18\n"
      "opset \"ai.onnx.ml\" 3\n"
      "producer \"pytorch\" \"2.1.0\"\n"
      "domain \"ai.example\"\n"
      "model_version 42\n"
      "metadata \"author\" \"me \\\"quoted\\\"\"\n"
      "metadata \"license\" \"MIT\"\n"
      "graph g () -> () {\n"
      "}\n");
  ExpectCanonical(
      "ir_version 8\n"
      "graph order (float[2] %x) -> (float[2] %z) {\n"
      "  %z = Neg(%y)\n"
      "  %y = Relu(%x)\n"
      "}\n");
  auto model = MustParse(
      "# comments and blank lines are fine\n\n"
      "graph order (float[2] %x) -> (float[2] %z) {  # trailing comment\n"
      "  %z = Neg(%y)\n"
      "  %y = Relu(%x)\n"
      "}\n");
  const Graph& graph = *model->graph;
  REQUIRE(graph.nodes().front()->op_type() == "Neg");  // order as written, not sorted
  REQUIRE(graph.FindValue("y")->producer() == graph.nodes().back().get());
  REQUIRE(graph.FindValue("y")->uses() == std::vector<Use>{{graph.nodes().front().get(), 0}});
  REQUIRE(graph.outputs()[0]->producer() == graph.nodes().front().get());
  REQUIRE(model->ir_version == 0);
}

TEST_CASE("a graph built through the API survives print and parse", "[text]") {
  Model model;
  model.ir_version = 7;
  model.graph = std::make_unique<Graph>();
  Graph& graph = *model.graph;
  graph.set_name("api");
  Value* x = graph.CreateValue("in put/0");
  x->type() = ValueType{DataType::kFloat16, Shape{Dim::Symbol("s0"), Dim::Unknown()}, {}, {}};
  graph.AddInput(x);
  Value* cond = graph.CreateValue("cond");
  cond->type().dtype = DataType::kBool;
  graph.AddInput(cond);
  Value* out = graph.CreateValue("out");
  Node* loop = graph.CreateNode("Loop", "", {nullptr, cond, x}, {out, nullptr}, "loop:0");
  Attribute body_attribute;
  body_attribute.name = "body";
  body_attribute.kind = AttributeKind::kGraph;
  body_attribute.g = std::make_unique<Graph>();
  Graph& body = *body_attribute.g;
  body.AttachTo(loop);
  body.set_name("body");
  Value* iteration = body.CreateValue("i");
  iteration->type() = ValueType{DataType::kInt64, Shape{}, {}, {}};
  body.AddInput(iteration);
  Value* doubled = body.CreateValue("doubled");
  body.CreateNode("Add", "", {x, x}, {doubled});  // reads the outer input
  body.AddOutput(cond);
  body.AddOutput(doubled);
  loop->mutable_attributes().push_back(std::move(body_attribute));
  Attribute weights;
  weights.name = "weights";
  weights.kind = AttributeKind::kTensor;
  const std::vector<uint16_t> halves = {0x3c00, 0x8001, 0x7e00, 0xfc00};
  weights.t =
      std::make_shared<const Tensor>(Tensor::FromValues(DataType::kFloat16, {2, 2}, halves));
  loop->SetAttribute(std::move(weights));
  Attribute scales;
  scales.name = "scales";
  scales.kind = AttributeKind::kFloats;
  scales.floats = {-0.0f, std::numeric_limits<float>::denorm_min(), 1.0f / 3.0f, NAN};
  loop->SetAttribute(std::move(scales));
  graph.AddOutput(out);

  const std::string printed = PrintModel(model);
  auto parsed = MustParse(printed);
  ExpectSameGraph(graph, *parsed->graph);
  ExpectWired(*parsed->graph);
  REQUIRE(PrintModel(*parsed) == printed);
  REQUIRE(printed.find("%\"in put/0\"") != std::string::npos);
  REQUIRE(printed.find("Loop(, %cond, %\"in put/0\")") != std::string::npos);
}

TEST_CASE("every 16-bit float and a sample of float32 values round trip bit for bit", "[text]") {
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    const uint16_t exponent_mask = dtype == DataType::kFloat16 ? 0x7c00 : 0x7f80;
    std::vector<uint16_t> patterns;
    for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
      const bool is_nan =
          (bits & exponent_mask) == exponent_mask && (bits & ~exponent_mask & 0x7fff) != 0;
      if (!is_nan) patterns.push_back(static_cast<uint16_t>(bits));
    }
    Graph graph;
    Value* value = graph.CreateValue("all");
    graph.SetInitializer(value, std::make_shared<const Tensor>(Tensor::FromValues(
                                    dtype, {static_cast<int64_t>(patterns.size())}, patterns)));
    auto parsed = MustParse(PrintGraph(graph, PrintOptions{-1}));
    REQUIRE(parsed->graph->FindValue("all")->initializer()->ContentEquals(*value->initializer()));
  }
  std::mt19937 random(1234);
  std::vector<float> floats;
  while (floats.size() < 20000) {
    uint32_t bits = random();
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    if (!std::isnan(value)) floats.push_back(value);
  }
  Graph graph;
  Value* value = graph.CreateValue("sample");
  graph.SetInitializer(value, Floats({static_cast<int64_t>(floats.size())}, floats));
  auto parsed = MustParse(PrintGraph(graph, PrintOptions{-1}));
  REQUIRE(parsed->graph->FindValue("sample")->initializer()->ContentEquals(*value->initializer()));
}

// ---------------------------------------------------------------- functions

TEST_CASE("text round trips: model-local functions after the main graph", "[text][function]") {
  const std::string text = R"(ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[N,4] %x, float[4] %b) -> (float[N,4] %y) {
  %y = ai.fusionopt::FusedAddRelu(%x, %b) {alpha: 0.5} @fused
}

function ai.fusionopt::FusedAddRelu (%a, %b) -> (%y) attributes [alpha] opset "" 17 {
  %t = Add(%a, %b)
  %y = LeakyRelu(%t) {alpha: ref float alpha}
}

function "odd.domain-x"::"Odd Name" (float[2] %p) -> (%q, float[2] %p) opset "" 17 opset "ai.fusionopt" 1
  value float[2] %r
{
  %r = Neg(%p)
  %flag = Constant() {value: tensor bool[] [1]}
  %q = If(%flag) {then_branch: graph then () -> (%inner) {
    %inner = ai.fusionopt::FusedAddRelu(%r, %p) {alpha: 0.1}
  }, else_branch: graph else () -> (%other) {
    %other = Identity(%r)
  }}
}
)";
  ExpectCanonical(text);
  auto model = MustParse(text);
  auto reparsed = MustParse(PrintModel(*model));
  REQUIRE(model->functions.size() == 2);
  REQUIRE(reparsed->functions.size() == 2);
  for (size_t i = 0; i < model->functions.size(); ++i) {
    const Function& a = *model->functions[i];
    const Function& b = *reparsed->functions[i];
    CHECK(a.domain == b.domain);
    CHECK(a.name == b.name);
    CHECK(a.attribute_names == b.attribute_names);
    CHECK(a.opsets == b.opsets);
    ExpectWired(*a.body);
    ExpectSameGraph(*a.body, *b.body);
  }

  const Function& fused = *model->FindFunction("ai.fusionopt", "FusedAddRelu");
  CHECK(fused.attribute_names == std::vector<std::string>{"alpha"});
  CHECK(fused.OpsetFor("") == 17);
  CHECK(Names(fused.body->inputs()) == std::vector<std::string>{"a", "b"});
  CHECK(fused.body->inputs()[0]->dtype() == DataType::kUndefined);
  CHECK(NodeNamed(*fused.body, "LeakyRelu")->attributes()[0].ref_attr_name == "alpha");
  // Bodies are scopes of their own: %b of the function is not the main graph's %b.
  CHECK(fused.body->inputs()[1] != model->graph->FindValue("b"));

  const Function& odd = *model->FindFunction("odd.domain-x", "Odd Name");
  CHECK(odd.OpsetFor("ai.fusionopt") == 1);
  CHECK(Names(odd.body->outputs()) == std::vector<std::string>{"q", "p"});
  CHECK(odd.body->inputs()[0]->dtype() == DataType::kFloat);
  CHECK(Names(odd.body->IntermediateValuesInOrder()) == std::vector<std::string>{"r"});
  CHECK(odd.body->FindValue("r")->uses().size() == 2);  // Neg's output, read in both branches
}

TEST_CASE("function text errors name the line and column", "[text][function]") {
  const std::string graph = "ir_version 8\ngraph (float[2] %x) -> (%x) {\n}\n";
  CHECK(ParseError(graph + "function F (%a) -> (%a)\n  init float[1] %w = [1.0]\n{\n}\n") ==
        "line 5, column 3: a function body has no initializers; use a Constant node");
  CHECK(ParseError(graph + "function d::F (%a) -> (%a) {\n}\nfunction d::F (%b) -> (%b) {\n}\n") ==
        "line 6, column 1: function 'd::F' is defined twice");
  CHECK(ParseError(graph + "function F (%a) -> (%y) {\n  %y = Neg(%x)\n}\n") ==
        "line 5, column 12: undefined value '%x'");
  CHECK(ParseError(graph + "function F (%a) -> (%a) opset \"\" 17 opset \"ai.onnx\" 1 {\n}\n") ==
        "line 4, column 37: domain \"ai.onnx\" is imported twice");
  CHECK(ParseError(graph + "function F (%a) -> (%a) attributes [k, k] {\n}\n") ==
        "line 4, column 40: attribute 'k' is listed twice");
  CHECK(ParseError(graph + "function F (%a) -> (%a) {\n}\ngraph (%z) -> (%z) {\n}\n") ==
        "line 6, column 1: unexpected 'graph' after a function");
  // Without functions the text reads as before.
  CHECK(MustParse(graph)->functions.empty());
}
