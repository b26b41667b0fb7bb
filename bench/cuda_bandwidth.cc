// Issue 7's bandwidth check, both sides in one run on one GPU: a fused elementwise kernel
// (z = Relu((x + y) * 0.5), fused at -O2 into one generated kernel reading x and y and writing
// z) against a plain device-to-device copy of the same size. Bandwidth counts bytes read plus
// bytes written: 3·N·4 for the kernel, 2·N·4 for the copy. Best of --repeat timings each
// (CUDA events around the GPU work only).
//
//   build/fusionopt_bench_cuda_bandwidth [MEBIBYTES_PER_TENSOR=256] [REPEAT=20]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cpu_runtime/engine/inputs.h"
#include "cuda_runtime/backend/cuda_session.h"
#include "text_format/text_format.h"
#include "passes/pipeline.h"
#include "shape_inference/shape_inference.h"

using namespace fusionopt;

namespace {

std::string ChainModel(int64_t elements) {
  const std::string n = std::to_string(elements);
  return "ir_version 8\nopset \"\" 17\ngraph chain (float[" + n + "] %x, float[" + n + "] %y) -> (float[" + n +
         "] %z)\n  init float[] %half = [0.5]\n{\n  %s = Add(%x, %y)\n  %h = Mul(%s, %half)\n  %z = Relu(%h)\n}\n";
}

int Fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return 4;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t mebibytes = argc > 1 ? std::atoll(argv[1]) : 256;
  const int repeat = argc > 2 ? std::atoi(argv[2]) : 20;
  if (mebibytes <= 0 || repeat <= 0) {
    std::fprintf(stderr, "usage: %s [MEBIBYTES_PER_TENSOR>0] [REPEAT>0]\n", argv[0]);
    return 2;
  }
  const int64_t elements = mebibytes * (int64_t{1} << 20) / 4;
  auto model = ParseModel(ChainModel(elements));
  if (!model.ok()) return Fail(model.status());
  // Fusion needs the intermediates' types and shapes, which the text form does not spell out
  // (the CLI's loader infers them; without this the chain stayed three kernels).
  InferShapes(**model);
  passes::PipelineOptions options;
  options.level = 2;
  auto optimized = passes::RunPipeline(**model, options);
  if (!optimized.ok()) return Fail(optimized.status());
  if ((*model)->graph->num_nodes() != 1) {
    std::fprintf(stderr, "error: -O2 left %zu nodes; the chain should be one fused node\n", (*model)->graph->num_nodes());
    return 3;
  }
  auto session = cuda::CudaSession::Create(**model, {});
  if (!session.ok()) return Fail(session.status());
  std::vector<cpu::NamedTensor> feeds;
  for (const char* name : {"x", "y"}) {
    auto tensor = cpu::RandomTensor(DataType::kFloat, {elements}, feeds.size());
    if (!tensor.ok()) return Fail(tensor.status());
    feeds.push_back({name, std::move(*tensor)});
  }
  auto plan = (*session)->Plan(feeds);
  if (!plan.ok()) return Fail(plan.status());
  if (plan->launches_per_inference != 1) {
    std::fprintf(stderr, "error: the chain should run as one fused kernel, but the plan has %lld launches\n",
                 static_cast<long long>(plan->launches_per_inference));
    return 3;
  }
  double kernel_ms = 1e30, copy_ms = 1e30;
  cuda::CudaRunStats stats;
  for (int i = 0; i < repeat + 1; ++i) {  // the first run builds and warms up
    auto outputs = (*session)->Run(feeds, &stats);
    if (!outputs.ok()) return Fail(outputs.status());
    if (i > 0) kernel_ms = std::min(kernel_ms, stats.device_ms);
    auto copy = (*session)->TimeDeviceCopy(static_cast<uint64_t>(elements) * 4);
    if (!copy.ok()) return Fail(copy.status());
    if (i > 0) copy_ms = std::min<double>(copy_ms, *copy);
  }
  const double bytes = static_cast<double>(elements) * 4;
  const double kernel_gbs = 3 * bytes / (kernel_ms * 1e-3) / 1e9, copy_gbs = 2 * bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("device: %s\n", (*session)->DeviceDescription().c_str());
  std::printf("kernels per inference: %lld (%s)\n", static_cast<long long>(plan->launches_per_inference),
              plan->nodes.empty() ? "" : plan->nodes.front().implementation.c_str());
  std::printf("| tensor MiB | fused elementwise GB/s | device copy GB/s | fused / copy |\n|---:|---:|---:|---:|\n");
  std::printf("| %lld | %.1f | %.1f | %.3f |\n", static_cast<long long>(mebibytes), kernel_gbs, copy_gbs,
              kernel_gbs / copy_gbs);
  return 0;
}
