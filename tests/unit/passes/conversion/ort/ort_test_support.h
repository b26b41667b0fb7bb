// What the ORT lowering's tests share (lower_for_ort_test, norms_test, rotary_test): model text
// pieces and the questions they ask of a lowered graph.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "pass_test_support.h"

namespace fusionopt::ort_test {

inline std::string Header() { return "ir_version 8\nopset \"\" 17\n"; }

inline std::string Weights() {
  std::string values;
  for (int i = 0; i < 8 * 16; ++i) values += (i ? ", " : "") + std::to_string(((i * 7) % 13 - 6) / 8.0);
  return values;
}

// A BERT / GPT-2 feed-forward input projection: MatMul, bias Add, then GELU as the exporters
// decompose it (`form` "erf" or "tanh"), in `dtype`.
inline std::string Projection(const std::string& form, const std::string& dtype = "float") {
  const std::string gelu =
      form == "erf" ? R"(
  %scaled = Div(%h, %sqrt2) @div
  %erf = Erf(%scaled) @erf
  %one_plus = Add(%erf, %one) @add_one
  %half_x = Mul(%h, %half) @mul_half
  %y = Mul(%half_x, %one_plus) @mul
)"
                    : R"(
  %cube = Pow(%h, %three) @pow
  %inner = Mul(%cube, %coeff) @mul_coeff
  %sum = Add(%h, %inner) @add_inner
  %arg = Mul(%sum, %root) @mul_root
  %tanh = Tanh(%arg) @tanh
  %one_plus = Add(%tanh, %one) @add_one
  %half_x = Mul(%h, %half) @mul_half
  %y = Mul(%half_x, %one_plus) @mul
)";
  return Header() + "graph main (" + dtype + "[N,4,8] %x) -> (" + dtype + "[N,4,16] %y)\n" +
         "  init " + dtype + "[8,16] %w = [" + Weights() + "]\n" +
         "  init " + dtype + "[16] %b = [0.5, -0.5, 0.25, 0, 1, -1, 2, -2, 0.5, -0.5, 0.25, 0, 1, -1, 2, -2]\n" +
         "  init " + dtype + "[] %sqrt2 = [1.4142135]\n  init " + dtype + "[] %one = [1.0]\n  init " + dtype +
         "[] %half = [0.5]\n  init " + dtype + "[] %three = [3.0]\n  init " + dtype + "[] %coeff = [0.044715]\n" +
         "  init " + dtype + "[] %root = [0.7978846]\n{\n  %m = MatMul(%x, %w) @matmul\n  %h = Add(%m, %b) @bias\n" +
         gelu + "}\n";
}


inline std::unique_ptr<Model> OptimizedAtO3(const std::string& text) { return pass_test::ParseOptimized(text, 3); }

inline bool Has(const std::vector<std::string>& ops, const std::string& op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); }

inline const Node& Only(const Graph& graph, const std::string& op) {
  const Node* found = nullptr;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == op) {
      REQUIRE(found == nullptr);
      found = node.get();
    }
  }
  REQUIRE(found != nullptr);
  return *found;
}

}  // namespace fusionopt::ort_test
