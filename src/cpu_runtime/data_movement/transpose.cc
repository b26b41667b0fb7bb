// Transpose, and the ops that are transposes of a reshaped tensor: DepthToSpace, SpaceToDepth.
//
// One engine: after merging axes that stay neighbours, a permutation that keeps the
// innermost source axis innermost is a strided copy of contiguous runs (memcpy); one that
// moves it is copied in square tiles over (the source's inner axis, the output's inner axis),
// so both the reads and the writes of a tile stay in cache. A channels-last input
// (rt_tensor.h) is transposed through its physical view, so NCHW -> NHWC behind a convolution
// (ConvNeXt's permute before its LayerNorm) and NHWC -> NCHW in front of one cost no copy.
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <numeric>

#include "cpu_runtime/onednn/conv_layout_views.h"
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"
#include "cpu_runtime/onednn/common.h"
#include "ir/permutation.h"

namespace fusionopt::cpu::data_movement {
namespace {

// Output of transpose(dims, perm) written contiguously; source read through the permuted strides.
StridedLayout TransposeLayout(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  std::vector<int64_t> in_strides = ContiguousStrides(dims);
  StridedLayout layout;
  for (int64_t axis : perm) {
    layout.dims.push_back(dims[axis]);
    layout.src_strides.push_back(in_strides[axis]);
  }
  layout.dst_strides = ContiguousStrides(layout.dims);
  return layout;
}

// One tile: out[r * out_stride + c] = in[c * in_stride + r] for r < rows, c < cols.
template <typename T>
void TransposeTile(T* out, int64_t out_stride, const T* in, int64_t in_stride, int64_t rows, int64_t cols) {
  int64_t row = 0;
#if defined(__SSE2__)
  // 4-byte elements (float, int32) go through 4x4 register transposes: four vector loads
  // along the source's contiguous axis, four vector stores along the output's.
  if constexpr (sizeof(T) == 4) {
    for (; row + 4 <= rows; row += 4) {
      int64_t col = 0;
      for (; col + 4 <= cols; col += 4) {
        const T* block = in + col * in_stride + row;
        __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block));
        __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + in_stride));
        __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 * in_stride));
        __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 3 * in_stride));
        __m128i ab_low = _mm_unpacklo_epi32(a, b), ab_high = _mm_unpackhi_epi32(a, b);
        __m128i cd_low = _mm_unpacklo_epi32(c, d), cd_high = _mm_unpackhi_epi32(c, d);
        T* target = out + row * out_stride + col;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(target), _mm_unpacklo_epi64(ab_low, cd_low));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(target + out_stride), _mm_unpackhi_epi64(ab_low, cd_low));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(target + 2 * out_stride), _mm_unpacklo_epi64(ab_high, cd_high));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(target + 3 * out_stride), _mm_unpackhi_epi64(ab_high, cd_high));
      }
      for (int64_t r = row; r < row + 4; ++r) {
        for (int64_t c = col; c < cols; ++c) out[r * out_stride + c] = in[c * in_stride + r];
      }
    }
  }
#endif
  for (; row < rows; ++row) {
    T* target = out + row * out_stride;
    const T* source = in + row;
    for (int64_t col = 0; col < cols; ++col) target[col] = source[col * in_stride];
  }
}

