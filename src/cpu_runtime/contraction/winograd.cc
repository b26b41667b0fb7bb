#include "cpu_runtime/contraction/winograd.h"


#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/engine/host_cpu.h"
#include "cpu_runtime/onednn/common.h"

namespace fusionopt::cpu::winograd {
namespace {

constexpr int64_t kTileOut = 4;    // outputs per tile side
constexpr int64_t kTileIn = 6;     // inputs per tile side
constexpr int64_t kPositions = 36;  // transformed positions per tile
constexpr int64_t kLanes = 8;      // channels per vector
// Tiles whose epilogue runs together: 4 × 16 outputs × 8 channels, one engine tile.
constexpr int64_t kTilesPerEpilogue = 4;
// V and M above this size would take more memory than the convolution is worth.
constexpr int64_t kMaxScratchBytes = int64_t{256} << 20;

using Vec = float __attribute__((vector_size(32)));

// By reference: a 32-byte vector passed by value would change the ABI between ISA levels.
void LoadLanes(const float* at, int64_t lane_stride, Vec& v) {
  if (lane_stride == 1) {
    std::memcpy(&v, at, sizeof v);
  } else {
    for (int64_t i = 0; i < kLanes; ++i) v[i] = at[i * lane_stride];
  }
}

void StoreLanes(float* at, int64_t lane_stride, const Vec& v) {
  if (lane_stride == 1) {
    std::memcpy(at, &v, sizeof v);
  } else {
    for (int64_t i = 0; i < kLanes; ++i) at[i * lane_stride] = v[i];
  }
}

// Where the 8 channels [c, c + 8) of image n lie in a (N, C, H, W) tensor stored as `layout`:
// the channels of position (y, x) start at base + y·row + x·column, `lane` apart.
struct PlaneAccess {
  int64_t base = 0, row = 0, column = 0, lane = 0;
  int64_t At(int64_t y, int64_t x) const { return base + y * row + x * column; }
};

PlaneAccess AccessOf(Layout layout, const std::vector<int64_t>& dims, int64_t n, int64_t c) {
  const int64_t channels = dims[1], height = dims[2], width = dims[3];
  switch (layout) {
    case Layout::kRowMajor: return {(n * channels + c) * height * width, width, 1, height * width};
    case Layout::kChannelsLast: return {n * height * width * channels + c, width * channels, channels, 1};
    case Layout::kBlocked8:
    case Layout::kBlocked16: {
      const int64_t block = layout == Layout::kBlocked8 ? 8 : 16;
      return {(n * (channels / block) + c / block) * height * width * block + c % block, width * block, block, 1};
    }
  }
  return {};
}

// Bᵀ·d over one axis of a 6×6 tile: d[k·stride] in, r[k·stride] out.
void InputTransform(const Vec* d, int64_t stride, Vec* r) {
  const Vec d0 = d[0], d1 = d[stride], d2 = d[2 * stride], d3 = d[3 * stride], d4 = d[4 * stride],
            d5 = d[5 * stride];
  r[0] = 4.0f * d0 - 5.0f * d2 + d4;
  r[stride] = -4.0f * (d1 + d2) + d3 + d4;
  r[2 * stride] = 4.0f * (d1 - d2) - d3 + d4;
  r[3 * stride] = 2.0f * (d3 - d1) - d2 + d4;
  r[4 * stride] = 2.0f * (d1 - d3) - d2 + d4;
  r[5 * stride] = 4.0f * d1 - 5.0f * d3 + d5;
}

// Aᵀ·m over one axis: six values in (m[k·stride]), four out (o[k·out_stride]).
void OutputTransform(const Vec* m, int64_t stride, Vec* o, int64_t out_stride) {
  const Vec m0 = m[0], m1 = m[stride], m2 = m[2 * stride], m3 = m[3 * stride], m4 = m[4 * stride],
            m5 = m[5 * stride];
  const Vec sum12 = m1 + m2, diff12 = m1 - m2, sum34 = m3 + m4, diff34 = m3 - m4;
  o[0] = m0 + sum12 + sum34;
  o[out_stride] = diff12 + 2.0f * diff34;
  o[2 * out_stride] = sum12 + 4.0f * sum34;
  o[3 * out_stride] = diff12 + 8.0f * diff34 + m5;
}

// G·g·Gᵀ for one 3×3 kernel, in double: the 6×6 transformed weights.
void WeightTransform(const float* g, double* u) {
  double t[kTileIn][3];  // G·g
  for (int64_t j = 0; j < 3; ++j) {
    const double g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
    t[0][j] = g0 / 4;
    t[1][j] = -(g0 + g1 + g2) / 6;
    t[2][j] = -(g0 - g1 + g2) / 6;
    t[3][j] = g0 / 24 + g1 / 12 + g2 / 6;
    t[4][j] = g0 / 24 - g1 / 12 + g2 / 6;
    t[5][j] = g2;
  }
  for (int64_t i = 0; i < kTileIn; ++i) {
    const double g0 = t[i][0], g1 = t[i][1], g2 = t[i][2];
    double* row = u + i * kTileIn;
    row[0] = g0 / 4;
    row[1] = -(g0 + g1 + g2) / 6;
    row[2] = -(g0 - g1 + g2) / 6;
    row[3] = g0 / 24 + g1 / 12 + g2 / 6;
    row[4] = g0 / 24 - g1 / 12 + g2 / 6;
    row[5] = g2;
  }
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The per-tile transforms are built for the baseline ISA, where GCC splits each 8-lane vector
// into two: an AVX2+FMA build of them (target_clones) ran YOLOv8n and ResNet-50 no faster
// (57.6 vs 58.3 ms, 48.2 vs 47.3 ms with every eligible convolution on Winograd), as the
// transforms wait on memory, not on arithmetic.
// One 6x6 tile of 8 channels (origin y0, x0; zero outside height x width) into its 36
// transformed positions, `slice` floats apart from `out` on.
void InputTile(const float* data, const PlaneAccess& access, int64_t y0, int64_t x0, int64_t height, int64_t width,
               float* out, int64_t slice) {
  Vec d[kPositions], t[kPositions];
  for (int64_t i = 0; i < kTileIn; ++i) {
    for (int64_t j = 0; j < kTileIn; ++j) {
      const int64_t y = y0 + i, x = x0 + j;
      Vec& lanes = d[i * kTileIn + j];
      if (y >= 0 && y < height && x >= 0 && x < width) {
        LoadLanes(data + access.At(y, x), access.lane, lanes);
      } else {
        lanes = Vec{};
      }
    }
  }
  for (int64_t j = 0; j < kTileIn; ++j) InputTransform(d + j, kTileIn, t + j);                // columns
  for (int64_t i = 0; i < kTileIn; ++i) InputTransform(t + i * kTileIn, 1, d + i * kTileIn);  // rows
  for (int64_t p = 0; p < kPositions; ++p) std::memcpy(out + p * slice, &d[p], sizeof(Vec));
}

// The 36 products of one tile's 8 output channels (`slice` floats apart from `in` on) into its
// 4x4 outputs plus `bias`, as 16 consecutive groups of 8 lanes at `values`.
void OutputTile(const float* in, int64_t slice, const float* bias, float* values) {
  Vec t[kPositions], o[kTileOut * kTileIn], r[kTileOut * kTileOut], b;
  std::memcpy(&b, bias, sizeof b);
  for (int64_t p = 0; p < kPositions; ++p) std::memcpy(&t[p], in + p * slice, sizeof(Vec));
  for (int64_t j = 0; j < kTileIn; ++j) OutputTransform(t + j, kTileIn, o + j, kTileIn);                // columns
  for (int64_t i = 0; i < kTileOut; ++i) OutputTransform(o + i * kTileIn, 1, r + i * kTileOut, 1);  // rows
  for (int64_t q = 0; q < kTileOut * kTileOut; ++q) {
    const Vec value = r[q] + b;
    std::memcpy(values + q * kLanes, &value, sizeof value);
  }
}



std::atomic<int64_t> runs_so_far{0};

}  // namespace

int64_t RunsSoFar() { return runs_so_far.load(std::memory_order_relaxed); }

Mode ModeFromEnvironment() {
  static const Mode mode = [] {
    const char* value = std::getenv("FUSIONOPT_CPU_WINOGRAD");
    const std::string text = value == nullptr ? "" : value;
    if (text == "off") return Mode::kOff;
    if (text == "always") return Mode::kAlways;
    return Mode::kAuto;
  }();
  return mode;
}

bool Applies(const ConvShape& shape) {
  const Window& window = shape.window;
  if (window.rank() != 2 || shape.group != 1) return false;
  if (shape.in_channels % kLanes != 0 || shape.out_channels % kLanes != 0) return false;
  for (size_t axis = 0; axis < 2; ++axis) {
    if (window.kernel[axis] != 3 || window.stride[axis] != 1 || window.dilation[axis] != 1) return false;
    if (window.pad_begin[axis] < 0 || window.pad_end[axis] < 0 || window.output[axis] < 1) return false;
  }
  const int64_t tiles = shape.batch * CeilDiv(window.output[0], kTileOut) * CeilDiv(window.output[1], kTileOut);
  const int64_t widest = std::max(shape.in_channels, shape.out_channels);
  return tiles * kPositions * widest * static_cast<int64_t>(sizeof(float)) <= kMaxScratchBytes;
}

// Measured per convolution of ResNet-50, DenseNet-121 and YOLOv8n and on chains of one shape
// (bench/winograd.py, docs/benchmarks.md). The transforms cost per channel and the saved
// multiply-adds per pair of channels, so the gain grows with width = C·M/(C+M); every run also
// pays a fixed cost (three passes, and reading the 36·C·M transformed weights, 4x the direct
// kernel's), which the tiles must amortize — the more, the narrower the channels. Measured:
// 16/16 channels lost at any size (1.2-1.4x slower), 32/32 about even; 128->32 won on 49
// tiles and more (0.75-0.95x) and lost on 32 and 16 (1.3x); 80/80 won from 25 tiles (0.6-0.7x),
// 128/128 from 16 (0.8x), 256/256 on 16 (0.5x), 512/512 on 8 (0.74x) but lost on 4 (1.7x).
DirectKernels DirectKernelsOnThisHost() {
  return ThisHost().onednn_avx512 ? DirectKernels::kAvx512 : DirectKernels::kAvx2;
}

// Both rules weigh the tiles (rows of the batched matmul) against the channels' harmonic width
// C·M/(C+M) (its inner and outer sizes together). Against AVX2's direct kernels Winograd won
// from width 20 given 1000/width tiles (AMD EPYC, AVX2, 2026-12-04); against AVX-512's brgemm
// kernels it lost on DenseNet's 128 -> 32 at 56x56 (1.29x) and ResNet's 512 -> 512 at 7x7
// (1.26x), and won on every shape of width 32 or more with 16 tiles or more (0.48-0.87x; AMD
// EPYC, AVX-512, 2026-12-06).
bool Pays(const ConvShape& shape, DirectKernels direct) {
  const int64_t tiles = shape.batch * CeilDiv(shape.window.output[0], kTileOut) *
                        CeilDiv(shape.window.output[1], kTileOut);
  const double width = static_cast<double>(shape.in_channels * shape.out_channels) /
                       static_cast<double>(shape.in_channels + shape.out_channels);
  if (direct == DirectKernels::kAvx512) return width >= 32 && tiles >= 16;
  return width >= 20 && static_cast<double>(tiles) >= std::max(8.0, 1000.0 / width);
}

bool Chosen(const ConvShape& shape, Mode mode) {
  if (mode == Mode::kOff || !Applies(shape)) return false;
  return mode == Mode::kAlways || Pays(shape, DirectKernelsOnThisHost());
}

Conv3x3::Conv3x3(const ConvShape& shape, const float* weights, const float* bias, ew::Program epilogue)
    : shape_(shape), epilogue_(std::move(epilogue)) {
  FUSIONOPT_CHECK(Applies(shape), "Winograd F(4x4, 3x3) applies");
  FUSIONOPT_CHECK(ew::BufferProgram::Accepts(epilogue_), "the epilogue runs on buffers");
  epilogue_is_identity_ = epilogue_.code.empty() && epilogue_.outputs[0] == 0;
  const int64_t channels = shape.in_channels, outputs = shape.out_channels;
  tiles_.rows = CeilDiv(shape.window.output[0], kTileOut);
  tiles_.columns = CeilDiv(shape.window.output[1], kTileOut);
  tiles_.per_image = tiles_.rows * tiles_.columns;
  tiles_.total = shape.batch * tiles_.per_image;
  bias_.assign(static_cast<size_t>(outputs), 0.0f);
  if (bias != nullptr) std::copy(bias, bias + outputs, bias_.begin());

  // U [36][C][M]: position-major, so each position's slice is one matmul's weights.
  std::vector<float> u(static_cast<size_t>(kPositions * channels * outputs));
  double transformed[kPositions];
#pragma omp parallel for private(transformed) if (channels * outputs > kParallelWork)
  for (int64_t pair = 0; pair < channels * outputs; ++pair) {
    const int64_t o = pair / channels, c = pair % channels;
    WeightTransform(weights + (o * channels + c) * 9, transformed);
    for (int64_t p = 0; p < kPositions; ++p) {
      u[static_cast<size_t>((p * channels + c) * outputs + o)] = static_cast<float>(transformed[p]);
    }
  }

  using dnnl::memory;
  v_desc_ = onednn::RowMajorDesc({kPositions, tiles_.total, channels});
  m_desc_ = onednn::RowMajorDesc({kPositions, tiles_.total, outputs});
  const memory::desc u_user = onednn::RowMajorDesc({kPositions, channels, outputs});
  const memory::desc u_any({kPositions, channels, outputs}, memory::data_type::f32, memory::format_tag::any);
  dnnl::matmul::desc description(v_desc_, u_any, m_desc_);
  dnnl::matmul::primitive_desc chosen(description, onednn::Engine());
  products_ = dnnl::matmul(chosen);
  transformed_weights_ = onednn::ReorderedCopy(u_user, u.data(), chosen.weights_desc());
}

void Conv3x3::TransformInput(const RtTensor& x, float* v) const {
  const std::vector<int64_t>& dims = x.dims();
  const int64_t height = dims[2], width = dims[3], channels = shape_.in_channels;
  const int64_t pad_top = shape_.window.pad_begin[0], pad_left = shape_.window.pad_begin[1];
  const int64_t blocks = channels / kLanes, slice = tiles_.total * channels;
  const float* data = x.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t tile = 0; tile < tiles_.total; ++tile) {
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t n = tile / tiles_.per_image, within = tile % tiles_.per_image;
      const int64_t y0 = within / tiles_.columns * kTileOut - pad_top;
      const int64_t x0 = within % tiles_.columns * kTileOut - pad_left;
      const PlaneAccess access = AccessOf(x.layout(), dims, n, block * kLanes);
      InputTile(data, access, y0, x0, height, width, v + tile * channels + block * kLanes, slice);
    }
  }
}

