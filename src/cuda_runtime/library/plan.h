// The device-free half of the contraction family (contraction.h): what a typed body computes,
// split into the part a library runs (cuBLASLt for MatMul / Gemm, cuDNN for Conv, with the
// epilogue steps the library fuses) and the remainder, a typed sub-body run as one generated
// elementwise kernel over the library's result. Plain C++: no CUDA call, no CUDA header, so the
// plan can be checked (and asserted in tests) on a machine without a GPU.
//
// Recognition mirrors src/cpu_runtime/fused/contraction.cc, so both runtimes accept the
// same bodies: exactly one MatMul, Gemm or Conv of the default domain; its operands are body
// inputs or constants (an operand computed in the body would be a prologue); every other node is
// the epilogue. The library then absorbs, in body order, the steps it can fuse:
//   MatMul / Gemm:  D = act(alpha·A·B + beta·C + bias), taking in any order before the
//                   activation: Mul|Div by a constant scalar (→ alpha, beta; before a bias
//                   only), Add of a bias of shape [n] (→ BIAS), Add of a residual of the
//                   output's shape (→ C, beta 1; Gemm's own full-shape C takes that slot);
//                   then Relu (→ RELU) or a GELU of the tanh form (→ GELU: cuBLASLt's GELU is
//                   the tanh approximation, so an erf GELU stays in the remainder)
//   Conv:           [Add per-channel bias] and [Add residual of the output's shape], in either
//                   order, then [Relu]          (cudnnConvolutionBiasActivationForward)
// An absorbed step's input must have no other reader and be no body output. Everything after
// the first step the library cannot take is the remainder.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

// Where a tensor the library reads comes from.
struct OperandRef {
  int input = -1;      // a body input: its device pointer arrives with Enqueue
  TensorPtr constant;  // a constant of the body (initializer or Constant node): uploaded at build
  std::vector<int64_t> dims;
  bool present() const { return input >= 0 || constant != nullptr; }
};

enum class MatmulEpilogue { kNone, kBias, kRelu, kReluBias, kGeluTanh, kGeluTanhBias };
std::string_view NameOf(MatmulEpilogue epilogue);

// Y[m,n] = alpha · op(A)[m,k] · op(B)[k,n] (+ beta · C) per batch, all row-major. With a 2-D
// (shared) B and a batched A the batches are folded into m: one larger GEMM instead of a
// strided batch.
struct MatmulPlan {
  DataType dtype = DataType::kFloat;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  // Elements between consecutive batches; 0: one matrix shared by every batch.
  int64_t stride_a = 0, stride_b = 0, stride_y = 0;
  // Batch dims one stride per operand cannot express (B [N,1,k,n] against A [N,H,m,k]: a
  // multi-query product) run as one strided batch per outer index: the element offsets of A, B
  // and Y (and C) for each call. Empty: one call.
  std::vector<std::array<int64_t, 3>> outer_offsets;
  bool trans_a = false;  // A stored [k, m]
  bool trans_b = false;  // B stored [n, k]
  float alpha = 1.0f;
  float beta = 0.0f;  // with c
  OperandRef a, b;
  OperandRef c;  // Gemm's C, or a residual, of the full output shape: added by cuBLASLt
  MatmulEpilogue epilogue = MatmulEpilogue::kNone;
  OperandRef bias;  // n values, for kBias / kReluBias / kGeluTanhBias
};

