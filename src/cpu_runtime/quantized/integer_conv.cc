// IntegerConv (quantized/integer_contraction.h): oneDNN's int8 convolution — the layouts its
// direct kernels run on, constant weights packed once; activations taken and handed on in a
// convolution layout (rt_tensor.h) where the executor allows — or float32 values on hosts without
// VNNI and for weight zero points oneDNN's int8 convolution does not take.
#include <atomic>
#include <cstring>
#include <mutex>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/contraction/conv_reference.h"
#include "cpu_runtime/contraction/conv_shape.h"
#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/quantized/integer_internal.h"

namespace fusionopt::cpu {

using dnnl::memory;
using namespace integer;

namespace {

struct Plan {
  dnnl::convolution_forward primitive;
  onednn::LayoutBridge src, dst;
  memory::desc weights_user, weights_chosen;
  ChannelLayout layout;
  bool src_zero = false;
  Layout dst_layout = Layout::kRowMajor;  // how the output lies: its readers' layout where they take one
};

// The convolution primitive over `shape` with the given element types, every layout chosen
// by oneDNN.
dnnl::convolution_forward::primitive_desc Describe(const ConvShape& shape, const std::vector<int64_t>& x_dims,
                                                   memory::data_type src, memory::data_type weights,
                                                   memory::data_type dst, const dnnl::primitive_attr& attributes) {
  const Window& window = shape.window;
  const auto [strides, dilations, pad_begin, pad_end] = OneDnnWindowOf(window);
  const memory::desc weights_user = WeightsDesc(shape, window.kernel, false, weights);
  const auto any = memory::format_tag::any;
  dnnl::convolution_forward::desc description(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
      memory::desc(onednn::ToDims(x_dims), src, any), memory::desc(weights_user.dims(), weights, any), memory::desc(),
      memory::desc(onednn::ToDims(shape.output_dims), dst, any), strides, dilations, pad_begin, pad_end);
  return dnnl::convolution_forward::primitive_desc(description, attributes, onednn::Engine());
}

}  // namespace

struct IntegerConv::State {
  IntegerEpilogue epilogue;
  Int8Path path = Int8PathOnThisHost();
  std::atomic<bool> onednn_refused = false;  // oneDNN rejected a primitive: the float32 path
  WindowAttributes attributes;
  int64_t group = 1;
  RtTensor constant_w;  // int8 (uint8 shifted by 128)
  int32_t constant_shift = 0;
  onednn::PackedConstant packed_w;  // set on the first plan (its desc needs the shape)
  std::mutex mutex;
  onednn::PlanCache<Plan> plans;
  onednn::PlanCache<Plan> float_plans;

  // `x` lies as its layout says (the float32 path reads a row-major copy); with `layout_output`
  // the output stays in the layout oneDNN chose, where that is a convolution layout.
  Plan& PlanFor(const RtTensor& x, const ConvShape& shape, const IntegerParameters& parameters, bool float32,
                bool layout_output) {
    const bool src_zero = !float32 && parameters.a_zero.front() != 0;
    std::vector<int64_t> key = x.dims();
    key.insert(key.end(), shape.output_dims.begin(), shape.output_dims.end());
    // The window too: a computed w of another kernel, padding or stride can give the same dims.
    for (const std::vector<int64_t>* part : {&shape.window.kernel, &shape.window.stride, &shape.window.dilation,
                                             &shape.window.pad_begin, &shape.window.pad_end}) {
      key.insert(key.end(), part->begin(), part->end());
    }
    key.insert(key.end(), {static_cast<int64_t>(x.dtype()), src_zero, static_cast<int64_t>(x.layout()), layout_output});
    const std::vector<int64_t> epilogue_key = EpilogueKey(epilogue, parameters);
    if (!float32) key.insert(key.end(), epilogue_key.begin(), epilogue_key.end());
    onednn::PlanCache<Plan>& cache = float32 ? float_plans : plans;
    if (Plan* plan = cache.Find(key)) return *plan;
    Plan plan;
    plan.src_zero = src_zero;
    plan.layout = ChannelLayout{shape.output_dims, 1};
    const auto f32 = memory::data_type::f32;
    const memory::data_type src_type = float32 ? f32 : Int8Type(x.dtype());
    const memory::data_type weights_type = float32 ? f32 : memory::data_type::s8;
    const memory::data_type dst_type = float32 ? f32 : DstType(epilogue);
    const dnnl::primitive_attr attributes =
        float32 ? dnnl::primitive_attr() : Attributes(epilogue, parameters, plan.layout, src_zero, false);
    auto chosen = Describe(shape, x.dims(), src_type, weights_type, dst_type, attributes);
    // oneDNN's reference kernel is far slower than the float32 path the refusal sends it to.
    if (!float32) RejectSlowImplementation(chosen.impl_info_str());
    const memory::desc src_user = float32 || x.row_major() ? onednn::RowMajorDesc(x.dims(), src_type) : onednn::LayoutOf(x);
    plan.dst_layout = layout_output ? onednn::LayoutOfDesc(chosen.dst_desc()) : Layout::kRowMajor;
    const memory::desc dst_user = plan.dst_layout != Layout::kRowMajor ? chosen.dst_desc()
                                                                       : onednn::RowMajorDesc(shape.output_dims, dst_type);
    plan.src = onednn::LayoutBridge(src_user, chosen.src_desc());
    plan.dst = onednn::LayoutBridge(dst_user, chosen.dst_desc());
    plan.weights_user = WeightsDesc(shape, shape.window.kernel, false, weights_type);
    plan.weights_chosen = chosen.weights_desc();
    plan.primitive = dnnl::convolution_forward(chosen);
    return cache.Insert(std::move(key), std::move(plan));
  }

