#include "passes/fusion/util/elementwise_support.h"

#include <vector>

#include "cpu_runtime/elementwise/elementwise.h"
#include "cpu_runtime/elementwise/expr.h"
#include "cpu_runtime/engine/kernel.h"
#include "ir/legacy_opsets.h"
#include "ir/op_class.h"

namespace fusionopt::passes {
namespace {

// The operand whose type selects the op's implementation: Where's first value, else the first
// input (Pow's or PRelu's second operand is converted to the first's type).
const Value* ValueOperand(const Node& node) {
  return node.op_type() == "Where" ? node.input(1) : node.input(0);
}

}  // namespace

WhyNot WhyEngineCannotEvaluate(const Node& node, int64_t opset) {
  if (ClassifyOp(node) != OpClass::kElementwise) return "not an elementwise op";
  if (opset < kFirstUnrestrictedOpset) return "opset before 7";
  if (cpu::KernelRegistry::BuiltIn().Find(node.domain(), node.op_type(), opset) == nullptr) {
    return "no CPU kernel for " + node.op_type() + " at opset " + std::to_string(opset);
  }
  std::vector<DataType> dtypes;
  std::vector<int> registers;
  for (const Value* value : node.inputs()) {
    if (value == nullptr) {
      registers.push_back(-1);
      continue;
    }
    if (!cpu::ew::Computes(value->dtype())) return "dtype the engine does not compute";
    registers.push_back(static_cast<int>(dtypes.size()));
    dtypes.push_back(value->dtype());
  }
  for (const Value* value : node.outputs()) {
    if (value != nullptr && !cpu::ew::Computes(value->dtype())) return "dtype the engine does not compute";
  }
  cpu::KernelInfo info{node, opset, {}};
  auto expression = cpu::ElementwiseExpr(info);
  if (!expression.ok()) return "the engine has no expression for this " + node.op_type();
  if (!*expression) return "CastLike (its second input gives only a type)";
  cpu::ew::ProgramBuilder builder(dtypes);
  if (!(*expression)(builder, registers).ok()) {
    const Value* operand = ValueOperand(node);
    std::string dtype = operand != nullptr ? std::string(NameOf(operand->dtype())) : "its operand types";
    return "the engine does not compute " + node.op_type() + " on " + dtype;
  }
  return {};
}

}  // namespace fusionopt::passes
