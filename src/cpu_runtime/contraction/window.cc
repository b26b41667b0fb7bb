#include "cpu_runtime/contraction/window.h"

namespace fusionopt::cpu {
namespace {

std::string ListToString(const std::vector<int64_t>& values) { return DimsToString(values); }

// Floor division, so a negative total padding puts its extra element at the end.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

Result<AutoPad> ParseAutoPad(const std::string& text) {
  if (text == "NOTSET" || text.empty()) return AutoPad::kNotSet;
  if (text == "SAME_UPPER") return AutoPad::kSameUpper;
  if (text == "SAME_LOWER") return AutoPad::kSameLower;
  if (text == "VALID") return AutoPad::kValid;
  return InvalidModel("auto_pad '" + text + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
}

Status CheckAll(const std::vector<int64_t>& values, const char* name, int64_t minimum) {
  for (int64_t value : values) {
    if (value < minimum) {
      return InvalidModel(std::string(name) + " " + ListToString(values) + " must be >= " + std::to_string(minimum));
    }
  }
  return Status::Ok();
}

Status CheckLength(const std::vector<int64_t>& values, const char* name, size_t rank) {
  if (values.empty() || values.size() == rank) return Status::Ok();
  return InvalidModel(std::string(name) + " " + ListToString(values) + " has " + std::to_string(values.size()) +
                      " entries for " + std::to_string(rank) + " spatial axes");
}

std::vector<int64_t> OrOnes(const std::vector<int64_t>& values, size_t rank) {
  return values.empty() ? std::vector<int64_t>(rank, 1) : values;
}

// Shared checks and defaults of both window kinds.
Result<Window> StartWindow(const WindowAttributes& attributes, const std::vector<int64_t>& input,
                           const std::vector<int64_t>& kernel) {
  const size_t rank = input.size();
  if (kernel.size() != rank) {
    return InvalidModel("the kernel has " + std::to_string(kernel.size()) + " spatial axes, the input " +
                        std::to_string(rank));
  }
  if (!attributes.kernel_shape.empty() && attributes.kernel_shape != kernel) {
    return InvalidModel("kernel_shape " + ListToString(attributes.kernel_shape) +
                        " does not match the weights' spatial dims " + ListToString(kernel));
  }
  FUSIONOPT_RETURN_IF_ERROR(CheckLength(attributes.strides, "strides", rank));
  FUSIONOPT_RETURN_IF_ERROR(CheckLength(attributes.dilations, "dilations", rank));
  if (!attributes.pads.empty() && attributes.pads.size() != 2 * rank) {
    return InvalidModel("pads " + ListToString(attributes.pads) + " needs " + std::to_string(2 * rank) + " entries");
  }
  FUSIONOPT_RETURN_IF_ERROR(CheckAll(kernel, "kernel", 1));
  Window window;
  window.input = input;
  window.kernel = kernel;
  window.stride = OrOnes(attributes.strides, rank);
  window.dilation = OrOnes(attributes.dilations, rank);
  window.pad_begin.assign(rank, 0);
  window.pad_end.assign(rank, 0);
  window.output.assign(rank, 0);
  if (attributes.auto_pad == AutoPad::kNotSet && !attributes.pads.empty()) {
    for (size_t axis = 0; axis < rank; ++axis) {
      window.pad_begin[axis] = attributes.pads[axis];
      window.pad_end[axis] = attributes.pads[axis + rank];
    }
  }
  return window;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Result<WindowAttributes> ReadWindowAttributes(const KernelInfo& info) {
  const Node& node = info.node;
  WindowAttributes attributes;
  attributes.kernel_shape = node.GetInts("kernel_shape").value_or(std::vector<int64_t>{});
  attributes.strides = node.GetInts("strides").value_or(std::vector<int64_t>{});
  attributes.dilations = node.GetInts("dilations").value_or(std::vector<int64_t>{});
  attributes.pads = node.GetInts("pads").value_or(std::vector<int64_t>{});
  attributes.output_padding = node.GetInts("output_padding").value_or(std::vector<int64_t>{});
  attributes.output_shape = node.GetInts("output_shape").value_or(std::vector<int64_t>{});
  attributes.ceil_mode = node.GetInt("ceil_mode", 0) != 0;
  auto auto_pad = ParseAutoPad(node.GetString("auto_pad", "NOTSET"));
  if (!auto_pad.ok()) return info.Error(auto_pad.status().message());
  attributes.auto_pad = *auto_pad;
  for (Status status : {CheckAll(attributes.kernel_shape, "kernel_shape", 1),
                        CheckAll(attributes.strides, "strides", 1),
                        CheckAll(attributes.dilations, "dilations", 1),
                        CheckAll(attributes.pads, "pads", 0),
                        CheckAll(attributes.output_padding, "output_padding", 0)}) {
    if (!status.ok()) return info.Error(status.message());
  }
  if (!attributes.kernel_shape.empty()) {
    const size_t rank = attributes.kernel_shape.size();
    for (Status status : {CheckLength(attributes.strides, "strides", rank),
                          CheckLength(attributes.dilations, "dilations", rank),
                          CheckLength(attributes.output_padding, "output_padding", rank),
                          CheckLength(attributes.pads, "pads", 2 * rank)}) {
      if (!status.ok()) return info.Error(status.message() + " (kernel_shape has " + std::to_string(rank) + ")");
    }
  }
  return attributes;
}

int64_t Window::FloorPadEnd(size_t axis) const {
  const int64_t needed = (output[axis] - 1) * stride[axis] + DilatedKernel(axis) - input[axis] - pad_begin[axis];
  return std::max(pad_end[axis], needed);
}

bool Window::ExtendsPastPadding() const {
  for (size_t axis = 0; axis < rank(); ++axis) {
    if (FloorPadEnd(axis) > pad_end[axis]) return true;
  }
  return false;
}

int64_t Window::InputSize() const {
  int64_t size = 1;
  for (int64_t dim : input) size *= dim;
  return size;
}

int64_t Window::OutputSize() const {
  int64_t size = 1;
  for (int64_t dim : output) size *= dim;
  return size;
}

Result<Window> ResolveWindow(const WindowAttributes& attributes, const std::vector<int64_t>& input,
                             const std::vector<int64_t>& kernel) {
  FUSIONOPT_ASSIGN_OR_RETURN(Window window, StartWindow(attributes, input, kernel));
  for (size_t axis = 0; axis < window.rank(); ++axis) {
    const int64_t in = input[axis], stride = window.stride[axis], dilated = window.DilatedKernel(axis);
    int64_t& begin = window.pad_begin[axis];
    int64_t& end = window.pad_end[axis];
    int64_t& out = window.output[axis];
    if (attributes.auto_pad == AutoPad::kSameUpper || attributes.auto_pad == AutoPad::kSameLower) {
      out = CeilDiv(in, stride);
      const int64_t total = std::max<int64_t>(0, (out - 1) * stride + dilated - in);
      begin = attributes.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      end = total - begin;
      continue;
    }
    const int64_t span = in + begin + end - dilated;
    if (span < 0) {
      return InvalidModel("spatial axis " + std::to_string(axis) + ": the window (" + std::to_string(dilated) +
                          " after dilation) is larger than the padded input (" + std::to_string(in + begin + end) +
                          ")");
    }
    out = (attributes.ceil_mode ? CeilDiv(span, stride) : span / stride) + 1;
    // A last window that would start inside the end padding is dropped (onnxruntime, reference).
    if (attributes.ceil_mode && (out - 1) * stride >= in + begin) --out;
  }
  return window;
}

Result<Window> ResolveTransposedWindow(const WindowAttributes& attributes, const std::vector<int64_t>& input,
                                       const std::vector<int64_t>& kernel) {
  FUSIONOPT_ASSIGN_OR_RETURN(Window window, StartWindow(attributes, input, kernel));
  const size_t rank = window.rank();
  FUSIONOPT_RETURN_IF_ERROR(CheckLength(attributes.output_padding, "output_padding", rank));
  if (!attributes.output_shape.empty() && attributes.output_shape.size() < rank) {
    return InvalidModel("output_shape " + ListToString(attributes.output_shape) + " has fewer than " +
                        std::to_string(rank) + " entries");
  }
  const std::vector<int64_t> output_padding =
      attributes.output_padding.empty() ? std::vector<int64_t>(rank, 0) : attributes.output_padding;
  for (size_t axis = 0; axis < rank; ++axis) {
    if (output_padding[axis] >= std::max(window.stride[axis], window.dilation[axis])) {
      return InvalidModel("output_padding " + ListToString(output_padding) +
                          " must be smaller than the stride or dilation");
    }
    // The size every output element could reach before padding is removed.
    const int64_t natural = (input[axis] - 1) * window.stride[axis] + output_padding[axis] + window.DilatedKernel(axis);
    int64_t& begin = window.pad_begin[axis];
    int64_t& end = window.pad_end[axis];
    int64_t wanted = -1;
    if (!attributes.output_shape.empty()) {
      wanted = attributes.output_shape[attributes.output_shape.size() - rank + axis];
    } else if (attributes.auto_pad == AutoPad::kSameUpper || attributes.auto_pad == AutoPad::kSameLower) {
      wanted = input[axis] * window.stride[axis];
    }
    if (wanted >= 0) {
      const int64_t total = natural - wanted;
      // SAME_UPPER puts the odd element of padding at the end, the other modes at the start.
      const int64_t half = FloorDiv(total, 2);
      begin = attributes.auto_pad == AutoPad::kSameUpper ? half : total - half;
      end = total - begin;
    }
    window.output[axis] = natural - begin - end;
    if (window.output[axis] <= 0) {
      return InvalidModel("spatial axis " + std::to_string(axis) + ": the pads leave no output (" +
                          std::to_string(window.output[axis]) + ")");
    }
    end -= output_padding[axis];  // folded in: see Window::pad_end
  }
  return window;
}

}  // namespace fusionopt::cpu