  // `residual`: what the sum post-op adds, put in dst first (in the layout dst has).
  void Execute(Plan& plan, const void* x, const memory& weights, std::unordered_map<int, memory> arguments,
               Allocator& allocator, RtTensor& y, const RtTensor* residual) {
    RtTensor src_scratch = Scratch(allocator, plan.src.scratch_bytes());
    RtTensor dst_scratch = Scratch(allocator, plan.dst.scratch_bytes());
    arguments[DNNL_ARG_SRC] = plan.src.Input(x, src_scratch.raw());
    arguments[DNNL_ARG_WEIGHTS] = weights;
    if (residual != nullptr && plan.dst.reorders()) {
      arguments[DNNL_ARG_DST] = plan.dst.Input(residual->raw(), dst_scratch.raw());
    } else {
      if (residual != nullptr) std::memcpy(y.raw(), residual->raw(), y.nbytes());
      arguments[DNNL_ARG_DST] = plan.dst.Output(y.raw(), dst_scratch.raw());
    }
    plan.primitive.execute(onednn::Stream(), arguments);
    plan.dst.WriteBack(y.raw(), dst_scratch.raw());
    onednn::Stream().wait();
  }

  Status RunOneDnn(const RtTensor& x, const RtTensor& w, const ConvShape& shape, const IntegerParameters& parameters,
                   Allocator& allocator, RtTensor& y, const RtTensor* residual, bool layout_output) {
    std::lock_guard<std::mutex> lock(mutex);
    Plan& plan = PlanFor(x, shape, parameters, false, layout_output);
    memory weights;
    if (constant_w.defined()) {
      if (!packed_w.defined()) packed_w = onednn::PackedConstant(plan.weights_user, constant_w);
      weights = packed_w.In(plan.weights_chosen);
    } else {
      const RtTensor shifted = w.dtype() == DataType::kUint8 ? ShiftedToInt8(w, &allocator) : w;
      weights = onednn::ReorderedCopy(plan.weights_user, shifted.raw(), plan.weights_chosen);
    }
    const int32_t shift = WeightsShift(w);
    RunArguments run = ArgumentsFor(epilogue, parameters, shape.out_channels, shift);
    // The residual the sum post-op adds lies as the output does.
    const RtTensor laid = residual != nullptr ? onednn::WithLayout(*residual, plan.dst_layout, allocator) : RtTensor();
    Execute(plan, x.raw(), weights, run.Bind(epilogue, parameters, plan.layout, plan.src_zero, false), allocator, y,
            residual != nullptr ? &laid : nullptr);
    y.set_layout(plan.dst_layout);
    return Status::Ok();
  }

  // x and w less their zero points as float32 (exact), convolved by oneDNN's float kernel
  // (exact while |acc| < 2^24; an int32 output beyond that by the double reference loops),
  // then the epilogue on the host.
  Status RunFloat32(const RtTensor& laid_x, const RtTensor& w, const ConvShape& shape, const IntegerParameters& parameters,
                    Allocator& allocator, RtTensor& y, const RtTensor* laid_residual) {
    const RtTensor x = onednn::RowMajor(laid_x, allocator);
    const RtTensor row_major_residual = laid_residual != nullptr ? onednn::RowMajor(*laid_residual, allocator) : RtTensor();
    const RtTensor* residual = laid_residual != nullptr ? &row_major_residual : nullptr;
    const RtTensor& w_source = constant_w.defined() ? constant_w : w;
    std::vector<int32_t> w_zero = parameters.b_zero;
    for (int32_t& zero : w_zero) zero -= constant_w.defined() ? constant_shift : 0;
    const RtTensor x32 = CenteredFloat32(x, parameters.a_zero, 1, 1, x.NumElements(), allocator);
    const RtTensor w32 = CenteredFloat32(w_source, w_zero, 1, shape.out_channels,
                                         w_source.NumElements() / shape.out_channels, allocator);
    if (epilogue.output == IntegerEpilogue::Output::kInt32 &&
        !ExactInFloat32(x32, w32, w32.NumElements() / shape.out_channels)) {
      std::vector<double> sums(static_cast<size_t>(y.NumElements()));
      ReferenceConv(Widened(x32).data(), Widened(w32).data(), nullptr, sums.data(), shape);
      StoreInt32(sums, y);
      return Status::Ok();
    }
    RtTensor acc = allocator.Allocate(DataType::kFloat, shape.output_dims);
    {
      std::lock_guard<std::mutex> lock(mutex);
      Plan& plan = PlanFor(x, shape, parameters, true, false);
      const memory weights = plan.weights_user == plan.weights_chosen
                                 ? onednn::Wrap(plan.weights_user, w32.raw())
                                 : onednn::ReorderedCopy(plan.weights_user, w32.raw(), plan.weights_chosen);
      Execute(plan, x32.raw(), weights, {}, allocator, acc, nullptr);
    }
    return FinishFromFloat(acc, epilogue, parameters, 1, y, residual);
  }

