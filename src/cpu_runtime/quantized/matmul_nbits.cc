// com.microsoft MatMulNBits: Y = A · dequantize(B)ᵀ + bias with B's weights quantized to 2, 4
// or 8 bits in blocks along K (onnxruntime's 4-bit LLM weights):
//
//   W[n, k] = (q[n, k] - zero[n, k / block]) · scale[n, k / block]     (g_idx: its block per k)
//
// B is [N, K / block, block · bits / 8] bytes, the first value of a byte in its low bits; the
// zero points are packed the same way per row (uint8) or given as A's float type; without them
// the zero point is 2^(bits - 1). The weight is dequantized a block or a panel at a time, never
// kept: a few rows of A (decoding) go through a direct loop that reads each packed block once;
// more rows dequantize a panel of output columns (up to kPanelBytes of float32: a model's whole
// weight where it is small, never more) and multiply it with oneDNN's float matmul, a wide
// product oneDNN runs well (LLaMA-style 4-layer decoder, 2×128 tokens: 123 → 90 ms with 64-column
// panels before, ORT's MatMulNBits 95 ms; docs/benchmarks.md).
#include <algorithm>
#include <cstring>
#include <mutex>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/engine/vector_isa.h"
#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/quantized/kernels.h"

namespace fusionopt::cpu {
namespace {

using dnnl::memory;

// Rows of A up to which the direct loop runs (each packed block is unpacked once per row block).
constexpr int64_t kDirectRows = 4;
// Output columns dequantized together for the oneDNN path: as many as kPanelBytes of float32
// weights hold (a wide product uses oneDNN well), at least kMinPanel.
constexpr int64_t kMinPanel = 64;
constexpr int64_t kPanelBytes = int64_t{1} << 24;

struct Layout {
  int64_t k = 0, n = 0, bits = 4, block = 32;
  int64_t blocks() const { return (k + block - 1) / block; }
  int64_t blob() const { return block * bits / 8; }
  int64_t zero_row_bytes() const { return (blocks() * bits + 7) / 8; }
};

// A row of 4-bit weights (`blocks` blocks of `block` values, an even count, two a byte, low bits
// first) as floats (v - zero[b])·scale[b]: the same two roundings at every instruction set,
// vectorized where the host has AVX2 or AVX-512 (the panel path dequantizes every weight once per
// run, so this loop is a tenth of a 4-bit model's time).
[[gnu::always_inline]] inline void NibbleRowLoop(const uint8_t* bytes, const float* scales, const float* zeros,
                                                 int64_t blocks, int64_t block, float* out) {
  const int64_t pairs = block / 2;
  for (int64_t b = 0; b < blocks; ++b) {
    const float scale = scales[b], zero = zeros[b];
    const uint8_t* in = bytes + b * pairs;
    float* to = out + b * block;
    for (int64_t j = 0; j < pairs; ++j) {
      const float low = static_cast<float>(in[j] & 0xF) - zero;
      const float high = static_cast<float>(in[j] >> 4) - zero;
      to[2 * j] = low * scale;
      to[2 * j + 1] = high * scale;
    }
  }
}

__attribute__((target("avx2"))) void NibbleRowAvx2(const uint8_t* bytes, const float* scales, const float* zeros,
                                                    int64_t blocks, int64_t block, float* out) {
  NibbleRowLoop(bytes, scales, zeros, blocks, block, out);
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) void NibbleRowAvx512(
    const uint8_t* bytes, const float* scales, const float* zeros, int64_t blocks, int64_t block, float* out) {
  NibbleRowLoop(bytes, scales, zeros, blocks, block, out);
}

void DequantizeNibbleRow(const uint8_t* bytes, const float* scales, const float* zeros, int64_t blocks,
                         int64_t block, float* out) {
  switch (ActiveVectorIsa()) {
    case VectorIsa::kAvx512: return NibbleRowAvx512(bytes, scales, zeros, blocks, block, out);
    case VectorIsa::kAvx2: return NibbleRowAvx2(bytes, scales, zeros, blocks, block, out);
    case VectorIsa::kBaseline: return NibbleRowLoop(bytes, scales, zeros, blocks, block, out);
  }
}

// The weights of one output column (row n of B), dequantized into `out` (K floats), or the
// `count` values of block `b`.
struct Dequantizer {
  const Layout& layout;
  const uint8_t* packed;             // B
  const float* scales;               // [N, blocks]
  const uint8_t* packed_zeros;       // uint8 zero points, or null
  const float* float_zeros;          // float zero points, or null
  const int32_t* block_of = nullptr; // g_idx, or null

