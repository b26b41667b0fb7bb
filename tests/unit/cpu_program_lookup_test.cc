// A value inside an elementwise program that depends on one 8-bit register alone (an input, or
// what a QuantizeLinear inside the program rounds) is read from that register's table
// (fused/program.h): the program holds kLookup instead of the ops, and its results are bit for
// bit those of the ops run one by one.
#include <algorithm>

#include "cpu_fused_test_helpers.h"
#include "cpu_runtime/fused/program.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::fused_test;

namespace {

// The outlined function's body as the fused elementwise kernel plans it, compiled for the
// dtypes of the call's arguments.
const ew::Program* Compile(const Model& model, std::unique_ptr<FusedProgram>& program) {
  REQUIRE(model.functions.size() == 1);
  const Function& function = *model.functions.front();
  const Graph& body = *function.body;
  std::vector<const Node*> nodes;
  for (const auto& node : body.nodes()) nodes.push_back(node.get());
  const std::vector<const Value*> inputs(body.inputs().begin(), body.inputs().end());
  const std::vector<const Value*> outputs(body.outputs().begin(), body.outputs().end());
  PrepareContext context{model};
  context.calls = {&function};
  program = FusedProgram::Plan(nodes, inputs, outputs, context);
  REQUIRE(program != nullptr);
  // The body's formal inputs are untyped: the call's arguments give the dtypes.
  const auto call = std::find_if(model.graph->nodes().begin(), model.graph->nodes().end(),
                                 [&](const auto& node) { return node->op_type() == function.name; });
  REQUIRE(call != model.graph->nodes().end());
  std::vector<DataType> dtypes;
  for (size_t index : program->used_inputs()) dtypes.push_back((*call)->input(index)->dtype());
  return program->Compiled(dtypes);
}

size_t Count(const ew::Program& program, ew::Op op) {
  return static_cast<size_t>(std::count_if(program.code.begin(), program.code.end(),
                                           [&](const ew::Instr& instr) { return instr.op == op; }));
}

// GELU after a quantized bias add (BERT's QDQ intermediate layer), and a Tanh after an int8
// rounding of the same sum: each output a lookup of its own 8-bit step.
const char* kTwoTails = R"(
ir_version 10
opset "" 21
graph main (uint8[4,96] %x, uint8[96] %bias) -> (uint8[4,96] %gelu, float[4,96] %tanh)
  init float[] %xs = [0.04]
  init uint8[] %xz = [120]
  init float[] %bs = [0.01]
  init uint8[] %bz = [128]
  init float[] %ss = [0.05]
  init uint8[] %sz = [100]
  init int8[] %iz = [-3]
  init float[] %sqrt2 = [1.4142135]
  init float[] %es = [0.008]
  init float[] %one = [1.0]
  init float[] %half = [0.5]
  init float[] %gs = [0.03]
{
  %xd = DequantizeLinear(%x, %xs, %xz) @n_xd
  %bd = DequantizeLinear(%bias, %bs, %bz) @n_bd
  %sum = Add(%xd, %bd) @n_sum
  %sq = QuantizeLinear(%sum, %ss, %sz) @n_sq
  %sd = DequantizeLinear(%sq, %ss, %sz) @n_sd
  %div = Div(%sd, %sqrt2) @n_div
  %erf = Erf(%div) @n_erf
  %eq = QuantizeLinear(%erf, %es, %sz) @n_eq
  %ed = DequantizeLinear(%eq, %es, %sz) @n_ed
  %plus = Add(%ed, %one) @n_plus
  %mul = Mul(%sd, %plus) @n_mul
  %g = Mul(%mul, %half) @n_g
  %gelu = QuantizeLinear(%g, %gs, %sz) @n_gelu
  %iq = QuantizeLinear(%sum, %ss, %iz) @n_iq
  %id = DequantizeLinear(%iq, %ss, %iz) @n_id
  %tanh = Tanh(%id) @n_tanh
}
)";

}  // namespace

