#include "passes/conversion/ort/kernel_choice.h"

#include <string>

namespace fusionopt::passes {

OrtProvider OrtProviderForTarget(std::string_view target) {
  return target == "cpu" ? OrtProvider::kCpu : OrtProvider::kCuda;
}

std::string_view NameOf(OrtProvider provider) {
  return provider == OrtProvider::kCpu ? "CPU EP" : "CUDA EP";
}

std::optional<int64_t> LengthOf(const Dim& dim, const SymbolSizes& dims) {
  if (dim.is_known()) return dim.value;
  if (!dim.is_symbolic()) return std::nullopt;
  if (auto it = dims.find(dim.symbol); it != dims.end()) return it->second;
  return std::nullopt;
}

AttentionKernelChoice ChooseAttentionKernel(OrtProvider provider, std::optional<int64_t> keys) {
  const std::string crossover = std::to_string(kCpuMultiHeadAttentionFromKeys);
  if (provider == OrtProvider::kCuda) {
    return {true, "CUDA EP: Attention taking in the projection (one kernel); not measured on the CUDA EP"};
  }
  if (!keys) {
    return {true, "CPU EP: Attention taking in the projection; the key count is unknown (give --dim), "
                  "and Attention is the faster below " + crossover + " keys"};
  }
  const std::string counted = std::to_string(*keys) + " keys";
  if (*keys < kCpuMultiHeadAttentionFromKeys) {
    return {true, "CPU EP: Attention taking in the projection; " + counted + ", where it beats "
                  "MultiHeadAttention (below " + crossover + " keys)"};
  }
  return {false, "CPU EP: MultiHeadAttention after the projection; " + counted + ", where it beats "
                 "Attention (from " + crossover + " keys on)"};
}

WhyNot WhyNotSkipNormKernel(OrtProvider provider, DataType dtype) {
  if (provider != OrtProvider::kCpu || dtype != DataType::kFloat16) return {};
  return "CPU EP: float16 Skip(Simplified)LayerNormalization is several times slower than the ops "
         "(0.85 against 0.1 ms a norm, GPT-2 fp16), which ORT inlines";
}

WhyNot WhyNotActivationKernel(OrtProvider provider, std::string_view op, DataType dtype) {
  if (provider != OrtProvider::kCpu || dtype != DataType::kFloat16 || (op != "Gelu" && op != "FastGelu")) return {};
  return "CPU EP: no float16 " + std::string(op) + " kernel (ORT expands it between Casts)";
}

}  // namespace fusionopt::passes
