// Which ONNX Runtime kernel `--runtime ort` writes where ORT has more than one for a fused
// group, decided per node for the execution provider the output is meant for (--target cpu:
// the CPU EP; a GPU target: the CUDA EP) from measurements, never by rule of thumb alone.
//
// Attention fed by its fused QKV projection can be written two ways:
//   com.microsoft::Attention(x, W, b)                 one kernel; ORT packs W at session creation
//   MatMul + Add + Split → com.microsoft::MultiHeadAttention(q, k, v)
// On the CPU EP (onnxruntime 1.32, 2 threads; bench/ort_attention_forms.py, docs/ort.md)
// Attention is 8–31% faster up to 512 keys, and MultiHeadAttention 3–14% faster from 1024 keys
// on (Whisper's 1500 frames): its CPU kernel tiles long key ranges, Attention's does not.
// Both beat the inlined ops at every shape measured. The CUDA EP is unmeasured (no
// onnxruntime-gpu on any machine here), so a GPU target keeps the one-kernel form and says so.
//
// Residual norms: Skip(Simplified)LayerNormalization, but for float16 on the CPU EP (below).
//
// Limits: the key count must be known (a constant dim, or a symbol sized with --dim); when it
// is not, the CPU choice is Attention, the form that wins at the lengths most models are served
// at, and the report says the length was unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/why_not.h"
#include "passes/cost_model/cost_model.h"

namespace fusionopt::passes {

enum class OrtProvider { kCpu, kCuda };

// `--target cpu` is ORT's CPU EP; every GPU profile (t4, a100, h100, h200) its CUDA EP.
OrtProvider OrtProviderForTarget(std::string_view target);
std::string_view NameOf(OrtProvider provider);

struct OrtLoweringOptions {
  OrtProvider provider = OrtProvider::kCuda;  // the default target is a GPU (h100)
  SymbolSizes dims;                           // --dim: sizes of the symbols the choices read
};

// From this many keys on, MultiHeadAttention after the projection beats Attention on the CPU EP.
inline constexpr int64_t kCpuMultiHeadAttentionFromKeys = 1024;

// `dim`'s length: its value, or its symbol's --dim size; nullopt when neither is known.
std::optional<int64_t> LengthOf(const Dim& dim, const SymbolSizes& dims);

struct AttentionKernelChoice {
  bool take_in_projection = true;  // Attention(x, W, b); otherwise MultiHeadAttention after the projection
  std::string because;             // for the report
};

AttentionKernelChoice ChooseAttentionKernel(OrtProvider provider, std::optional<int64_t> keys);

// Why `provider` runs a residual norm of `dtype` faster as the ops than as
// Skip(Simplified)LayerNormalization (empty when the kernel is the faster). On the CPU EP a
// float16 SkipLayerNormalization took 0.85 ms a norm on GPT-2's fp16 export where
// LayerNormalization and Add took 0.1 ms (ORT's profile, onnxruntime 1.32, 2 threads), and BERT
// fp16 runs 1.03x faster with its norms left as ops (bench/ort_runtime.py --baseline-binary;
// docs/benchmarks.md). The simplified variant shares that kernel's code. float32, and the CUDA
// EP, take the kernel.
WhyNot WhyNotSkipNormKernel(OrtProvider provider, DataType dtype);

// Why `provider` has no kernel for the activation `op` (Gelu, FastGelu, BiasGelu, QuickGelu) of
// `dtype`, or "" when it has. The CPU EP (onnxruntime 1.32) has no float16 Gelu or FastGelu: its
// optimizer expands their function bodies between Casts (the saved graphs of the MPT and GPT-2
// float16 fixtures hold no Gelu and no FastGelu), which costs more nodes than the GELU saves.
WhyNot WhyNotActivationKernel(OrtProvider provider, std::string_view op, DataType dtype);

}  // namespace fusionopt::passes
