// MatMul and Gemm on oneDNN's matmul primitive (float32; float16/bfloat16 staged through
// float32), with direct loops for double and the integer types ONNX allows. Fused nodes give
// either kernel an epilogue of post-ops (contraction/epilogue.h).
#include <cstring>
#include <unordered_map>

#include "cpu_runtime/contraction/epilogue.h"
#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/contraction/matmul_shape.h"
#include "cpu_runtime/onednn/common.h"

namespace fusionopt::cpu {
namespace {

using onednn::ColumnMajorDesc;
using onednn::OneDnnType;
using onednn::RowMajorDesc;
using onednn::Wrap;

constexpr size_t kMaxOneDnnRank = 12;

bool IsIntegerMatMulType(DataType dtype) {
  return dtype == DataType::kInt32 || dtype == DataType::kInt64 || dtype == DataType::kUint32 ||
         dtype == DataType::kUint64;
}

template <typename Fn>
Status DispatchDirectType(DataType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DataType::kDouble: return fn(double{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    case DataType::kUint32: return fn(uint32_t{});
    case DataType::kUint64: return fn(uint64_t{});
    default:
      return Unsupported(std::string(op) + " does not support dtype " + std::string(NameOf(dtype)));
  }
}

class MatMulKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info, std::vector<PostOp> post_ops = {}) {
    post_ops_ = std::move(post_ops);
    host_step_ = HostEpilogueStep::TakeFrom(post_ops_);
    first_addend_ = ContractionInputs(info.node.op_type());
    const TensorPtr& b = info.constant_input(1);
    if (b != nullptr && (b->dtype() == DataType::kFloat || IsHalfPrecision(b->dtype()))) {
      constant_b_ = ConstantToFloat32(b);
      // One matrix for every batch: kept as this host's GEMM runs fastest.
      const int64_t rows = constant_b_.rank() >= 2 ? constant_b_.dim(constant_b_.rank() - 2) : 0;
      if (rows > 0 && constant_b_.NumElements() == rows * constant_b_.dims().back()) {
        if (ConstantWeightsLayout() == ConstantWeights::kPacked) {
          // Packed straight from the model's bytes (the reorder converts float16), so no
          // float32 copy is kept beside the packed one; other plans convert B per run.
          packed_b_ = onednn::PackedConstant(RowMajorDesc({rows, constant_b_.dims().back()}, OneDnnType(b->dtype())),
                                             RtTensor::WrapConstant(b));
          if (b->dtype() != DataType::kFloat) constant_b_ = RtTensor();
        } else {
          constant_b_ = TransposedMatrix(constant_b_);
          constant_b_column_major_ = true;
        }
      }
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    if (!context.has_input(0) || !context.has_input(1)) return InvalidModel("MatMul needs both operands");
    const RtTensor& a = *context.input(0);
    const RtTensor& b = *context.input(1);
    if (a.dtype() != b.dtype()) {
      return InvalidModel("MatMul operands have different dtypes: " + DescribeTensor(a) + " and " + DescribeTensor(b));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(MatMulShape shape, ResolveMatMul(a.dims(), b.dims()));
    if (a.dtype() == DataType::kFloat || IsHalfPrecision(a.dtype())) return ComputeFloat32(context, a, b, shape);
    if (!post_ops_.empty() || host_step_) return Unsupported("post-ops need float32, float16 or bfloat16 operands");
    if (a.dtype() != DataType::kDouble && !IsIntegerMatMulType(a.dtype())) {
      return Unsupported("MatMul does not support dtype " + std::string(NameOf(a.dtype())));
    }
    return DispatchDirectType(a.dtype(), "MatMul", [&](auto zero) {
      using T = decltype(zero);
      RtTensor& c = context.Output(0, a.dtype(), shape.output);
      ReferenceMatMul<T>(a.data<T>(), b.data<T>(), c.data<T>(), shape);
      return Status::Ok();
    });
  }

 private:
  struct Plan {
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c;
    bool b_packed = false;  // b is the layout the primitive chose; the weights come from packed_b_
  };

  Status ComputeFloat32(KernelContext& context, const RtTensor& a, const RtTensor& b, const MatMulShape& shape) {
    PostOpAddends addends;
    if (!post_ops_.empty()) {
      // A 1-D operand drops M or N from the output; an empty K runs no primitive.
      if (a.rank() < 2 || b.rank() < 2 || shape.k == 0) return Unsupported("no post-ops for this MatMul shape");
      FUSIONOPT_ASSIGN_OR_RETURN(addends, GatherAddends(context, first_addend_, post_ops_, shape.output, shape.dst(),
                                                        shape.output.size() - 1, /*sum_full=*/false));
    }
    Float32Outputs outputs(context);
    RtTensor& c = outputs.Output(0, a.dtype(), shape.output);
    if (c.NumElements() > 0 && shape.k == 0) std::memset(c.raw(), 0, c.nbytes());
    if (c.NumElements() > 0 && shape.k > 0) {
      RtTensor a32 = ToFloat32(a, *context.allocator);
      const std::string what = "MatMul " + DimsToString(a.dims()) + " x " + DimsToString(b.dims());
      FUSIONOPT_RETURN_IF_ERROR(onednn::Guarded(what, [&] {
        const Plan& plan = PlanFor(a.dims(), b.dims(), shape, addends);
        RtTensor b32;
        if (!plan.b_packed) b32 = constant_b_.defined() ? constant_b_ : ToFloat32(b, *context.allocator);
        const dnnl::memory weights = plan.b_packed ? packed_b_.In(plan.b) : Wrap(plan.b, b32.raw());
        std::unordered_map<int, dnnl::memory> arguments = {{DNNL_ARG_SRC, Wrap(plan.a, a32.raw())},
                                                           {DNNL_ARG_WEIGHTS, weights},
                                                           {DNNL_ARG_DST, Wrap(plan.c, c.raw())}};
        BindAddends(post_ops_, addends, plan.c.dims().size(), arguments);
        plan.primitive.execute(onednn::Stream(), arguments);
        onednn::Stream().wait();
        return Status::Ok();
      }));
    }
    if (host_step_) FUSIONOPT_RETURN_IF_ERROR(host_step_->Apply(c));
    outputs.Finish();
    return Status::Ok();
  }

  const Plan& PlanFor(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                      const MatMulShape& shape, const PostOpAddends& addends) {
    std::vector<int64_t> key = a_dims;
    key.push_back(-1);
    key.insert(key.end(), b_dims.begin(), b_dims.end());
    key.insert(key.end(), addends.key.begin(), addends.key.end());
    if (const Plan* plan = plans_.Find(key)) return *plan;
    Plan plan;
    if (shape.b_shared()) {
      const int64_t rows = Product(shape.a_batch) * shape.m;
      plan.a = RowMajorDesc({rows, shape.k});
      plan.b_packed = packed_b_.defined();
      plan.b = plan.b_packed                ? onednn::AnyLayoutDesc({shape.k, shape.n})
               : constant_b_column_major_ ? ColumnMajorDesc(shape.k, shape.n)
                                          : RowMajorDesc({shape.k, shape.n});
      plan.c = RowMajorDesc({rows, shape.n});
    } else {
      if (shape.batch.size() + 2 > kMaxOneDnnRank) throw dnnl::error(dnnl_unimplemented, "more than 12 dims");
      auto with_matrix = [](std::vector<int64_t> dims, int64_t rows, int64_t columns) {
        dims.push_back(rows);
        dims.push_back(columns);
        return dims;
      };
      plan.a = RowMajorDesc(with_matrix(shape.a_batch, shape.m, shape.k));
      plan.b = RowMajorDesc(with_matrix(shape.b_batch, shape.k, shape.n));
      plan.c = RowMajorDesc(with_matrix(shape.batch, shape.m, shape.n));
    }
    dnnl::primitive_attr attributes;
    if (!post_ops_.empty()) attributes.set_post_ops(BuildPostOps(post_ops_, addends.layouts, plan.c.dims().size()));
    dnnl::matmul::primitive_desc descriptor(dnnl::matmul::desc(plan.a, plan.b, plan.c), attributes,
                                            onednn::Engine());
    if (!post_ops_.empty()) RejectSlowImplementation(descriptor.impl_info_str());
    if (plan.b_packed) plan.b = descriptor.weights_desc();
    plan.primitive = dnnl::matmul(descriptor);
    return plans_.Insert(std::move(key), std::move(plan));
  }

  RtTensor constant_b_;  // float32 copy of a constant B
  bool constant_b_column_major_ = false;
  onednn::PackedConstant packed_b_;  // B in the layouts the plans chose (ConstantWeights::kPacked)
  std::vector<PostOp> post_ops_;
  std::optional<HostEpilogueStep> host_step_;  // after the post-ops, when they end in one
  size_t first_addend_ = 0;  // the context input holding the first post-op addend
  onednn::PlanCache<Plan> plans_;
};

// ---- Gemm: Y = alpha * A' * B' + beta * C, C broadcast unidirectionally to (M, N).

struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
  int64_t c_rows = 1, c_columns = 1;  // C padded to rank 2; each 1 or the full size
};

// How beta * C enters the product. oneDNN's output scale multiplies the bias too, so a
// bias is used only when alpha is 1; otherwise Y is prefilled and accumulated into.
enum class GemmEpilogue { kNone = 0, kBias = 1, kAccumulate = 2 };

template <typename T>
void FillBroadcastC(const T* c, const GemmShape& shape, T* y) {
  const int64_t n = shape.n;
#pragma omp parallel for if (shape.m * n > kParallelWork)
  for (int64_t row = 0; row < shape.m; ++row) {
    const T* c_row = c + (shape.c_rows == 1 ? 0 : row) * shape.c_columns;
    T* y_row = y + row * n;
    if (shape.c_columns == 1) {
      std::fill(y_row, y_row + n, c_row[0]);
    } else {
      std::copy(c_row, c_row + n, y_row);
    }
  }
}

template <typename T>
void ReferenceGemm(const T* a, const T* b, const T* c, T* y, const GemmShape& shape, bool trans_a, bool trans_b,
                   T alpha, T beta) {
  const int64_t m = shape.m, k = shape.k, n = shape.n;
#pragma omp parallel for if (m * k * n > kParallelWork)
  for (int64_t row = 0; row < m; ++row) {
    T* y_row = y + row * n;
    std::fill(y_row, y_row + n, T(0));
    for (int64_t inner = 0; inner < k; ++inner) {
      const T scale = trans_a ? a[inner * m + row] : a[row * k + inner];
      for (int64_t column = 0; column < n; ++column) {
        y_row[column] += scale * (trans_b ? b[column * k + inner] : b[inner * n + column]);
      }
    }
    for (int64_t column = 0; column < n; ++column) {
      const int64_t c_index = (shape.c_rows == 1 ? 0 : row) * shape.c_columns + (shape.c_columns == 1 ? 0 : column);
      const T bias = c == nullptr ? T(0) : c[c_index];
      y_row[column] = alpha * y_row[column] + beta * bias;
    }
  }
}

class GemmKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info, std::vector<PostOp> post_ops = {}) {
    post_ops_ = std::move(post_ops);
    host_step_ = HostEpilogueStep::TakeFrom(post_ops_);
    first_addend_ = ContractionInputs(info.node.op_type());
    trans_a_ = info.node.GetInt("transA", 0) != 0;
    trans_b_ = info.node.GetInt("transB", 0) != 0;
    alpha_ = info.node.GetFloat("alpha", 1.0f);
    beta_ = info.node.GetFloat("beta", 1.0f);
    const TensorPtr& b = info.constant_input(1);
    if (b != nullptr && (b->dtype() == DataType::kFloat || IsHalfPrecision(b->dtype()))) {
      constant_b_ = ConstantToFloat32(b);
      if (constant_b_.rank() == 2 && ConstantWeightsLayout() == ConstantWeights::kPacked) {
        const int64_t k = trans_b_ ? constant_b_.dim(1) : constant_b_.dim(0);
        const int64_t n = trans_b_ ? constant_b_.dim(0) : constant_b_.dim(1);
        // Packed from the model's bytes, as MatMul's.
        packed_b_ = onednn::PackedConstant(
            trans_b_ ? ColumnMajorDesc(k, n, OneDnnType(b->dtype())) : RowMajorDesc({k, n}, OneDnnType(b->dtype())),
            RtTensor::WrapConstant(b));
        constant_b_ = RtTensor();
      } else if (!trans_b_ && constant_b_.rank() == 2) {
        // Column-major, as this host's GEMM runs fastest; transB says it already is.
        constant_b_ = TransposedMatrix(constant_b_);
        constant_b_column_major_ = true;
      }
    }
    const TensorPtr& c = info.constant_input(2);
    if (c != nullptr && (c->dtype() == DataType::kFloat || IsHalfPrecision(c->dtype()))) {
      scaled_c_ = ScaledC(ConstantToFloat32(c), nullptr);
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& context) override {
    if (!context.has_input(0) || !context.has_input(1)) return InvalidModel("Gemm needs A and B");
    const RtTensor& a = *context.input(0);
    const RtTensor& b = *context.input(1);
    const RtTensor* c = context.has_input(2) ? context.input(2) : nullptr;
    FUSIONOPT_ASSIGN_OR_RETURN(GemmShape shape, ResolveShape(a, b, c));
    if (a.dtype() == DataType::kFloat || IsHalfPrecision(a.dtype())) return ComputeFloat32(context, a, b, c, shape);
    if (!post_ops_.empty() || host_step_) return Unsupported("post-ops need float32, float16 or bfloat16 operands");
    return DispatchDirectType(a.dtype(), "Gemm", [&](auto zero) {
      using T = decltype(zero);
      RtTensor& y = context.Output(0, a.dtype(), {shape.m, shape.n});
      ReferenceGemm<T>(a.data<T>(), b.data<T>(), c ? c->data<T>() : nullptr, y.data<T>(), shape, trans_a_, trans_b_,
                       static_cast<T>(alpha_), static_cast<T>(beta_));
      return Status::Ok();
    });
  }

