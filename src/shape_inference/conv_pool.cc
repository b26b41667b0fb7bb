// Sliding-window ops: Conv, ConvTranspose, AveragePool, MaxPool, LpPool and global pools.
//
// Output size per spatial axis, with effective kernel k' = (k - 1) * dilation + 1:
//   NOTSET        floor((in + pad_begin + pad_end - k') / stride) + 1   (ceil with ceil_mode)
//   SAME_UPPER/LOWER   ceil(in / stride)
//   VALID         floor((in - k') / stride) + 1
// With ceil_mode a last window that would start inside the end padding is dropped, as
// onnxruntime and the ONNX reference implementation do (onnx's own C++ inference does not).
// ConvTranspose inverts this: stride * (in - 1) + output_padding + k' - pad_begin - pad_end,
// or in * stride for SAME_*, unless output_shape gives the sizes outright.
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

struct Window {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begin values for every axis, then end values
  std::string auto_pad;
  bool ceil_mode = false;
};

std::vector<int64_t> IntsOr(const Node& node, std::string_view name, size_t count,
                            int64_t fallback) {
  return node.GetInts(name).value_or(std::vector<int64_t>(count, fallback));
}

// Reads the window attributes for `spatial` axes; nullopt (after a warning) when they do not
// fit. `kernel_from_weights` is used when kernel_shape is absent (Conv, ConvTranspose).
std::optional<Window> ReadWindow(const InferenceContext& context, size_t spatial,
                                 const std::optional<std::vector<int64_t>>& kernel_from_weights) {
  const Node& node = context.node();
  Window window;
  if (auto kernel = node.GetInts("kernel_shape")) {
    window.kernel = *kernel;
  } else if (kernel_from_weights) {
    window.kernel = *kernel_from_weights;
  } else {
    return std::nullopt;  // weights' spatial dims not known yet; nothing to warn about
  }
  window.strides = IntsOr(node, "strides", spatial, 1);
  window.dilations = IntsOr(node, "dilations", spatial, 1);
  window.pads = IntsOr(node, "pads", 2 * spatial, 0);
  window.auto_pad = node.GetString("auto_pad", "NOTSET");
  window.ceil_mode = node.GetInt("ceil_mode", 0) != 0;
  if (window.kernel.size() != spatial || window.strides.size() != spatial ||
      window.dilations.size() != spatial || window.pads.size() != 2 * spatial) {
    context.Warn("kernel_shape/strides/dilations/pads do not match " + std::to_string(spatial) +
                 " spatial axes");
    return std::nullopt;
  }
  for (size_t axis = 0; axis < spatial; ++axis) {
    if (window.kernel[axis] <= 0 || window.strides[axis] <= 0 || window.dilations[axis] <= 0) {
      context.Warn("kernel_shape, strides and dilations must be positive");
      return std::nullopt;
    }
  }
  if (window.auto_pad != "NOTSET" && window.auto_pad != "SAME_UPPER" &&
      window.auto_pad != "SAME_LOWER" && window.auto_pad != "VALID") {
    context.Warn("unknown auto_pad '" + window.auto_pad + "'");
    return std::nullopt;
  }
  return window;
}

int64_t CeilDiv(int64_t numerator, int64_t denominator) {
  return (numerator + denominator - 1) / denominator;
}

Dim WindowOutputDim(const InferenceContext& context, const Dim& input, const Window& window,
                    size_t axis, size_t spatial) {
  if (!input.is_known()) return Dim::Unknown();
  int64_t in = input.value;
  int64_t stride = window.strides[axis];
  int64_t effective_kernel = (window.kernel[axis] - 1) * window.dilations[axis] + 1;
  if (window.auto_pad == "SAME_UPPER" || window.auto_pad == "SAME_LOWER") {
    return Dim::Known(CeilDiv(in, stride));
  }
  int64_t pad_begin = window.auto_pad == "VALID" ? 0 : window.pads[axis];
  int64_t pad_end = window.auto_pad == "VALID" ? 0 : window.pads[axis + spatial];
  int64_t span = in + pad_begin + pad_end - effective_kernel;
  if (span < 0) {
    context.Warn("window of " + std::to_string(effective_kernel) + " does not fit padded size " +
                 std::to_string(in + pad_begin + pad_end) + " on spatial axis " +
                 std::to_string(axis));
    return Dim::Unknown();
  }
  if (!window.ceil_mode || window.auto_pad == "VALID") return Dim::Known(span / stride + 1);
  int64_t out = CeilDiv(span, stride) + 1;
  if ((out - 1) * stride >= in + pad_begin) --out;
  return Dim::Known(out);
}

Shape SpatialOutput(const InferenceContext& context, const Shape& x,
                    const std::optional<Window>& window) {
  size_t spatial = x.size() - 2;
  Shape out;
  for (size_t axis = 0; axis < spatial; ++axis) {
    out.push_back(window ? WindowOutputDim(context, x[axis + 2], *window, axis, spatial)
                         : Dim::Unknown());
  }
  return out;
}

std::optional<std::vector<int64_t>> KernelFromWeights(const Shape* weights) {
  if (weights == nullptr || weights->size() < 3) return std::nullopt;
  std::vector<int64_t> kernel;
  for (size_t axis = 2; axis < weights->size(); ++axis) {
    if (!(*weights)[axis].is_known()) return std::nullopt;
    kernel.push_back((*weights)[axis].value);
  }
  return kernel;
}

}  // namespace

