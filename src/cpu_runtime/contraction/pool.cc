// MaxPool, AveragePool, LpPool and their Global forms.
//
// float32 max/average pooling and 8-bit max pooling run on oneDNN's pooling primitive. Direct
// loops cover what it cannot: MaxPool's Indices output, LpPool, double, average pooling whose
// ceil_mode window runs past the padding with count_include_pad (oneDNN would divide by the
// full kernel), and windows oneDNN rejects (padding as large as the kernel). An input in a
// convolution layout (rt_tensor.h) is pooled as it lies, and the output stays in oneDNN's
// layout where the executor allows it; the direct loops read it reordered to row-major.
#include <cmath>
#include <limits>
#include <optional>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/contraction/epilogue.h"
#include "cpu_runtime/contraction/window.h"
#include "cpu_runtime/onednn/common.h"
#include "ir/legacy_opsets.h"

namespace fusionopt::cpu {
namespace {

enum class PoolKind { kMax, kAverage, kLp };

struct PoolOptions {
  PoolKind kind = PoolKind::kMax;
  bool count_include_pad = false;
  bool column_major_indices = false;  // MaxPool storage_order = 1
  int64_t p = 2;                      // LpPool
};

// The input coordinates one output position reads along one axis, and how many of its
// window positions lie in the padded extent (count_include_pad's divisor).
struct AxisTaps {
  std::vector<std::vector<int64_t>> coordinates;  // per output position
  std::vector<int64_t> padded_count;              // per output position
};

std::vector<AxisTaps> BuildTaps(const Window& window) {
  std::vector<AxisTaps> axes(window.rank());
  for (size_t axis = 0; axis < window.rank(); ++axis) {
    AxisTaps& taps = axes[axis];
    taps.coordinates.resize(window.output[axis]);
    taps.padded_count.resize(window.output[axis]);
    for (int64_t o = 0; o < window.output[axis]; ++o) {
      for (int64_t k = 0; k < window.kernel[axis]; ++k) {
        const int64_t at = o * window.stride[axis] - window.pad_begin[axis] + k * window.dilation[axis];
        if (at >= 0 && at < window.input[axis]) taps.coordinates[o].push_back(at);
        if (at >= -window.pad_begin[axis] && at < window.input[axis] + window.pad_end[axis]) ++taps.padded_count[o];
      }
    }
  }
  return axes;
}

// Reduces one window. `visit(offset, coordinates)` sees every in-bounds position; returns
// false when the window lies wholly in the padding.
template <typename Visit>
bool ForEachTap(const std::vector<AxisTaps>& axes, const std::vector<int64_t>& out_at,
                const std::vector<int64_t>& input, std::vector<int64_t>& position, std::vector<int64_t>& at,
                Visit&& visit) {
  const size_t rank = axes.size();
  for (size_t axis = 0; axis < rank; ++axis) {
    if (axes[axis].coordinates[out_at[axis]].empty()) return false;
    position[axis] = 0;
  }
  while (true) {
    int64_t offset = 0;
    for (size_t axis = 0; axis < rank; ++axis) {
      at[axis] = axes[axis].coordinates[out_at[axis]][position[axis]];
      offset = offset * input[axis] + at[axis];
    }
    visit(offset, at);
    // Odometer step: the last axis moves fastest; done when every axis wrapped around.
    size_t axis = rank;
    for (; axis > 0; --axis) {
      if (++position[axis - 1] < static_cast<int64_t>(axes[axis - 1].coordinates[out_at[axis - 1]].size())) break;
      position[axis - 1] = 0;
    }
    if (axis == 0) return true;
  }
}

int64_t ColumnMajorOffset(const std::vector<int64_t>& at, const std::vector<int64_t>& dims) {
  int64_t offset = 0, stride = 1;
  for (size_t axis = 0; axis < dims.size(); ++axis) {
    offset += at[axis] * stride;
    stride *= dims[axis];
  }
  return offset;
}

template <typename T>
void DirectPool(const T* x, T* y, int64_t* indices, int64_t planes, const Window& window, const PoolOptions& options) {
  const std::vector<AxisTaps> axes = BuildTaps(window);
  const int64_t in_size = window.InputSize(), out_size = window.OutputSize();
  const size_t rank = window.rank();
  int64_t kernel_size = 1;
  for (int64_t dim : window.kernel) kernel_size *= dim;
#pragma omp parallel for if (planes * out_size * kernel_size > kParallelWork)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const T* x_plane = x + plane * in_size;
    std::vector<int64_t> out_at(rank), position(rank), at(rank);
    for (int64_t o = 0; o < out_size; ++o) {
      for (int64_t rest = o, axis = static_cast<int64_t>(rank) - 1; axis >= 0; --axis) {
        out_at[axis] = rest % window.output[axis];
        rest /= window.output[axis];
      }
      double sum = 0;
      int64_t count = 0, padded = 1, best_offset = 0, best_index = 0;
      T best = std::numeric_limits<T>::lowest();
      ForEachTap(axes, out_at, window.input, position, at, [&](int64_t offset, const std::vector<int64_t>& where) {
        const T value = x_plane[offset];
        ++count;
        if (options.kind == PoolKind::kAverage) sum += value;
        if (options.kind == PoolKind::kLp) sum += std::pow(std::abs(static_cast<double>(value)), options.p);
        if (options.kind == PoolKind::kMax && (count == 1 || value > best)) {
          best = value;
          best_offset = offset;
          if (indices) best_index = options.column_major_indices ? ColumnMajorOffset(where, window.input) : offset;
        }
      });
      for (size_t axis = 0; axis < rank; ++axis) padded *= axes[axis].padded_count[out_at[axis]];
      T& result = y[plane * out_size + o];
      switch (options.kind) {
        case PoolKind::kMax: result = count > 0 ? x_plane[best_offset] : best; break;
        case PoolKind::kAverage: {
          const int64_t divisor = options.count_include_pad ? padded : count;
          result = static_cast<T>(divisor > 0 ? sum / static_cast<double>(divisor) : 0.0);
          break;
        }
        case PoolKind::kLp: result = static_cast<T>(std::pow(sum, 1.0 / static_cast<double>(options.p))); break;
      }
      if (indices) indices[plane * out_size + o] = plane * in_size + best_index;
    }
  }
}

struct PoolPlan {
  dnnl::pooling_v2_forward primitive;
  onednn::LayoutBridge src, dst;  // the tensors' layouts <-> the primitive's
  Layout dst_layout = Layout::kRowMajor;  // how the kernel hands the output on
};

class PoolKernel : public Kernel {
 public:
  PoolKernel(PoolKind kind, bool global) : global_(global) { options_.kind = kind; }