template <typename T>
void CopyTiled(uint8_t* dst_bytes, const uint8_t* src_bytes, const StridedLayout& layout, size_t row_axis) {
  // Tile rows walk the source's unit-stride axis; tile columns the output's unit-stride axis.
  const size_t col_axis = layout.dims.size() - 1;
  const int64_t rows = layout.dims[row_axis];
  const int64_t cols = layout.dims[col_axis];
  const int64_t dst_row_stride = layout.dst_strides[row_axis];
  const int64_t src_col_stride = layout.src_strides[col_axis];
  const int64_t tile = 32;
  std::vector<int64_t> outer_dims, outer_dst, outer_src;
  for (size_t k = 0; k < col_axis; ++k) {
    if (k == row_axis) continue;
    outer_dims.push_back(layout.dims[k]);
    outer_dst.push_back(layout.dst_strides[k]);
    outer_src.push_back(layout.src_strides[k]);
  }
  const int64_t row_tiles = (rows + tile - 1) / tile;
  const int64_t col_tiles = (cols + tile - 1) / tile;
  const int64_t tasks = Product(outer_dims) * row_tiles * col_tiles;
  T* dst = reinterpret_cast<T*>(dst_bytes);
  const T* src = reinterpret_cast<const T*>(src_bytes);
  ParallelChunks(tasks, rows * cols * Product(outer_dims), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      int64_t col_begin = (task % col_tiles) * tile;
      int64_t row_begin = (task / col_tiles % row_tiles) * tile;
      int64_t outer = task / (col_tiles * row_tiles);
      int64_t dst_offset = 0, src_offset = 0;
      for (size_t k = outer_dims.size(); k-- > 0;) {
        int64_t index = outer % outer_dims[k];
        outer /= outer_dims[k];
        dst_offset += index * outer_dst[k];
        src_offset += index * outer_src[k];
      }
      TransposeTile(dst + dst_offset + row_begin * dst_row_stride + col_begin, dst_row_stride,
                    src + src_offset + col_begin * src_col_stride + row_begin, src_col_stride,
                    std::min(tile, rows - row_begin), std::min(tile, cols - col_begin));
    }
  });
}

// Copies `src` (dims) to `dst` as transpose(src, perm), contiguous.
void TransposeBytes(uint8_t* dst, const uint8_t* src, size_t element_size, const std::vector<int64_t>& dims,
                    const std::vector<int64_t>& perm) {
  StridedLayout layout = TransposeLayout(dims, perm);
  if (Product(layout.dims) == 0) return;
  SimplifyLayout(layout);
  const size_t rank = layout.dims.size();
  size_t unit_axis = rank;
  for (size_t k = 0; k < rank; ++k) {
    if (layout.src_strides[k] == 1) unit_axis = k;
  }
  // Identity permutations, and those keeping the inner axis, are runs of memcpy.
  if (rank < 2 || unit_axis >= rank - 1) {
    CopyStrided(dst, src, element_size, std::move(layout));
    return;
  }
  DispatchByElementSize(element_size, [&](auto tag) { CopyTiled<decltype(tag)>(dst, src, layout, unit_axis); });
}

class TransposeKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    perm_ = info.node.GetInts("perm");
    if (perm_ && !IsPermutation(*perm_)) return info.Error("perm " + DimsToString(*perm_) + " is not a permutation");
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    std::vector<int64_t> perm(data.rank());
    if (perm_) {
      if (perm_->size() != data.rank()) {
        return InvalidModel("perm " + DimsToString(*perm_) + " does not match the input rank " +
                            std::to_string(data.rank()));
      }
      perm = *perm_;
    } else {
      std::iota(perm.rbegin(), perm.rend(), 0);
    }
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    std::vector<int64_t> dims;
    for (int64_t axis : perm) dims.push_back(data.dim(axis));
    if (data.layout() == Layout::kChannelsLast) return FromChannelsLast(context, data, perm, dims, element_size);
    const RtTensor source = onednn::RowMajor(data, *context.allocator);
    // NHWC -> NCHW in front of a convolution: the result is the input, read channels-last.
    if (context.conv_layout_output && source.dtype() == DataType::kFloat && IsChannelsLastOf(perm) &&
        !layouts::SameInBothLayouts(dims)) {
      context.outputs[0] = RtTensor(source.dtype(), dims, source.storage());
      context.outputs[0].set_layout(Layout::kChannelsLast);
      context.launched = false;
      return Status::Ok();
    }
    RtTensor& out = context.Output(0, source.dtype(), dims);
    TransposeBytes(out.raw(), source.raw(), element_size, source.dims(), perm);
    return Status::Ok();
  }

  bool ReadsConvLayouts() const override { return true; }

 private:
  // Whether transposing by `perm` gives the tensor whose channels-last physical order is the
  // input's row-major one: perm = (0, r-1, 1, ..., r-2).
  static bool IsChannelsLastOf(const std::vector<int64_t>& perm) {
    const int64_t rank = static_cast<int64_t>(perm.size());
    if (rank < 3 || rank > 5 || perm[0] != 0 || perm[1] != rank - 1) return false;
    for (int64_t axis = 2; axis < rank; ++axis) {
      if (perm[static_cast<size_t>(axis)] != axis - 1) return false;
    }
    return true;
  }

  // A channels-last input transposed through its physical view; NCHW -> NHWC behind a
  // convolution is that view itself, no copy.
  static Status FromChannelsLast(KernelContext& context, const RtTensor& data, const std::vector<int64_t>& perm,
                                 const std::vector<int64_t>& dims, size_t element_size) {
    const RtTensor physical = layouts::PhysicalView(data);
    const int64_t rank = static_cast<int64_t>(data.rank());
    std::vector<int64_t> physical_perm;
    for (int64_t axis : perm) physical_perm.push_back(layouts::PhysicalAxes(axis, rank, data.layout())[0]);
    if (std::is_sorted(physical_perm.begin(), physical_perm.end())) {
      context.outputs[0] = RtTensor(data.dtype(), dims, data.storage());
      context.launched = false;
      return Status::Ok();
    }
    RtTensor& out = context.Output(0, data.dtype(), dims);
    TransposeBytes(out.raw(), physical.raw(), element_size, physical.dims(), physical_perm);
    return Status::Ok();
  }

  std::optional<std::vector<int64_t>> perm_;
};

