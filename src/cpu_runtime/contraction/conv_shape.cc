#include "cpu_runtime/contraction/conv_shape.h"

#include <string>

#include "cpu_runtime/contraction/common.h"

namespace fusionopt::cpu {
namespace {

using dnnl::memory;

std::vector<int64_t> Spatial(const std::vector<int64_t>& dims) { return {dims.begin() + 2, dims.end()}; }

}  // namespace

Result<ConvShape> ResolveConvShape(const WindowAttributes& attributes, int64_t group, bool transposed,
                                   const RtTensor& x, const RtTensor& w, const RtTensor* bias) {
  const char* op = transposed ? "ConvTranspose" : "Conv";
  if (x.rank() < 3) return InvalidModel(std::string(op) + " input must be (N, C, D1, ...), got " + DescribeTensor(x));
  if (w.rank() != x.rank()) {
    return InvalidModel(std::string(op) + " weights " + DescribeTensor(w) + " must have the input's rank " +
                        std::to_string(x.rank()));
  }
  ConvShape shape;
  shape.group = group;
  shape.batch = x.dim(0);
  shape.in_channels = x.dim(1);
  // Conv weights are (M, C/group, k...); ConvTranspose weights are (C, M/group, k...).
  const int64_t weight_in = transposed ? w.dim(0) : w.dim(1) * group;
  shape.out_channels = transposed ? w.dim(1) * group : w.dim(0);
  if (weight_in != shape.in_channels) {
    return InvalidModel(std::string(op) + " input has " + std::to_string(shape.in_channels) + " channels but weights " +
                        DimsToString(w.dims()) + " with group " + std::to_string(group) + " expect " +
                        std::to_string(weight_in));
  }
  if (w.dim(0) % group != 0) {
    return InvalidModel(std::string(op) + " weights " + DimsToString(w.dims()) + ": dim 0 is not divisible by group " +
                        std::to_string(group));
  }
  if (bias != nullptr && (bias->rank() != 1 || bias->dim(0) != shape.out_channels)) {
    return InvalidModel(std::string(op) + " bias " + DescribeTensor(*bias) + " must be 1-D with " +
                        std::to_string(shape.out_channels) + " values");
  }
  auto window = transposed ? ResolveTransposedWindow(attributes, Spatial(x.dims()), Spatial(w.dims()))
                           : ResolveWindow(attributes, Spatial(x.dims()), Spatial(w.dims()));
  if (!window.ok()) return InvalidModel(std::string(op) + " " + window.status().message());
  shape.window = std::move(window).value();
  shape.output_dims = {shape.batch, shape.out_channels};
  shape.output_dims.insert(shape.output_dims.end(), shape.window.output.begin(), shape.window.output.end());
  return shape;
}

memory::desc WeightsDesc(const ConvShape& shape, const std::vector<int64_t>& kernel, bool transposed,
                         memory::data_type type) {
  const int64_t g = shape.group, out = shape.out_channels / g, in = shape.in_channels / g;
  int64_t kernel_size = 1;
  for (int64_t dim : kernel) kernel_size *= dim;
  memory::dims dims, strides;
  if (g > 1) {
    dims.push_back(g);
    strides.push_back(out * in * kernel_size);
  }
  dims.push_back(out);
  dims.push_back(in);
  // Conv: [o][i][k...]; ConvTranspose: [i][o][k...].
  strides.push_back(transposed ? kernel_size : in * kernel_size);
  strides.push_back(transposed ? out * kernel_size : kernel_size);
  int64_t stride = kernel_size;
  for (int64_t dim : kernel) {
    stride /= dim;
    dims.push_back(dim);
    strides.push_back(stride);
  }
  return memory::desc(dims, type, strides);
}

OneDnnWindow OneDnnWindowOf(const Window& window) {
  OneDnnWindow converted;
  for (size_t axis = 0; axis < window.rank(); ++axis) {
    converted.strides.push_back(window.stride[axis]);
    converted.dilations.push_back(window.dilation[axis] - 1);  // oneDNN counts the gaps
    converted.pad_begin.push_back(window.pad_begin[axis]);
    converted.pad_end.push_back(window.pad_end[axis]);
  }
  return converted;
}

}  // namespace fusionopt::cpu
