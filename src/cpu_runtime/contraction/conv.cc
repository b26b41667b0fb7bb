// Conv and ConvTranspose on oneDNN's convolution / deconvolution primitives.
//
// oneDNN picks every layout (format_tag::any); constant weights are reordered into theirs
// once per cached primitive, and the runtime's row-major activations are reordered around
// the primitive into the blocked layouts oneDNN's direct kernels run on. Pointwise
// convolutions take that path too although oneDNN's GEMM would read row-major data as is:
// its kernel sums rows in a tail-dependent order, so output channels with identical weights
// came out a few ulps apart, which a later Softmax over huge logits turns into a different
// answer (squeezenet in ../shared/models); the direct kernels treat every channel alike.
// double runs direct loops (contraction/conv_reference.cc). A fused node gives a Conv
// an epilogue of post-ops (contraction/epilogue.h).
//
// Between convolutions the reorders go: an input in a convolution layout (rt_tensor.h) is
// read as it lies, and where the executor allows it (every reader reads such layouts) the
// output stays in the layout oneDNN wrote, as ORT's NCHWc transformer keeps activations
// between its convolutions.
//
// 3×3 stride-1 convolutions with constant weights run by Winograd's F(4×4, 3×3) where it pays
// (contraction/winograd.h), writing the layout the direct primitive would have written.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

#include "cpu_runtime/contraction/epilogue.h"
#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/contraction/conv_reference.h"
#include "cpu_runtime/contraction/window.h"
#include "cpu_runtime/contraction/winograd.h"
#include "cpu_runtime/onednn/common.h"

namespace fusionopt::cpu {
namespace {

using dnnl::memory;
using onednn::RowMajorDesc;
using onednn::Wrap;

std::vector<int64_t> Spatial(const std::vector<int64_t>& dims) { return {dims.begin() + 2, dims.end()}; }

struct ConvPlan {
  dnnl::primitive primitive;
  onednn::LayoutBridge src, dst;
  Layout dst_layout = Layout::kRowMajor;  // how the kernel hands the output on
  memory::desc weights_user, weights_chosen, bias;
  memory packed_weights;  // constant weights, already in weights_chosen
  // Set when oneDNN rejected the negative padding of a transposed convolution whose output
  // grows past its natural size (output_shape, output_padding, SAME): the primitive computes
  // the natural output, placed at `grown_offset` in the real one, whose other cells hold
  // only the bias.
  std::vector<int64_t> natural_dims;
  std::vector<int64_t> grown_offset;
  std::unique_ptr<winograd::Conv3x3> winograd;  // set where F(4x4, 3x3) computes it instead
};

// `shape` with its negative pads cut to zero and its output shrunk to match; nullopt when no
// pad is negative. `offset` receives where the smaller output sits inside the real one.
std::optional<ConvShape> WithoutNegativePads(const ConvShape& shape, std::vector<int64_t>& offset) {
  ConvShape natural = shape;
  Window& window = natural.window;
  bool negative = false;
  offset.assign(window.rank(), 0);
  for (size_t axis = 0; axis < window.rank(); ++axis) {
    const int64_t grow_begin = std::max<int64_t>(0, -window.pad_begin[axis]);
    const int64_t grow_end = std::max<int64_t>(0, -window.pad_end[axis]);
    negative = negative || grow_begin > 0 || grow_end > 0;
    window.pad_begin[axis] += grow_begin;
    window.pad_end[axis] += grow_end;
    window.output[axis] -= grow_begin + grow_end;
    natural.output_dims[axis + 2] = window.output[axis];
    offset[axis] = grow_begin;
  }
  if (!negative) return std::nullopt;
  return natural;
}

// Places each (n, m) plane of `inner` at `offset` inside the same plane of `outer` and fills
// the cells around it with the channel's bias (zero without one).
void EmbedWithBias(const RtTensor& inner, const std::vector<int64_t>& offset, const float* bias, RtTensor& outer) {
  const std::vector<int64_t> inner_spatial = Spatial(inner.dims()), outer_spatial = Spatial(outer.dims());
  int64_t inner_size = 1, outer_size = 1;
  for (int64_t dim : inner_spatial) inner_size *= dim;
  for (int64_t dim : outer_spatial) outer_size *= dim;
  const int64_t channels = outer.dim(1);
  const float* source = inner.data<float>();
  float* target = outer.data<float>();
#pragma omp parallel for if (outer.NumElements() > kParallelWork)
  for (int64_t plane = 0; plane < outer.dim(0) * channels; ++plane) {
    float* outer_plane = target + plane * outer_size;
    std::fill(outer_plane, outer_plane + outer_size, bias ? bias[plane % channels] : 0.0f);
    for (int64_t i = 0; i < inner_size; ++i) {
      int64_t rest = i, at = 0, stride = 1;
      for (size_t axis = inner_spatial.size(); axis-- > 0;) {
        at += (rest % inner_spatial[axis] + offset[axis]) * stride;
        rest /= inner_spatial[axis];
        stride *= outer_spatial[axis];
      }
      outer_plane[at] = source[plane * inner_size + i];
    }
  }
}

// One Conv or ConvTranspose node: attributes, constant weights and the primitives per shape.
class ConvKernelBase : public Kernel {
 public:
  explicit ConvKernelBase(bool transposed) : transposed_(transposed) {}

