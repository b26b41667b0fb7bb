// matmul-add-to-gemm (O1): its rewrite, conditions and limits are in matmul_add_to_gemm.h.
#include "passes/fold/matmul_add_to_gemm.h"

#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

bool GemmTakes(DataType dtype, int64_t opset) {
  if (dtype == DataType::kBFloat16) return opset >= 13;
  return dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kDouble;
}

bool RankIs(const Value* value, size_t rank) { return value != nullptr && value->shape() && value->shape()->size() == rank; }

// C broadcasts to `output` one way: right-aligned, each dim 1 or the same as the output's.
bool BroadcastsOneWay(const Shape& c, const Shape& output) {
  if (c.size() > output.size()) return false;
  size_t offset = output.size() - c.size();
  for (size_t axis = 0; axis < c.size(); ++axis) {
    const Dim& dim = c[axis];
    const Dim& target = output[offset + axis];
    bool same_known = dim.is_known() && target.is_known() && dim.value == target.value;
    bool same_symbol = dim.is_symbolic() && target.is_symbolic() && dim.symbol == target.symbol;
    bool stretches = dim.is_known() && dim.value == 1;
    if (!same_known && !same_symbol && !stretches) return false;
  }
  return true;
}

// Why MatMul `matmul` + `add` (reading it at input `index`) cannot become a Gemm, or "".
WhyNot WhyNotGemm(const Node& matmul, const Node& add, int index, int64_t opset) {
  const Value* product = add.input(static_cast<size_t>(index));
  if (!OnlyReadBy(*product, add)) return "MatMul output has other readers or is a graph output";
  const Value* a = matmul.input(0);
  const Value* b = matmul.input(1);
  if (a == nullptr || b == nullptr || !a->shape() || !b->shape()) return "rank of A or B unknown";
  if (a->shape()->size() > 2) return "batched MatMul (A of rank > 2; Gemm is 2-D)";
  if (!RankIs(a, 2) || !RankIs(b, 2)) return "A or B is not 2-D";
  if (!GemmTakes(a->dtype(), opset)) return "dtype Gemm does not take at this opset";
  const Value* c = add.input(index == 0 ? 1 : 0);
  if (c == nullptr || c->dtype() != a->dtype()) return "bias dtype differs";
  if (!c->shape() || !RankIs(product, 2) || !BroadcastsOneWay(*c->shape(), *product->shape())) {
    return "bias does not broadcast one way to [M, N]";
  }
  return {};
}

}  // namespace

Result<bool> MatMulAddToGemm::RunOnGraph(Graph& graph, PassContext& context) {
  int64_t opset = context.model().OpsetFor("").value_or(0);
  std::vector<Node*> adds;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == "Add" && IsDefaultDomain(*node) && node->inputs().size() == 2) adds.push_back(node.get());
  }
  bool changed = false;
  for (Node* add : adds) {
    WhyNot why;
    for (int index = 0; index < 2; ++index) {
      Value* operand = add->input(static_cast<size_t>(index));
      Node* matmul = operand != nullptr ? operand->producer() : nullptr;
      if (matmul == nullptr || matmul->op_type() != "MatMul" || !IsDefaultDomain(*matmul) || matmul->graph() != &graph) {
        continue;
      }
      why = opset < 7 ? WhyNot("Gemm before opset 7") : WhyNotGemm(*matmul, *add, index, opset);
      if (why) continue;
      Value* bias = add->input(index == 0 ? 1 : 0);
      Node* gemm = graph.CreateNode("Gemm", matmul->domain(), {matmul->input(0), matmul->input(1), bias}, {nullptr},
                                    matmul->name());
      ReplaceChain(graph, *gemm, 0, {matmul, add}, *add->output(0));
      context.Matched();
      changed = true;
      break;
    }
    if (why) context.Rejected(*add, why);
  }
  if (changed) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
