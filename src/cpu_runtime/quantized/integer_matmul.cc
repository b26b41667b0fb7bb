// IntegerMatMul (quantized/integer_contraction.h): oneDNN's int8 matmul, or float32 values on
// hosts without VNNI and for zero points the int8 primitive does not take.
#include <atomic>
#include <cstring>
#include <mutex>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/contraction/matmul_shape.h"
#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/quantized/integer_internal.h"

namespace fusionopt::cpu {

using dnnl::memory;
using namespace integer;

namespace {

// One operand of the product as oneDNN reads it: its logical dims (batch dims, rows, columns)
// over data stored row-major, or (Gemm's transA/transB) stored with the last two axes swapped.
memory::desc OperandDesc(const std::vector<int64_t>& dims, memory::data_type type, bool transposed) {
  if (!transposed) return onednn::RowMajorDesc(dims, type);
  // Stored [..., cols, rows] row-major; read as [..., rows, cols].
  const size_t rank = dims.size();
  memory::dims strides(rank);
  int64_t stride = 1;
  strides[rank - 2] = 1;
  strides[rank - 1] = dims[rank - 2];
  stride = dims[rank - 2] * dims[rank - 1];
  for (size_t axis = rank - 2; axis-- > 0;) {
    strides[axis] = stride;
    stride *= dims[axis];
  }
  return memory::desc(onednn::ToDims(dims), type, strides);
}

// The product's operands in oneDNN's terms: src [..., M, K], weights [..., K, N], dst [..., M, N].
struct ProductDims {
  std::vector<int64_t> src, weights, dst;
};

ProductDims DimsOf(const MatMulShape& shape) {
  ProductDims dims;
  if (shape.b_shared()) {
    const int64_t rows = Product(shape.a_batch) * shape.m;
    return {{rows, shape.k}, {shape.k, shape.n}, {rows, shape.n}};
  }
  dims.src = shape.a_batch;
  dims.weights = shape.b_batch;
  dims.dst = shape.batch;
  dims.src.insert(dims.src.end(), {shape.m, shape.k});
  dims.weights.insert(dims.weights.end(), {shape.k, shape.n});
  dims.dst.insert(dims.dst.end(), {shape.m, shape.n});
  return dims;
}

struct Plan {
  dnnl::matmul primitive;
  memory::desc src, weights_user, weights_chosen, dst;
  ChannelLayout layout;
  bool src_zero = false, weights_zero = false;
};

}  // namespace

struct IntegerMatMul::State {
  IntegerEpilogue epilogue;
  Int8Path path = Int8PathOnThisHost();
  std::atomic<bool> onednn_refused = false;  // oneDNN rejected a primitive: the float32 path
  bool trans_a = false, trans_b = false;
  // A constant B: as int8 (uint8 shifted by 128), packed per chosen layout; and as float32
  // for the float path, by zero point.
  RtTensor constant_b;
  int32_t constant_shift = 0;
  onednn::PackedConstant packed_b;
  std::mutex mutex;
  onednn::PlanCache<Plan> plans;
  onednn::PlanCache<dnnl::matmul> float_plans;

  // The logical (un-transposed) dims of A and B: Gemm's transA/transB swap the last two.
  static std::vector<int64_t> Logical(const std::vector<int64_t>& dims, bool transposed) {
    std::vector<int64_t> logical = dims;
    if (transposed && logical.size() >= 2) std::swap(logical[logical.size() - 1], logical[logical.size() - 2]);
    return logical;
  }

  Plan& PlanFor(const RtTensor& a, const MatMulShape& shape, DataType b_type, const IntegerParameters& parameters) {
    const bool src_zero = parameters.a_zero.front() != 0;
    const bool weights_zero = parameters.b_zero.front() - (b_type == DataType::kUint8 ? 128 : 0) != 0;
    std::vector<int64_t> key = a.dims();
    key.insert(key.end(), shape.b_batch.begin(), shape.b_batch.end());
    key.insert(key.end(), {shape.k, shape.n, static_cast<int64_t>(a.dtype()), src_zero, weights_zero});
    const std::vector<int64_t> epilogue_key = EpilogueKey(epilogue, parameters);
    key.insert(key.end(), epilogue_key.begin(), epilogue_key.end());
    if (Plan* plan = plans.Find(key)) return *plan;
    const ProductDims dims = DimsOf(shape);
    Plan plan;
    plan.src_zero = src_zero;
    plan.weights_zero = weights_zero;
    plan.layout = ChannelLayout{dims.dst, dims.dst.size() - 1};
    plan.src = OperandDesc(dims.src, Int8Type(a.dtype()), trans_a);
    plan.weights_user = OperandDesc(dims.weights, memory::data_type::s8, trans_b);
    plan.dst = onednn::RowMajorDesc(dims.dst, DstType(epilogue));
    // A constant B goes into the layout oneDNN picks (packed once); a computed one is read as it lies.
    const memory::desc weights_any(onednn::ToDims(dims.weights), memory::data_type::s8, memory::format_tag::any);
    const dnnl::primitive_attr attributes = Attributes(epilogue, parameters, plan.layout, src_zero, weights_zero);
    dnnl::matmul::desc description(plan.src, packed_b.defined() ? weights_any : plan.weights_user, plan.dst);
    dnnl::matmul::primitive_desc chosen(description, attributes, onednn::Engine());
    // oneDNN's reference kernel is far slower than the float32 path the refusal sends it to.
    RejectSlowImplementation(chosen.impl_info_str());
    plan.weights_chosen = chosen.weights_desc();
    plan.primitive = dnnl::matmul(chosen);
    return plans.Insert(std::move(key), std::move(plan));
  }

