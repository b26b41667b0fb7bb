// Recognising composite bodies (patterns/composite/composite.h): what a runtime reads from an ai.fusionopt
// function body — kind, the role of each formal input, the constants — and the bodies it must
// refuse. Bodies are written as untyped graphs, the way outlined function bodies print.
#include <catch2/catch.hpp>

#include <cmath>

#include "patterns/composite/composite.h"
#include "text_format/text_format.h"

using namespace fusionopt;

namespace {

std::unique_ptr<Model> ParseBody(const std::string& body, int64_t opset = 17) {
  auto model = ParseModel("ir_version 8\nopset \"\" " + std::to_string(opset) + "\n" + body);
  INFO(model.status().message());
  REQUIRE(model.ok());
  return std::move(model).value();
}

std::optional<FusedComposite> Recognize(const std::string& body, int64_t opset = 17) {
  auto model = ParseBody(body, opset);
  return RecognizeComposite(*model->graph, opset);
}

using Role = CompositeRole;

// The exporter form of BERT's LayerNorm, with the residual add whose sum is a second result.
constexpr const char* kAddLayerNormBody = R"(graph (%x0, %x1, %x2, %x3) -> (%y0, %y1) {
  %y0 = Add(%x0, %x1)
  %t0 = ReduceMean(%y0) {axes: [-1], keepdims: 1}
  %t1 = Sub(%y0, %t0)
  %c0 = Constant() {value: tensor float[] [2.0]}
  %t2 = Pow(%t1, %c0)
  %t3 = ReduceMean(%t2) {axes: [-1], keepdims: 1}
  %c1 = Constant() {value: tensor float[] [1e-12]}
  %t4 = Add(%t3, %c1)
  %t5 = Sqrt(%t4)
  %t6 = Div(%t1, %t5)
  %t7 = Mul(%t6, %x2)
  %y1 = Add(%t7, %x3)
})";

// The erf GELU as BERT exports it, (x · (1 + Erf(x / √2))) · 0.5, its constants of `type`.
std::string ErfGeluBody(const std::string& type, const std::string& sqrt2) {
  return R"(graph (%x0) -> (%y0) {
      %c0 = Constant() {value: tensor )" + type + "[] [" + sqrt2 + R"(]}
      %t0 = Div(%x0, %c0)
      %t1 = Erf(%t0)
      %c1 = Constant() {value: tensor )" + type + R"([] [1.0]}
      %t2 = Add(%t1, %c1)
      %t3 = Mul(%x0, %t2)
      %c2 = Constant() {value: tensor )" + type + R"([] [0.5]}
      %y0 = Mul(%t3, %c2)
    })";
}

// The tanh GELU as GPT-2 exports it, its constants of `type`.
std::string TanhGeluBody(const std::string& type, const std::string& cubic, const std::string& root) {
  return R"(graph (%x0) -> (%y0) {
      %c0 = Constant() {value: tensor )" + type + R"([] [0.5]}
      %t0 = Mul(%x0, %c0)
      %c1 = Constant() {value: tensor )" + type + R"([] [3.0]}
      %t1 = Pow(%x0, %c1)
      %c2 = Constant() {value: tensor )" + type + "[] [" + cubic + R"(]}
      %t2 = Mul(%t1, %c2)
      %t3 = Add(%x0, %t2)
      %c3 = Constant() {value: tensor )" + type + "[] [" + root + R"(]}
      %t4 = Mul(%t3, %c3)
      %t5 = Tanh(%t4)
      %c4 = Constant() {value: tensor )" + type + R"([] [1.0]}
      %t6 = Add(%t5, %c4)
      %y0 = Mul(%t0, %t6)
    })";
}

}  // namespace