void Conv3x3::TransformOutput(const float* m, RtTensor& y, Layout y_layout, const RtTensor* residual) const {
  const std::vector<int64_t>& dims = y.dims();
  const int64_t height = dims[2], width = dims[3], outputs = shape_.out_channels;
  const int64_t blocks = outputs / kLanes, slice = tiles_.total * outputs;
  const int64_t groups = CeilDiv(tiles_.total, kTilesPerEpilogue);
  constexpr int64_t kGroupValues = kTilesPerEpilogue * kTileOut * kTileOut * kLanes;
  float* out = y.data<float>();
  const float* added = residual != nullptr ? residual->data<float>() : nullptr;
#pragma omp parallel
  {
    ew::BufferProgram epilogue(epilogue_);
    alignas(32) float values[kGroupValues];
    alignas(32) float addends[kGroupValues] = {};
#pragma omp for collapse(2) schedule(static)
    for (int64_t group = 0; group < groups; ++group) {
      for (int64_t block = 0; block < blocks; ++block) {
        const int64_t first = group * kTilesPerEpilogue, count = std::min(kTilesPerEpilogue, tiles_.total - first);
        for (int64_t k = 0; k < count; ++k) {
          OutputTile(m + (first + k) * outputs + block * kLanes, slice, bias_.data() + block * kLanes,
                     values + k * kTileOut * kTileOut * kLanes);
        }
        // The residual at the same outputs (zero past the edges), then the epilogue.
        auto for_each_output = [&](auto visit) {
          for (int64_t k = 0; k < count; ++k) {
            const int64_t tile = first + k, n = tile / tiles_.per_image, within = tile % tiles_.per_image;
            const int64_t y0 = within / tiles_.columns * kTileOut, x0 = within % tiles_.columns * kTileOut;
            const PlaneAccess access = AccessOf(y_layout, dims, n, block * kLanes);
            for (int64_t i = 0; i < kTileOut && y0 + i < height; ++i) {
              for (int64_t j = 0; j < kTileOut && x0 + j < width; ++j) {
                visit(access.At(y0 + i, x0 + j), access.lane, (k * kTileOut * kTileOut + i * kTileOut + j) * kLanes);
              }
            }
          }
        };
        const int n = static_cast<int>(count * kTileOut * kTileOut * kLanes);
        if (added != nullptr) {
          for_each_output([&](int64_t at, int64_t lane, int64_t slot) {
            Vec value;
            LoadLanes(added + at, lane, value);
            std::memcpy(addends + slot, &value, sizeof value);
          });
        }
        if (!epilogue_is_identity_) {
          const float* inputs[] = {values, addends};
          epilogue.Run(inputs, values, n);
        }
        for_each_output([&](int64_t at, int64_t lane, int64_t slot) {
          Vec value;
          std::memcpy(&value, values + slot, sizeof value);
          StoreLanes(out + at, lane, value);
        });
      }
    }
  }
}

void Conv3x3::Run(const RtTensor& x, RtTensor& y, Layout y_layout, const RtTensor* residual,
                  Allocator& allocator) const {
  FUSIONOPT_CHECK(x.dtype() == DataType::kFloat && y.dtype() == DataType::kFloat, "float32 operands");
  FUSIONOPT_CHECK((residual != nullptr) == (epilogue_.num_inputs == 2), "a residual exactly where the epilogue sums one");
  RtTensor v = Scratch(allocator, v_desc_.get_size());
  RtTensor m = Scratch(allocator, m_desc_.get_size());
  TransformInput(x, v.data<float>());
  std::unordered_map<int, dnnl::memory> arguments = {{DNNL_ARG_SRC, onednn::Wrap(v_desc_, v.raw())},
                                                     {DNNL_ARG_WEIGHTS, transformed_weights_},
                                                     {DNNL_ARG_DST, onednn::Wrap(m_desc_, m.raw())}};
  products_.execute(onednn::Stream(), arguments);
  onednn::Stream().wait();
  TransformOutput(m.data<float>(), y, y_layout, residual);
  runs_so_far.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace fusionopt::cpu::winograd
