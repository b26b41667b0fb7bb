// Planning MatMul and Gemm for cuBLASLt (contraction_plan.h): problem sizes, batch strides and
// transposes of the row-major operands, Gemm's alpha / beta·C, and the epilogue steps cuBLASLt
// fuses (scalar scaling into alpha and beta, a residual of the output's shape as C, BIAS, RELU,
// tanh-GELU).
//
// Limits: float32, float16 and bfloat16 only; a strided batch has one stride per operand, so
// batch dims that broadcast within an operand (a multi-query K [N,1,S,D] against Q [N,H,S,D])
// run as one call per index of the dims before those (at most 4096 calls); empty tensors are
// Unsupported.
#include <algorithm>
#include <array>
#include <functional>
#include <numeric>

#include "cuda_runtime/library/plan.h"
#include "patterns/composite/composite.h"

namespace fusionopt::cuda::contraction_internal {
namespace {

// Only GELU is matched here, whose forms are the same in every opset that has its ops.
constexpr int64_t kCompositeOpset = 21;

int64_t Product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  return std::accumulate(dims.begin() + static_cast<std::ptrdiff_t>(begin),
                         dims.begin() + static_cast<std::ptrdiff_t>(end), int64_t{1}, std::multiplies<>());
}

Status CheckDtype(const Node& contraction, DataType dtype) {
  if (dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) return Status::Ok();
  return Unsupported(contraction.op_type() + " on " + std::string(NameOf(dtype)) +
                     ": the cuBLASLt path runs float, float16 and bfloat16 only");
}

// An operand's batch dims, left-padded with 1s to the output's batch rank (`matrix` trailing
// dims are its matrix: 2, or 1 for a vector).
std::vector<int64_t> AlignedBatch(const std::vector<int64_t>& dims, size_t matrix, size_t rank) {
  const size_t own = dims.size() > matrix ? dims.size() - matrix : 0;
  std::vector<int64_t> batch(rank - std::min(rank, own), 1);
  batch.insert(batch.end(), dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(own));
  return batch;
}

// The first batch dim from which on each operand has every output dim or broadcasts every one.
size_t InnerBatchStart(const std::vector<int64_t>& y, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t split = y.size();
  bool a_full = true, a_shared = true, b_full = true, b_shared = true;
  while (split > 0) {
    const size_t j = split - 1;
    const bool stretched = y[j] != 1;
    a_full = a_full && a[j] == y[j];
    a_shared = a_shared && (a[j] == 1 || !stretched);
    b_full = b_full && b[j] == y[j];
    b_shared = b_shared && (b[j] == 1 || !stretched);
    if (!(a_full || a_shared) || !(b_full || b_shared)) break;
    --split;
  }
  return split;
}

// One call per index of the outer batch dims (those before `split`), with the element offsets of
// A, B and Y there; `matrix` holds the elements of one A, B and Y matrix.
Status PlanOuterCalls(const Node& contraction, const std::vector<int64_t>& y, const std::vector<int64_t>& a,
                      const std::vector<int64_t>& b, size_t split, std::array<int64_t, 3> matrix, MatmulPlan& plan) {
  constexpr int64_t kMostCalls = 4096;
  const int64_t calls = Product(y, 0, split);
  if (split == 0) return Status::Ok();
  if (calls > kMostCalls) {
    return Unsupported(DescribeNode(contraction) + ": batch dims broadcast within an operand over " +
                       std::to_string(calls) + " outer batches (at most " + std::to_string(kMostCalls) +
                       " cuBLASLt calls)");
  }
  const std::array<const std::vector<int64_t>*, 3> operands = {&a, &b, &y};
  std::array<std::vector<int64_t>, 3> strides;  // elements between indices of each outer dim
  for (size_t o = 0; o < 3; ++o) {
    int64_t stride = matrix[o] * Product(*operands[o], split, operands[o]->size());
    strides[o].assign(split, 0);
    for (size_t j = split; j-- > 0;) {
      strides[o][j] = (*operands[o])[j] == 1 && y[j] != 1 ? 0 : stride;
      stride *= (*operands[o])[j];
    }
  }
  for (int64_t call = 0; call < calls; ++call) {
    std::array<int64_t, 3> offsets = {0, 0, 0};
    int64_t rest = call;
    for (size_t j = split; j-- > 0;) {
      const int64_t index = rest % y[j];
      rest /= y[j];
      for (size_t o = 0; o < 3; ++o) offsets[o] += index * strides[o][j];
    }
    plan.outer_offsets.push_back(offsets);
  }
  return Status::Ok();
}

// MatMul's sizes and batch layout (numpy matmul semantics, 1-D operands promoted).
Status PlanMatMulShapes(const Node& contraction, MatmulPlan& plan, bool& has_vector_operand) {
  const std::vector<int64_t> y = DimsOf(*contraction.output(0));
  const std::vector<int64_t>& a = plan.a.dims;
  const std::vector<int64_t>& b = plan.b.dims;
  if (a.empty() || b.empty()) return InvalidModel(DescribeNode(contraction) + ": MatMul of a scalar");
  const size_t ra = a.size(), rb = b.size();
  has_vector_operand = ra == 1 || rb == 1;
  const int64_t m = ra >= 2 ? a[ra - 2] : 1;
  const int64_t k = a[ra - 1];
  const int64_t kb = rb >= 2 ? b[rb - 2] : b[0];
  const int64_t n = rb >= 2 ? b[rb - 1] : 1;
  if (k != kb)
    return InvalidModel(DescribeNode(contraction) + ": inner dimensions " + std::to_string(k) + " and " +
                        std::to_string(kb) + " differ");
  // The output is [batch..., m (unless A is 1-D), n (unless B is 1-D)].
  const size_t matrix_dims = (ra >= 2 ? 1 : 0) + (rb >= 2 ? 1 : 0);
  if (y.size() < matrix_dims) return InvalidModel(DescribeNode(contraction) + ": output rank too small");
  const std::vector<int64_t> y_batch(y.begin(), y.end() - static_cast<std::ptrdiff_t>(matrix_dims));
  if (m == 0 || n == 0 || k == 0 || Product(y_batch, 0, y_batch.size()) == 0) {
    return Unsupported(DescribeNode(contraction) + ": empty MatMul");
  }
  const std::vector<int64_t> a_dims = AlignedBatch(a, ra >= 2 ? 2 : 1, y_batch.size());
  const std::vector<int64_t> b_dims = AlignedBatch(b, rb >= 2 ? 2 : 1, y_batch.size());
  // Broadcast dims only stretch size-1 dims. Within the inner dims each operand has all of the
  // output's batch dims or none (one stride each); the outer ones are one call per index.
  const size_t split = InnerBatchStart(y_batch, a_dims, b_dims);
  const int64_t batch = Product(y_batch, split, y_batch.size());
  const int64_t a_batch = Product(a_dims, split, a_dims.size());
  const int64_t b_batch = Product(b_dims, split, b_dims.size());
  FUSIONOPT_RETURN_IF_ERROR(PlanOuterCalls(contraction, y_batch, a_dims, b_dims, split, {m * k, k * n, m * n}, plan));
  plan.m = m;
  plan.n = n;
  plan.k = k;
  if (b_batch == 1 && a_batch == batch) {
    plan.m = m * batch;  // the rows of every A batch are contiguous: one GEMM
    plan.batch = 1;
  } else {
    plan.batch = batch;
  }
  plan.stride_a = a_batch == 1 && plan.batch > 1 ? 0 : plan.m * k;
  plan.stride_b = b_batch == 1 && plan.batch > 1 ? 0 : k * n;
  plan.stride_y = plan.m * n;
  return Status::Ok();
}

// Gemm's sizes, alpha, and where beta·C goes: cuBLASLt's C (full shape), its bias (a row vector
// with beta 1), or the remainder (any other broadcast).
Status PlanGemm(const Graph& body, const Node& gemm, MatmulPlan& plan, CorePlan& core) {
  if (plan.a.dims.size() != 2 || plan.b.dims.size() != 2)
    return InvalidModel(DescribeNode(gemm) + ": Gemm operands must be 2-D");
  plan.trans_a = gemm.GetInt("transA", 0) != 0;
  plan.trans_b = gemm.GetInt("transB", 0) != 0;
  plan.alpha = gemm.GetFloat("alpha", 1.0f);
  const float beta = gemm.GetFloat("beta", 1.0f);
  plan.m = plan.a.dims[plan.trans_a ? 1 : 0];
  plan.k = plan.a.dims[plan.trans_a ? 0 : 1];
  plan.n = plan.b.dims[plan.trans_b ? 0 : 1];
  const int64_t kb = plan.b.dims[plan.trans_b ? 1 : 0];
  if (plan.k != kb) return InvalidModel(DescribeNode(gemm) + ": inner dimensions differ");
  if (plan.m == 0 || plan.n == 0 || plan.k == 0) return Unsupported(DescribeNode(gemm) + ": empty Gemm");
  plan.stride_a = plan.m * plan.k;
  plan.stride_b = plan.k * plan.n;
  plan.stride_y = plan.m * plan.n;
  if (gemm.input(2) == nullptr || beta == 0.0f) return Status::Ok();
  FUSIONOPT_ASSIGN_OR_RETURN(OperandRef c, ResolveOperand(body, gemm, 2));
  std::vector<int64_t> dims = c.dims;
  while (!dims.empty() && dims.front() == 1 && dims.size() > 1) dims.erase(dims.begin());
  if (c.dims == std::vector<int64_t>{plan.m, plan.n}) {
    plan.c = std::move(c);
    plan.beta = beta;
  } else if (beta == 1.0f && dims == std::vector<int64_t>{plan.n}) {
    plan.bias = std::move(c);
    plan.epilogue = MatmulEpilogue::kBias;
  } else {
    core.deferred_c = gemm.input(2);
    core.deferred_beta = beta;
  }
  return Status::Ok();
}

// A GELU whose input is `value` and whose ops read all of `value`'s uses.
std::optional<CompositeMatch> GeluOf(const Graph& body, const Value& value) {
  if (std::find(body.outputs().begin(), body.outputs().end(), &value) != body.outputs().end()) return std::nullopt;
  for (const auto& node : body.nodes()) {
    const std::string& op = node->op_type();
    if (op != "Erf" && op != "Tanh" && op != "Gelu") continue;
    CompositeSearch search = MatchCompositeAt(*node, kCompositeOpset);
    if (!search.match || search.match->kind != CompositeKind::kGelu || search.match->x != &value) continue;
    const std::vector<Node*>& members = search.match->nodes;
    const bool all_uses_inside = std::all_of(value.uses().begin(), value.uses().end(), [&](const Use& use) {
      return std::find(members.begin(), members.end(), use.node) != members.end();
    });
    if (all_uses_inside) return search.match;
  }
  return std::nullopt;
}

// The operand of a binary `node` that is not `value`, or null when both are.
const Value* OtherOperand(const Node& node, const Value& value) {
  if (node.inputs().size() != 2) return nullptr;
  const Value* other = node.input(0) == &value ? node.input(1) : node.input(0);
  return other == &value ? nullptr : other;
}

// Walks the epilogue from the product, absorbing what cuBLASLt applies while writing D.
class EpilogueWalker {
 public:
  EpilogueWalker(const Graph& body, MatmulPlan& plan, CorePlan& core, bool bias_allowed)
      : body_(body), plan_(plan), core_(core), bias_allowed_(bias_allowed) {}