// DepthToSpace and SpaceToDepth: a 6-D view of the NCHW input, permuted.
class BlockRearrangeKernel : public Kernel {
 public:
  explicit BlockRearrangeKernel(bool depth_to_space) : depth_to_space_(depth_to_space) {}
  Status Init(const KernelInfo& info) {
    block_ = info.node.GetInt("blocksize", 0);
    if (block_ <= 0) return info.Error("blocksize must be positive");
    std::string mode = info.node.GetString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return info.Error("unknown mode '" + mode + "'");
    // DepthToSpace has `mode` from version 11, SpaceToDepth from 28.
    column_row_depth_ = mode == "CRD" && info.opset >= (depth_to_space_ ? 11 : 28);
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    if (data.rank() != 4) return InvalidModel("the input must be 4-D, not " + DimsToString(data.dims()));
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    int64_t n = data.dim(0), c = data.dim(1), h = data.dim(2), w = data.dim(3), b = block_;
    std::vector<int64_t> view, perm, out_dims;
    if (depth_to_space_) {
      if (c % (b * b) != 0) return InvalidModel("channels " + std::to_string(c) + " are not divisible by blocksize²");
      int64_t depth = c / (b * b);
      view =
          column_row_depth_ ? std::vector<int64_t>{n, depth, b, b, h, w} : std::vector<int64_t>{n, b, b, depth, h, w};
      perm = column_row_depth_ ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
      out_dims = {n, depth, h * b, w * b};
    } else {
      if (h % b != 0 || w % b != 0) {
        return InvalidModel("spatial dims " + DimsToString(data.dims()) + " are not divisible by the blocksize");
      }
      view = {n, c, h / b, b, w / b, b};
      perm = column_row_depth_ ? std::vector<int64_t>{0, 1, 3, 5, 2, 4} : std::vector<int64_t>{0, 3, 5, 1, 2, 4};
      out_dims = {n, c * b * b, h / b, w / b};
    }
    RtTensor& out = context.Output(0, data.dtype(), out_dims);
    TransposeBytes(out.raw(), data.raw(), element_size, view, perm);
    return Status::Ok();
  }

 private:
  bool depth_to_space_;
  bool column_row_depth_ = false;
  int64_t block_ = 0;
};

template <bool kDepthToSpace>
class BlockRearrange : public BlockRearrangeKernel {
 public:
  BlockRearrange() : BlockRearrangeKernel(kDepthToSpace) {}
};

}  // namespace

void RegisterTransposeKernels(KernelRegistry& registry) {
  registry.Register("", "Transpose", 1, kAnyOpset, MakeWithInputs<TransposeKernel>(1));
  registry.Register("", "DepthToSpace", 1, kAnyOpset, MakeWithInputs<BlockRearrange<true>>(1));
  registry.Register("", "SpaceToDepth", 1, kAnyOpset, MakeWithInputs<BlockRearrange<false>>(1));
}

}  // namespace fusionopt::cpu::data_movement