  Status RunOneDnn(const RtTensor& a, const RtTensor& b, const MatMulShape& shape, const IntegerParameters& parameters,
                   Allocator& allocator, RtTensor& y, const RtTensor* residual) {
    const DataType b_type = constant_b.defined() ? (constant_shift ? DataType::kUint8 : DataType::kInt8) : b.dtype();
    std::lock_guard<std::mutex> lock(mutex);
    Plan& plan = PlanFor(a, shape, b_type, parameters);
    memory weights;
    RtTensor shifted;
    if (packed_b.defined()) {
      weights = packed_b.In(plan.weights_chosen);
    } else if (constant_b.defined()) {
      weights = onednn::Wrap(plan.weights_user, constant_b.raw());  // shifted to int8 once
    } else {
      shifted = b.dtype() == DataType::kUint8 ? ShiftedToInt8(b, &allocator) : b;
      weights = onednn::Wrap(plan.weights_user, shifted.raw());
    }
    RunArguments run = ArgumentsFor(epilogue, parameters, plan.layout.channels(), b_type == DataType::kUint8 ? 128 : 0);
    std::unordered_map<int, memory> arguments = run.Bind(epilogue, parameters, plan.layout, plan.src_zero, plan.weights_zero);
    arguments[DNNL_ARG_SRC] = onednn::Wrap(plan.src, a.raw());
    arguments[DNNL_ARG_WEIGHTS] = weights;
    // The sum post-op adds what dst holds: the residual, row-major as dst is.
    if (residual != nullptr) std::memcpy(y.raw(), residual->raw(), y.nbytes());
    arguments[DNNL_ARG_DST] = onednn::Wrap(plan.dst, y.raw());
    plan.primitive.execute(onednn::Stream(), arguments);
    onednn::Stream().wait();
    return Status::Ok();
  }

