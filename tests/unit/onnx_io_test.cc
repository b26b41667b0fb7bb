#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <onnx/onnx_pb.h>

#include "onnx_io/model_io.h"
#include "scratch_dir.h"
#include "onnx_io/proto_codec.h"

using namespace fusionopt;
namespace fs = std::filesystem;

namespace {

// y = Relu(x + b), b an initializer.
onnx::ModelProto TinyModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_version(17);
  auto* graph = model.mutable_graph();
  graph->set_name("tiny");
  auto* x = graph->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("N");
  auto* b = graph->add_initializer();
  b->set_name("b");
  b->set_data_type(1);
  b->add_dims(2);
  b->add_float_data(1.5f);
  b->add_float_data(-2.0f);
  auto* add = graph->add_node();
  add->set_op_type("Add");
  add->add_input("x");
  add->add_input("b");
  add->add_output("t");
  auto* relu = graph->add_node();
  relu->set_op_type("Relu");
  relu->add_input("t");
  relu->add_output("y");
  graph->add_output()->set_name("y");
  return model;
}

std::string SaveToString(const Model& model, const fs::path& dir) {
  auto report = SaveModel(model, (dir / "out.onnx").string());
  REQUIRE(report.ok());
  std::ifstream in(dir / "out.onnx", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("a loaded model exposes graph, tensors and types", "[onnx_io]") {
  auto model = LoadModelFromBytes(TinyModel().SerializeAsString(), ".");
  REQUIRE(model.ok());
  const Graph& graph = *(*model)->graph;
  REQUIRE(graph.num_nodes() == 2);
  Value* b = graph.FindValue("b");
  REQUIRE(b->is_initializer());
  REQUIRE(b->initializer()->values<float>()[1] == -2.0f);
  REQUIRE(b->initializer()->typed_storage());
  REQUIRE(graph.inputs()[0]->shape()->at(0).symbol == "N");
  REQUIRE(graph.FindValue("t")->uses().size() == 1);
  REQUIRE((*model)->OpsetFor("") == 17);
}

TEST_CASE("save reproduces the loaded bytes, unknown fields included", "[onnx_io]") {
  onnx::ModelProto proto = TinyModel();
  proto.mutable_graph()->mutable_node(0)->set_doc_string("why this node exists");
  std::string bytes = proto.SerializeAsString();
  bytes += std::string("\xc0\x3e\x07", 3);  // field 1000, varint 7: unknown to every reader
  auto model = LoadModelFromBytes(bytes, ".");
  REQUIRE(model.ok());
  test_support::ScratchDir dir("io_test_roundtrip");
  REQUIRE(SaveToString(**model, dir.path()) == bytes);
  REQUIRE(fs::directory_iterator(dir.path()) != fs::directory_iterator());
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) ++files;
  REQUIRE(files == 1);  // no temporary left behind
}

TEST_CASE("invalid graphs are rejected with the offending name", "[onnx_io]") {
  SECTION("dangling input") {
    onnx::ModelProto proto = TinyModel();
    proto.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
    auto model = LoadModelFromBytes(proto.SerializeAsString(), ".");
    REQUIRE(model.status().code() == ErrorCode::kInvalidModel);
    REQUIRE_THAT(model.status().message(), Catch::Contains("'nowhere'"));
  }
  SECTION("raw data of the wrong size") {
    onnx::ModelProto proto = TinyModel();
    auto* b = proto.mutable_graph()->mutable_initializer(0);
    b->clear_float_data();
    b->set_raw_data(std::string(7, '\0'));
    auto model = LoadModelFromBytes(proto.SerializeAsString(), ".");
    REQUIRE_THAT(model.status().message(), Catch::Contains("7 bytes") && Catch::Contains("expected 8"));
  }
  SECTION("unknown data type") {
    onnx::ModelProto proto = TinyModel();
    proto.mutable_graph()->mutable_initializer(0)->set_data_type(99);
    auto model = LoadModelFromBytes(proto.SerializeAsString(), ".");
    REQUIRE_THAT(model.status().message(), Catch::Contains("unknown data type 99"));
  }
  SECTION("unsupported opset") {
    onnx::ModelProto proto = TinyModel();
    proto.mutable_opset_import(0)->set_version(29);
    auto model = LoadModelFromBytes(proto.SerializeAsString(), ".");
    REQUIRE(model.status().code() == ErrorCode::kUnsupported);
  }
}

TEST_CASE("external data is confined to the model folder", "[onnx_io]") {
  test_support::ScratchDir dir("io_test_confine");
  fs::create_directories(dir / "model");
  { std::ofstream(dir / "model" / "w.bin", std::ios::binary) << std::string(16, '\1'); }
  { std::ofstream(dir / "outside.bin", std::ios::binary) << std::string(16, '\1'); }
  fs::create_symlink(dir / "outside.bin", dir / "model" / "link.bin");
  ExternalDataResolver resolver((dir / "model").string());

  REQUIRE(resolver.Open("w.bin").ok());
  REQUIRE_THAT(resolver.Open("../outside.bin").status().message(), Catch::Contains("escapes"));
  REQUIRE_THAT(resolver.Open((dir / "outside.bin").string()).status().message(),
               Catch::Contains("absolute"));
  REQUIRE_THAT(resolver.Open("link.bin").status().message(), Catch::Contains("symlink"));
  REQUIRE_THAT(resolver.Open("missing.bin").status().message(), Catch::Contains("does not exist"));
}

TEST_CASE("external data round trip maps on load and writes a side file", "[onnx_io]") {
  test_support::ScratchDir dir("io_test_external");
  onnx::ModelProto proto = TinyModel();
  auto model = LoadModelFromBytes(proto.SerializeAsString(), dir.path().string());
  REQUIRE(model.ok());
  SaveOptions options;
  options.external_data = true;
  options.external_threshold_bytes = 8;
  auto report = SaveModel(**model, (dir / "ext.onnx").string(), options);
  REQUIRE(report.ok());
  REQUIRE(report->external_data);
  REQUIRE(report->external_bytes == 8);
  REQUIRE(fs::file_size(dir / "ext.onnx.data") == 8);

  auto reloaded = LoadModel((dir / "ext.onnx").string());
  REQUIRE(reloaded.ok());
  const TensorPtr& b = (*reloaded)->graph->FindValue("b")->initializer();
  REQUIRE(b->IsMapped());
  REQUIRE(b->values<float>()[0] == 1.5f);
  REQUIRE((*reloaded)->external_data_files == std::vector<std::string>{"ext.onnx.data"});

  SaveOptions high_threshold = options;
  high_threshold.external_threshold_bytes = 9;
  auto inline_report = SaveModel(**model, (dir / "inline.onnx").string(), high_threshold);
  REQUIRE(inline_report.ok());
  REQUIRE_FALSE(inline_report->external_data);  // nothing reached the threshold
  REQUIRE_FALSE(fs::exists(dir / "inline.onnx.data"));
}

TEST_CASE("a save into a missing folder fails without leaving files", "[onnx_io]") {
  auto model = LoadModelFromBytes(TinyModel().SerializeAsString(), ".");
  REQUIRE(model.ok());
  auto report = SaveModel(**model, "/tmp/fusionopt_no_such_dir/out.onnx");
  REQUIRE(report.status().code() == ErrorCode::kIo);
  REQUIRE_FALSE(fs::exists("/tmp/fusionopt_no_such_dir"));
}

namespace {

// TinyModel grown to exercise the spliced writer: raw initializers above and below the
// splicing threshold, a large typed one, a large Constant value (not an initializer), and
// fields on both sides of each splice point (tensor doc_string, graph doc_string, opsets).
onnx::ModelProto ModelWithLargeTensors() {
  onnx::ModelProto model = TinyModel();
  auto* origin = model.add_metadata_props();
  origin->set_key("origin");
  origin->set_value("unit test");
  auto* graph = model.mutable_graph();
  graph->set_doc_string("after the initializers");
  auto add_raw = [&](const std::string& name, int64_t floats) {
    auto* tensor = graph->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(1);
    tensor->add_dims(floats);
    std::string raw(static_cast<size_t>(floats) * 4, '\0');
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>((i * 131) >> 3);
    tensor->set_raw_data(raw);
    tensor->set_doc_string("after raw_data");
    return tensor;
  };
  add_raw("w_large", 100000);
  add_raw("w_small", 10);
  add_raw("w_unused_large", 40000);
  auto* typed = graph->add_initializer();
  typed->set_name("w_typed");
  typed->set_data_type(1);
  typed->add_dims(30000);
  for (int i = 0; i < 30000; ++i) typed->add_float_data(static_cast<float>(i));
  auto* constant = graph->add_node();
  constant->set_op_type("Constant");
  constant->add_output("c");
  auto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(1);
  value->mutable_t()->add_dims(50000);
  value->mutable_t()->set_raw_data(std::string(200000, '\x3f'));
  auto* concat = graph->add_node();
  concat->set_op_type("Concat");
  for (const char* input : {"w_large", "w_small", "w_typed", "c"}) concat->add_input(input);
  concat->add_output("z");
  auto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  graph->add_output()->set_name("z");
  return model;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("large initializers are spliced into the file as protobuf would write them", "[onnx_io]") {
  std::string bytes = ModelWithLargeTensors().SerializeAsString();
  bytes += std::string("\xc0\x3e\x07", 3);  // an unknown field after everything
  auto model = LoadModelFromBytes(bytes, ".");
  REQUIRE(model.ok());
  test_support::ScratchDir dir("io_test_spliced");
  auto serialized = SerializeModel(**model);
  REQUIRE(serialized.ok());
  REQUIRE(serialized->size() == bytes.size());
  REQUIRE(*serialized == bytes);
  std::string saved = SaveToString(**model, dir.path());
  REQUIRE(saved.size() == bytes.size());
  REQUIRE(saved == bytes);
}

TEST_CASE("weights mapped from external data are spliced into an inline save", "[onnx_io]") {
  test_support::ScratchDir dir("io_test_spliced_external");
  auto model = LoadModelFromBytes(ModelWithLargeTensors().SerializeAsString(), dir.path().string());
  REQUIRE(model.ok());
  SaveOptions external;
  external.external_data = true;
  external.external_threshold_bytes = 1024;
  REQUIRE(SaveModel(**model, (dir / "ext.onnx").string(), external).ok());
  auto mapped = LoadModel((dir / "ext.onnx").string());
  REQUIRE(mapped.ok());
  REQUIRE((*mapped)->graph->FindValue("w_large")->initializer()->IsMapped());

  auto report = SaveModel(**mapped, (dir / "inline.onnx").string());
  REQUIRE(report.ok());
  REQUIRE_FALSE(report->external_data);
  std::string written = ReadFile(dir / "inline.onnx");
  REQUIRE(report->model_bytes == written.size());
  REQUIRE(written == SerializeModel(**mapped).value());
  auto reloaded = LoadModel((dir / "inline.onnx").string());
  REQUIRE(reloaded.ok());
  REQUIRE((*reloaded)->graph->FindValue("w_large")->initializer()->ContentEquals(
      *(*model)->graph->FindValue("w_large")->initializer()));
}
