// What Resize and Upsample mean, for every runtime that implements them (the CPU runtime's
// cpu_runtime/data_movement/resize.cc, the CUDA generator's cuda_runtime/codegen/resize_codegen.cc):
// the node's attributes read per opset, the output geometry from scales or sizes, and how an
// output coordinate samples the input along one axis (coordinate transforms, interpolation
// weights). Runtimes differ only in how they apply the samplings.
//
// Interpolation is separable: an n-linear or n-cubic resize is a 1-D resize along each
// resized axis in turn, which is how the ONNX reference defines it. The weights follow the
// reference implementation (onnx/reference/ops/op_resize.py), which generated the backend
// tests: neighbour windows, edge clamping, exclude_outside renormalisation, antialias filters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt {

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

enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };

// A Resize (opset >= 10) or Upsample (7-9) node's attributes, and where its run-time
// arguments are: Upsample-7 has its scales as an attribute; Upsample-9 and Resize-10 take
// scales as input 1; Resize-11 on takes roi, scales and sizes as inputs 1-3.
struct ResizeAttributes {
  ResizeOptions options;
  AspectPolicy policy = AspectPolicy::kStretch;
  std::optional<std::vector<int64_t>> axes;              // opset >= 18
  std::optional<std::vector<float>> scales_attribute;    // Upsample-7
  size_t scales_input = 1;
  std::optional<size_t> roi_input, sizes_input;
};
// InvalidModel with the reason for an unknown mode, coordinate mapping or policy.
Result<ResizeAttributes> ReadResizeAttributes(const Node& node, int64_t opset);

// The output dims, per-axis scales and region of interest of one resize.
struct ResizeGeometry {
  std::vector<int64_t> out_dims;
  std::vector<double> scales;
  std::vector<double> roi_start, roi_end;
};
// From the input's dims and the arguments as given: `scales` (empty when absent), `sizes`
// (nullopt or empty when absent) and `roi` (2 values per resized axis; read only by
// tf_crop_and_resize). Exactly one of scales and sizes must be given.
Result<ResizeGeometry> ResolveResizeGeometry(const ResizeAttributes& attributes, const std::vector<int64_t>& in_dims,
                                             const std::vector<double>& scales,
                                             const std::optional<std::vector<int64_t>>& sizes,
                                             const std::vector<double>& roi);

// Every axis's sampling for `geometry` (identity axes included).
std::vector<AxisSampling> PlanResize(const ResizeOptions& options, const std::vector<int64_t>& in_dims,
                                     const ResizeGeometry& geometry);

// The axes whose sampling is not the identity, in the order separable interpolation resamples
// them: shrinking axes first, and among equal ratios the innermost first (its gather pass is the
// costly one, best run while the tensor is smallest). Interpolated values depend on this order
// in their last bits, so every runtime follows it.
std::vector<size_t> InterpolationOrder(const std::vector<AxisSampling>& samplings);

Result<CoordinateMode> ParseCoordinateMode(const std::string& name, int64_t opset);
Result<NearestMode> ParseNearestMode(const std::string& name);

}  // namespace fusionopt
