#include "passes/fusion/util/composite_legality.h"

#include <algorithm>

#include "ir/graph.h"

namespace fusionopt::passes {
namespace {

// Opsets that introduced the standard ops a composite may be built around.
constexpr int64_t kLayerNormalizationOpset = 17;
constexpr int64_t kRmsNormalizationOpset = 23;
constexpr int64_t kGeluOpset = 20;
// Softmax before opset 13 flattens its input to 2-D at `axis`.
constexpr int64_t kRowSoftmaxOpset = 13;

bool CertainDim(const Dim& dim) { return dim.is_known() || dim.is_symbolic(); }

// `operand` scales each row alike: one element, or shape [1, ..., 1, H] where H is the row's
// length — it broadcasts over the rows and never widens the normalized tensor.
bool BroadcastsAlongRowsOnly(const Value& operand, const Shape& normalized) {
  if (!operand.shape() || normalized.empty()) return false;
  const Shape& shape = *operand.shape();
  if (shape.size() > normalized.size()) return false;
  bool single_element = std::all_of(shape.begin(), shape.end(), [](const Dim& dim) { return dim.value == 1; });
  if (single_element) return true;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    if (shape[i].value != 1) return false;
  }
  const Dim& row = normalized.back();
  return CertainDim(row) && shape.back() == row;
}

void RemoveNode(CompositeMatch& match, Node* node) {
  match.nodes.erase(std::remove(match.nodes.begin(), match.nodes.end(), node), match.nodes.end());
}

// Whether `operand` may have `result`'s shape at run time: the same rank, and no dims that
// provably differ — two different sizes or symbols, or a 1 against anything but 1, which
// broadcasts. Unknown dims pass: the runtime checks each run's shapes and runs the body op by
// op when its fused kernel does not apply, so the cost of a wrong guess is speed, never results.
// (Shape inference leaves exporters' attention reshapes with unknown dims, where certainty
// would reject every transformer.)
bool MayHaveShapeOf(const Value& operand, const Value& result) {
  if (!operand.shape() || !result.shape() || operand.shape()->size() != result.shape()->size()) return false;
  for (size_t i = 0; i < operand.shape()->size(); ++i) {
    const Dim& dim = (*operand.shape())[i];
    const Dim& target = (*result.shape())[i];
    if (dim.is_known() && target.is_known() && dim.value != target.value) return false;
    if (dim.is_symbolic() && target.is_symbolic() && dim.symbol != target.symbol) return false;
    if (dim.is_known() && dim.value == 1 && !(target.is_known() && target.value == 1)) return false;
  }
  return true;
}

// The prologue stays only when it is a true residual add: both addends may have the sum's
// shape, so the kernel reads two rows and writes the row it normalizes (a bias or broadcast add is
// left to the epilogue and elementwise passes).
void KeepResidualPrologueIfRowwise(CompositeMatch& match) {
  if (match.residual_add == nullptr) return;
  const Value& sum = *match.residual_sum;
  // One type for both addends and the sum: the kernel rounds the sum to it, as the Add does.
  bool rowwise = MayHaveShapeOf(*match.x, sum) && MayHaveShapeOf(*match.residual, sum) &&
                 match.x->dtype() == sum.dtype() && match.residual->dtype() == sum.dtype();
  if (rowwise) return;
  RemoveNode(match, match.residual_add);
  match.x = match.residual_sum;
  match.residual_add = nullptr;
  match.residual = nullptr;
  match.residual_sum = nullptr;
}

void DropBeta(CompositeMatch& match) {
  RemoveNode(match, match.beta_add);
  match.output = match.gamma_mul->output(0);
  match.beta_add = nullptr;
  match.beta = nullptr;
}

void DropAffineTail(CompositeMatch& match) {
  if (match.beta_add != nullptr) DropBeta(match);
  RemoveNode(match, match.gamma_mul);
  match.output = match.gamma_mul->input(0) == match.gamma ? match.gamma_mul->input(1) : match.gamma_mul->input(0);
  match.gamma_mul = nullptr;
  match.gamma = nullptr;
}

// The row kernel's 16-bit rows: read and written as float16 or bfloat16, computed in float32.
bool SixteenBitRow(DataType dtype) { return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16; }

// Whether the residual, gamma and beta the norm has are all of x's type.
bool OperandsOfInputType(const CompositeMatch& match) {
  for (const Value* operand : {match.residual, match.gamma, match.beta}) {
    if (operand != nullptr && operand->dtype() != match.x->dtype()) return false;
  }
  return true;
}

// Why the norm's float32 Casts cannot join it (empty when they can): the row kernel reads and
// writes x's type and computes in float32, which is what the Casts do when x is float16 or
// bfloat16, the Cast back restores that type and gamma and beta have it too.
WhyNot CheckCastTypes(const CompositeMatch& match) {
  const DataType x = match.x->dtype();
  if (!SixteenBitRow(x)) return "the Cast to float32 widens no float16 or bfloat16";
  if (match.cast_back_to != static_cast<int64_t>(x) || match.output->dtype() != x) {
    return "the Cast back does not restore the input's type";
  }
  if (!OperandsOfInputType(match)) return "gamma or beta is not of the input's type";
  return {};
}

// A LayerNormalization or RMSNormalization op of float16 or bfloat16 that computes in float32
// (stash_type 1, the default), gamma and beta of its type: what the row kernel computes.
bool SixteenBitStandardNorm(const CompositeMatch& match) {
  if (!match.standard_op || (match.kind != CompositeKind::kLayerNorm && match.kind != CompositeKind::kRmsNorm)) return false;
  const DataType x = match.x->dtype();
  if (!SixteenBitRow(x) || match.output->dtype() != x || !OperandsOfInputType(match)) return false;
  for (const Node* node : match.nodes) {
    const bool norm = node->op_type() == "LayerNormalization" || node->op_type() == "RMSNormalization";
    if (norm && node->GetInt("stash_type", 1) != 1) return false;
  }
  return true;
}

// The norm without its Casts (and the affine tail after them): the float32 core alone.
void DropCasts(CompositeMatch& match) {
  if (match.gamma_mul != nullptr) DropAffineTail(match);
  RemoveNode(match, match.cast_in);
  RemoveNode(match, match.cast_out);
  match.x = match.cast_in->output(0);
  match.output = match.cast_out->input(0);
  match.cast_in = nullptr;
  match.cast_out = nullptr;
  match.cast_back_to = 0;
}


// The standard op at the core of `match` exists in `opset` (empty when it does, or there is none).
WhyNot CheckStandardOp(const CompositeMatch& match, int64_t opset) {
  if (!match.standard_op) return {};
  if (match.kind == CompositeKind::kLayerNorm && opset < kLayerNormalizationOpset) {
    return "LayerNormalization needs opset 17";
  }
  if (match.kind == CompositeKind::kRmsNorm && opset < kRmsNormalizationOpset) return "RMSNormalization needs opset 23";
  if (match.kind == CompositeKind::kGelu && opset < kGeluOpset) return "Gelu needs opset 20";
  return {};
}

WhyNot CheckNorm(CompositeMatch& match, const Node& anchor, PassContext& context) {
  KeepResidualPrologueIfRowwise(match);
  const Value& normalized = match.residual_sum != nullptr ? *match.residual_sum : *match.x;
  if (!normalized.shape() || normalized.shape()->empty()) return "input rank unknown";
  const Shape& shape = *normalized.shape();
  auto rank = static_cast<int64_t>(shape.size());
  if (NormalizedAxis(match.axis, rank) != rank - 1) {
    return match.standard_op ? "the normalized axis is not the last" : "reduce axis is not the last";
  }
  if (match.gamma_mul != nullptr && !BroadcastsAlongRowsOnly(*match.gamma, shape)) {
    context.Rejected(anchor, WhyNot("gamma broadcasts over more than the last axis (fused without it)").Prefixed(NameOf(match.kind)));
    DropAffineTail(match);
  }
  if (match.beta_add != nullptr && !BroadcastsAlongRowsOnly(*match.beta, shape)) {
    context.Rejected(anchor, WhyNot("beta broadcasts over more than the last axis (fused without it)").Prefixed(NameOf(match.kind)));
    DropBeta(match);
  }
  return {};
}

WhyNot CheckSoftmax(CompositeMatch& match, int64_t opset) {
  const Value* scores = match.mask_node != nullptr ? match.mask_node->output(0) : match.x;
  if (!scores->shape() || scores->shape()->empty()) return "input rank unknown";
  auto rank = static_cast<int64_t>(scores->shape()->size());
  if (NormalizedAxis(match.axis, rank) != rank - 1) {
    return opset < kRowSoftmaxOpset ? "opset < 13 softmax flattens to 2-D at an axis that is not the last"
                                    : "axis is not the last";
  }
  if (match.mask_node == nullptr || MayHaveShapeOf(*match.x, *scores)) return {};
  // Addition commutes: an unscaled x that is the broadcast side may trade places with the mask.
  bool swappable = match.mask != nullptr && !match.scale && MayHaveShapeOf(*match.mask, *scores);
  if (!swappable) return "the mask broadcasts the scores";
  std::swap(match.x, match.mask);
  return {};
}

}  // namespace

WhyNot MakeFusable(CompositeMatch& match, int64_t opset, const Node& anchor, PassContext& context) {
  WhyNot reason = CheckStandardOp(match, opset);
  if (!reason && match.cast_in != nullptr) {
    if (WhyNot casts = CheckCastTypes(match)) {
      context.Rejected(anchor, WhyNot(casts.reason() + " (fused without its Casts)").Prefixed(NameOf(match.kind)));
      DropCasts(match);
    }
  }
  const bool float32 = match.x->dtype() == DataType::kFloat && match.output->dtype() == DataType::kFloat;
  if (!reason && match.cast_in == nullptr && !float32 && !SixteenBitStandardNorm(match)) {
    reason = "dtype is not float32";
  }
  if (!reason) {
    switch (match.kind) {
      case CompositeKind::kLayerNorm:
      case CompositeKind::kRmsNorm: reason = CheckNorm(match, anchor, context); break;
      case CompositeKind::kSoftmax: reason = CheckSoftmax(match, opset); break;
      case CompositeKind::kGelu:
      case CompositeKind::kSilu: break;
    }
  }
  return reason.Prefixed(NameOf(match.kind));
}

}  // namespace fusionopt::passes
