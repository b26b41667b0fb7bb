// Per-axis sampling of Resize: output coordinate -> input coordinate -> weighted input taps.
#include <algorithm>
#include <cmath>

#include "cpu_runtime/data_movement/resize.h"

namespace fusionopt::cpu::data_movement {
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

}  // namespace fusionopt::cpu::data_movement