TEST_CASE("a tail that depends on one 8-bit step alone is a lookup: bit for bit the ops' values",
          "[cpu][quantized]") {
  auto outlined = Outlined(kTwoTails, {"n_xd", "n_bd", "n_sum", "n_sq", "n_sd", "n_div", "n_erf", "n_eq", "n_ed", "n_plus",
                                          "n_mul", "n_g", "n_gelu", "n_iq", "n_id", "n_tanh"});
  std::unique_ptr<FusedProgram> program;
  const ew::Program* compiled = Compile(*outlined, program);
  REQUIRE(compiled != nullptr);
  // Both tails (one after a uint8 step, one after an int8 step) are lookups; what is left
  // computes the sum and its two roundings.
  CHECK(Count(*compiled, ew::Op::kLookup) == 2);
  CHECK(compiled->tables.size() == 2);
  CHECK(Count(*compiled, ew::Op::kErf) == 0);
  CHECK(Count(*compiled, ew::Op::kTanh) == 0);
  CHECK(Count(*compiled, ew::Op::kQuantize) == 2);

  // Every byte of x against every byte of the bias, so each table entry is read.
  RtTensor x = RtTensor::Allocate(DataType::kUint8, {4, 96});
  for (int64_t i = 0; i < x.NumElements(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(i * 7 % 256);
  const std::vector<NamedTensor> feeds = {{"x", x}, {"bias", Bytes({96}, 5)}};
  const Outcome fused = Run(*outlined, feeds);
  const Outcome op_by_op = Run(*outlined, feeds, false);
  RequireIdentical(fused.outputs, op_by_op.outputs);
}

TEST_CASE("a value inside the program that depends on one 8-bit register is a lookup; cheap or mixed ones are computed",
          "[cpu][quantized]") {
  // The rounded sum's DequantizeLinear alone is cheap (computed); its Exp depends on the rounded
  // sum alone (a lookup) though the product after it reads x as well; SiLU of the 8-bit input
  // y, as SwiGLU's gate, is a lookup before the product with x; Exp(x + y), with no 8-bit
  // value between, is computed.
  const std::string text = R"(
ir_version 10
opset "" 21
graph main (uint8[4,32] %x, uint8[4,32] %y) -> (float[4,32] %cheap, float[4,32] %mixed, uint8[4,32] %gated, float[4,32] %plain)
  init float[] %s = [0.04]
  init uint8[] %z = [120]
  init float[] %gs = [0.02]
{
  %xd = DequantizeLinear(%x, %s, %z) @n_xd
  %yd = DequantizeLinear(%y, %s, %z) @n_yd
  %sum = Add(%xd, %yd) @n_sum
  %sq = QuantizeLinear(%sum, %s, %z) @n_sq
  %cheap = DequantizeLinear(%sq, %s, %z) @n_cheap
  %e = Exp(%cheap) @n_e
  %mixed = Mul(%e, %xd) @n_mixed
  %sig = Sigmoid(%yd) @n_sig
  %silu = Mul(%yd, %sig) @n_silu
  %prod = Mul(%silu, %xd) @n_prod
  %gated = QuantizeLinear(%prod, %gs, %z) @n_gated
  %plain = Exp(%sum) @n_plain
}
)";
  auto outlined = Outlined(text, {"n_xd", "n_yd", "n_sum", "n_sq", "n_cheap", "n_e", "n_mixed", "n_sig", "n_silu",
                                  "n_prod", "n_gated", "n_plain"});
  std::unique_ptr<FusedProgram> program;
  const ew::Program* compiled = Compile(*outlined, program);
  REQUIRE(compiled != nullptr);
  CHECK(Count(*compiled, ew::Op::kLookup) == 2);  // Exp(cheap) and SiLU(y)
  CHECK(compiled->tables.size() == 2);
  CHECK(Count(*compiled, ew::Op::kExp) == 1);     // Exp(x + y)
  CHECK(Count(*compiled, ew::Op::kSigmoid) == 0);
  CHECK(Count(*compiled, ew::Op::kSwish) == 0);

  const std::vector<NamedTensor> feeds = {{"x", Bytes({4, 32}, 1)}, {"y", Bytes({4, 32}, 2)}};
  RequireIdentical(Run(*outlined, feeds).outputs, Run(*outlined, feeds, false).outputs);
}
