// share-duplicate-initializers: equal weights become one, memory-mapped ones included, and
// what must stay apart.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

#include "ir/mapped_file.h"
#include "onnx_io/model_io.h"
#include "pass_harness.h"
#include "scratch_dir.h"
#include "shape_inference/shape_inference.h"
#include "passes/util/content_hash.h"
#include "passes/cleanup/share_duplicate_initializers.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using namespace fusionopt::pass_test;

namespace {

std::string Text(const std::string& signature, const std::string& body, const std::string& inits) {
  return "ir_version 8\nopset \"\" 17\ngraph g (" + signature + ")\n" + inits + "{\n" + body + "\n}\n";
}

constexpr const char* kPass = "share-duplicate-initializers";
// Sharing reorders no arithmetic: the same bits.
const Check kExact{.numbers = BitForBit()};

}  // namespace

TEST_CASE("share-duplicate-initializers keeps one copy of equal weights", "[passes]") {
  std::string inits = "  init float[3] %w1 = [1.0, 2.0, 3.0]\n  init float[3] %w2 = [1.0, 2.0, 3.0]\n"
                      "  init float[3] %w3 = [1.0, 2.0, 4.0]\n  init float[1,3] %row = [1.0, 2.0, 3.0]\n"
                      "  init int32[3] %bits = [1065353216, 1073741824, 1077936128]\n"
                      "  init float[3] %w4 = [1.0, 2.0, 3.0]\n";
  std::string before = Text("float[3] %x) -> (float[3] %y, float[1,3] %z, int32[3] %i",
                            "  %a = Add(%x, %w1)\n  %b = Mul(%a, %w2)\n  %c = Sub(%b, %w3)\n  %y = Div(%c, %w4)\n"
                            "  %z = Add(%x, %row)\n  %i = Neg(%bits)",
                            inits);
  auto outcome = ExpectRewrite(before, kPass,
                               Text("float[3] %x) -> (float[3] %y, float[1,3] %z, int32[3] %i",
                                    "  %a = Add(%x, %w1)\n  %b = Mul(%a, %w1)\n  %c = Sub(%b, %w3)\n"
                                    "  %y = Div(%c, %w1)\n  %z = Add(%x, %row)\n  %i = Neg(%bits)",
                                    "  init float[3] %w1 = [1.0, 2.0, 3.0]\n  init float[3] %w3 = [1.0, 2.0, 4.0]\n"
                                    "  init float[1,3] %row = [1.0, 2.0, 3.0]\n"
                                    "  init int32[3] %bits = [1065353216, 1073741824, 1077936128]\n"),
                               kExact);
  CHECK(outcome.Counter("initializers_removed") == 2);
  CHECK(outcome.Counter("bytes_saved") == 24);
}

TEST_CASE("share-duplicate-initializers leaves the model's interface alone", "[passes]") {
  SECTION("an initializer that is a graph input can be fed another value") {
    ExpectUnchanged(Text("float[3] %x, float[3] %w2) -> (float[3] %y", "  %a = Add(%x, %w1)\n  %y = Mul(%a, %w2)",
                         "  init float[3] %w1 = [1.0, 2.0, 3.0]\n  init float[3] %w2 = [1.0, 2.0, 3.0]\n"),
                    kPass);
  }
  SECTION("a duplicate that is a graph output keeps its name") {
    auto outcome =
        ExpectUnchanged(Text("float[3] %x) -> (float[3] %y, float[3] %w2", "  %y = Add(%x, %w1)",
                             "  init float[3] %w1 = [1.0, 2.0, 3.0]\n  init float[3] %w2 = [1.0, 2.0, 3.0]\n"),
                        kPass);
    CHECK(outcome.Counter("graph_output_duplicates_kept") == 1);
  }
  SECTION("subgraph initializers are shared within their graph") {
    std::string before = Text("bool[] %c, float[2] %x) -> (float[2] %y",
                              "  %y = If(%c) {then_branch: graph t () -> (float[2] %o)\n"
                              "    init float[2] %k1 = [5.0, 6.0]\n    init float[2] %k2 = [5.0, 6.0]\n"
                              "  {\n    %a = Add(%x, %k1)\n    %o = Mul(%a, %k2)\n"
                              "  }, else_branch: graph e () -> (float[2] %p) {\n    %p = Mul(%x, %w)\n  }}",
                              "  init float[2] %w = [5.0, 6.0]\n");
    auto outcome = ExpectRewrite(before, kPass,
                                 Text("bool[] %c, float[2] %x) -> (float[2] %y",
                                      "  %y = If(%c) {then_branch: graph t () -> (float[2] %o)\n"
                                      "    init float[2] %k1 = [5.0, 6.0]\n"
                                      "  {\n    %a = Add(%x, %k1)\n    %o = Mul(%a, %k1)\n"
                                      "  }, else_branch: graph e () -> (float[2] %p) {\n    %p = Mul(%x, %w)\n  }}",
                                      "  init float[2] %w = [5.0, 6.0]\n"),
                                 kExact);
    CHECK(outcome.Counter("initializers_removed") == 1);
  }
}