TEST_CASE("a decomposed residual LayerNorm body is recognised with its roles and constants", "[fused_pattern]") {
  auto composite = Recognize(kAddLayerNormBody);
  REQUIRE(composite.has_value());
  CHECK(composite->kind == CompositeKind::kLayerNorm);
  CHECK_FALSE(composite->standard_op);
  CHECK(composite->input_roles == std::vector<Role>{Role::kX, Role::kResidual, Role::kGamma, Role::kBeta});
  CHECK(composite->x.input == 0);
  CHECK(composite->residual.input == 1);
  CHECK(composite->gamma.input == 2);
  CHECK(composite->beta.input == 3);
  CHECK_FALSE(composite->mask.present());
  CHECK(composite->result_output == 1);
  CHECK(composite->residual_sum_output == 0);
  CHECK(composite->epsilon == Approx(1e-12).epsilon(1e-6));
  CHECK(composite->axis == -1);
}

TEST_CASE("norm bodies: Mul(d, d), reciprocal forms, scalar gamma, opset-18 axes, standard ops", "[fused_pattern]") {
  SECTION("LayerNorm with Mul(d, d), Reciprocal and no beta; a scalar gamma held as a Constant") {
    auto composite = Recognize(R"(graph (%x0) -> (%y0) {
      %t0 = ReduceMean(%x0) {axes: [2]}
      %t1 = Sub(%x0, %t0)
      %t2 = Mul(%t1, %t1)
      %t3 = ReduceMean(%t2) {axes: [2]}
      %c0 = Constant() {value: tensor float[] [1e-05]}
      %t4 = Add(%c0, %t3)
      %t5 = Sqrt(%t4)
      %t6 = Reciprocal(%t5)
      %t7 = Mul(%t6, %t1)
      %c1 = Constant() {value: tensor float[] [3.0]}
      %y0 = Mul(%c1, %t7)
    })");
    REQUIRE(composite.has_value());
    CHECK(composite->kind == CompositeKind::kLayerNorm);
    CHECK(composite->input_roles == std::vector<Role>{Role::kX});
    REQUIRE(composite->gamma.constant != nullptr);
    CHECK(composite->gamma.constant->AsDoubles()->front() == 3.0);
    CHECK_FALSE(composite->beta.present());
    CHECK(composite->axis == 2);  // as written: the kernel checks it against the input's rank
    CHECK(composite->epsilon == Approx(1e-5).epsilon(1e-6));
  }
  SECTION("RMSNorm with Div(1, Sqrt) and an opset-18 axes input") {
    auto composite = Recognize(R"(graph (%x0, %x1) -> (%y0) {
      %c0 = Constant() {value: tensor float[] [2.0]}
      %t0 = Pow(%x0, %c0)
      %c1 = Constant() {value: tensor int64[1] [-1]}
      %t1 = ReduceMean(%t0, %c1)
      %c2 = Constant() {value: tensor float[] [1e-06]}
      %t2 = Add(%t1, %c2)
      %t3 = Sqrt(%t2)
      %c3 = Constant() {value: tensor float[] [1.0]}
      %t4 = Div(%c3, %t3)
      %t5 = Mul(%x0, %t4)
      %y0 = Mul(%x1, %t5)
    })", 18);
    REQUIRE(composite.has_value());
    CHECK(composite->kind == CompositeKind::kRmsNorm);
    CHECK(composite->input_roles == std::vector<Role>{Role::kX, Role::kGamma});
    CHECK(composite->axis == -1);
    CHECK(composite->epsilon == Approx(1e-6).epsilon(1e-6));
  }
  SECTION("Add + LayerNormalization, the sum only read inside") {
    auto composite = Recognize(R"(graph (%x0, %x1, %x2, %x3) -> (%y0) {
      %t0 = Add(%x0, %x1)
      %y0 = LayerNormalization(%t0, %x2, %x3) {axis: -1, epsilon: 1e-05}
    })");
    REQUIRE(composite.has_value());
    CHECK(composite->kind == CompositeKind::kLayerNorm);
    CHECK(composite->standard_op);
    CHECK(composite->input_roles == std::vector<Role>{Role::kX, Role::kResidual, Role::kGamma, Role::kBeta});
    CHECK(composite->residual_sum_output == -1);
    CHECK(composite->epsilon == Approx(1e-5).epsilon(1e-6));
  }
  SECTION("Add + RMSNormalization") {
    auto composite = Recognize(R"(graph (%x0, %x1, %x2) -> (%y0, %y1) {
      %y0 = Add(%x1, %x0)
      %y1 = RMSNormalization(%y0, %x2) {epsilon: 1e-06}
    })", 23);
    REQUIRE(composite.has_value());
    CHECK(composite->kind == CompositeKind::kRmsNorm);
    CHECK(composite->input_roles == std::vector<Role>{Role::kResidual, Role::kX, Role::kGamma});
    CHECK(composite->result_output == 1);
    CHECK(composite->residual_sum_output == 0);
  }
}

