// Internals of the elementwise generator (elementwise_codegen.h): the C++ statements that
// compute one element of a typed body, op by op. Each op's expression mirrors the CPU
// engine's instruction of the same name (cpu_runtime/elementwise/ops.cc), including how it
// treats NaN, division by zero and integer wrap-around.
#pragma once

#include <string>
#include <unordered_map>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda::elementwise {

// The statements of one element's computation, and the C++ expression (in the value's
// compute type, cuda_types.h) that holds each value computed so far.
class ElementScope {
 public:
  // `value` is available as `expression` (an operand loaded by the kernel, or a literal).
  void Bind(const Value* value, std::string expression) { expressions_[value] = std::move(expression); }
  bool Has(const Value* value) const { return expressions_.count(value) != 0; }
  // The expression holding `value`; the value must be bound.
  const std::string& Of(const Value* value) const;

  // A new temporary `const <compute type of dtype> tN = expression;`, rounded to `dtype` when
  // it is float16 or bfloat16 (the CPU engine rounds every instruction's result the same way).
  std::string Temporary(DataType dtype, const std::string& expression);
  // `expression`, of `from`'s compute type, converted to `to` as the CPU engine converts (Cast).
  std::string Convert(DataType from, DataType to, const std::string& expression);

  const std::string& statements() const { return statements_; }

 private:
  std::unordered_map<const Value*, std::string> expressions_;
  std::string statements_;
  int next_temporary_ = 0;
};

// OK when `node` is an op EmitNode knows (by domain and name; operand dtypes are checked when
// it is emitted); else Unsupported naming the op.
Status CheckElementwiseOp(const Node& node);

// Emits `node` (an elementwise op of the default domain, every operand bound in `scope`) and
// binds its output. Unsupported names the op (and the dtype, when that is the reason).
Status EmitNode(const Node& node, ElementScope& scope);

// The exact C++ literal of element `index` of `tensor`, in its dtype's compute type (hex
// float for floating point; bit patterns for NaN and infinities). Unsupported for dtypes
// without a CUDA type.
Result<std::string> Literal(const Tensor& tensor, int64_t index);

// The device helper functions the expressions call (fo_*), to put before the kernel.
std::string_view HelperFunctions();

}  // namespace fusionopt::cuda::elementwise
