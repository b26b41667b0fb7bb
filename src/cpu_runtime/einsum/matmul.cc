// Float32 Einsum contractions as one batched oneDNN matmul.
//
// The labels of a two-operand contraction fall in four roles: batch (in both, kept), K (in
// both, summed), M (only in the left operand, kept) and N (only in the right, kept). With
// each role's labels adjacent, the operands are the matrices [batch, M, K] and [batch, K, N]
// and the result is [batch, M, N]. An operand already laid out so — or with its two inner
// groups swapped, which oneDNN reads as a transposed matrix — is used in place; otherwise it
// is copied into shape (Project), which also sums the labels only it has and nobody keeps.
// The role orders and which operand goes left are chosen to copy the least data: for
// `bhid,bhjd->bhij`, `bij,bjk->bik` and `ij,jk->ki` nothing is copied at all.
#include <algorithm>
#include <limits>

#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/einsum/contract.h"
#include "cpu_runtime/onednn/common.h"

namespace fusionopt::cpu::einsum {
namespace {

using data_movement::Product;

bool Contains(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

// The labels of `subset`, in the order they have in `order` (which holds them all).
std::vector<int> InOrderOf(const std::vector<int>& subset, const std::vector<int>& order) {
  std::vector<int> ordered;
  for (int label : order) {
    if (Contains(subset, label)) ordered.push_back(label);
  }
  return ordered;
}

std::vector<int> Concat(const std::vector<int>& first, const std::vector<int>& second, const std::vector<int>& third) {
  std::vector<int> labels = first;
  labels.insert(labels.end(), second.begin(), second.end());
  labels.insert(labels.end(), third.begin(), third.end());
  return labels;
}

// How one matmul operand [batch, outer, inner] is read.
struct Side {
  bool transposed = false;  // in place as [batch, inner, outer]
  bool copied = false;      // copied into [batch, outer, inner] first
};

Side ChooseSide(const Operand& operand, const std::vector<int>& batch, const std::vector<int>& outer,
                const std::vector<int>& inner, const Workspace& workspace) {
  if (IsLaidOutAs(operand, Concat(batch, outer, inner), workspace)) return {};
  if (IsLaidOutAs(operand, Concat(batch, inner, outer), workspace)) return {.transposed = true};
  return {.copied = true};
}

// One way to run a contraction as a matmul, and the elements it copies.
struct Arrangement {
  bool swapped = false;  // the right operand (b) goes left
  std::vector<int> batch, m, k, n;
  Side lhs, rhs;
  int64_t cost = std::numeric_limits<int64_t>::max();

  std::vector<int> ResultLabels() const { return Concat(batch, m, n); }
};

std::vector<int> Intersect(const std::vector<int>& labels, const std::vector<int>& others, bool inside) {
  std::vector<int> kept;
  for (int label : labels) {
    if (Contains(others, label) == inside) kept.push_back(label);
  }
  return kept;
}

// Tries both operand orders and, per role, the orders of `keep` and of either operand.
Arrangement Arrange(const Operand& a, const Operand& b, const std::vector<int>& keep, const Workspace& workspace) {
  Arrangement best;
  for (bool swapped : {false, true}) {
    const Operand& lhs = swapped ? b : a;
    const Operand& rhs = swapped ? a : b;
    const std::vector<int> left = PresentLabels(lhs, workspace), right = PresentLabels(rhs, workspace);
    const std::vector<int> shared = Intersect(left, right, true);
    const std::vector<int> batch = Intersect(shared, keep, true), k = Intersect(shared, keep, false);
    const std::vector<int> m = Intersect(Intersect(left, right, false), keep, true);
    const std::vector<int> n = Intersect(Intersect(right, left, false), keep, true);
    for (const std::vector<int>* batch_order : {&keep, &left, &right}) {
      for (const std::vector<int>* m_order : {&keep, &left}) {
        for (const std::vector<int>* n_order : {&keep, &right}) {
          for (const std::vector<int>* k_order : {&left, &right}) {
            Arrangement candidate;
            candidate.swapped = swapped;
            candidate.batch = InOrderOf(batch, *batch_order);
            candidate.m = InOrderOf(m, *m_order);
            candidate.k = InOrderOf(k, *k_order);
            candidate.n = InOrderOf(n, *n_order);
            candidate.lhs = ChooseSide(lhs, candidate.batch, candidate.m, candidate.k, workspace);
            candidate.rhs = ChooseSide(rhs, candidate.batch, candidate.k, candidate.n, workspace);
            const std::vector<int> result = candidate.ResultLabels();
            candidate.cost = (candidate.lhs.copied ? lhs.tensor.NumElements() : 0) +
                             (candidate.rhs.copied ? rhs.tensor.NumElements() : 0) +
                             (result != keep ? Product(workspace.SizesOf(result)) : 0);
            if (candidate.cost < best.cost) best = std::move(candidate);
          }
        }
      }
    }
  }
  return best;
}

// [batch, rows, columns] row-major, or its transpose in the inner pair when `transposed`.
dnnl::memory::desc MatrixDesc(int64_t batch, int64_t rows, int64_t columns, bool transposed) {
  const dnnl::memory::dims strides =
      transposed ? dnnl::memory::dims{rows * columns, 1, rows} : dnnl::memory::dims{rows * columns, columns, 1};
  return dnnl::memory::desc({batch, rows, columns}, dnnl::memory::data_type::f32, strides);
}

}  // namespace

struct MatMulPlans::Cache {
  struct Plan {
    dnnl::matmul primitive;
    dnnl::memory::desc lhs, rhs, result;
  };
  onednn::PlanCache<Plan> plans;

