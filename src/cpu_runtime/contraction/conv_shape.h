// The shape of one convolution or transposed convolution: its channel arithmetic and window,
// resolved for one input (the float kernels of contraction/conv.cc and the integer ones of
// quantized/ share it), and its weights as oneDNN indexes them.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <vector>

#include "cpu_runtime/contraction/window.h"
#include "cpu_runtime/engine/rt_tensor.h"
#include "ir/status.h"

namespace fusionopt::cpu {

struct ConvShape {
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t group = 1;
  Window window;                     // spatial axes
  std::vector<int64_t> output_dims;  // (N, M, spatial...)
};

// x (N, C, spatial...), w (M, C/group, k...) — or (C, M/group, k...) when `transposed` — and
// an optional bias (M); errors name the op and the mismatch.
Result<ConvShape> ResolveConvShape(const WindowAttributes& attributes, int64_t group, bool transposed,
                                   const RtTensor& x, const RtTensor& w, const RtTensor* bias);

// A window in oneDNN's terms: strides, dilations as gaps (dilation - 1), pads at each end.
struct OneDnnWindow {
  dnnl::memory::dims strides, dilations, pad_begin, pad_end;
};
OneDnnWindow OneDnnWindowOf(const Window& window);

// Weights as oneDNN indexes them, (g, o, i, k...) or (o, i, k...), over the ONNX layout.
dnnl::memory::desc WeightsDesc(const ConvShape& shape, const std::vector<int64_t>& kernel, bool transposed,
                               dnnl::memory::data_type type = dnnl::memory::data_type::f32);

}  // namespace fusionopt::cpu