// One matrix as cuBLASLt sees it (column-major): the stored layout and the op applied to it.
struct LtMatrix {
  bool transposed = false;  // CUBLAS_OP_T
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// The row-major problem mapped onto column-major cuBLASLt: a row-major [r, c] matrix is the
// column-major [c, r] matrix in the same bytes, so Y = A·B is computed as Yᵀ = Bᵀ·Aᵀ with
// cuBLASLt's first operand the ONNX B and its second the ONNX A, and no data moved. The bias
// (one value per ONNX column) is then one value per cuBLASLt row, as CUBLASLT_EPILOGUE_BIAS
// wants.
struct LtProblem {
  uint64_t m = 0, n = 0, k = 0;  // cuBLASLt's: m = plan.n, n = plan.m
  LtMatrix first;                // ONNX B
  LtMatrix second;               // ONNX A
  LtMatrix output;               // D (and C): rows = plan.n, cols = plan.m
  int64_t batch = 1;
};
LtProblem ColumnMajorProblem(const MatmulPlan& plan);

// A 2-D convolution, NCHW, with the epilogue cuDNN's fused call applies:
// y = act(conv(x, w) + residual + bias).
struct ConvPlan {
  DataType dtype = DataType::kFloat;
  std::array<int64_t, 4> x_dims{}, w_dims{}, y_dims{};
  int64_t groups = 1;
  std::array<int64_t, 2> pads{}, strides{1, 1}, dilations{1, 1};  // pads symmetric (cuDNN's)
  OperandRef x, w;
  OperandRef bias;      // y_dims[1] values
  OperandRef residual;  // y's shape
  bool relu = false;
  // cudnnConvolutionBiasActivationForward (else cudnnConvolutionForward).
  bool fused() const { return bias.present() || residual.present() || relu; }
};

struct ContractionPlan {
  std::string op_type;  // MatMul, Gemm or Conv
  std::variant<MatmulPlan, ConvPlan> core;
  std::string library_result;  // the body value the library writes
  std::vector<int64_t> library_result_dims;
  int library_result_output = -1;         // the body output it is, or -1: written to workspace
  std::vector<std::string> absorbed_ops;  // epilogue ops the library fuses, in order
  // The rest of the epilogue, or null. Its inputs: the library's result, then the body inputs
  // it reads (remainder_inputs); its outputs are body outputs (remainder_outputs). Constants it
  // reads are its initializers.
  std::unique_ptr<Graph> remainder;
  std::vector<int> remainder_inputs;
  std::vector<int> remainder_outputs;

  std::string Describe() const;  // one line: library, epilogue split, shapes
};

// The plan for `typed_body`, or Unsupported naming why this family declines it.
Result<ContractionPlan> PlanContraction(const Graph& typed_body);

// The ops this family runs on a library: MatMul, Gemm and Conv of the default domain. The
// plugin's dispatch sends a body holding exactly one of them here.
bool IsLibraryContraction(const Node& node);

// ---- for the planners (contraction_plan*.cc)

namespace contraction_internal {

// The contraction's operand at `index` as an OperandRef; Unsupported when it is computed inside
// the body.
Result<OperandRef> ResolveOperand(const Graph& body, const Node& contraction, size_t index);
// `value` as an OperandRef when it is a body input or a constant, else nullopt.
std::optional<OperandRef> ResolveValue(const Graph& body, const Value* value);
// The node that alone reads `value`, when `value` is no body output; else null.
Node* SoleReader(const Graph& body, const Value& value);
// The scalar `value` holds where it resolves (through the call) to a one-element constant.
std::optional<double> ResolvedScalar(const Graph& body, const Value* value);
// The dims of a statically shaped value.
std::vector<int64_t> DimsOf(const Value& value);

// What a family planner returns: its core, the value the library writes and the body nodes it
// absorbed (besides the contraction).
struct CorePlan {
  std::variant<MatmulPlan, ConvPlan> core;
  const Value* result = nullptr;
  std::vector<const Node*> absorbed;
  // Gemm's C when cuBLASLt cannot add it (broadcast along other axes, or beta with a vector):
  // the remainder starts with Y = result + beta·C.
  const Value* deferred_c = nullptr;
  float deferred_beta = 1.0f;
};
Result<CorePlan> PlanMatmulCore(const Graph& body, const Node& contraction);
Result<CorePlan> PlanConvCore(const Graph& body, const Node& contraction);

}  // namespace contraction_internal
}  // namespace fusionopt::cuda