  const Plan& For(int64_t batch, int64_t m, int64_t k, int64_t n, const Arrangement& arrangement) {
    std::vector<int64_t> key = {batch, m, k, n, arrangement.lhs.transposed, arrangement.rhs.transposed};
    if (const Plan* plan = plans.Find(key)) return *plan;
    Plan plan;
    plan.lhs = MatrixDesc(batch, m, k, arrangement.lhs.transposed);
    plan.rhs = MatrixDesc(batch, k, n, arrangement.rhs.transposed);
    plan.result = MatrixDesc(batch, m, n, false);
    plan.primitive = dnnl::matmul(
        dnnl::matmul::primitive_desc(dnnl::matmul::desc(plan.lhs, plan.rhs, plan.result), onednn::Engine()));
    return plans.Insert(std::move(key), std::move(plan));
  }
};

MatMulPlans::MatMulPlans() : cache_(std::make_unique<Cache>()) {}
MatMulPlans::~MatMulPlans() = default;

Result<Operand> MatMulPlans::Contract(const Operand& a, const Operand& b, const std::vector<int>& keep,
                                      const Workspace& workspace) {
  FUSIONOPT_CHECK(a.tensor.dtype() == DataType::kFloat && b.tensor.dtype() == DataType::kFloat,
                  "the matmul path computes float32");
  // Empty operands leave nothing to multiply: the result is empty or all zeros.
  if (a.tensor.NumElements() == 0 || b.tensor.NumElements() == 0) return ContractDirectly(a, b, keep, workspace);
  const Arrangement arrangement = Arrange(a, b, keep, workspace);
  const Operand& lhs = arrangement.swapped ? b : a;
  const Operand& rhs = arrangement.swapped ? a : b;
  const RtTensor lhs_data =
      arrangement.lhs.copied ? Project(lhs, Concat(arrangement.batch, arrangement.m, arrangement.k), workspace).tensor
                             : lhs.tensor;
  const RtTensor rhs_data =
      arrangement.rhs.copied ? Project(rhs, Concat(arrangement.batch, arrangement.k, arrangement.n), workspace).tensor
                             : rhs.tensor;
  const int64_t batch = Product(workspace.SizesOf(arrangement.batch));
  const int64_t m = Product(workspace.SizesOf(arrangement.m));
  const int64_t k = Product(workspace.SizesOf(arrangement.k));
  const int64_t n = Product(workspace.SizesOf(arrangement.n));
  const std::vector<int> labels = arrangement.ResultLabels();
  Operand result{workspace.allocator->Allocate(DataType::kFloat, workspace.SizesOf(labels)), labels};
  const std::string what = "Einsum matmul " + DimsToString({batch, m, k, n});
  FUSIONOPT_RETURN_IF_ERROR(onednn::Guarded(what, [&] {
    const Cache::Plan& plan = cache_->For(batch, m, k, n, arrangement);
    plan.primitive.execute(onednn::Stream(), {{DNNL_ARG_SRC, onednn::Wrap(plan.lhs, lhs_data.raw())},
                                              {DNNL_ARG_WEIGHTS, onednn::Wrap(plan.rhs, rhs_data.raw())},
                                              {DNNL_ARG_DST, onednn::Wrap(plan.result, result.tensor.raw())}});
    onednn::Stream().wait();
    return Status::Ok();
  }));
  return result;
}

}  // namespace fusionopt::cpu::einsum
