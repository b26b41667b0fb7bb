// Resize and Upsample, split by idea: how an output coordinate samples the input along one
// axis (data_movement/resize_plan.cc: coordinate transforms, interpolation weights)
// and the kernels that apply those samplings (data_movement/resize.cc).
//
// Interpolation is separable: an n-linear or n-cubic resize is a 1-D resize along each
// resized axis in turn, which is how the ONNX reference defines it. The weights follow the
// reference implementation (onnx/reference/ops/op_resize.py), which generated the backend
// tests: neighbour windows, edge clamping, exclude_outside renormalisation, antialias filters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/status.h"

namespace fusionopt::cpu::data_movement {

enum class ResizeMode { kNearest, kLinear, kCubic };

enum class CoordinateMode {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};

// kSimple is the rounding of Upsample and Resize-10, which name none: floor when the axis
// grows, ceil when it shrinks (as onnxruntime does).
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeOptions {
  ResizeMode mode = ResizeMode::kNearest;
  CoordinateMode coordinates = CoordinateMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation_value = 0.0;
};

// How one axis of the output samples the same axis of the input: each output coordinate
// reads `taps` input coordinates (already clamped into range) with weights; coordinates
// that tf_crop_and_resize maps outside the input are flagged and get the extrapolation value.
struct AxisSampling {
  int64_t in_size = 0;
  int64_t out_size = 0;
  int taps = 1;
  std::vector<int64_t> index;         // out_size * taps
  std::vector<double> weight;         // out_size * taps
  std::vector<uint8_t> extrapolated;  // out_size

  // Output coordinate x reads exactly input coordinate x: the axis can be skipped.
  bool IsIdentity() const;
};

// `scale` is the axis's scale factor (given, or output/input size); roi_start/roi_end are
// the axis's region of interest (used by tf_crop_and_resize only).
AxisSampling PlanAxis(const ResizeOptions& options, int64_t in_size, int64_t out_size, double scale, double roi_start,
                      double roi_end);

Result<CoordinateMode> ParseCoordinateMode(const std::string& name, int64_t opset);
Result<NearestMode> ParseNearestMode(const std::string& name);

}  // namespace fusionopt::cpu::data_movement