  int32_t WeightsShift(const RtTensor& w) const {
    if (constant_w.defined()) return constant_shift;
    return w.dtype() == DataType::kUint8 ? 128 : 0;
  }
};

IntegerConv::IntegerConv(IntegerEpilogue epilogue, WindowAttributes attributes, int64_t group, TensorPtr constant_w)
    : state_(std::make_unique<State>()) {
  state_->epilogue = std::move(epilogue);
  state_->attributes = std::move(attributes);
  state_->group = group;
  if (constant_w != nullptr && IsEightBitInteger(constant_w->dtype())) {
    RtTensor wrapped = RtTensor::WrapConstant(constant_w);
    state_->constant_shift = constant_w->dtype() == DataType::kUint8 ? 128 : 0;
    state_->constant_w = state_->constant_shift ? ShiftedToInt8(wrapped, nullptr) : wrapped;
  }
}

IntegerConv::~IntegerConv() = default;

Status IntegerConv::Run(const RtTensor& x, const RtTensor& w, const IntegerParameters& parameters,
                        KernelContext& context, size_t output, const RtTensor* residual) {
  FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(x, "an integer convolution"));
  FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(w, "an integer convolution"));
  if (x.rank() > 5) return Unsupported("integer convolutions of 1 to 3 spatial axes, got " + DimsToString(x.dims()));
  FUSIONOPT_ASSIGN_OR_RETURN(ConvShape shape, ResolveConvShape(state_->attributes, state_->group, false, x, w, nullptr));
  if (parameters.a_zero.size() != 1) return InvalidModel("the input's zero point must be a scalar");
  for (const auto* values : {&parameters.scale, &parameters.bias}) {
    if (values->size() > 1 && values->size() != static_cast<size_t>(shape.out_channels)) {
      return InvalidModel("per-channel scales and biases need " + std::to_string(shape.out_channels) + " values");
    }
  }
  if (parameters.b_zero.size() != 1 && parameters.b_zero.size() != static_cast<size_t>(shape.out_channels)) {
    return InvalidModel("a per-channel weight zero point needs " + std::to_string(shape.out_channels) + " values");
  }
  RtTensor& y = context.Output(output, OutputType(state_->epilogue), shape.output_dims);
  if (y.NumElements() == 0) return Status::Ok();
  if ((residual != nullptr) != (state_->epilogue.residual_type != DataType::kUndefined) ||
      (residual != nullptr && (residual->dims() != y.dims() || residual->dtype() != state_->epilogue.residual_type))) {
    return InvalidModel("the residual must be " + std::string(NameOf(state_->epilogue.residual_type)) + " " +
                        DimsToString(y.dims()));
  }
  // oneDNN's int8 convolution takes no weight zero point.
  const bool no_weights_zero = Uniform(parameters.b_zero) && parameters.b_zero.front() == state_->WeightsShift(w);
  const std::string what = "integer Conv " + DimsToString(x.dims()) + " * " + DimsToString(w.dims());
  if (state_->path == Int8Path::kOneDnn && !state_->onednn_refused && integer::OneDnnWritesOutput(state_->epilogue) &&
      integer::EltwiseSteps(state_->epilogue, parameters) && no_weights_zero) {
    const bool layout_output = output == 0 && context.conv_layout_output;
    Status status = onednn::Guarded(what, [&] {
      return state_->RunOneDnn(x, w, shape, parameters, *context.allocator, y, residual, layout_output);
    });
    // A primitive oneDNN refuses runs on the float32 path from then on, as the unfused ops would.
    if (status.code() != ErrorCode::kUnsupported) return status;
    state_->onednn_refused = true;
  }
  return onednn::Guarded(what, [&] { return state_->RunFloat32(x, w, shape, parameters, *context.allocator, y, residual); });
}

}  // namespace fusionopt::cpu
