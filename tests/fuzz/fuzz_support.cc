// Shared pieces of the libFuzzer targets (fuzz_support.h).
#include "fuzz_support.h"

#include "onnx_io/model_io.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>

namespace fusionopt::fuzz {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "fusionopt-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("fusionopt fuzz: mkdtemp");
      std::abort();
    }
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// Saturating, so that dims whose product overflows count as "too big" instead of wrapping.
int64_t KnownElements(const Shape& shape) {
  int64_t elements = 1;
  for (const Dim& dim : shape) {
    if (!dim.is_known() || dim.value == 0) continue;
    if (dim.value > INT64_MAX / elements) return INT64_MAX;
    elements *= dim.value;
  }
  return elements;
}

// Recurses into subgraphs: fine here, as the fuzzers cap the input length and with it the
// nesting depth.
bool GraphWithinBudget(const Graph& graph, const Budget& budget, int64_t& nodes) {
  for (const Value* value : graph.AllValues()) {
    if (value->shape() && KnownElements(*value->shape()) > budget.max_elements_per_value) return false;
    if (value->is_initializer() &&
        value->initializer()->nbytes() > uint64_t(budget.max_elements_per_value) * 8) {
      return false;
    }
  }
  for (const auto& node : graph.nodes()) {
    if (++nodes > budget.max_nodes) return false;
    for (const Attribute& attribute : node->attributes()) {
      if (attribute.t && attribute.t->nbytes() > uint64_t(budget.max_elements_per_value) * 8) return false;
    }
    for (const Graph* subgraph : node->Subgraphs()) {
      if (!GraphWithinBudget(*subgraph, budget, nodes)) return false;
    }
  }
  return true;
}

}  // namespace

const std::string& EmptyModelDir() {
  static const TempDir dir;
  return dir.path;
}

Result<std::unique_ptr<Model>> LoadFuzzInput(const uint8_t* data, size_t size, bool infer_shapes) {
  LoadOptions options;
  options.infer_shapes = infer_shapes;
  return LoadModelFromBytes(std::string(reinterpret_cast<const char*>(data), size), EmptyModelDir(), options);
}

bool WithinBudget(const Model& model, const Budget& budget) {
  int64_t nodes = 0;
  if (!GraphWithinBudget(*model.graph, budget, nodes)) return false;
  for (const auto& function : model.functions) {
    if (!GraphWithinBudget(*function->body, budget, nodes)) return false;
  }
  return true;
}

void Finding(std::string_view what, const Status& status) {
  Finding(what, "code " + std::to_string(int(status.code())) + ": " + status.message());
}

void Finding(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "fusionopt fuzz finding: %.*s: %.*s\n", int(what.size()), what.data(),
               int(detail.size()), detail.data());
  std::abort();
}

}  // namespace fusionopt::fuzz