// X: [N, C, spatial...], W: [M, C / group, kernel...] -> [N, M, out...].
std::optional<Shape> ConvOutputShape(InferenceContext& context, size_t x_input, size_t w_input) {
  const Shape* x = context.InputShape(x_input);
  const Shape* w = context.InputShape(w_input);
  if (x == nullptr) {
    // The weights alone still give the rank and the output channels.
    if (w == nullptr || w->size() < 3) return std::nullopt;
    Shape out = UnknownDims(w->size());
    out[1] = (*w)[0];
    return out;
  }
  if (x->size() < 3) {
    context.Warn("convolution needs an input of rank >= 3, got " + ShapeToString(*x));
    return std::nullopt;
  }
  int64_t group = context.node().GetInt("group", 1);
  if (w != nullptr && w->size() == x->size() && (*x)[1].is_known() && (*w)[1].is_known() &&
      (*x)[1].value != (*w)[1].value * group) {
    context.Warn("input channels " + std::to_string((*x)[1].value) + " do not match weights " +
                 ShapeToString(*w) + " with group " + std::to_string(group));
  }
  Shape out{(*x)[0], w != nullptr && !w->empty() ? (*w)[0] : Dim::Unknown()};
  Shape spatial =
      SpatialOutput(context, *x, ReadWindow(context, x->size() - 2, KernelFromWeights(w)));
  out.insert(out.end(), spatial.begin(), spatial.end());
  return out;
}

// Pools keep N and C.
std::optional<Shape> PoolOutputShape(InferenceContext& context, const Shape* x) {
  if (x == nullptr) return std::nullopt;
  if (x->size() < 3) {
    context.Warn("pooling needs an input of rank >= 3, got " + ShapeToString(*x));
    return std::nullopt;
  }
  if (!context.node().GetInts("kernel_shape")) {
    context.Warn("attribute 'kernel_shape' is required");
  }
  Shape out{(*x)[0], (*x)[1]};
  Shape spatial = SpatialOutput(context, *x, ReadWindow(context, x->size() - 2, std::nullopt));
  out.insert(out.end(), spatial.begin(), spatial.end());
  return out;
}

std::optional<Shape> GlobalPoolOutputShape(const Shape* x) {
  if (x == nullptr || x->size() < 2) return std::nullopt;
  Shape out(x->size(), Dim::Known(1));
  out[0] = (*x)[0];
  out[1] = (*x)[1];
  return out;
}

namespace {

void ConvRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  if (auto out = ConvOutputShape(context, 0, 1)) context.SetOutputShape(0, *out);
}

Dim TransposedOutputDim(const Dim& input, const Window& window,
                        const std::vector<int64_t>& output_padding, size_t axis, size_t spatial) {
  if (!input.is_known()) return Dim::Unknown();
  int64_t stride = window.strides[axis];
  if (window.auto_pad == "SAME_UPPER" || window.auto_pad == "SAME_LOWER") {
    return Dim::Known(input.value * stride);
  }
  bool valid = window.auto_pad == "VALID";
  int64_t pads = valid ? 0 : window.pads[axis] + window.pads[axis + spatial];
  int64_t effective_kernel = (window.kernel[axis] - 1) * window.dilations[axis] + 1;
  int64_t out = stride * (input.value - 1) + output_padding[axis] + effective_kernel - pads;
  return out > 0 ? Dim::Known(out) : Dim::Unknown();
}

// X: [N, C, spatial...], W: [C, M / group, kernel...] -> [N, M, out...].
void ConvTransposeRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* x = context.InputShape(0);
  const Shape* w = context.InputShape(1);
  if (x == nullptr || x->size() < 3) return;
  size_t spatial = x->size() - 2;
  int64_t group = context.node().GetInt("group", 1);
  Dim channels = Dim::Unknown();
  if (w != nullptr && w->size() >= 2 && (*w)[1].is_known()) {
    channels = Dim::Known((*w)[1].value * group);
  }
  Shape out{(*x)[0], channels};
  std::optional<std::vector<int64_t>> output_shape = context.node().GetInts("output_shape");
  std::vector<int64_t> output_padding = IntsOr(context.node(), "output_padding", spatial, 0);
  std::optional<Window> window = ReadWindow(context, spatial, KernelFromWeights(w));
  if (output_shape && output_shape->size() >= spatial) {
    // Some exporters include N and C; the spatial sizes are the last entries.
    for (size_t axis = output_shape->size() - spatial; axis < output_shape->size(); ++axis) {
      out.push_back(KnownOrUnknown((*output_shape)[axis]));
    }
  } else if (window && output_padding.size() == spatial) {
    for (size_t axis = 0; axis < spatial; ++axis) {
      out.push_back(TransposedOutputDim((*x)[axis + 2], *window, output_padding, axis, spatial));
    }
  } else {
    Shape unknown = UnknownDims(spatial);
    out.insert(out.end(), unknown.begin(), unknown.end());
  }
  context.SetOutputShape(0, out);
}

// MaxPool's optional Indices output is int64 of the pooled shape.
void PoolRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  context.SetOutputDtype(1, DataType::kInt64);
  if (auto out = PoolOutputShape(context, context.InputShape(0))) {
    context.SetOutputShape(0, *out);
    context.SetOutputShape(1, *out);
  }
}

void GlobalPoolRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  if (auto out = GlobalPoolOutputShape(context.InputShape(0))) context.SetOutputShape(0, *out);
}

}  // namespace

void RegisterConvPoolRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"Conv"}, ConvRule);
  registry.AddTypeRule("", {"ConvTranspose"}, ConvTransposeRule);
  registry.AddTypeRule("", {"AveragePool", "MaxPool", "LpPool"}, PoolRule);
  registry.AddTypeRule("", {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}, GlobalPoolRule);
}

}  // namespace fusionopt::shape_inference