  Status Init(const KernelInfo& info) {
    const Node& node = info.node;
    FUSIONOPT_RETURN_IF_ERROR(CheckLegacyNode(node, info.opset));  // Lp pools before opset 2
    if (!global_) {
      FUSIONOPT_ASSIGN_OR_RETURN(attributes_, ReadWindowAttributes(info));
      if (attributes_.kernel_shape.empty()) return info.Error("kernel_shape is required");
    }
    options_.count_include_pad = node.GetInt("count_include_pad", 0) != 0;
    const int64_t storage_order = node.GetInt("storage_order", 0);
    if (storage_order != 0 && storage_order != 1) {
      return info.Error("storage_order " + std::to_string(storage_order) + " must be 0 or 1");
    }
    options_.column_major_indices = storage_order == 1;
    if (options_.kind == PoolKind::kLp) {
      const Attribute* p = node.FindAttribute("p");
      options_.p = p == nullptr ? 2 : p->kind == AttributeKind::kFloat ? static_cast<int64_t>(p->f) : p->i;
      if (options_.p < 1) return info.Error("p " + std::to_string(options_.p) + " must be >= 1");
    }
    wants_indices_ = node.output(1) != nullptr;
    return Status::Ok();
  }

  bool ReadsConvLayouts() const override { return true; }

  Status Compute(KernelContext& context) override {
    if (!context.has_input(0)) return InvalidModel("pooling needs an input");
    const RtTensor& x = *context.input(0);
    if (x.rank() < 3) return InvalidModel("pooling input must be (N, C, D1, ...), got " + DescribeTensor(x));
    const std::vector<int64_t> spatial(x.dims().begin() + 2, x.dims().end());
    if (!global_ && attributes_.kernel_shape.size() != spatial.size()) {
      return InvalidModel("kernel_shape " + DimsToString(attributes_.kernel_shape) + " does not fit input " +
                          DescribeTensor(x));
    }
    auto resolved = global_ ? ResolveWindow(WindowAttributes{}, spatial, spatial)
                            : ResolveWindow(attributes_, spatial, attributes_.kernel_shape);
    if (!resolved.ok()) return resolved.status();
    const Window& window = *resolved;
    std::vector<int64_t> output_dims = {x.dim(0), x.dim(1)};
    output_dims.insert(output_dims.end(), window.output.begin(), window.output.end());
    switch (x.dtype()) {
      case DataType::kDouble: return ComputeDirect<double>(context, x, window, output_dims);
      case DataType::kInt8: return ComputeDirectInteger<int8_t>(context, x, window, output_dims);
      case DataType::kUint8: return ComputeDirectInteger<uint8_t>(context, x, window, output_dims);
      case DataType::kFloat: case DataType::kFloat16: case DataType::kBFloat16:
        return ComputeFloat32(context, x, window, output_dims);
      default:
        return Unsupported("pooling does not support dtype " + std::string(NameOf(x.dtype())));
    }
  }

