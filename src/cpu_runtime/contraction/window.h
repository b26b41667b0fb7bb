// Sliding-window geometry shared by Conv, ConvTranspose and the pools: the attributes as
// the node spells them, and the window they resolve to for one input shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

struct WindowAttributes {
  std::vector<int64_t> kernel_shape;  // empty when absent
  std::vector<int64_t> strides;       // empty: 1 on every axis
  std::vector<int64_t> dilations;     // empty: 1 on every axis
  std::vector<int64_t> pads;          // empty: 0; else all begins, then all ends
  AutoPad auto_pad = AutoPad::kNotSet;
  bool ceil_mode = false;             // pools only
  // ConvTranspose only.
  std::vector<int64_t> output_padding;
  std::vector<int64_t> output_shape;
};

// Reads and validates the attributes: positive kernel/strides/dilations, non-negative pads,
// a known auto_pad, and per-axis lists of one common length.
Result<WindowAttributes> ReadWindowAttributes(const KernelInfo& info);

// A window resolved over the spatial axes of one input.
struct Window {
  std::vector<int64_t> input;
  std::vector<int64_t> kernel;
  std::vector<int64_t> stride;
  std::vector<int64_t> dilation;
  std::vector<int64_t> pad_begin;
  // For a transposed window, end padding less output_padding (negative when the output
  // grows past the natural size): then output == (input-1)*stride + dilated - begin - end.
  std::vector<int64_t> pad_end;
  std::vector<int64_t> output;

  size_t rank() const { return input.size(); }
  int64_t DilatedKernel(size_t axis) const { return (kernel[axis] - 1) * dilation[axis] + 1; }
  // The end padding a floor-rounding library needs to produce `output`: pad_end, or more
  // when ceil_mode kept a window that runs past it.
  int64_t FloorPadEnd(size_t axis) const;
  bool ExtendsPastPadding() const;  // some FloorPadEnd exceeds pad_end
  int64_t InputSize() const;
  int64_t OutputSize() const;
};

// The window of a convolution or pool over spatial `input` with a `kernel` (from the
// weights for Conv, from kernel_shape for pools). Errors name the offending axis.
Result<Window> ResolveWindow(const WindowAttributes& attributes, const std::vector<int64_t>& input,
                             const std::vector<int64_t>& kernel);
// The window of a transposed convolution: output from output_shape or the natural size.
Result<Window> ResolveTransposedWindow(const WindowAttributes& attributes,
                                       const std::vector<int64_t>& input,
                                       const std::vector<int64_t>& kernel);

}  // namespace fusionopt::cpu