  const Value* Walk(const Value* value) {
    while (!activated_) {
      const Value* next = Step(*value);
      if (next == nullptr) break;
      value = next;
    }
    return value;
  }

 private:
  bool has_bias() const { return plan_.bias.present(); }

  const Value* Step(const Value& value) {
    if (std::optional<CompositeMatch> gelu = GeluOf(body_, value)) {
      if (gelu->gelu_form != GeluForm::kTanh) return nullptr;  // erf GELU: the remainder's
      core_.absorbed.insert(core_.absorbed.end(), gelu->nodes.begin(), gelu->nodes.end());
      plan_.epilogue = has_bias() ? MatmulEpilogue::kGeluTanhBias : MatmulEpilogue::kGeluTanh;
      activated_ = true;
      return gelu->output;
    }
    Node* node = SoleReader(body_, value);
    if (node == nullptr || !IsDefaultDomain(*node) || node->outputs().size() != 1 || node->output(0) == nullptr)
      return nullptr;
    const std::string& op = node->op_type();
    if (op == "Relu") {
      plan_.epilogue = has_bias() ? MatmulEpilogue::kReluBias : MatmulEpilogue::kRelu;
      activated_ = true;
    } else if ((op == "Mul" || op == "Div") && !has_bias()) {
      if (!Scale(*node, value)) return nullptr;
    } else if (op == "Add" || (op == "Sum" && node->inputs().size() == 2)) {
      if (!Bias(*node, value) && !Residual(*node, value)) return nullptr;
    } else {
      return nullptr;
    }
    core_.absorbed.push_back(node);
    return node->output(0);
  }