  Status Init(const KernelInfo& info, std::vector<PostOp> post_ops = {}) {
    post_ops_ = std::move(post_ops);
    host_step_ = HostEpilogueStep::TakeFrom(post_ops_);
    first_addend_ = ContractionInputs(info.node.op_type());
    FUSIONOPT_ASSIGN_OR_RETURN(attributes_, ReadWindowAttributes(info));
    group_ = info.node.GetInt("group", 1);
    if (group_ < 1) return info.Error("group " + std::to_string(group_) + " must be >= 1");
    const TensorPtr& w = info.constant_input(1);
    if (w != nullptr) {
      FUSIONOPT_RETURN_IF_ERROR(CheckConstantWeights(info, *w));
      if (w->dtype() == DataType::kFloat || IsHalfPrecision(w->dtype())) constant_w_ = ConstantToFloat32(w);
    }
    const TensorPtr& b = info.constant_input(2);
    if (b != nullptr && (b->dtype() == DataType::kFloat || IsHalfPrecision(b->dtype()))) {
      constant_b_ = ConstantToFloat32(b);
    }
    return Status::Ok();
  }

  bool ReadsConvLayouts() const override { return true; }

  Status Compute(KernelContext& context) override {
    const char* op = transposed_ ? "ConvTranspose" : "Conv";
    if (!context.has_input(0) || !context.has_input(1)) return InvalidModel(std::string(op) + " needs X and W");
    const RtTensor& x = *context.input(0);  // row-major or in a convolution layout
    const RtTensor w = onednn::RowMajor(*context.input(1), *context.allocator);
    const RtTensor b_row_major = context.has_input(2) ? onednn::RowMajor(*context.input(2), *context.allocator)
                                                      : RtTensor();
    const RtTensor* b = b_row_major.defined() ? &b_row_major : nullptr;
    if (w.dtype() != x.dtype() || (b != nullptr && b->dtype() != x.dtype())) {
      return InvalidModel(std::string(op) + " inputs have different dtypes: " + DescribeTensor(x) + ", " +
                          DescribeTensor(w) + (b ? ", " + DescribeTensor(*b) : ""));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(ConvShape shape, ResolveConvShape(attributes_, group_, transposed_, x, w, b));
    if ((!post_ops_.empty() || host_step_) && x.dtype() == DataType::kDouble) {
      return Unsupported("post-ops need float32, float16 or bfloat16 operands");
    }
    if (x.dtype() == DataType::kDouble) {
      RtTensor& y = context.Output(0, x.dtype(), shape.output_dims);
      const double* bias = b ? b->data<double>() : nullptr;
      if (transposed_) {
        ReferenceConvTranspose(x.data<double>(), w.data<double>(), bias, y.data<double>(), shape);
      } else {
        ReferenceConv(x.data<double>(), w.data<double>(), bias, y.data<double>(), shape);
      }
      return Status::Ok();
    }
    if (x.dtype() != DataType::kFloat && !IsHalfPrecision(x.dtype())) {
      return Unsupported(std::string(op) + " does not support dtype " + std::string(NameOf(x.dtype())));
    }
    if (x.rank() > 5) {
      return Unsupported(std::string(op) + " supports 1-D to 3-D convolutions, got " + DescribeTensor(x));
    }
    PostOpAddends addends;
    if (!post_ops_.empty()) {
      FUSIONOPT_ASSIGN_OR_RETURN(addends, GatherAddends(context, first_addend_, post_ops_, shape.output_dims,
                                                        shape.output_dims, 1, /*sum_full=*/true));
    }
    Float32Outputs outputs(context);
    RtTensor& y = outputs.Output(0, x.dtype(), shape.output_dims);
    if (y.NumElements() > 0) {
      RtTensor x32 = ToFloat32(x, *context.allocator);
      RtTensor w32 = constant_w_.defined() ? constant_w_ : ToFloat32(w, *context.allocator);
      RtTensor b32;
      if (b != nullptr) b32 = constant_b_.defined() ? constant_b_ : ToFloat32(*b, *context.allocator);
      // A convolution layout only where no float32 staging stands between the primitive and it.
      const bool layout_output = context.conv_layout_output && x.dtype() == DataType::kFloat;
      FUSIONOPT_RETURN_IF_ERROR(onednn::Guarded(std::string(op) + " " + DescribeTensor(x), [&] {
        ConvPlan& plan = PlanFor(x, w.dims(), b32.defined(), shape, addends, layout_output);
        Execute(plan, x32, w32, b32, *context.allocator, y, addends);
        y.set_layout(plan.dst_layout);
        return Status::Ok();
      }));
      if (host_step_) FUSIONOPT_RETURN_IF_ERROR(host_step_->Apply(y));
    }
    outputs.Finish();
    return Status::Ok();
  }

 private:
  Status CheckConstantWeights(const KernelInfo& info, const Tensor& w) const {
    if (w.dims().size() < 3) return info.Error("weights " + DimsToString(w.dims()) + " need rank >= 3");
    const int64_t grouped = w.dims()[0];
    if (grouped % group_ != 0) {
      return info.Error("weights " + DimsToString(w.dims()) + ": dim 0 is not divisible by group " +
                        std::to_string(group_));
    }
    // Catch a channel mismatch before anything runs when the input's channels are declared.
    const Value* x = info.node.input(0);
    if (x == nullptr || !x->shape() || x->shape()->size() < 2 || !(*x->shape())[1].is_known()) return Status::Ok();
    const int64_t channels = (*x->shape())[1].value;
    const int64_t expected = transposed_ ? w.dims()[0] : w.dims()[1] * group_;
    if (channels != expected) {
      return info.Error("input has " + std::to_string(channels) + " channels but weights " + DimsToString(w.dims()) +
                        " with group " + std::to_string(group_) + " expect " + std::to_string(expected));
    }
    return Status::Ok();
  }

  ConvPlan& PlanFor(const RtTensor& x, const std::vector<int64_t>& w_dims, bool has_bias, const ConvShape& shape,
                    const PostOpAddends& addends, bool layout_output) {
    std::vector<int64_t> key = x.dims();
    key.insert(key.end(), w_dims.begin(), w_dims.end());
    key.push_back(has_bias);
    key.push_back(static_cast<int64_t>(x.layout()));
    key.push_back(layout_output);
    key.insert(key.end(), addends.key.begin(), addends.key.end());
    if (ConvPlan* plan = plans_.Find(key)) return *plan;
    ConvPlan plan;
    const memory::desc src_user = onednn::LayoutOf(x);
    try {
      BuildPrimitive(plan, src_user, shape, has_bias, addends, layout_output);
    } catch (const dnnl::error&) {
      std::optional<ConvShape> natural = WithoutNegativePads(shape, plan.grown_offset);
      // The cells around a grown output hold only the bias, without the epilogue; the
      // embedding writes row-major.
      if (!natural || !post_ops_.empty()) throw;
      BuildPrimitive(plan, src_user, *natural, has_bias, addends, /*layout_output=*/false);
      plan.natural_dims = natural->output_dims;
    }
    plan.winograd = WinogradFor(shape, has_bias, addends);
    return plans_.Insert(std::move(key), std::move(plan));
  }

  std::unique_ptr<winograd::Conv3x3> WinogradFor(const ConvShape& shape, bool has_bias,
                                                 const PostOpAddends& addends) const {
    if (transposed_ || !constant_w_.defined() || (has_bias && !constant_b_.defined())) return nullptr;
    if (!winograd::Chosen(shape, winograd::ModeFromEnvironment())) return nullptr;
    std::optional<ew::Program> epilogue = PostOpsAsProgram(post_ops_, addends.layouts);
    if (!epilogue) return nullptr;
    return std::make_unique<winograd::Conv3x3>(shape, constant_w_.data<float>(),
                                               has_bias ? constant_b_.data<float>() : nullptr, std::move(*epilogue));
  }

  void BuildPrimitive(ConvPlan& plan, const memory::desc& src_user, const ConvShape& shape, bool has_bias,
                      const PostOpAddends& addends, bool layout_output) const {
    const memory::dims x_dims = src_user.dims();
    const Window& window = shape.window;
    const auto [strides, dilations, pad_begin, pad_end] = OneDnnWindowOf(window);
    memory::desc dst_user = RowMajorDesc(shape.output_dims);
    const memory::desc src = onednn::AnyLayoutDesc({x_dims.begin(), x_dims.end()});
    const memory::desc dst = onednn::AnyLayoutDesc(shape.output_dims);
    const memory::desc weights_user = WeightsDesc(shape, window.kernel, transposed_);
    const memory::desc weights = memory::desc(weights_user.dims(), memory::data_type::f32, memory::format_tag::any);
    const memory::desc bias = has_bias ? RowMajorDesc({shape.out_channels}) : memory::desc();
    const auto kind = dnnl::prop_kind::forward_inference;
    dnnl::primitive_attr attributes;
    if (!post_ops_.empty()) attributes.set_post_ops(BuildPostOps(post_ops_, addends.layouts, shape.output_dims.size()));
    memory::desc src_chosen, dst_chosen;
    if (transposed_) {
      dnnl::deconvolution_forward::desc description(kind, dnnl::algorithm::deconvolution_direct, src, weights, bias,
                                                    dst, strides, dilations, pad_begin, pad_end);
      dnnl::deconvolution_forward::primitive_desc chosen(description, onednn::Engine());
      src_chosen = chosen.src_desc();
      dst_chosen = chosen.dst_desc();
      plan.weights_chosen = chosen.weights_desc();
      plan.primitive = dnnl::deconvolution_forward(chosen);
    } else {
      dnnl::convolution_forward::desc description(kind, dnnl::algorithm::convolution_direct, src, weights, bias, dst,
                                                  strides, dilations, pad_begin, pad_end);
      dnnl::convolution_forward::primitive_desc chosen(description, attributes, onednn::Engine());
      if (!post_ops_.empty()) {
        bool sums = std::any_of(addends.layouts.begin(), addends.layouts.end(), [](const auto& l) { return l.summed; });
        RejectSlowImplementation(chosen.impl_info_str(), sums);
      }
      src_chosen = chosen.src_desc();
      dst_chosen = chosen.dst_desc();
      plan.weights_chosen = chosen.weights_desc();
      plan.primitive = dnnl::convolution_forward(chosen);
    }
    plan.dst_layout = layout_output ? onednn::LayoutOfDesc(dst_chosen) : Layout::kRowMajor;
    if (plan.dst_layout != Layout::kRowMajor) dst_user = dst_chosen;
    plan.src = onednn::LayoutBridge(src_user, src_chosen);
    plan.dst = onednn::LayoutBridge(dst_user, dst_chosen);
    plan.weights_user = weights_user;
    plan.bias = bias;
    if (constant_w_.defined()) {
      plan.packed_weights = onednn::ReorderedCopy(weights_user, constant_w_.raw(), plan.weights_chosen);
    }
  }

  void Execute(ConvPlan& plan, const RtTensor& x, const RtTensor& w, const RtTensor& b, Allocator& allocator,
               RtTensor& y, const PostOpAddends& addends) {
    if (plan.natural_dims.empty()) return ExecutePrimitive(plan, x, w, b, allocator, y, addends);
    RtTensor natural = allocator.Allocate(DataType::kFloat, plan.natural_dims);
    ExecutePrimitive(plan, x, w, b, allocator, natural, addends);
    EmbedWithBias(natural, plan.grown_offset, b.defined() ? b.data<float>() : nullptr, y);
  }

  void ExecutePrimitive(ConvPlan& plan, const RtTensor& x, const RtTensor& w, const RtTensor& b, Allocator& allocator,
                        RtTensor& y, const PostOpAddends& addends) {
    if (plan.winograd) {
      RtTensor residual;
      if (addends.summed >= 0) {
        residual = onednn::WithLayout(addends.values[static_cast<size_t>(addends.summed)], plan.dst_layout, allocator);
      }
      plan.winograd->Run(x, y, plan.dst_layout, residual.defined() ? &residual : nullptr, allocator);
      return;
    }
    RtTensor src_scratch = Scratch(allocator, plan.src.scratch_bytes());
    RtTensor dst_scratch = Scratch(allocator, plan.dst.scratch_bytes());
    memory weights = plan.packed_weights
                         ? plan.packed_weights
                         : plan.weights_user == plan.weights_chosen
                               ? Wrap(plan.weights_user, w.raw())
                               : onednn::ReorderedCopy(plan.weights_user, w.raw(), plan.weights_chosen);
    memory dst = plan.dst.Output(y.raw(), dst_scratch.raw());
    if (addends.summed >= 0) {
      // The sum post-op adds the product to what the output holds: the residual, in the
      // output's layout.
      const RtTensor residual =
          onednn::WithLayout(addends.values[static_cast<size_t>(addends.summed)], plan.dst_layout, allocator);
      if (plan.dst.reorders()) {
        dst = plan.dst.Input(residual.raw(), dst_scratch.raw());
      } else {
        std::memcpy(y.raw(), residual.raw(), y.nbytes());
      }
    }
    std::unordered_map<int, memory> arguments = {{DNNL_ARG_SRC, plan.src.Input(x.raw(), src_scratch.raw())},
                                                 {DNNL_ARG_WEIGHTS, weights},
                                                 {DNNL_ARG_DST, dst}};
    if (b.defined()) arguments[DNNL_ARG_BIAS] = Wrap(plan.bias, b.raw());
    BindAddends(post_ops_, addends, y.rank(), arguments);
    plan.primitive.execute(onednn::Stream(), arguments);
    plan.dst.WriteBack(y.raw(), dst_scratch.raw());
    onednn::Stream().wait();
  }

  bool transposed_;
  WindowAttributes attributes_;
  int64_t group_ = 1;
  RtTensor constant_w_;  // float32 copy of constant weights (row-major, ONNX layout)
  RtTensor constant_b_;
  std::vector<PostOp> post_ops_;
  std::optional<HostEpilogueStep> host_step_;  // after the post-ops, when they end in one
  size_t first_addend_ = 0;  // the context input holding the first post-op addend
  onednn::PlanCache<ConvPlan> plans_;
};

class ConvKernel : public ConvKernelBase {
 public:
  ConvKernel() : ConvKernelBase(false) {}
};

class ConvTransposeKernel : public ConvKernelBase {
 public:
  ConvTransposeKernel() : ConvKernelBase(true) {}
};

}  // namespace

Result<std::unique_ptr<Kernel>> CreateConvWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops) {
  auto kernel = std::make_unique<ConvKernel>();
  FUSIONOPT_RETURN_IF_ERROR(kernel->Init(info, std::move(post_ops)));
  return std::unique_ptr<Kernel>(std::move(kernel));
}

void RegisterConvKernels(KernelRegistry& registry) {
  registry.Register("", "Conv", 1, kAnyOpset, Make<ConvKernel>());
  registry.Register("", "ConvTranspose", 1, kAnyOpset, Make<ConvTransposeKernel>());
}

}  // namespace fusionopt::cpu
