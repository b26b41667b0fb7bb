// The ONNX operator schemas fusionopt reads models against: every version of every op of the
// default and ai.onnx.ml domains, generated from the ONNX library (operator_schemas.inc,
// scripts/generate_operator_schemas.py; onnx 1.23.2: opset 28, ai.onnx.ml 5).
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

namespace fusionopt {

// The newest opsets the table (and so the loader) knows.
inline constexpr int64_t kNewestDefaultOpset = 28;
inline constexpr int64_t kNewestMlOpset = 5;

struct OperatorSchema {
  static constexpr int kUnbounded = std::numeric_limits<int>::max();
  std::string_view domain;  // "" or "ai.onnx.ml"
  std::string_view op_type;
  int since_version = 0;
  int min_inputs = 0, max_inputs = 0, min_outputs = 0, max_outputs = 0;
  // One letter per formal parameter: S single, O optional, V variadic (the last one only).
  std::string_view inputs, outputs;
  std::string_view input_names;  // comma-separated, in order

  // The name of formal input `index` (the last one for a variadic tail).
  std::string_view InputName(size_t index) const;
};

// The version of `op_type` in force at `opset` of `domain` ("ai.onnx" is ""): the newest one
// not above it. Null for an op the domain does not define by then, and for other domains.
const OperatorSchema* FindOperatorSchema(std::string_view domain, std::string_view op_type, int64_t opset);

}  // namespace fusionopt