 private:
  struct Plan {
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c, bias;
    bool b_packed = false;  // b is the layout the primitive chose; the weights come from packed_b_
  };

  Result<GemmShape> ResolveShape(const RtTensor& a, const RtTensor& b, const RtTensor* c) const {
    if (a.rank() != 2 || b.rank() != 2) {
      return InvalidModel("Gemm needs 2-D A and B, got " + DescribeTensor(a) + " and " + DescribeTensor(b));
    }
    if (a.dtype() != b.dtype() || (c != nullptr && c->dtype() != a.dtype())) {
      return InvalidModel("Gemm operands have different dtypes: " + DescribeTensor(a) + ", " + DescribeTensor(b) +
                          (c ? ", " + DescribeTensor(*c) : ""));
    }
    GemmShape shape;
    shape.m = trans_a_ ? a.dim(1) : a.dim(0);
    shape.k = trans_a_ ? a.dim(0) : a.dim(1);
    shape.n = trans_b_ ? b.dim(0) : b.dim(1);
    const int64_t b_k = trans_b_ ? b.dim(1) : b.dim(0);
    if (b_k != shape.k) {
      return InvalidModel("Gemm inner dimensions differ: A' is " + DimsToString({shape.m, shape.k}) + ", B' is " +
                          DimsToString({b_k, shape.n}));
    }
    if (c == nullptr) return shape;
    if (c->rank() > 2) return InvalidModel("Gemm C must have rank <= 2, got " + DescribeTensor(*c));
    shape.c_rows = c->rank() == 2 ? c->dim(0) : 1;
    shape.c_columns = c->rank() >= 1 ? c->dim(c->rank() - 1) : 1;
    if ((shape.c_rows != 1 && shape.c_rows != shape.m) || (shape.c_columns != 1 && shape.c_columns != shape.n)) {
      return InvalidModel("Gemm C " + DimsToString(c->dims()) + " does not broadcast to " +
                          DimsToString({shape.m, shape.n}));
    }
    return shape;
  }

