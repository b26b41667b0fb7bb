// The per-node kernel choice of `--runtime ort` (passes/conversion/ort/kernel_choice.h): Attention taking
// in the QKV projection, or MultiHeadAttention after it, by provider and key count; the key count
// read from a dim or its --dim size. On real exports, with ORT's numbers:
// tests/python/test_runtime_ort.py.
#include <catch2/catch.hpp>

#include "passes/conversion/ort/kernel_choice.h"

namespace fusionopt::passes {
namespace {

TEST_CASE("ort kernel choice: --target cpu is the CPU EP, every GPU profile the CUDA EP", "[passes][ort]") {
  CHECK(OrtProviderForTarget("cpu") == OrtProvider::kCpu);
  for (const char* gpu : {"t4", "a100", "h100", "h200"}) CHECK(OrtProviderForTarget(gpu) == OrtProvider::kCuda);
  CHECK(NameOf(OrtProvider::kCpu) == "CPU EP");
}

TEST_CASE("ort kernel choice: a dim's length is its value or its symbol's --dim size", "[passes][ort]") {
  const SymbolSizes dims{{"sequence", 2048}};
  CHECK(LengthOf(Dim::Known(50), dims) == 50);
  CHECK(LengthOf(Dim::Symbol("sequence"), dims) == 2048);
  CHECK_FALSE(LengthOf(Dim::Symbol("batch"), dims).has_value());  // not sized: unknown, not 1
  CHECK_FALSE(LengthOf(Dim{}, dims).has_value());
}

TEST_CASE("ort kernel choice: on the CPU EP Attention below the crossover, MultiHeadAttention from it", "[passes][ort]") {
  const AttentionKernelChoice short_keys = ChooseAttentionKernel(OrtProvider::kCpu, 50);
  CHECK(short_keys.take_in_projection);
  CHECK(short_keys.because.find("50 keys") != std::string::npos);
  CHECK(ChooseAttentionKernel(OrtProvider::kCpu, kCpuMultiHeadAttentionFromKeys - 1).take_in_projection);
  const AttentionKernelChoice long_keys = ChooseAttentionKernel(OrtProvider::kCpu, kCpuMultiHeadAttentionFromKeys);
  CHECK_FALSE(long_keys.take_in_projection);
  CHECK(long_keys.because.find("MultiHeadAttention") == 8);  // "CPU EP: MultiHeadAttention ..."
  CHECK_FALSE(ChooseAttentionKernel(OrtProvider::kCpu, 1500).take_in_projection);
}

TEST_CASE("ort kernel choice: an unknown key count and the CUDA EP keep Attention and say why", "[passes][ort]") {
  const AttentionKernelChoice unknown = ChooseAttentionKernel(OrtProvider::kCpu, std::nullopt);
  CHECK(unknown.take_in_projection);
  CHECK(unknown.because.find("unknown (give --dim)") != std::string::npos);
  for (std::optional<int64_t> keys : {std::optional<int64_t>(50), std::optional<int64_t>(4096), std::optional<int64_t>()}) {
    const AttentionKernelChoice cuda = ChooseAttentionKernel(OrtProvider::kCuda, keys);
    CHECK(cuda.take_in_projection);
    CHECK(cuda.because.find("not measured on the CUDA EP") != std::string::npos);
  }
}

TEST_CASE("ort kernel choice: float16 Gelu and FastGelu have no CPU EP kernel; float32, BiasGelu and the CUDA EP do",
          "[passes][ort]") {
  CHECK(WhyNotActivationKernel(OrtProvider::kCpu, "Gelu", DataType::kFloat16));
  CHECK(WhyNotActivationKernel(OrtProvider::kCpu, "FastGelu", DataType::kFloat16));
  CHECK_FALSE(WhyNotActivationKernel(OrtProvider::kCpu, "BiasGelu", DataType::kFloat16));
  CHECK_FALSE(WhyNotActivationKernel(OrtProvider::kCpu, "Gelu", DataType::kFloat));
  CHECK_FALSE(WhyNotActivationKernel(OrtProvider::kCuda, "FastGelu", DataType::kFloat16));
}

}  // namespace
}  // namespace fusionopt::passes