  // Both operands less their zero points as float32 (exact), multiplied by oneDNN's float
  // matmul (exact while |acc| < 2^24; an int32 output beyond that by the double reference
  // loops), then the epilogue on the host.
  Status RunFloat32(const RtTensor& a, const RtTensor& b, const MatMulShape& shape, const IntegerParameters& parameters,
                    Allocator& allocator, RtTensor& y, const RtTensor* residual) {
    if (parameters.a_zero.size() != 1 && parameters.a_zero.size() != static_cast<size_t>(shape.m)) {
      return InvalidModel("a per-row zero point of A needs " + std::to_string(shape.m) + " values");
    }
    if (parameters.b_zero.size() != 1 && parameters.b_zero.size() != static_cast<size_t>(shape.n)) {
      return InvalidModel("a per-column zero point of B needs " + std::to_string(shape.n) + " values");
    }
    // A's zero point runs along M, B's along N, in the operands' stored layouts.
    const RtTensor a32 = trans_a ? CenteredFloat32(a, parameters.a_zero, a.dim(0), a.dim(1), 1, allocator)
                                 : CenteredFloat32(a, parameters.a_zero, a.NumElements() / (shape.m * shape.k),
                                                   shape.m, shape.k, allocator);
    const RtTensor& b_source = constant_b.defined() ? constant_b : b;
    std::vector<int32_t> b_zero = parameters.b_zero;
    for (int32_t& zero : b_zero) zero -= constant_b.defined() ? constant_shift : 0;
    const RtTensor b32 = trans_b ? CenteredFloat32(b_source, b_zero, 1, b_source.dim(0), b_source.dim(1), allocator)
                                 : CenteredFloat32(b_source, b_zero, b_source.NumElements() / shape.n, shape.n, 1,
                                                   allocator);
    if (epilogue.output == IntegerEpilogue::Output::kInt32 && !trans_a && !trans_b && !ExactInFloat32(a32, b32, shape.k)) {
      std::vector<double> product(static_cast<size_t>(y.NumElements()));
      ReferenceMatMul(Widened(a32).data(), Widened(b32).data(), product.data(), shape);
      StoreInt32(product, y);
      return Status::Ok();
    }
    const ProductDims dims = DimsOf(shape);
    RtTensor acc = allocator.Allocate(DataType::kFloat, shape.output);
    std::vector<int64_t> key = a.dims();
    key.insert(key.end(), b_source.dims().begin(), b_source.dims().end());
    std::lock_guard<std::mutex> lock(mutex);
    dnnl::matmul* primitive = float_plans.Find(key);
    const memory::desc src = OperandDesc(dims.src, memory::data_type::f32, trans_a);
    const memory::desc weights = OperandDesc(dims.weights, memory::data_type::f32, trans_b);
    const memory::desc dst = onednn::RowMajorDesc(dims.dst);
    if (primitive == nullptr) {
      dnnl::matmul::primitive_desc chosen(dnnl::matmul::desc(src, weights, dst), onednn::Engine());
      primitive = &float_plans.Insert(key, dnnl::matmul(chosen));
    }
    primitive->execute(onednn::Stream(), {{DNNL_ARG_SRC, onednn::Wrap(src, a32.raw())},
                                          {DNNL_ARG_WEIGHTS, onednn::Wrap(weights, b32.raw())},
                                          {DNNL_ARG_DST, onednn::Wrap(dst, acc.raw())}});
    onednn::Stream().wait();
    return FinishFromFloat(acc, epilogue, parameters, shape.output.size() - 1, y, residual);
  }
};

IntegerMatMul::IntegerMatMul(IntegerEpilogue epilogue, TensorPtr constant_b, bool trans_a, bool trans_b)
    : state_(std::make_unique<State>()) {
  state_->epilogue = std::move(epilogue);
  state_->trans_a = trans_a;
  state_->trans_b = trans_b;
  if (constant_b != nullptr && IsEightBitInteger(constant_b->dtype())) {
    RtTensor wrapped = RtTensor::WrapConstant(constant_b);
    if (constant_b->dtype() == DataType::kUint8) {
      state_->constant_b = ShiftedToInt8(wrapped, nullptr);
      state_->constant_shift = 128;
    } else {
      state_->constant_b = wrapped;
    }
    // Packed where oneDNN reads it as one [K, N] matrix for every batch (a 2-D B); a 1-D or
    // batched B is read as it lies.
    const std::vector<int64_t> logical = State::Logical(state_->constant_b.dims(), trans_b);
    if (logical.size() == 2) {
      state_->packed_b = onednn::PackedConstant(OperandDesc(logical, memory::data_type::s8, trans_b), state_->constant_b);
    }
  }
}

IntegerMatMul::~IntegerMatMul() = default;

Status IntegerMatMul::Run(const RtTensor& a, const RtTensor& b, const IntegerParameters& parameters,
                          KernelContext& context, size_t output, const RtTensor* residual) {
  FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(a, "an integer matrix product"));
  FUSIONOPT_RETURN_IF_ERROR(CheckQuantizedOperand(b, "an integer matrix product"));
  const bool gemm = state_->trans_a || state_->trans_b;
  if (gemm && (a.rank() != 2 || b.rank() != 2)) {
    return InvalidModel("Gemm operands must be 2-D, got " + DimsToString(a.dims()) + " and " + DimsToString(b.dims()));
  }
  FUSIONOPT_ASSIGN_OR_RETURN(MatMulShape shape, ResolveMatMul(State::Logical(a.dims(), state_->trans_a),
                                                              State::Logical(b.dims(), state_->trans_b)));
  for (const auto* values : {&parameters.scale, &parameters.bias}) {
    if (values->size() > 1 && values->size() != static_cast<size_t>(shape.n)) {
      return InvalidModel("per-column scales and biases need " + std::to_string(shape.n) + " values, got " +
                          std::to_string(values->size()));
    }
  }
  RtTensor& y = context.Output(output, OutputType(state_->epilogue), shape.output);
  if (y.NumElements() == 0) return Status::Ok();
  if ((residual != nullptr) != (state_->epilogue.residual_type != DataType::kUndefined) ||
      (residual != nullptr && (residual->dims() != y.dims() || residual->dtype() != state_->epilogue.residual_type))) {
    return InvalidModel("the residual must be " + std::string(NameOf(state_->epilogue.residual_type)) + " " +
                        DimsToString(y.dims()));
  }
  if (shape.k == 0) {
    RtTensor zeros = context.allocator->Allocate(DataType::kFloat, shape.output);
    std::memset(zeros.raw(), 0, zeros.nbytes());
    return FinishFromFloat(zeros, state_->epilogue, parameters, shape.output.size() - 1, y, residual);
  }
  const bool one_zero_point = parameters.a_zero.size() == 1 && Uniform(parameters.b_zero);
  const bool within_onednn = shape.output.size() <= 12;
  const std::string what = "integer MatMul " + DimsToString(a.dims()) + " x " + DimsToString(b.dims());
  if (state_->path == Int8Path::kOneDnn && !state_->onednn_refused && integer::OneDnnWritesOutput(state_->epilogue) &&
      integer::EltwiseSteps(state_->epilogue, parameters) && one_zero_point && within_onednn) {
    IntegerParameters uniform = parameters;
    uniform.b_zero.resize(1);
    Status status = onednn::Guarded(what, [&] { return state_->RunOneDnn(a, b, shape, uniform, *context.allocator, y, residual); });
    // A primitive oneDNN refuses (a post-op chain its int8 kernels lack) runs on the float32
    // path from then on, as the unfused ops would run.
    if (status.code() != ErrorCode::kUnsupported) return status;
    state_->onednn_refused = true;
  }
  return onednn::Guarded(what, [&] { return state_->RunFloat32(a, b, shape, parameters, *context.allocator, y, residual); });
}

}  // namespace fusionopt::cpu