  // beta * C in float32; C itself when beta is 1 and it is float32 already.
  RtTensor ScaledC(const RtTensor& c32, Allocator* allocator) const {
    if (beta_ == 1.0f) return c32;
    RtTensor scaled = allocator ? allocator->Allocate(DataType::kFloat, c32.dims())
                                : RtTensor::Allocate(DataType::kFloat, c32.dims());
    const float* in = c32.data<float>();
    float* out = scaled.data<float>();
    for (int64_t i = 0; i < c32.NumElements(); ++i) out[i] = beta_ * in[i];
    return scaled;
  }

  Status ComputeFloat32(KernelContext& context, const RtTensor& a, const RtTensor& b, const RtTensor* c,
                        const GemmShape& shape) {
    PostOpAddends addends;
    if (!post_ops_.empty()) {
      if (shape.k == 0) return Unsupported("no post-ops for an empty K: no primitive runs");
      const std::vector<int64_t> dims = {shape.m, shape.n};
      FUSIONOPT_ASSIGN_OR_RETURN(addends, GatherAddends(context, first_addend_, post_ops_, dims, dims, 1,
                                                        /*sum_full=*/false));
    }
    Float32Outputs outputs(context);
    RtTensor& y = outputs.Output(0, a.dtype(), {shape.m, shape.n});
    const bool uses_c = c != nullptr && beta_ != 0.0f;
    if (y.NumElements() > 0) {
      RtTensor c32;
      if (uses_c) c32 = scaled_c_.defined() ? scaled_c_ : ScaledC(ToFloat32(*c, *context.allocator), context.allocator);
      const GemmEpilogue epilogue = !uses_c          ? GemmEpilogue::kNone
                                    : alpha_ == 1.0f ? GemmEpilogue::kBias
                                                     : GemmEpilogue::kAccumulate;
      if (shape.k == 0 || epilogue == GemmEpilogue::kAccumulate) {
        if (uses_c) {
          FillBroadcastC(c32.data<float>(), shape, y.data<float>());
        } else {
          std::memset(y.raw(), 0, y.nbytes());
        }
      }
      if (shape.k > 0) {
        RtTensor a32 = ToFloat32(a, *context.allocator);
        FUSIONOPT_RETURN_IF_ERROR(onednn::Guarded("Gemm " + DimsToString({shape.m, shape.k, shape.n}), [&] {
          const Plan& plan = PlanFor(shape, epilogue, addends);
          RtTensor b32;
          if (!plan.b_packed) b32 = constant_b_.defined() ? constant_b_ : ToFloat32(b, *context.allocator);
          const dnnl::memory weights = plan.b_packed ? packed_b_.In(plan.b) : Wrap(plan.b, b32.raw());
          std::unordered_map<int, dnnl::memory> arguments = {{DNNL_ARG_SRC, Wrap(plan.a, a32.raw())},
                                                             {DNNL_ARG_WEIGHTS, weights},
                                                             {DNNL_ARG_DST, Wrap(plan.c, y.raw())}};
          if (epilogue == GemmEpilogue::kBias) arguments[DNNL_ARG_BIAS] = Wrap(plan.bias, c32.raw());
          // The accumulation of C is the primitive's own first post-op.
          BindAddends(post_ops_, addends, 2, arguments, epilogue == GemmEpilogue::kAccumulate ? 1 : 0);
          plan.primitive.execute(onednn::Stream(), arguments);
          onednn::Stream().wait();
          return Status::Ok();
        }));
      }
      if (host_step_) FUSIONOPT_RETURN_IF_ERROR(host_step_->Apply(y));
    }
    outputs.Finish();
    return Status::Ok();
  }