TEST_CASE("an RMSNorm between a Cast to float32 and a Cast back takes both Casts in", "[fused_pattern]") {
  const std::string core = R"(
  %c0 = Constant() {value: tensor float[] [2.0]}
  %t1 = Pow(%t0, %c0)
  %c1 = Constant() {value: tensor int64[1] [-1]}
  %t2 = ReduceMean(%t1, %c1) {keepdims: 1}
  %c2 = Constant() {value: tensor float[] [1e-06]}
  %t3 = Add(%t2, %c2)
  %t4 = Sqrt(%t3)
  %t5 = Reciprocal(%t4)
  %t6 = Mul(%t0, %t5))";
  auto both = Recognize("graph (%x0, %x1) -> (%y0) {\n  %t0 = Cast(%x0) {to: 1}" + core +
                            "\n  %t7 = Cast(%t6) {to: 10}\n  %y0 = Mul(%x1, %t7)\n}",
                        18);
  REQUIRE(both.has_value());
  CHECK(both->kind == CompositeKind::kRmsNorm);
  CHECK(both->cast_back_to == 10);
  CHECK(both->input_roles == std::vector<Role>{Role::kX, Role::kGamma});
  // Widened only: the Cast stays outside the norm, so a body holding it is not one composite.
  CHECK_FALSE(Recognize("graph (%x0) -> (%y0) {\n  %t0 = Cast(%x0) {to: 1}" + core + "\n  %y0 = Identity(%t6)\n}", 18)
                  .has_value());
  // A float32 norm has no Casts to restore.
  auto plain = Recognize("graph (%t0) -> (%t6) {" + core + "\n}", 18);
  REQUIRE(plain.has_value());
  CHECK(plain->cast_back_to == 0);
}

TEST_CASE("softmax bodies: scale and additive mask, Where mask, the opset's default axis", "[fused_pattern]") {
  SECTION("Softmax(x / 4 + mask)") {
    auto composite = Recognize(R"(graph (%x0, %x1) -> (%y0) {
      %c0 = Constant() {value: tensor float[] [4.0]}
      %t0 = Div(%x0, %c0)
      %t1 = Add(%x1, %t0)
      %y0 = Softmax(%t1) {axis: -1}
    })");
    REQUIRE(composite.has_value());
    CHECK(composite->kind == CompositeKind::kSoftmax);
    CHECK(composite->input_roles == std::vector<Role>{Role::kX, Role::kMask});
    REQUIRE(composite->scale.has_value());
    CHECK(*composite->scale == 4.0);
    CHECK(composite->scale_divides);
    CHECK(composite->axis == -1);
  }
  SECTION("Softmax(Where(cond, x · 0.125, -inf)) with the opset-11 default axis") {
    auto composite = Recognize(R"(graph (%x0, %x1) -> (%y0) {
      %c0 = Constant() {value: tensor float[] [0.125]}
      %t0 = Mul(%c0, %x0)
      %c1 = Constant() {value: tensor float[] [-inf]}
      %t1 = Where(%x1, %t0, %c1)
      %y0 = Softmax(%t1)
    })", 11);
    REQUIRE(composite.has_value());
    CHECK(composite->input_roles == std::vector<Role>{Role::kX, Role::kCondition});
    CHECK(*composite->scale == 0.125);
    CHECK_FALSE(composite->scale_divides);
    REQUIRE(composite->fill.has_value());
    CHECK(std::isinf(*composite->fill));
    CHECK_FALSE(composite->fill_when_true);
    CHECK(composite->axis == 1);  // Softmax-11's default
  }
}