  int Value(int64_t n, int64_t k) const {
    const int64_t b = k / layout.block, j = k % layout.block;
    const uint8_t byte = packed[(n * layout.blocks() + b) * layout.blob() + (j * layout.bits) / 8];
    return (byte >> ((j * layout.bits) % 8)) & ((1 << layout.bits) - 1);
  }

  float Zero(int64_t n, int64_t b) const {
    if (float_zeros != nullptr) return float_zeros[n * layout.blocks() + b];
    if (packed_zeros == nullptr) return static_cast<float>(1 << (layout.bits - 1));
    const int64_t bit = b * layout.bits;
    return static_cast<float>((packed_zeros[n * layout.zero_row_bytes() + bit / 8] >> (bit % 8)) & ((1 << layout.bits) - 1));
  }

  void Block(int64_t n, int64_t b, float* out) const {
    const int64_t first = b * layout.block, count = std::min(layout.block, layout.k - first);
    const float scale = scales[n * layout.blocks() + b], zero = Zero(n, b);
    const uint8_t* bytes = packed + (n * layout.blocks() + b) * layout.blob();
    if (layout.bits == 4 && count % 2 == 0) return DequantizeNibbleRow(bytes, &scale, &zero, 1, count, out);
    for (int64_t j = 0; j < count; ++j) out[j] = (static_cast<float>(Value(n, first + j)) - zero) * scale;
  }

  void Row(int64_t n, float* out) const {
    if (block_of == nullptr && layout.bits == 4 && layout.k % layout.block == 0) {
      // Whole blocks: the row's zero points unpacked, then one vectorized pass.
      std::vector<float> zeros(static_cast<size_t>(layout.blocks()));
      for (int64_t b = 0; b < layout.blocks(); ++b) zeros[static_cast<size_t>(b)] = Zero(n, b);
      DequantizeNibbleRow(packed + n * layout.blocks() * layout.blob(), scales + n * layout.blocks(), zeros.data(),
                          layout.blocks(), layout.block, out);
      return;
    }
    if (block_of == nullptr) {
      for (int64_t b = 0; b < layout.blocks(); ++b) Block(n, b, out + b * layout.block);
      return;
    }
    for (int64_t k = 0; k < layout.k; ++k) {
      const int64_t b = block_of[k];
      out[k] = (static_cast<float>(Value(n, k)) - Zero(n, b)) * scales[n * layout.blocks() + b];
    }
  }
};

class MatMulNBitsKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    const Node& node = info.node;
    layout_.k = node.GetInt("K", 0);
    layout_.n = node.GetInt("N", 0);
    layout_.bits = node.GetInt("bits", 4);
    layout_.block = node.GetInt("block_size", 0);
    if (layout_.k <= 0 || layout_.n <= 0) return info.Error("K and N must be positive");
    if (layout_.bits != 2 && layout_.bits != 4 && layout_.bits != 8) {
      return info.Error(std::to_string(layout_.bits) + "-bit weights are not supported (2, 4 or 8)");
    }
    if (layout_.block < 16 || (layout_.block & (layout_.block - 1)) != 0) {
      return info.Error("block_size " + std::to_string(layout_.block) + " must be a power of two >= 16");
    }
    if (node.GetInt("weight_prepacked", 0) != 0) return info.Error("prepacked weights are a CUDA layout");
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    for (size_t index : {0, 1, 2}) {
      if (!context.has_input(index)) return InvalidModel("MatMulNBits needs input " + std::to_string(index));
    }
    const RtTensor& a = *context.input(0);
    FUSIONOPT_RETURN_IF_ERROR(CheckOperands(context));
    std::vector<int64_t> dims = a.dims();
    dims.back() = layout_.n;
    Float32Outputs outputs(context);
    RtTensor& y = outputs.Output(0, a.dtype(), dims);
    const int64_t rows = a.NumElements() / layout_.k;
    const RtTensor a32 = ToFloat32(a, *context.allocator);
    const RtTensor scales = ToFloat32(*context.input(2), *context.allocator);
    const RtTensor* zeros = context.has_input(3) ? context.input(3) : nullptr;
    const RtTensor float_zeros = zeros != nullptr && zeros->dtype() != DataType::kUint8
                                     ? ToFloat32(*zeros, *context.allocator) : RtTensor();
    const Dequantizer weights{layout_, context.input(1)->data<uint8_t>(), scales.data<float>(),
                              zeros != nullptr && zeros->dtype() == DataType::kUint8 ? zeros->data<uint8_t>() : nullptr,
                              float_zeros.defined() ? float_zeros.data<float>() : nullptr,
                              context.has_input(4) ? context.input(4)->data<int32_t>() : nullptr};
    const RtTensor bias = context.has_input(5) ? ToFloat32(*context.input(5), *context.allocator) : RtTensor();
    if (rows <= kDirectRows) {
      Direct(a32.data<float>(), rows, weights, y.data<float>());
    } else {
      FUSIONOPT_RETURN_IF_ERROR(onednn::Guarded("MatMulNBits " + DimsToString(a.dims()), [&] {
        Panels(a32, rows, weights, y, *context.allocator);
        return Status::Ok();
      }));
    }
    if (bias.defined()) AddBias(bias.data<float>(), rows, y.data<float>());
    outputs.Finish();
    return Status::Ok();
  }