  const Plan& PlanFor(const GemmShape& shape, GemmEpilogue epilogue, const PostOpAddends& addends) {
    std::vector<int64_t> key = {shape.m,      shape.k,         shape.n,
                                shape.c_rows, shape.c_columns, static_cast<int64_t>(epilogue)};
    key.insert(key.end(), addends.key.begin(), addends.key.end());
    if (const Plan* plan = plans_.Find(key)) return *plan;
    Plan plan;
    // Transposed operands are strided views; oneDNN reads them in place.
    plan.a = trans_a_ ? ColumnMajorDesc(shape.m, shape.k) : RowMajorDesc({shape.m, shape.k});
    plan.b_packed = packed_b_.defined();
    plan.b = plan.b_packed                           ? onednn::AnyLayoutDesc({shape.k, shape.n})
             : trans_b_ || constant_b_column_major_ ? ColumnMajorDesc(shape.k, shape.n)
                                                     : RowMajorDesc({shape.k, shape.n});
    plan.c = RowMajorDesc({shape.m, shape.n});
    dnnl::primitive_attr attributes;
    if (alpha_ != 1.0f) attributes.set_output_scales(0, {alpha_});
    dnnl::post_ops own;
    if (epilogue == GemmEpilogue::kAccumulate) own.append_sum(1.0f);
    if (epilogue == GemmEpilogue::kAccumulate || !post_ops_.empty()) {
      attributes.set_post_ops(BuildPostOps(post_ops_, addends.layouts, 2, own));
    }
    if (epilogue == GemmEpilogue::kBias) plan.bias = RowMajorDesc({shape.c_rows, shape.c_columns});
    dnnl::matmul::desc description = epilogue == GemmEpilogue::kBias
                                         ? dnnl::matmul::desc(plan.a, plan.b, plan.bias, plan.c)
                                         : dnnl::matmul::desc(plan.a, plan.b, plan.c);
    dnnl::matmul::primitive_desc descriptor(description, attributes, onednn::Engine());
    if (!post_ops_.empty()) RejectSlowImplementation(descriptor.impl_info_str());
    if (plan.b_packed) plan.b = descriptor.weights_desc();
    plan.primitive = dnnl::matmul(descriptor);
    return plans_.Insert(std::move(key), std::move(plan));
  }