 private:
  int64_t* IndicesOutput(KernelContext& context, const std::vector<int64_t>& output_dims) {
    return wants_indices_ ? context.Output(1, DataType::kInt64, output_dims).data<int64_t>() : nullptr;
  }

  template <typename T>
  Status ComputeDirect(KernelContext& context, const RtTensor& x, const Window& window,
                       const std::vector<int64_t>& output_dims) {
    RtTensor& y = context.Output(0, x.dtype(), output_dims);
    DirectPool<T>(x.data<T>(), y.data<T>(), IndicesOutput(context, output_dims), x.dim(0) * x.dim(1), window, options_);
    return Status::Ok();
  }

  template <typename T>
  Status ComputeDirectInteger(KernelContext& context, const RtTensor& x, const Window& window,
                              const std::vector<int64_t>& output_dims) {
    if (options_.kind != PoolKind::kMax) {
      return Unsupported("only MaxPool accepts " + std::string(NameOf(x.dtype())) + " input");
    }
    // A quantized model's MaxPool: oneDNN's int8 pooling, channels last (its fast kernels' only
    // layout for 8-bit data; a row-major input is reordered to it), in the layout the integer
    // convolution before it handed on. A direct loop where oneDNN cannot.
    if (!wants_indices_) {
      RtTensor& y = context.Output(0, x.dtype(), output_dims);
      if (y.NumElements() == 0 || RunOneDnn(x, y, window, *context.allocator, context.conv_layout_output)) {
        return Status::Ok();
      }
    }
    return ComputeDirect<T>(context, onednn::RowMajor(x, *context.allocator), window, output_dims);
  }

  Status ComputeFloat32(KernelContext& context, const RtTensor& x, const Window& window,
                        const std::vector<int64_t>& output_dims) {
    Float32Outputs outputs(context);
    RtTensor& y = outputs.Output(0, x.dtype(), output_dims);
    if (y.NumElements() > 0) {
      RtTensor x32 = ToFloat32(x, *context.allocator);
      const bool layout_output = context.conv_layout_output && x.dtype() == DataType::kFloat;
      if (!RunOneDnn(x32, y, window, *context.allocator, layout_output)) {
        x32 = onednn::RowMajor(x32, *context.allocator);
        DirectPool<float>(x32.data<float>(), y.data<float>(), IndicesOutput(context, output_dims), x.dim(0) * x.dim(1),
                          window, options_);
      }
    } else if (wants_indices_) {
      IndicesOutput(context, output_dims);
    }
    outputs.Finish();
    return Status::Ok();
  }

  // False when oneDNN cannot compute this pool exactly as ONNX defines it.
  bool RunOneDnn(const RtTensor& x, RtTensor& y, const Window& window, Allocator& allocator, bool layout_output) {
    if (options_.kind == PoolKind::kLp || wants_indices_ || x.rank() > 5) return false;
    const bool include_pad = options_.kind == PoolKind::kAverage && options_.count_include_pad;
    if (include_pad && window.ExtendsPastPadding()) return false;
    std::vector<int64_t> key = x.dims();
    key.push_back(static_cast<int64_t>(x.layout()));
    key.push_back(layout_output);
    std::optional<PoolPlan>* cached = plans_.Find(key);
    if (cached == nullptr) {
      std::optional<PoolPlan> made;
      try {
        made = MakePlan(x, y.dims(), window, include_pad, layout_output);
      } catch (const dnnl::error&) {
        // e.g. padding as large as the kernel: remembered, so later runs go straight to the loop
      }
      cached = &plans_.Insert(std::move(key), std::move(made));
    }
    if (!cached->has_value()) return false;
    PoolPlan& plan = **cached;
    try {
      RtTensor src_scratch = Scratch(allocator, plan.src.scratch_bytes());
      RtTensor dst_scratch = Scratch(allocator, plan.dst.scratch_bytes());
      plan.primitive.execute(onednn::Stream(), {{DNNL_ARG_SRC, plan.src.Input(x.raw(), src_scratch.raw())},
                                                {DNNL_ARG_DST, plan.dst.Output(y.raw(), dst_scratch.raw())}});
      plan.dst.WriteBack(y.raw(), dst_scratch.raw());
      onednn::Stream().wait();
    } catch (const dnnl::error&) {
      return false;
    }
    y.set_layout(plan.dst_layout);
    return true;
  }