 private:
  Status CheckOperands(const KernelContext& context) const {
    const RtTensor& a = *context.input(0);
    if (a.dtype() != DataType::kFloat && !IsHalfPrecision(a.dtype())) {
      return InvalidModel("MatMulNBits takes a float A, not " + std::string(NameOf(a.dtype())));
    }
    if (a.rank() < 1 || a.dims().back() != layout_.k) {
      return InvalidModel("MatMulNBits A " + DimsToString(a.dims()) + " must end in K = " + std::to_string(layout_.k));
    }
    const RtTensor& b = *context.input(1);
    if (b.dtype() != DataType::kUint8 || b.NumElements() != layout_.n * layout_.blocks() * layout_.blob()) {
      return InvalidModel("MatMulNBits B must be uint8 [N, K/block, block*bits/8] = [" + std::to_string(layout_.n) +
                          ", " + std::to_string(layout_.blocks()) + ", " + std::to_string(layout_.blob()) + "], got " +
                          DescribeTensor(b) + " " + DimsToString(b.dims()));
    }
    if (context.input(2)->NumElements() != layout_.n * layout_.blocks()) {
      return InvalidModel("MatMulNBits scales need N * K/block = " + std::to_string(layout_.n * layout_.blocks()) + " values");
    }
    if (context.has_input(3)) {
      const RtTensor& zeros = *context.input(3);
      const int64_t expected = zeros.dtype() == DataType::kUint8 ? layout_.n * layout_.zero_row_bytes()
                                                                  : layout_.n * layout_.blocks();
      if (zeros.NumElements() != expected) {
        return InvalidModel("MatMulNBits zero_points need " + std::to_string(expected) + " values");
      }
    }
    if (context.has_input(4)) {
      const RtTensor& order = *context.input(4);
      if (order.dtype() != DataType::kInt32 || order.NumElements() != layout_.k) {
        return InvalidModel("MatMulNBits g_idx must be int32 [K]");
      }
      for (int64_t k = 0; k < layout_.k; ++k) {
        const int32_t block = order.data<int32_t>()[k];
        if (block < 0 || block >= layout_.blocks()) return InvalidModel("MatMulNBits g_idx names a block out of range");
      }
    }
    if (context.has_input(5) && context.input(5)->NumElements() != layout_.n) {
      return InvalidModel("MatMulNBits bias needs N = " + std::to_string(layout_.n) + " values");
    }
    return Status::Ok();
  }