TEST_CASE("share-duplicate-initializers compares memory-mapped weights in place", "[passes]") {
  test_support::ScratchDir scratch("share_test");
  // A data file holding the same 256 floats twice, then a variant differing in the last one.
  std::vector<float> weights(256);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.25f * static_cast<float>(i);
  std::vector<float> variant = weights;
  variant.back() += 1.0f;
  std::filesystem::path data = scratch / "weights.bin";
  {
    std::ofstream out(data, std::ios::binary);
    for (const auto* block : {&weights, &weights, &variant}) {
      out.write(reinterpret_cast<const char*>(block->data()), static_cast<std::streamsize>(block->size() * 4));
    }
  }
  auto file = MappedFile::Open(data.string());
  REQUIRE(file.ok());
  auto model = ParseInferred(Text("float[256] %x) -> (float[256] %y",
                                  "  %a = Add(%x, %m1)\n  %b = Mul(%a, %m2)\n  %y = Sub(%b, %m3)",
                                  "  init float[1] %m1 = [0.0]\n  init float[1] %m2 = [0.0]\n"
                                  "  init float[1] %m3 = [0.0]\n"));
  const char* names[] = {"m1", "m2", "m3"};
  for (uint64_t i = 0; i < 3; ++i) {
    auto tensor = std::make_shared<Tensor>(Tensor::Mapped(DataType::kFloat, {256}, *file, i * 1024, 1024));
    model->graph->SetInitializer(model->graph->FindValue(names[i]), tensor);
  }
  InferShapes(*model);
  std::unique_ptr<Model> original = ParseInferred(Print(*model));

  PassRun outcome = RunPass(*model, kPass);
  CHECK(outcome.statistics.changed);
  CHECK(Print(*model) != Print(*original));
  CHECK(outcome.Counter("initializers_removed") == 1);
  CHECK(outcome.Counter("bytes_saved") == 1024);
  const Graph& graph = *model->graph;
  REQUIRE(graph.initializers().size() == 2);
  CHECK(graph.FindValue("m2") == nullptr);
  CHECK(graph.FindValue("m1")->initializer()->IsMapped());  // read in place, not copied
  CHECK(graph.FindValue("m1")->uses().size() == 2);
  ExpectSameNumbers(*original, *model, BitForBit());

  // The shared model saves and loads back with its external data.
  std::string path = (scratch / "shared.onnx").string();
  SaveOptions save;
  save.external_data = true;
  REQUIRE(SaveModel(*model, path, save).ok());
  auto reloaded = LoadModel(path);
  REQUIRE(reloaded.ok());
  CHECK((*reloaded)->graph->initializers().size() == 2);
}

TEST_CASE("the content index tells apart weights whose sampled bytes agree", "[passes]") {
  // 100000 floats: the sample reads 64 chunks of 64 bytes; element 12345 (byte 49380) lies
  // between two of them, so a change there leaves the sample equal and only the full
  // comparison can tell the tensors apart.
  std::vector<float> values(100000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) * 0.25f;
  std::vector<float> changed = values;
  changed[12345] += 1.0f;
  auto tensor = [](const std::vector<float>& v) {
    return std::make_shared<const Tensor>(Tensor::FromValues(DataType::kFloat, {static_cast<int64_t>(v.size())}, v));
  };
  TensorPtr original = tensor(values), near_copy = tensor(changed), copy = tensor(values);
  REQUIRE(HashTensorSample(*original) == HashTensorSample(*near_copy));

  Graph graph;
  Value* a = graph.CreateValue("a");
  Value* b = graph.CreateValue("b");
  Value* c = graph.CreateValue("c");
  TensorContentIndex index;
  CHECK(index.FindOrAdd(a, original) == nullptr);
  CHECK(index.FindOrAdd(b, near_copy) == nullptr);  // same sample, other bytes: kept apart
  CHECK(index.FindOrAdd(c, copy) == a);
}