  bool trans_a_ = false;
  bool trans_b_ = false;
  float alpha_ = 1.0f;
  float beta_ = 1.0f;
  RtTensor constant_b_;  // float32 copy of a constant B
  bool constant_b_column_major_ = false;
  onednn::PackedConstant packed_b_;  // B in the layouts the plans chose (ConstantWeights::kPacked)
  RtTensor scaled_c_;    // beta * C in float32 for a constant C
  std::vector<PostOp> post_ops_;
  std::optional<HostEpilogueStep> host_step_;  // after the post-ops, when they end in one
  size_t first_addend_ = 0;  // the context input holding the first post-op addend
  onednn::PlanCache<Plan> plans_;
};

template <typename K>
Result<std::unique_ptr<Kernel>> CreateWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops) {
  auto kernel = std::make_unique<K>();
  FUSIONOPT_RETURN_IF_ERROR(kernel->Init(info, std::move(post_ops)));
  return std::unique_ptr<Kernel>(std::move(kernel));
}

}  // namespace

Result<std::unique_ptr<Kernel>> CreateMatMulWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops) {
  return CreateWithPostOps<MatMulKernel>(info, std::move(post_ops));
}

Result<std::unique_ptr<Kernel>> CreateGemmWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops) {
  return CreateWithPostOps<GemmKernel>(info, std::move(post_ops));
}

void RegisterMatMulKernels(KernelRegistry& registry) {
  registry.Register("", "MatMul", 1, kAnyOpset, Make<MatMulKernel>());
  registry.Register("", "Gemm", 1, kAnyOpset, Make<GemmKernel>());
}

}  // namespace fusionopt::cpu
