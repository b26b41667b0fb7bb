// Resize's meaning (resize_sampling.h): attributes, geometry, and per-axis sampling — output
// coordinate -> input coordinate -> weighted input taps.
#include "ir/resize_sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace fusionopt {
namespace {

// The input coordinate that output coordinate x maps to. Like the reference, align_corners
// and tf_crop_and_resize divide by the real-valued output length scale * in_size.
double SourceCoordinate(const ResizeOptions& options, double x, int64_t in_size, int64_t out_size, double scale,
                        double roi_start, double roi_end) {
  const double out_width = scale * static_cast<double>(in_size);
  const double last = static_cast<double>(in_size - 1);
  switch (options.coordinates) {
    case CoordinateMode::kHalfPixel: return (x + 0.5) / scale - 0.5;
    case CoordinateMode::kHalfPixelSymmetric: {
      // Centres the sampled region when the output length was rounded.
      double adjustment = static_cast<double>(out_size) / out_width;
      double offset = static_cast<double>(in_size) / 2.0 * (1.0 - adjustment);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case CoordinateMode::kPytorchHalfPixel: return out_size > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case CoordinateMode::kAlignCorners: return out_width == 1.0 ? 0.0 : x * last / (out_width - 1.0);
    case CoordinateMode::kAsymmetric: return x / scale;
    case CoordinateMode::kTfHalfPixelForNn: return (x + 0.5) / scale;
    case CoordinateMode::kTfCropAndResize: {
      double span = out_width == 1.0 ? (roi_end - roi_start) * last / 2.0
                                     : x * (roi_end - roi_start) * last / (out_width - 1.0);
      return span + roi_start * last;
    }
  }
  return x;
}

int64_t NearestIndex(double source, NearestMode mode, double scale) {
  const double below = std::floor(source);
  if (source == below) return static_cast<int64_t>(below);
  const double fraction = source - below;
  bool up = false;
  switch (mode) {
    case NearestMode::kRoundPreferFloor: up = fraction > 0.5; break;
    case NearestMode::kRoundPreferCeil: up = fraction >= 0.5; break;
    case NearestMode::kFloor: up = false; break;
    case NearestMode::kCeil: up = true; break;
    case NearestMode::kSimple: up = scale < 1.0; break;
  }
  return static_cast<int64_t>(below) + (up ? 1 : 0);
}

double CubicKernel(double x, double a) {
  x = std::abs(x);
  if (x <= 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

std::vector<double> Normalized(std::vector<double> weights) {
  double sum = 0.0;
  for (double weight : weights) sum += weight;
  for (double& weight : weights) weight /= sum;
  return weights;
}

// Weights of the taps around a source coordinate whose offset past the tap on its left is
// `ratio` (in (0, 1]; 1 for an exact hit, whose window then starts one tap earlier).
// Antialiasing widens the filter by 1/scale when the axis shrinks.
std::vector<double> Weights(const ResizeOptions& options, double ratio, double scale) {
  const double a = options.cubic_a;
  if (!options.antialias) {
    if (options.mode == ResizeMode::kLinear) return {1.0 - ratio, ratio};
    double r = ratio, s = 1.0 - ratio;
    return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1, ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
  }
  const double support_scale = std::min(scale, 1.0);
  std::vector<double> weights;
  if (options.mode == ResizeMode::kLinear) {
    int64_t start = static_cast<int64_t>(std::floor(-1.0 / support_scale)) + 1;
    int64_t footprint = 2 - 2 * start;
    for (int64_t i = start; i < start + footprint; ++i) {
      weights.push_back(std::clamp(1.0 - std::abs((static_cast<double>(i) - ratio) * support_scale), 0.0, 1.0));
    }
  } else {
    int64_t start = static_cast<int64_t>(std::floor(-2.0 / support_scale)) + 1;
    for (int64_t i = start; i < 2 - start; ++i) {
      weights.push_back(CubicKernel(support_scale * (static_cast<double>(i) - ratio), a));
    }
  }
  return Normalized(std::move(weights));
}

// First of the `taps` input coordinates nearest to `source` (ties go to the lower ones).
int64_t WindowStart(double source, int taps) {
  const int pad = (taps + 1) / 2;
  const double padded = source + pad;
  const double below = std::floor(padded);
  const double fraction = padded - below;
  int64_t offset = 0;
  if (taps % 2 == 0) {
    offset = fraction == 0.0 ? -(taps / 2) : -(taps / 2) + 1;
  } else {
    offset = fraction <= 0.5 ? -((taps - 1) / 2) : -((taps - 1) / 2) + 1;
  }
  return static_cast<int64_t>(below) + offset - pad;
}

void PlanInterpolatingTaps(const ResizeOptions& options, AxisSampling& sampling, int64_t x, double source,
                           double scale) {
  const double below = std::floor(source);
  const double ratio = source == below ? 1.0 : source - below;
  std::vector<double> weights = Weights(options, ratio, scale);
  const int64_t start = WindowStart(source, static_cast<int>(weights.size()));
  if (options.exclude_outside) {
    double sum = 0.0;
    for (size_t t = 0; t < weights.size(); ++t) {
      int64_t at = start + static_cast<int64_t>(t);
      if (at < 0 || at >= sampling.in_size) weights[t] = 0.0;
      sum += weights[t];
    }
    if (sum != 0.0) {
      for (double& weight : weights) weight /= sum;
    }
  }
  for (size_t t = 0; t < weights.size(); ++t) {
    size_t slot = static_cast<size_t>(x) * weights.size() + t;
    sampling.index[slot] = std::clamp<int64_t>(start + static_cast<int64_t>(t), 0, sampling.in_size - 1);
    sampling.weight[slot] = weights[t];
  }
}

}  // namespace

bool AxisSampling::IsIdentity() const {
  if (in_size != out_size) return false;
  for (int64_t x = 0; x < out_size; ++x) {
    if (extrapolated[x]) return false;
    double on_self = 0.0;
    for (int t = 0; t < taps; ++t) {
      size_t slot = static_cast<size_t>(x * taps + t);
      if (index[slot] == x) {
        on_self += weight[slot];
      } else if (weight[slot] != 0.0) {
        return false;
      }
    }
    if (on_self != 1.0) return false;
  }
  return true;
}

AxisSampling PlanAxis(const ResizeOptions& options, int64_t in_size, int64_t out_size, double scale, double roi_start,
                      double roi_end) {
  AxisSampling sampling;
  sampling.in_size = in_size;
  sampling.out_size = out_size;
  sampling.taps = options.mode == ResizeMode::kNearest ? 1 : static_cast<int>(Weights(options, 0.5, scale).size());
  sampling.index.assign(static_cast<size_t>(out_size * sampling.taps), 0);
  sampling.weight.assign(sampling.index.size(), 0.0);
  sampling.extrapolated.assign(static_cast<size_t>(out_size), 0);
  for (int64_t x = 0; x < out_size; ++x) {
    double source = SourceCoordinate(options, static_cast<double>(x), in_size, out_size, scale, roi_start, roi_end);
    if (options.coordinates == CoordinateMode::kTfCropAndResize &&
        (source < 0.0 || source > static_cast<double>(in_size - 1))) {
      sampling.extrapolated[x] = 1;
      continue;
    }
    if (options.mode == ResizeMode::kNearest) {
      sampling.index[x] = std::clamp<int64_t>(NearestIndex(source, options.nearest, scale), 0, in_size - 1);
      sampling.weight[x] = 1.0;
    } else {
      PlanInterpolatingTaps(options, sampling, x, source, scale);
    }
  }
  return sampling;
}

Result<CoordinateMode> ParseCoordinateMode(const std::string& name, int64_t opset) {
  if (name == "half_pixel") return CoordinateMode::kHalfPixel;
  if (name == "pytorch_half_pixel") return CoordinateMode::kPytorchHalfPixel;
  if (name == "align_corners") return CoordinateMode::kAlignCorners;
  if (name == "asymmetric") return CoordinateMode::kAsymmetric;
  if (name == "tf_half_pixel_for_nn") return CoordinateMode::kTfHalfPixelForNn;
  if (name == "tf_crop_and_resize") return CoordinateMode::kTfCropAndResize;
  if (name == "half_pixel_symmetric" && opset >= 19) return CoordinateMode::kHalfPixelSymmetric;
  return InvalidModel("unknown coordinate_transformation_mode '" + name + "' at opset " + std::to_string(opset));
}

Result<NearestMode> ParseNearestMode(const std::string& name) {
  if (name == "round_prefer_floor") return NearestMode::kRoundPreferFloor;
  if (name == "round_prefer_ceil") return NearestMode::kRoundPreferCeil;
  if (name == "floor") return NearestMode::kFloor;
  if (name == "ceil") return NearestMode::kCeil;
  return InvalidModel("unknown nearest_mode '" + name + "'");
}


Result<ResizeAttributes> ReadResizeAttributes(const Node& node, int64_t opset) {
  ResizeAttributes out;
  ResizeOptions& options = out.options;
  const bool upsample = node.op_type() == "Upsample";
  const std::string mode = node.GetString("mode", "nearest");
  const bool legacy = upsample || opset < 11;
  if (mode == "nearest") {
    options.mode = ResizeMode::kNearest;
  } else if (mode == "linear") {
    options.mode = ResizeMode::kLinear;
  } else if (mode == "cubic" && !legacy) {
    options.mode = ResizeMode::kCubic;
  } else {
    return InvalidModel("unknown mode '" + mode + "'");
  }
  if (legacy) {
    // Upsample and Resize-10 name no coordinate mapping; theirs is asymmetric.
    options.coordinates = CoordinateMode::kAsymmetric;
    options.nearest = NearestMode::kSimple;
    if (upsample && opset < 9) {
      const Attribute* scales = node.FindAttribute("scales");
      if (scales == nullptr || scales->kind != AttributeKind::kFloats) {
        return InvalidModel("the scales attribute is required");
      }
      out.scales_attribute = scales->floats;
    }
    return out;
  }
  FUSIONOPT_ASSIGN_OR_RETURN(options.coordinates,
                             ParseCoordinateMode(node.GetString("coordinate_transformation_mode", "half_pixel"), opset));
  FUSIONOPT_ASSIGN_OR_RETURN(options.nearest, ParseNearestMode(node.GetString("nearest_mode", "round_prefer_floor")));
  options.cubic_a = node.GetFloat("cubic_coeff_a", -0.75f);
  options.exclude_outside = node.GetInt("exclude_outside", 0) != 0;
  options.extrapolation_value = node.GetFloat("extrapolation_value", 0.0f);
  out.scales_input = 2;
  out.roi_input = 1;
  out.sizes_input = 3;
  if (opset >= 18) {
    options.antialias = node.GetInt("antialias", 0) != 0 && options.mode != ResizeMode::kNearest;
    out.axes = node.GetInts("axes");
    const std::string policy = node.GetString("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger") {
      out.policy = AspectPolicy::kNotLarger;
    } else if (policy == "not_smaller") {
      out.policy = AspectPolicy::kNotSmaller;
    } else if (policy != "stretch") {
      return InvalidModel("unknown keep_aspect_ratio_policy '" + policy + "'");
    }
  }
  return out;
}

namespace {

Result<std::vector<int64_t>> ResizedAxes(const ResizeAttributes& attributes, int64_t rank) {
  std::vector<int64_t> axes(static_cast<size_t>(rank));
  std::iota(axes.begin(), axes.end(), 0);
  if (!attributes.axes) return axes;
  axes.clear();
  std::set<int64_t> seen;
  for (int64_t axis : *attributes.axes) {
    if (axis < -rank || axis >= rank) {
      return InvalidModel("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    }
    const int64_t positive = axis < 0 ? axis + rank : axis;
    if (!seen.insert(positive).second) return InvalidModel("axis names axis " + std::to_string(positive) + " twice");
    axes.push_back(positive);
  }
  return axes;
}

Status ApplyScales(const std::vector<double>& scales, const std::vector<int64_t>& axes, ResizeGeometry& geometry) {
  if (scales.size() != axes.size()) {
    return InvalidModel("scales has " + std::to_string(scales.size()) + " entries for " +
                        std::to_string(axes.size()) + " axes");
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!(scales[i] > 0.0)) return InvalidModel("scales must be positive");
    geometry.scales[axes[i]] = scales[i];
    double size = std::floor(scales[i] * static_cast<double>(geometry.out_dims[axes[i]]));
    if (size > 1e15) return InvalidModel("scale " + std::to_string(scales[i]) + " makes the output too large");
    geometry.out_dims[axes[i]] = static_cast<int64_t>(size);
  }
  return Status::Ok();
}

Status ApplySizes(AspectPolicy policy, const std::vector<int64_t>& sizes, const std::vector<int64_t>& axes,
                  ResizeGeometry& geometry) {
  if (sizes.size() != axes.size()) {
    return InvalidModel("sizes has " + std::to_string(sizes.size()) + " entries for " + std::to_string(axes.size()) +
                        " axes");
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t in = geometry.out_dims[axes[i]];
    if (sizes[i] < 0) return InvalidModel("sizes must not be negative");
    if (in == 0 && sizes[i] != 0) return InvalidModel("an empty axis cannot be resized to a non-empty one");
    geometry.scales[axes[i]] = in == 0 ? 1.0 : static_cast<double>(sizes[i]) / static_cast<double>(in);
  }
  if (policy == AspectPolicy::kStretch) {
    for (size_t i = 0; i < axes.size(); ++i) geometry.out_dims[axes[i]] = sizes[i];
    return Status::Ok();
  }
  // One scale for all listed axes, the output rounded half up from it.
  double scale = geometry.scales[axes[0]];
  for (int64_t axis : axes) {
    scale = policy == AspectPolicy::kNotLarger ? std::min(scale, geometry.scales[axis])
                                               : std::max(scale, geometry.scales[axis]);
  }
  for (int64_t axis : axes) {
    geometry.scales[axis] = scale;
    geometry.out_dims[axis] = static_cast<int64_t>(scale * static_cast<double>(geometry.out_dims[axis]) + 0.5);
  }
  return Status::Ok();
}

}  // namespace

Result<ResizeGeometry> ResolveResizeGeometry(const ResizeAttributes& attributes, const std::vector<int64_t>& in_dims,
                                             const std::vector<double>& scales,
                                             const std::optional<std::vector<int64_t>>& sizes,
                                             const std::vector<double>& roi) {
  const auto rank = static_cast<int64_t>(in_dims.size());
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ResizedAxes(attributes, rank));
  ResizeGeometry geometry{in_dims, std::vector<double>(in_dims.size(), 1.0), std::vector<double>(in_dims.size(), 0.0),
                          std::vector<double>(in_dims.size(), 1.0)};
  if (attributes.options.coordinates == CoordinateMode::kTfCropAndResize) {
    if (roi.size() != 2 * axes.size()) {
      return InvalidModel("tf_crop_and_resize needs roi of " + std::to_string(2 * axes.size()) + " values, not " +
                          std::to_string(roi.size()));
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      geometry.roi_start[axes[i]] = roi[i];
      geometry.roi_end[axes[i]] = roi[i + axes.size()];
    }
  }
  const bool has_sizes = sizes && !sizes->empty();
  if (has_sizes == !scales.empty()) return InvalidModel("exactly one of scales and sizes must be given");
  if (has_sizes) {
    FUSIONOPT_RETURN_IF_ERROR(ApplySizes(attributes.policy, *sizes, axes, geometry));
  } else {
    FUSIONOPT_RETURN_IF_ERROR(ApplyScales(scales, axes, geometry));
  }
  return geometry;
}

std::vector<size_t> InterpolationOrder(const std::vector<AxisSampling>& samplings) {
  std::vector<size_t> order;
  for (size_t k = 0; k < samplings.size(); ++k) {
    if (!samplings[k].IsIdentity()) order.push_back(k);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int64_t lhs = samplings[a].out_size * samplings[b].in_size, rhs = samplings[b].out_size * samplings[a].in_size;
    return lhs != rhs ? lhs < rhs : a > b;
  });
  return order;
}

std::vector<AxisSampling> PlanResize(const ResizeOptions& options, const std::vector<int64_t>& in_dims,
                                     const ResizeGeometry& geometry) {
  std::vector<AxisSampling> samplings;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    samplings.push_back(PlanAxis(options, in_dims[k], geometry.out_dims[k], geometry.scales[k], geometry.roi_start[k],
                                 geometry.roi_end[k]));
  }
  return samplings;
}

}  // namespace fusionopt
