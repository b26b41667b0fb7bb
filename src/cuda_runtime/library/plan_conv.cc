// Planning Conv for cuDNN (contraction_plan.h): the 2-D convolution's geometry (groups, pads,
// strides, dilations, auto_pad resolved) and the epilogue cudnnConvolutionBiasActivationForward
// applies — a per-channel bias (Conv's own B or an Add), a residual of the output's shape, and a
// final Relu: y = relu(conv(x, w) + z + b), the FusedConvAddRelu shape.
//
// A 1-D Conv runs as the 2-D Conv of height 1 it equals (Whisper's audio stem).
//
// Limits: NCW 1-D and NCHW 2-D only (3-D Conv is Unsupported), float32 and float16, symmetric
// padding (cuDNN's legacy descriptor has one pad per spatial axis).
#include <algorithm>

#include "cuda_runtime/library/plan.h"

namespace fusionopt::cuda::contraction_internal {
namespace {

std::vector<int64_t> IntsOr(const Node& node, std::string_view name, std::vector<int64_t> fallback) {
  std::optional<std::vector<int64_t>> values = node.GetInts(name);
  return values ? *values : fallback;
}

// The begin and end pad of one spatial axis, auto_pad resolved.
Result<std::array<int64_t, 2>> AxisPads(const Node& conv, const std::string& auto_pad, const std::vector<int64_t>& pads,
                                        size_t axis, int64_t in, int64_t kernel, int64_t stride, int64_t dilation) {
  if (auto_pad == "NOTSET") return std::array<int64_t, 2>{pads[axis], pads[axis + 2]};
  if (auto_pad == "VALID") return std::array<int64_t, 2>{0, 0};
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return InvalidModel(DescribeNode(conv) + ": auto_pad '" + auto_pad + "'");
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - in);
  const int64_t small = total / 2, large = total - small;
  return auto_pad == "SAME_UPPER" ? std::array<int64_t, 2>{small, large} : std::array<int64_t, 2>{large, small};
}

// A 1-D Conv as the 2-D Conv of height 1 it equals: a unit axis before the spatial one in x, w
// and y (the same bytes), and that axis's kernel, stride and dilation 1 and pads 0.
struct Geometry2d {
  std::vector<int64_t> x, w, y, kernel, strides, dilations, pads;
};

Result<Geometry2d> LiftTo2d(const Node& conv, const ConvPlan& plan, const std::vector<int64_t>& y) {
  const std::vector<int64_t>& x = plan.x.dims;
  const std::vector<int64_t>& w = plan.w.dims;
  if ((x.size() != 3 && x.size() != 4) || w.size() != x.size() || y.size() != x.size()) {
    const size_t spatial = x.size() >= 2 ? x.size() - 2 : 0;
    return Unsupported(DescribeNode(conv) + ": " + std::to_string(spatial) +
                       "-D Conv; cuDNN is used for 1-D and 2-D (NCHW) only");
  }
  const size_t spatial = x.size() - 2;
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (IntsOr(conv, "kernel_shape", kernel) != kernel)
    return InvalidModel(DescribeNode(conv) + ": kernel_shape disagrees with the weights");
  Geometry2d g{x, w, y, kernel, IntsOr(conv, "strides", std::vector<int64_t>(spatial, 1)),
               IntsOr(conv, "dilations", std::vector<int64_t>(spatial, 1)),
               IntsOr(conv, "pads", std::vector<int64_t>(2 * spatial, 0))};
  if (g.strides.size() != spatial || g.dilations.size() != spatial || g.pads.size() != 2 * spatial)
    return InvalidModel(DescribeNode(conv) + ": attribute lengths");
  if (spatial == 1) {
    g.x.insert(g.x.begin() + 2, 1);
    g.w.insert(g.w.begin() + 2, 1);
    g.y.insert(g.y.begin() + 2, 1);
    g.kernel.insert(g.kernel.begin(), 1);
    g.strides.insert(g.strides.begin(), 1);
    g.dilations.insert(g.dilations.begin(), 1);
    g.pads = {0, g.pads[0], 0, g.pads[1]};
  }
  return g;
}

Status PlanGeometry(const Node& conv, ConvPlan& plan, const std::vector<int64_t>& conv_y) {
  FUSIONOPT_ASSIGN_OR_RETURN(Geometry2d g, LiftTo2d(conv, plan, conv_y));
  const std::vector<int64_t>& x = g.x;
  const std::vector<int64_t>& w = g.w;
  std::copy(g.y.begin(), g.y.end(), plan.y_dims.begin());
  plan.groups = conv.GetInt("group", 1);
  if (plan.groups < 1 || x[1] % plan.groups != 0 || w[1] * plan.groups != x[1] || w[0] % plan.groups != 0) {
    return InvalidModel(DescribeNode(conv) + ": channels do not match group " + std::to_string(plan.groups));
  }
  const std::string auto_pad = conv.GetString("auto_pad", "NOTSET");
  for (size_t axis = 0; axis < 2; ++axis) {
    FUSIONOPT_ASSIGN_OR_RETURN(auto axis_pads, AxisPads(conv, auto_pad, g.pads, axis, x[2 + axis], w[2 + axis],
                                                        g.strides[axis], g.dilations[axis]));
    if (axis_pads[0] != axis_pads[1]) {
      return Unsupported(DescribeNode(conv) +
                         ": asymmetric padding; cuDNN's convolution descriptor pads both sides alike");
    }
    plan.pads[axis] = axis_pads[0];
    plan.strides[axis] = g.strides[axis];
    plan.dilations[axis] = g.dilations[axis];
    const int64_t extent = (w[2 + axis] - 1) * g.dilations[axis] + 1;
    const int64_t out = (x[2 + axis] + 2 * axis_pads[0] - extent) / g.strides[axis] + 1;
    if (out != plan.y_dims[2 + axis])
      return InvalidModel(DescribeNode(conv) + ": output shape disagrees with its attributes");
  }
  std::copy(x.begin(), x.end(), plan.x_dims.begin());
  std::copy(w.begin(), w.end(), plan.w_dims.begin());
  if (plan.y_dims[0] != x[0] || plan.y_dims[1] != w[0])
    return InvalidModel(DescribeNode(conv) + ": output shape disagrees with its inputs");
  for (int64_t dim : plan.y_dims) {
    if (dim == 0) return Unsupported(DescribeNode(conv) + ": empty Conv");
  }
  return Status::Ok();
}

// One value per output channel of a Conv output `y`: [M], as ONNX Conv's B; as an addend, any
// shape that broadcasts to y with M on the channel axis and 1 elsewhere ([M,1,1], [1,M,1,1], and
// [M,1] for a 1-D Conv).
bool IsChannelVector(const std::vector<int64_t>& dims, const std::vector<int64_t>& y, bool addend) {
  const int64_t channels = y[1];
  if (!addend) return dims == std::vector<int64_t>{channels};
  if (dims.size() > y.size() || dims.size() + 1 < y.size()) return false;
  const size_t channel = 1 - (y.size() - dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] != (k == channel ? channels : 1)) return false;
  }
  return true;
}