  // D·c or D/c with a constant scalar c: alpha (and beta, which scales C) absorb it.
  bool Scale(const Node& node, const Value& value) {
    const Value* other = OtherOperand(node, value);
    if (other == nullptr || (node.op_type() == "Div" && node.input(0) != &value)) return false;
    std::optional<double> scalar = ResolvedScalar(body_, other);
    if (!scalar || (node.op_type() == "Div" && *scalar == 0.0)) return false;
    const double factor = node.op_type() == "Mul" ? *scalar : 1.0 / *scalar;
    plan_.alpha = static_cast<float>(plan_.alpha * factor);
    plan_.beta = static_cast<float>(plan_.beta * factor);
    return true;
  }

  // D + bias with one value per output column ([n], or [1,...,1,n]).
  bool Bias(const Node& node, const Value& value) {
    if (!bias_allowed_ || has_bias()) return false;
    const Value* other = OtherOperand(node, value);
    std::optional<OperandRef> ref = ResolveValue(body_, other);
    if (!ref || other->dtype() != value.dtype() || ref->dims.empty() || ref->dims.size() > DimsOf(value).size())
      return false;
    if (ref->dims.back() != plan_.n || Product(ref->dims, 0, ref->dims.size()) != plan_.n) return false;
    plan_.bias = std::move(*ref);
    plan_.epilogue = MatmulEpilogue::kBias;
    return true;
  }

