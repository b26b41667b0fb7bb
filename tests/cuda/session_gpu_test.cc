// The CUDA backend's session on a GPU with CUDA Graphs: a model fed two input shapes in
// alternation keeps one captured graph per shape, and every replay reads the feeds of its own
// inference (checked against the CPU runtime, with new random feeds each time). Without a
// device the case WARNs what it skipped and returns.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu_runtime/engine/inputs.h"
#include "have_device.h"
#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/backend/cuda_session.h"
#include "onnx_io/model_io.h"
#include "passes/pipeline.h"
#include "scratch_dir.h"

namespace fusionopt {
namespace {

std::vector<cpu::NamedTensor> RandomFeeds(const Model& model, int64_t batch, int64_t sequence, uint64_t seed) {
  std::vector<cpu::NamedTensor> feeds;
  for (const Value* input : model.graph->inputs()) {
    if (input->is_initializer()) continue;
    auto tensor = cpu::RandomTensor(input->dtype(), {batch, sequence}, seed + feeds.size());
    REQUIRE(tensor.ok());
    feeds.push_back({input->name(), std::move(tensor).value()});
  }
  return feeds;
}

double MaxDifference(const cpu::RtTensor& actual, const cpu::RtTensor& expected) {
  REQUIRE(actual.dims() == expected.dims());
  double worst = 0;
  for (int64_t i = 0; i < expected.NumElements(); ++i) {
    worst = std::max(worst, std::abs(actual.ValueAsDouble(i) - expected.ValueAsDouble(i)));
  }
  return worst;
}

TEST_CASE("CUDA backend GPU: one CUDA graph per input shape, replayed in any order", "[backend][gpu]") {
  if (!test_support::HaveCudaDevice()) {
    WARN("no CUDA device: skipped CUDA graph replay across input shapes");
    return;
  }
  auto loaded = LoadModel(std::string(FUSIONOPT_SOURCE_DIR) + "/models/bert_style.onnx");
  REQUIRE(loaded.ok());
  std::unique_ptr<Model> model = std::move(loaded).value();
  passes::PipelineOptions pipeline;
  pipeline.level = 3;
  REQUIRE(passes::RunPipeline(*model, pipeline).ok());

  test_support::ScratchDir cache("session_gpu_cache");
  cuda::CudaSessionOptions options;
  options.cuda_graph = true;
  options.cache_dir = cache.path().string();
  auto cuda_session = cuda::CudaSession::Create(*model, options);
  INFO((cuda_session.ok() ? "" : cuda_session.status().message()));
  REQUIRE(cuda_session.ok());
  auto cpu_session = cpu::Session::Create(*model);
  REQUIRE(cpu_session.ok());

  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 16}, {2, 7}};
  uint64_t seed = 1;
  for (int round = 0; round < 2; ++round) {
    for (const auto& [batch, sequence] : shapes) {
      INFO("round " << round << ", batch " << batch << ", sequence " << sequence);
      std::vector<cpu::NamedTensor> feeds = RandomFeeds(*model, batch, sequence, seed += 10);
      cuda::CudaRunStats stats;
      auto actual = cuda_session.value()->Run(feeds, &stats);
      INFO((actual.ok() ? "" : actual.status().message()));
      REQUIRE(actual.ok());
      CHECK(stats.replayed_graph);
      auto expected = cpu_session.value()->Run(feeds);
      REQUIRE(expected.ok());
      REQUIRE(actual.value().size() == expected.value().size());
      for (size_t i = 0; i < expected.value().size(); ++i) {
        CHECK(MaxDifference(actual.value()[i].tensor, expected.value()[i].tensor) < 1e-3);
      }
    }
  }
}

}  // namespace
}  // namespace fusionopt