// Adds (bias, residual) then one Relu after the convolution, as cuDNN's fused call applies them.
const Value* WalkEpilogue(const Graph& body, const Value* value, ConvPlan& plan, CorePlan& core,
                          const std::vector<int64_t>& y) {
  while (!plan.relu) {
    Node* node = SoleReader(body, *value);
    if (node == nullptr || !IsDefaultDomain(*node) || node->outputs().size() != 1 || node->output(0) == nullptr) break;
    const std::string& op = node->op_type();
    if (op == "Relu") {
      plan.relu = true;
    } else if ((op == "Add" || op == "Sum") && node->inputs().size() == 2) {
      const Value* other = node->input(0) == value ? node->input(1) : node->input(0);
      std::optional<OperandRef> ref = other == value ? std::nullopt : ResolveValue(body, other);
      if (!ref || other->dtype() != value->dtype()) break;
      if (!plan.bias.present() && IsChannelVector(ref->dims, y, true)) {
        plan.bias = std::move(*ref);
      } else if (!plan.residual.present() && ref->dims == y) {
        plan.residual = std::move(*ref);
      } else {
        break;
      }
    } else {
      break;
    }
    core.absorbed.push_back(node);
    value = node->output(0);
  }
  return value;
}

}  // namespace

Result<CorePlan> PlanConvCore(const Graph& body, const Node& conv) {
  CorePlan core;
  ConvPlan plan;
  FUSIONOPT_ASSIGN_OR_RETURN(plan.x, ResolveOperand(body, conv, 0));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.w, ResolveOperand(body, conv, 1));
  if (!plan.x.present() || !plan.w.present()) return InvalidModel(DescribeNode(conv) + ": missing operand");
  plan.dtype = conv.input(0)->dtype();
  if (plan.dtype != DataType::kFloat && plan.dtype != DataType::kFloat16) {
    return Unsupported(DescribeNode(conv) + ": Conv on " + std::string(NameOf(plan.dtype)) +
                       "; the cuDNN path runs float and float16 only");
  }
  const std::vector<int64_t> y = DimsOf(*conv.output(0));
  FUSIONOPT_RETURN_IF_ERROR(PlanGeometry(conv, plan, y));
  if (conv.input(2) != nullptr) {
    FUSIONOPT_ASSIGN_OR_RETURN(plan.bias, ResolveOperand(body, conv, 2));
    if (!IsChannelVector(plan.bias.dims, y, false))
      return InvalidModel(DescribeNode(conv) + ": B is not one value per output channel");
  }
  core.result = WalkEpilogue(body, conv.output(0), plan, core, y);
  core.core = std::move(plan);
  return core;
}

}  // namespace fusionopt::cuda::contraction_internal