  // Each column n: its blocks unpacked once and dotted with every row of A.
  void Direct(const float* a, int64_t rows, const Dequantizer& weights, float* y) const {
    const int64_t k = layout_.k, n_total = layout_.n;
#pragma omp parallel
    {
      std::vector<float> row(static_cast<size_t>(weights.block_of ? k : layout_.block));
#pragma omp for schedule(static)
      for (int64_t n = 0; n < n_total; ++n) {
        float acc[kDirectRows] = {};
        if (weights.block_of != nullptr) {
          weights.Row(n, row.data());
          for (int64_t r = 0; r < rows; ++r) acc[r] = Dot(a + r * k, row.data(), k);
        } else {
          for (int64_t b = 0; b < layout_.blocks(); ++b) {
            const int64_t first = b * layout_.block, count = std::min(layout_.block, k - first);
            weights.Block(n, b, row.data());
            for (int64_t r = 0; r < rows; ++r) acc[r] += Dot(a + r * k + first, row.data(), count);
          }
        }
        for (int64_t r = 0; r < rows; ++r) y[r * n_total + n] = acc[r];
      }
    }
  }

  static float Dot(const float* a, const float* b, int64_t count) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < count; ++i) sum += a[i] * b[i];
    return sum;
  }

  // Panels of kPanel columns: dequantized into a [panel, K] buffer and multiplied by oneDNN
  // (A [rows, K] · panelᵀ into Y's columns).
  void Panels(const RtTensor& a, int64_t rows, const Dequantizer& weights, RtTensor& y, Allocator& allocator) {
    const int64_t k = layout_.k, n_total = layout_.n;
    const int64_t columns = std::min(n_total, std::max(kMinPanel, kPanelBytes / (k * 4)));
    RtTensor panel = allocator.Allocate(DataType::kFloat, {columns, k});
    for (int64_t first = 0; first < n_total; first += columns) {
      const int64_t width = std::min(columns, n_total - first);
#pragma omp parallel for if (width * k > kParallelWork)
      for (int64_t j = 0; j < width; ++j) weights.Row(first + j, panel.data<float>() + j * k);
      const dnnl::matmul product = PanelProduct(rows, width);
      const memory::desc src = onednn::RowMajorDesc({rows, k});
      const memory::desc weights_desc = onednn::ColumnMajorDesc(k, width);
      const memory::desc dst({rows, width}, memory::data_type::f32, memory::dims{n_total, 1});
      product.execute(onednn::Stream(), {{DNNL_ARG_SRC, onednn::Wrap(src, a.raw())},
                                         {DNNL_ARG_WEIGHTS, onednn::Wrap(weights_desc, panel.raw())},
                                         {DNNL_ARG_DST, onednn::Wrap(dst, y.data<float>() + first)}});
      onednn::Stream().wait();
    }
  }

  // By value (a handle): the cache may drop its entries once the lock is released.
  dnnl::matmul PanelProduct(int64_t rows, int64_t width) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::vector<int64_t> key = {rows, width};
    if (dnnl::matmul* found = products_.Find(key)) return *found;
    const memory::desc src = onednn::RowMajorDesc({rows, layout_.k});
    const memory::desc weights = onednn::ColumnMajorDesc(layout_.k, width);
    const memory::desc dst({rows, width}, memory::data_type::f32, memory::dims{layout_.n, 1});
    dnnl::matmul::primitive_desc chosen(dnnl::matmul::desc(src, weights, dst), onednn::Engine());
    return products_.Insert(key, dnnl::matmul(chosen));
  }

  void AddBias(const float* bias, int64_t rows, float* y) const {
#pragma omp parallel for if (rows * layout_.n > kParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t n = 0; n < layout_.n; ++n) y[r * layout_.n + n] += bias[n];
    }
  }

  Layout layout_;
  std::mutex mutex_;
  onednn::PlanCache<dnnl::matmul> products_;
};

}  // namespace

void RegisterMatMulNBitsKernels(KernelRegistry& registry) {
  registry.Register("com.microsoft", "MatMulNBits", 1, kAnyOpset, Make<MatMulNBitsKernel>());
}

}  // namespace fusionopt::cpu
