// Planning Conv for cuDNN (contraction_plan.h): the 2-D convolution's geometry (groups, pads,
// strides, dilations, auto_pad resolved) and the epilogue cudnnConvolutionBiasActivationForward
// applies — a per-channel bias (Conv's own B or an Add), a residual of the output's shape, and a
// final Relu: y = relu(conv(x, w) + z + b), the FusedConvAddRelu shape.
//
// Limits: NCHW 2-D only (1-D and 3-D Conv are Unsupported), float32 and float16, symmetric
// padding (cuDNN's legacy descriptor has one pad per spatial axis).
#include <algorithm>

#include "cuda_runtime/plugin/contraction_plan.h"

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

Status PlanGeometry(const Node& conv, ConvPlan& plan) {
  const std::vector<int64_t>& x = plan.x.dims;
  const std::vector<int64_t>& w = plan.w.dims;
  if (x.size() != 4 || w.size() != 4) {
    const size_t spatial = x.size() >= 2 ? x.size() - 2 : 0;
    return Unsupported(DescribeNode(conv) + ": " + std::to_string(spatial) +
                       "-D Conv; cuDNN is used for 2-D (NCHW) only");
  }
  plan.groups = conv.GetInt("group", 1);
  if (plan.groups < 1 || x[1] % plan.groups != 0 || w[1] * plan.groups != x[1] || w[0] % plan.groups != 0) {
    return InvalidModel(DescribeNode(conv) + ": channels do not match group " + std::to_string(plan.groups));
  }
  const std::vector<int64_t> kernel = IntsOr(conv, "kernel_shape", {w[2], w[3]});
  if (kernel != std::vector<int64_t>{w[2], w[3]})
    return InvalidModel(DescribeNode(conv) + ": kernel_shape disagrees with the weights");
  const std::vector<int64_t> strides = IntsOr(conv, "strides", {1, 1});
  const std::vector<int64_t> dilations = IntsOr(conv, "dilations", {1, 1});
  const std::vector<int64_t> pads = IntsOr(conv, "pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return InvalidModel(DescribeNode(conv) + ": attribute lengths");
  const std::string auto_pad = conv.GetString("auto_pad", "NOTSET");
  for (size_t axis = 0; axis < 2; ++axis) {
    FUSIONOPT_ASSIGN_OR_RETURN(
        auto axis_pads, AxisPads(conv, auto_pad, pads, axis, x[2 + axis], w[2 + axis], strides[axis], dilations[axis]));
    if (axis_pads[0] != axis_pads[1]) {
      return Unsupported(DescribeNode(conv) +
                         ": asymmetric padding; cuDNN's convolution descriptor pads both sides alike");
    }
    plan.pads[axis] = axis_pads[0];
    plan.strides[axis] = strides[axis];
    plan.dilations[axis] = dilations[axis];
    const int64_t extent = (w[2 + axis] - 1) * dilations[axis] + 1;
    const int64_t out = (x[2 + axis] + 2 * axis_pads[0] - extent) / strides[axis] + 1;
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

// One value per output channel: [M], as ONNX Conv's B, or [M,1,1] / [1,M,1,1] as an addend.
bool IsChannelVector(const std::vector<int64_t>& dims, int64_t channels, bool addend) {
  if (!addend) return dims == std::vector<int64_t>{channels};
  return dims == std::vector<int64_t>{channels, 1, 1} || dims == std::vector<int64_t>{1, channels, 1, 1};
}

// Adds (bias, residual) then one Relu after the convolution, as cuDNN's fused call applies them.
const Value* WalkEpilogue(const Graph& body, const Value* value, ConvPlan& plan, CorePlan& core) {
  const std::vector<int64_t> y(plan.y_dims.begin(), plan.y_dims.end());
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
      if (!plan.bias.present() && IsChannelVector(ref->dims, y[1], true)) {
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
  if (y.size() == 4) std::copy(y.begin(), y.end(), plan.y_dims.begin());
  FUSIONOPT_RETURN_IF_ERROR(PlanGeometry(conv, plan));
  if (conv.input(2) != nullptr) {
    FUSIONOPT_ASSIGN_OR_RETURN(plan.bias, ResolveOperand(body, conv, 2));
    if (!IsChannelVector(plan.bias.dims, plan.y_dims[1], false))
      return InvalidModel(DescribeNode(conv) + ": B is not one value per output channel");
  }
  core.result = WalkEpilogue(body, conv.output(0), plan, core);
  core.core = std::move(plan);
  return core;
}

}  // namespace fusionopt::cuda::contraction_internal