TEST_CASE("activation bodies: GELU in its exporter orders and forms, SiLU", "[fused_pattern]") {
  SECTION("erf form, (x · bracket) · 0.5 with x / sqrt(2)") {
    auto composite = Recognize(ErfGeluBody("float", "1.4142135"));
    REQUIRE(composite.has_value());
    CHECK(composite->kind == CompositeKind::kGelu);
    CHECK(composite->gelu_form == GeluForm::kErf);
    CHECK(composite->input_roles == std::vector<Role>{Role::kX});
  }
  SECTION("erf form, (x · 0.5) · bracket with x · 0.70710677") {
    auto composite = Recognize(R"(graph (%x0) -> (%y0) {
      %c0 = Constant() {value: tensor float[] [0.5]}
      %t0 = Mul(%c0, %x0)
      %c1 = Constant() {value: tensor float[] [0.70710677]}
      %t1 = Mul(%x0, %c1)
      %t2 = Erf(%t1)
      %c2 = Constant() {value: tensor float[] [1.0]}
      %t3 = Add(%c2, %t2)
      %y0 = Mul(%t3, %t0)
    })");
    REQUIRE(composite.has_value());
    CHECK(composite->gelu_form == GeluForm::kErf);
  }
  SECTION("tanh form as GPT-2 exports it") {
    auto composite = Recognize(TanhGeluBody("float", "0.044715", "0.7978846"));
    REQUIRE(composite.has_value());
    CHECK(composite->gelu_form == GeluForm::kTanh);
  }
  SECTION("float16 exports: the constants as float16 holds them") {
    // 1.4140625 is sqrt(2) rounded to float16 (1.1e-4 off), 0.7978516 sqrt(2/pi), 0.04470825
    // 0.044715: each within half a float16 ulp, each far outside float32's 1e-6.
    auto erf = Recognize(ErfGeluBody("float16", "1.4140625"));
    REQUIRE(erf.has_value());
    CHECK(erf->gelu_form == GeluForm::kErf);
    auto tanh = Recognize(TanhGeluBody("float16", "0.04470825", "0.7978516"));
    REQUIRE(tanh.has_value());
    CHECK(tanh->gelu_form == GeluForm::kTanh);
  }
  SECTION("the Gelu op and SiLU") {
    auto gelu = Recognize("graph (%x0) -> (%y0) {\n %y0 = Gelu(%x0) {approximate: \"tanh\"}\n}", 20);
    REQUIRE(gelu.has_value());
    CHECK(gelu->standard_op);
    CHECK(gelu->gelu_form == GeluForm::kTanh);
    auto silu = Recognize("graph (%x0) -> (%y0) {\n %t0 = Sigmoid(%x0)\n %y0 = Mul(%t0, %x0)\n}");
    REQUIRE(silu.has_value());
    CHECK(silu->kind == CompositeKind::kSilu);
    CHECK(silu->input_roles == std::vector<Role>{Role::kX});
    CHECK(silu->alpha == 1.0);
  }
  SECTION("QuickGELU: a swish with its scale, multiplied or divided, in either order") {
    for (const char* scaled : {"%t1 = Mul(%c0, %x0)", "%t1 = Mul(%x0, %c0)", "%t1 = Div(%x0, %c0)"}) {
      INFO(scaled);
      const bool divides = std::string(scaled).find("Div") != std::string::npos;
      auto quick = Recognize(std::string("graph (%x0) -> (%y0) {\n %c0 = Constant() {value: tensor float[] [") +
                             (divides ? "0.5" : "1.702") + "]}\n " + scaled +
                             "\n %t2 = Sigmoid(%t1)\n %y0 = Mul(%x0, %t2)\n}");
      REQUIRE(quick.has_value());
      CHECK(quick->kind == CompositeKind::kSilu);
      CHECK(quick->input_roles == std::vector<Role>{Role::kX});
      CHECK(quick->alpha == Approx(divides ? 2.0 : 1.702).epsilon(1e-6));
    }
    // The outer Mul reads the scaled value: a plain SiLU of it, which leaves the scaling Mul
    // outside (so the body is not one composite).
    CHECK_FALSE(Recognize("graph (%x0) -> (%y0) {\n %c0 = Constant() {value: tensor float[] [1.702]}\n"
                          " %t1 = Mul(%c0, %x0)\n %t2 = Sigmoid(%t1)\n %y0 = Mul(%t1, %t2)\n}")
                     .has_value());
    // A scale per element is no swish alpha.
    CHECK_FALSE(Recognize("graph (%x0) -> (%y0) {\n %c0 = Constant() {value: tensor float[2] [1.702, 1.0]}\n"
                          " %t1 = Mul(%c0, %x0)\n %t2 = Sigmoid(%t1)\n %y0 = Mul(%x0, %t2)\n}")
                     .has_value());
  }
}