  PoolPlan MakePlan(const RtTensor& x, const std::vector<int64_t>& y_dims, const Window& window, bool include_pad,
                    bool layout_output) const {
    const std::vector<int64_t>& x_dims = x.dims();
    dnnl::memory::dims strides, kernel, dilation, pad_begin, pad_end;
    for (size_t axis = 0; axis < window.rank(); ++axis) {
      strides.push_back(window.stride[axis]);
      kernel.push_back(window.kernel[axis]);
      dilation.push_back(window.dilation[axis] - 1);
      pad_begin.push_back(window.pad_begin[axis]);
      pad_end.push_back(window.FloorPadEnd(axis));
    }
    const dnnl::algorithm algorithm = options_.kind == PoolKind::kMax ? dnnl::algorithm::pooling_max
                                      : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                    : dnnl::algorithm::pooling_avg_exclude_padding;
    const dnnl::memory::desc user = onednn::LayoutOf(x);
    const dnnl::memory::data_type type = user.data_type();
    const bool integer = x.dtype() != DataType::kFloat;
    const dnnl::memory::desc src = !x.row_major() ? user
                                   : integer      ? onednn::DescIn(x_dims, Layout::kChannelsLast, type)
                                                  : onednn::ChannelBlockedDesc(x_dims);
    const dnnl::memory::desc dst_any(onednn::ToDims(y_dims), type, dnnl::memory::format_tag::any);
    dnnl::pooling_v2_forward::desc description(dnnl::prop_kind::forward_inference, algorithm, src, dst_any, strides,
                                               kernel, dilation, pad_begin, pad_end);
    dnnl::pooling_v2_forward::primitive_desc chosen(description, onednn::Engine());
    // An int8 layout without a fast kernel runs oneDNN's reference loop: the direct loop is faster.
    if (integer) RejectSlowImplementation(chosen.impl_info_str());
    PoolPlan plan;
    plan.primitive = dnnl::pooling_v2_forward(chosen);
    plan.dst_layout = layout_output ? onednn::LayoutOfDesc(chosen.dst_desc()) : Layout::kRowMajor;
    plan.src = onednn::LayoutBridge(user, src);
    plan.dst = onednn::LayoutBridge(
        plan.dst_layout != Layout::kRowMajor ? chosen.dst_desc() : onednn::RowMajorDesc(y_dims, type), chosen.dst_desc());
    return plan;
  }

  bool global_;
  PoolOptions options_;
  WindowAttributes attributes_;
  bool wants_indices_ = false;
  onednn::PlanCache<std::optional<PoolPlan>> plans_;  // nullopt: oneDNN cannot compute that shape
};

template <PoolKind kind, bool global>
KernelFactory MakePool() {
  return [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    auto kernel = std::make_unique<PoolKernel>(kind, global);
    FUSIONOPT_RETURN_IF_ERROR(kernel->Init(info));
    return std::unique_ptr<Kernel>(std::move(kernel));
  };
}

}  // namespace

void RegisterPoolKernels(KernelRegistry& registry) {
  registry.Register("", "MaxPool", 1, kAnyOpset, MakePool<PoolKind::kMax, false>());
  registry.Register("", "AveragePool", 1, kAnyOpset, MakePool<PoolKind::kAverage, false>());
  registry.Register("", "LpPool", 1, kAnyOpset, MakePool<PoolKind::kLp, false>());
  registry.Register("", "GlobalMaxPool", 1, kAnyOpset, MakePool<PoolKind::kMax, true>());
  registry.Register("", "GlobalAveragePool", 1, kAnyOpset, MakePool<PoolKind::kAverage, true>());
  registry.Register("", "GlobalLpPool", 1, kAnyOpset, MakePool<PoolKind::kLp, true>());
}

}  // namespace fusionopt::cpu
