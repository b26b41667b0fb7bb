#include "cpu_runtime/contraction/conv_reference.h"

#include "cpu_runtime/contraction/common.h"

namespace fusionopt::cpu {
namespace {

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t product = 1;
  for (int64_t dim : dims) product *= dim;
  return product;
}

// Row-major coordinates of `index` within `dims`.
void Decode(int64_t index, const std::vector<int64_t>& dims, std::vector<int64_t>& coordinates) {
  for (size_t axis = dims.size(); axis-- > 0;) {
    coordinates[axis] = index % dims[axis];
    index /= dims[axis];
  }
}

// Row-major offset of the position `base * stride - pad + tap * dilation` within `bounds`
// on every axis, or -1 when it falls outside (in the padding).
int64_t TapOffset(const Window& window, const std::vector<int64_t>& base, const std::vector<int64_t>& tap,
                  const std::vector<int64_t>& bounds) {
  int64_t offset = 0;
  for (size_t axis = 0; axis < window.rank(); ++axis) {
    const int64_t at = base[axis] * window.stride[axis] - window.pad_begin[axis] + tap[axis] * window.dilation[axis];
    if (at < 0 || at >= bounds[axis]) return -1;
    offset = offset * bounds[axis] + at;
  }
  return offset;
}

}  // namespace

void ReferenceConv(const double* x, const double* w, const double* bias, double* y, const ConvShape& shape) {
  const Window& window = shape.window;
  const int64_t in_size = window.InputSize(), out_size = window.OutputSize(), kernel_size = Product(window.kernel);
  const int64_t in_per_group = shape.in_channels / shape.group;
  const int64_t out_per_group = shape.out_channels / shape.group;
  const int64_t work = shape.batch * shape.out_channels * std::max(in_size, out_size) * kernel_size * in_per_group;
#pragma omp parallel for if (work > kParallelWork)
  for (int64_t plane = 0; plane < shape.batch * shape.out_channels; ++plane) {
    const int64_t n = plane / shape.out_channels, m = plane % shape.out_channels;
    const double* x_group = x + (n * shape.in_channels + (m / out_per_group) * in_per_group) * in_size;
    const double* w_filter = w + m * in_per_group * kernel_size;
    std::vector<int64_t> out_at(window.rank()), tap(window.rank());
    for (int64_t o = 0; o < out_size; ++o) {
      Decode(o, window.output, out_at);
      double sum = bias ? bias[m] : 0.0;
      for (int64_t k = 0; k < kernel_size; ++k) {
        Decode(k, window.kernel, tap);
        const int64_t offset = TapOffset(window, out_at, tap, window.input);
        if (offset < 0) continue;
        for (int64_t c = 0; c < in_per_group; ++c) sum += x_group[c * in_size + offset] * w_filter[c * kernel_size + k];
      }
      y[plane * out_size + o] = sum;
    }
  }
}

void ReferenceConvTranspose(const double* x, const double* w, const double* bias, double* y, const ConvShape& shape) {
  const Window& window = shape.window;
  const int64_t in_size = window.InputSize(), out_size = window.OutputSize(), kernel_size = Product(window.kernel);
  const int64_t in_per_group = shape.in_channels / shape.group;
  const int64_t out_per_group = shape.out_channels / shape.group;
  const int64_t work = shape.batch * shape.out_channels * std::max(in_size, out_size) * kernel_size * in_per_group;
  // Each thread owns whole output planes, so the scatter below never races.
#pragma omp parallel for if (work > kParallelWork)
  for (int64_t plane = 0; plane < shape.batch * shape.out_channels; ++plane) {
    const int64_t n = plane / shape.out_channels, m = plane % shape.out_channels;
    const int64_t first_channel = (m / out_per_group) * in_per_group;
    double* y_plane = y + plane * out_size;
    std::fill(y_plane, y_plane + out_size, bias ? bias[m] : 0.0);
    std::vector<int64_t> in_at(window.rank()), tap(window.rank());
    for (int64_t c = first_channel; c < first_channel + in_per_group; ++c) {
      const double* x_plane = x + (n * shape.in_channels + c) * in_size;
      const double* w_filter = w + (c * out_per_group + m % out_per_group) * kernel_size;
      for (int64_t i = 0; i < in_size; ++i) {
        Decode(i, window.input, in_at);
        for (int64_t k = 0; k < kernel_size; ++k) {
          Decode(k, window.kernel, tap);
          const int64_t offset = TapOffset(window, in_at, tap, window.output);
          if (offset >= 0) y_plane[offset] += x_plane[i] * w_filter[k];
        }
      }
    }
  }
}

}  // namespace fusionopt::cpu