TEST_CASE("bodies that are not exactly one composite are refused", "[fused_pattern]") {
  SECTION("an extra op after the composite") {
    CHECK_FALSE(Recognize(R"(graph (%x0) -> (%y0) {
      %t0 = Sigmoid(%x0)
      %t1 = Mul(%x0, %t0)
      %y0 = Relu(%t1)
    })").has_value());
  }
  SECTION("an intermediate returned as a result") {
    CHECK_FALSE(Recognize(R"(graph (%x0) -> (%y0, %y1) {
      %y0 = Sigmoid(%x0)
      %y1 = Mul(%x0, %y0)
    })").has_value());
  }
  SECTION("a formal input the composite does not read") {
    CHECK_FALSE(Recognize(R"(graph (%x0, %x1) -> (%y0) {
      %t0 = Sigmoid(%x0)
      %y0 = Mul(%x0, %t0)
    })").has_value());
  }
  SECTION("a GELU constant 1% off, and x·sigmoid(y)") {
    CHECK_FALSE(Recognize(R"(graph (%x0) -> (%y0) {
      %c0 = Constant() {value: tensor float[] [1.4283557]}
      %t0 = Div(%x0, %c0)
      %t1 = Erf(%t0)
      %c1 = Constant() {value: tensor float[] [1.0]}
      %t2 = Add(%t1, %c1)
      %t3 = Mul(%x0, %t2)
      %c2 = Constant() {value: tensor float[] [0.5]}
      %y0 = Mul(%t3, %c2)
    })").has_value());
    CHECK_FALSE(Recognize("graph (%x0, %x1) -> (%y0) {\n %t0 = Sigmoid(%x1)\n %y0 = Mul(%t0, %x0)\n}").has_value());
  }
  SECTION("a LayerNorm whose epsilon is an input, not a constant") {
    CHECK_FALSE(Recognize(R"(graph (%x0, %x1) -> (%y0) {
      %t0 = ReduceMean(%x0) {axes: [-1]}
      %t1 = Sub(%x0, %t0)
      %t2 = Mul(%t1, %t1)
      %t3 = ReduceMean(%t2) {axes: [-1]}
      %t4 = Add(%t3, %x1)
      %t5 = Sqrt(%t4)
      %y0 = Div(%t1, %t5)
    })").has_value());
  }
}