  // D + R with R of D's own shape: cuBLASLt's C with beta 1, which it adds before the bias and
  // the activation, as the body does (the walk stops at the activation).
  bool Residual(const Node& node, const Value& value) {
    if (plan_.c.present()) return false;
    const Value* other = OtherOperand(node, value);
    std::optional<OperandRef> ref = ResolveValue(body_, other);
    if (!ref || other->dtype() != value.dtype() || ref->dims != DimsOf(value)) return false;
    plan_.c = std::move(*ref);
    plan_.beta = 1.0f;
    return true;
  }

  const Graph& body_;
  MatmulPlan& plan_;
  CorePlan& core_;
  bool bias_allowed_;
  bool activated_ = false;
};

}  // namespace

Result<CorePlan> PlanMatmulCore(const Graph& body, const Node& contraction) {
  CorePlan core;
  MatmulPlan plan;
  FUSIONOPT_ASSIGN_OR_RETURN(plan.a, ResolveOperand(body, contraction, 0));
  FUSIONOPT_ASSIGN_OR_RETURN(plan.b, ResolveOperand(body, contraction, 1));
  if (!plan.a.present() || !plan.b.present()) return InvalidModel(DescribeNode(contraction) + ": missing operand");
  plan.dtype = contraction.input(0)->dtype();
  FUSIONOPT_RETURN_IF_ERROR(CheckDtype(contraction, plan.dtype));
  if (contraction.input(1)->dtype() != plan.dtype)
    return InvalidModel(DescribeNode(contraction) + ": operand dtypes differ");
  bool has_vector_operand = false;
  if (contraction.op_type() == "Gemm") {
    FUSIONOPT_RETURN_IF_ERROR(PlanGemm(body, contraction, plan, core));
  } else {
    FUSIONOPT_RETURN_IF_ERROR(PlanMatMulShapes(contraction, plan, has_vector_operand));
  }
  core.result = contraction.output(0);
  if (core.deferred_c == nullptr) {
    // With a 1-D B the output's last dim is m, not n: a bias there is no column bias.
    EpilogueWalker walker(body, plan, core, !has_vector_operand && !plan.bias.present());
    core.result = walker.Walk(core.result);
  }
  core.core = std::move(plan);
  return core;
}

}  // namespace fusionopt::cuda::contraction_internal