TEST_CASE("near misses name the failed check", "[fused_pattern]") {
  auto near_miss_at = [](const std::string& body, const std::string& anchor_op, int64_t opset = 17) {
    auto model = ParseBody(body, opset);
    for (const auto& node : model->graph->nodes()) {
      if (node->op_type() == anchor_op) return MatchCompositeAt(*node, opset).near_miss;
    }
    FAIL("no " << anchor_op);
    return WhyNot();
  };
  CHECK(near_miss_at(R"(graph (%x0) -> (%y0) {
      %c0 = Constant() {value: tensor float[] [0.7]}
      %t0 = Mul(%x0, %c0)
      %t1 = Erf(%t0)
      %c1 = Constant() {value: tensor float[] [1.0]}
      %t2 = Add(%t1, %c1)
      %t3 = Mul(%x0, %t2)
      %c2 = Constant() {value: tensor float[] [0.5]}
      %y0 = Mul(%t3, %c2)
    })", "Erf") == "gelu: the erf argument is not x/sqrt(2)");
  // The float16 neighbour of sqrt(2) one ulp further out, and float16's value in a float32
  // constant: both more than the constant's own rounding away.
  for (auto [type, sqrt2] : {std::pair{"float16", "1.4150391"}, {"float", "1.4140625"}}) {
    CHECK(near_miss_at(ErfGeluBody(type, sqrt2), "Erf") == "gelu: the erf argument is not x/sqrt(2)");
  }
  CHECK(near_miss_at(R"(graph (%x0) -> (%y0) {
      %t0 = ReduceMean(%x0) {axes: [-1]}
      %t1 = Sub(%x0, %t0)
      %t2 = Mul(%t1, %t1)
      %t3 = ReduceMean(%t2) {axes: [-2]}
      %c0 = Constant() {value: tensor float[] [1e-05]}
      %t4 = Add(%t3, %c0)
      %t5 = Sqrt(%t4)
      %y0 = Div(%t1, %t5)
    })", "Sqrt") == "layernorm: the two ReduceMeans reduce different axes");
  CHECK(near_miss_at(R"(graph (%x0) -> (%y0) {
      %t0 = ReduceMean(%x0) {axes: [-1]}
      %t1 = Sub(%x0, %t0)
      %t2 = Mul(%t1, %t1)
      %t3 = ReduceMean(%t2) {axes: [-1]}
      %c0 = Constant() {value: tensor float[] [1e-05]}
      %t4 = Add(%t3, %c0)
      %t5 = Sqrt(%t4)
      %y0 = Div(%t1, %t5)
    })", "Sqrt", 18) == "layernorm: ReduceMean axes attribute from opset 18");
  CHECK(near_miss_at(R"(graph (%x0) -> (%y0, %y1) {
      %y1 = Sigmoid(%x0)
      %y0 = Mul(%x0, %y1)
    })", "Sigmoid") == "silu: a graph output is inside the pattern");
}

TEST_CASE("a mean of another tensor does not make a LayerNorm: the centered value is RMS-normalized",
          "[fused_pattern]") {
  // d = x - mean(z): mean(d²) and d / sqrt(..) are RMSNorm of d, whatever d is.
  auto model = ParseBody(R"(graph (%x, %z) -> (%y) {
    %m = ReduceMean(%z) {axes: [-1]}
    %d = Sub(%x, %m)
    %q = Mul(%d, %d)
    %v = ReduceMean(%q) {axes: [-1]}
    %eps = Constant() {value: tensor float[] [1e-05]}
    %e = Add(%v, %eps)
    %r = Sqrt(%e)
    %y = Div(%d, %r)
  })");
  for (const auto& node : model->graph->nodes()) {
    if (node->op_type() != "Sqrt") continue;
    CompositeSearch search = MatchCompositeAt(*node, 17);
    REQUIRE(search.match.has_value());
    CHECK(search.match->kind == CompositeKind::kRmsNorm);
    CHECK(search.match->x->name() == "d");
    CHECK(search.match->nodes.size() == 5);  // Mul, ReduceMean, Add, Sqrt, Div
  }
}
