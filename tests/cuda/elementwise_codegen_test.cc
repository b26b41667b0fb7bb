// The elementwise CUDA generator (cuda_runtime/codegen/elementwise_codegen.h), without a GPU:
// - structure: entry name, parameters in contract order, vector width, launch configuration,
//   broadcast index expressions, constants compiled in as literals;
// - every generated source compiles with NVRTC for sm_80 and sm_90;
// - numbers: the generated source is plain C++ apart from a few CUDA names, so it is compiled
//   with the host compiler against a small shim of those names (host_shim below), run as a
//   loop over blocks and threads on host memory, and compared with the CPU runtime on the same
//   random inputs. The shim needs nothing unusual from the generator.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <utility>

#include "cpu_runtime/engine/session.h"
#include "cuda_runtime/codegen/elementwise_codegen.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "cuda_runtime/codegen/generate.h"
#include "cuda_runtime/compile/nvrtc_compiler.h"
#include "ir/float16.h"
#include "shape_inference/shape_inference.h"
#include "text_format/text_format.h"
#include "host_kernel.h"
#include "scratch_dir.h"

namespace fusionopt::cuda {
namespace {

using cpu::NamedTensor;
using cpu::RtTensor;

// A one-graph model parsed from `graph` (IR text) with shapes inferred: the main graph is the
// typed body.
std::unique_ptr<Model> Body(const std::string& graph, int opset = 17) {
  auto model = ParseModel("ir_version 8\nopset \"\" " + std::to_string(opset) + "\n" + graph);
  INFO(model.status().message());
  REQUIRE(model.ok());
  InferShapes(*(*model)->graph, **model);
  return std::move(model).value();
}

GeneratedProgram Generate(const Model& model, const std::string& name = "kernel") {
  auto program = GenerateElementwise(*model.graph, name);
  INFO(program.status().message());
  REQUIRE(program.ok());
  return std::move(program).value();
}

void RequireCompiles(const GeneratedProgram& program) {
  for (int arch : {80, 90}) {
    CompileOptions options;
    options.sm_arch = arch;
    auto compiled = CompileCuda(program.source, program.name, options);
    INFO("sm_" << arch << "\n" << program.source << "\n" << compiled.status().message());
    REQUIRE(compiled.ok());
    REQUIRE(compiled->ptx.find(".entry " + program.kernels[0].entry) != std::string::npos);
    CHECK(compiled->log.empty());  // generated code compiles without warnings
  }
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- running generated kernels on the host: host_kernel.h

RtTensor RandomTensor(const Value& value, std::mt19937& random) {
  RtTensor tensor = RtTensor::Allocate(value.dtype(), StaticDims(value));
  std::uniform_real_distribution<float> real(-3.0f, 3.0f);
  std::uniform_int_distribution<int64_t> integer(-50, 50);
  for (int64_t i = 0; i < tensor.NumElements(); ++i) {
    switch (value.dtype()) {
      case DataType::kFloat: tensor.data<float>()[i] = real(random); break;
      case DataType::kFloat16: tensor.data<uint16_t>()[i] = FloatToHalf(real(random)); break;
      case DataType::kBFloat16: tensor.data<uint16_t>()[i] = FloatToBFloat16(real(random)); break;
      case DataType::kDouble: tensor.data<double>()[i] = real(random); break;
      case DataType::kUint8: tensor.data<uint8_t>()[i] = static_cast<uint8_t>(integer(random) + 50); break;
      case DataType::kInt64: tensor.data<int64_t>()[i] = integer(random); break;
      case DataType::kInt32: tensor.data<int32_t>()[i] = static_cast<int32_t>(integer(random)); break;
      case DataType::kBool: tensor.data<uint8_t>()[i] = integer(random) > 0; break;
      default: FAIL("no random values for " << NameOf(value.dtype()));
    }
  }
  return tensor;
}

// Tensors the host kernel reads or writes, `offset` elements into their buffers (a view at an
// offset: what the kernel's alignment check is for).
struct HostBuffers {
  std::vector<RtTensor> storage;
  std::vector<void*> arguments;
  void Add(DataType dtype, const std::vector<int64_t>& dims, int64_t offset, const void* contents) {
    int64_t count = 1;
    for (int64_t dim : dims) count *= dim;
    RtTensor buffer = RtTensor::Allocate(dtype, {count + offset});
    const uint64_t element = ByteSizeOf(dtype, 1);
    if (contents != nullptr) std::memcpy(buffer.raw() + offset * element, contents, ByteSizeOf(dtype, count));
    arguments.push_back(buffer.raw() + offset * element);
    storage.push_back(std::move(buffer));
  }
};

void RequireClose(const RtTensor& expected, const uint8_t* actual_bytes, const std::string& name) {
  RtTensor actual = RtTensor::Allocate(expected.dtype(), expected.dims());
  std::memcpy(actual.raw(), actual_bytes, expected.nbytes());
  const bool half = expected.dtype() == DataType::kFloat16 || expected.dtype() == DataType::kBFloat16;
  const double rtol = half ? 2e-3 : 1e-4, atol = half ? 2e-3 : 1e-5;
  int mismatches = 0;
  for (int64_t i = 0; i < expected.NumElements(); ++i) {
    const double want = expected.ValueAsDouble(i), got = actual.ValueAsDouble(i);
    const bool same = (std::isnan(want) && std::isnan(got)) || std::abs(want - got) <= atol + rtol * std::abs(want);
    if (!same && mismatches++ < 5) UNSCOPED_INFO(name << "[" << i << "]: CPU " << want << ", generated " << got);
  }
  REQUIRE(mismatches == 0);
}

// Runs `model`'s graph on the CPU runtime and as the generated kernel on the host, on the same
// random inputs, and compares every output; `offset` shifts every buffer by that many elements.
void CompareWithCpu(const Model& model, const GeneratedProgram& program, int64_t offset = 0, uint32_t seed = 7) {
  std::mt19937 random(seed);
  std::vector<NamedTensor> feeds;
  HostBuffers buffers;
  for (const Value* input : model.graph->inputs()) {
    RtTensor tensor = RandomTensor(*input, random);
    buffers.Add(tensor.dtype(), tensor.dims(), offset, tensor.raw());
    feeds.push_back({input->name(), tensor});
  }
  for (const std::string& name : program.constant_inputs) {
    const TensorPtr& constant = model.graph->FindValue(name)->initializer();
    buffers.Add(constant->dtype(), constant->dims(), offset, constant->bytes().data());
  }
  const size_t first_output = buffers.arguments.size();
  for (const Value* output : model.graph->outputs()) buffers.Add(output->dtype(), StaticDims(*output), offset, nullptr);

  auto session = cpu::Session::Create(model);
  INFO(session.status().message());
  REQUIRE(session.ok());
  auto expected = (*session)->Run(feeds);
  INFO(expected.status().message());
  REQUIRE(expected.ok());

  test_support::ScratchDir scratch("host_kernel");
  HostKernel kernel(program, scratch);
  kernel.Launch(buffers.arguments);
  for (size_t k = 0; k < expected->size(); ++k) {
    RequireClose((*expected)[k].tensor, static_cast<const uint8_t*>(buffers.arguments[first_output + k]),
                 (*expected)[k].name);
  }
}

TEST_CASE("same-shape Add: direct operands, 4-wide vectors, contract-order parameters", "[cuda][codegen]") {
  auto model = Body("graph t (float[4,256] %a, float[4,256] %b) -> (float[4,256] %y) {\n  %y = Add(%a, %b)\n}\n");
  GeneratedProgram program = Generate(*model, "add.kernel");
  REQUIRE(program.name == "add_kernel");
  REQUIRE(program.kernels.size() == 1);
  REQUIRE(program.kernels[0].entry == "add_kernel");
  REQUIRE(program.kernels[0].block == std::array<uint32_t, 3>{256, 1, 1});
  REQUIRE(program.kernels[0].grid == std::array<uint32_t, 3>{1, 1, 1});  // 1024 / 4 per vector / 256
  REQUIRE(program.constant_inputs.empty());
  REQUIRE(program.workspace_bytes == 0);
  REQUIRE(Contains(program.description, "4-wide vectors"));
  REQUIRE(Contains(program.source, "add_kernel(const float* __restrict__ in0, const float* __restrict__ in1, float* out0)"));
  REQUIRE(Contains(program.source, "fo_pack<float, 4>"));
  REQUIRE(Contains(program.source, "fo_aligned(in0, 16) && fo_aligned(in1, 16) && fo_aligned(out0, 16)"));
  REQUIRE(Contains(program.source, "const unsigned int count = 1024;"));
  RequireCompiles(program);
  CompareWithCpu(*model, program);
  CompareWithCpu(*model, program, /*offset=*/1);  // unaligned views take the scalar path
}

TEST_CASE("launch configuration: blocks follow the element count up to the cap", "[cuda][codegen]") {
  auto medium = Body("graph t (float[1024,1024] %a) -> (float[1024,1024] %y) {\n  %y = Neg(%a)\n}\n");
  REQUIRE(Generate(*medium).kernels[0].grid[0] == 1024);  // 2^20 / 4 / 256
  auto odd = Body("graph t (float[3,5] %a) -> (float[3,5] %y) {\n  %y = Neg(%a)\n}\n");
  GeneratedProgram small = Generate(*odd);
  REQUIRE(small.kernels[0].grid[0] == 1);
  REQUIRE(Contains(small.source, "scalar_begin = vectors * 4"));  // 15 = 3 vectors + a 3-element tail
  CompareWithCpu(*odd, small);
  auto huge = Body("graph t (float[8192,4096] %a) -> (float[8192,4096] %y) {\n  %y = Neg(%a)\n}\n");
  REQUIRE(Generate(*huge).kernels[0].grid[0] == kElementwiseMaxBlocks);
  auto beyond_int32 = Body("graph t (float[3,1073741824] %a) -> (float[3,1073741824] %y) {\n  %y = Neg(%a)\n}\n");
  GeneratedProgram wide = Generate(*beyond_int32);
  REQUIRE(Contains(wide.source, "const unsigned long long count = 3221225472ULL;"));
  REQUIRE(Contains(wide.description, "64-bit indexing"));
  REQUIRE(Contains(Generate(*medium).description, "32-bit indexing"));
  RequireCompiles(wide);
}

TEST_CASE("broadcasts are folded into index expressions", "[cuda][codegen]") {
  auto trailing = Body("graph t (float[2,3,4] %a, float[4] %b) -> (float[2,3,4] %y) {\n  %y = Add(%a, %b)\n}\n");
  GeneratedProgram add = Generate(*trailing);
  REQUIRE(Contains(add.source, "in1[(i % 4)]"));
  REQUIRE(Contains(add.description, "1 broadcast operands"));
  RequireCompiles(add);
  CompareWithCpu(*trailing, add);

  auto both = Body("graph t (float[2,1,4] %a, float[3,1] %b) -> (float[2,3,4] %y) {\n  %y = Mul(%a, %b)\n}\n");
  GeneratedProgram mul = Generate(*both);
  REQUIRE(Contains(mul.source, "in0[(i % 4) + (i / 12) * 4]"));
  REQUIRE(Contains(mul.source, "in1[((i / 4) % 3)]"));
  REQUIRE_FALSE(Contains(mul.source, "fo_pack<float, 4> v_in"));  // no direct operand to vector-load
  RequireCompiles(mul);
  CompareWithCpu(*both, mul);
}

constexpr const char* kGeluChain = R"(graph t (%T[8,96] %x) -> (%T[8,96] %y)
  init %T[] %sqrt2 = [1.4142135623730951]
  init %T[] %one = [1.0]
  init %T[] %half = [0.5]
{
  %d = Div(%x, %sqrt2)
  %e = Erf(%d)
  %p = Add(%e, %one)
  %m = Mul(%x, %p)
  %y = Mul(%m, %half)
}
)";

std::string WithType(std::string text, const std::string& type) {
  for (size_t at; (at = text.find("%T")) != std::string::npos;) text.replace(at, 2, type);
  return text;
}

TEST_CASE("a GELU-erf chain in float and float16", "[cuda][codegen]") {
  auto single = Body(WithType(kGeluChain, "float"));
  GeneratedProgram program = Generate(*single, "gelu");
  REQUIRE(Contains(program.source, "erff("));
  REQUIRE(Contains(program.source, "0x1.6a09e6p+0f"));  // sqrt(2) rounded to float, exactly
  REQUIRE(Contains(program.source, "0x1p-1f"));         // 0.5
  REQUIRE_FALSE(Contains(program.source, "__expf"));    // no fast-math intrinsics
  RequireCompiles(program);
  CompareWithCpu(*single, program);

  auto half = Body(WithType(kGeluChain, "float16"));
  GeneratedProgram half_program = Generate(*half, "gelu_half");
  REQUIRE(Contains(half_program.source, "fo_pack<__half, 8>"));
  REQUIRE(Contains(half_program.source, "__half2float(v_in0.v[j])"));
  REQUIRE(Contains(half_program.source, "fo_round_half(erff("));  // fp32 math, rounded like the CPU engine
  REQUIRE(Contains(half_program.description, "8-wide vectors"));
  RequireCompiles(half_program);
  CompareWithCpu(*half, half_program);
}

TEST_CASE("Where with a broadcast bool condition", "[cuda][codegen]") {
  auto model = Body(R"(graph t (bool[4,1] %c, float[4,64] %a, float[64] %b) -> (float[4,64] %y) {
  %y = Where(%c, %a, %b)
}
)");
  GeneratedProgram program = Generate(*model);
  REQUIRE(Contains(program.source, "const bool* __restrict__ in0"));
  REQUIRE(Contains(program.source, "in0[(i / 64)]"));
  RequireCompiles(program);
  CompareWithCpu(*model, program);
}

TEST_CASE("a body with two outputs and a larger constant read through a pointer", "[cuda][codegen]") {
  auto model = Body(R"(graph t (float[6,4] %x) -> (float[6,4] %y, float[6,4] %s)
  init float[4] %w = [0.5, -1.0, 2.0, 0.25]
  init float[] %k = [0.1]
{
  %s = Mul(%x, %w)
  %t = Add(%s, %k)
  %y = Relu(%t)
}
)");
  GeneratedProgram program = Generate(*model);
  REQUIRE(program.constant_inputs == std::vector<std::string>{"w"});
  REQUIRE(Contains(program.source,
                   "(const float* __restrict__ in0, const float* __restrict__ constant0, float* out0, float* out1)"));
  REQUIRE(Contains(program.source, "0x1.99999ap-4f"));  // 0.1f exactly, compiled in
  REQUIRE(Contains(program.source, "constant0[(i % 4)]"));
  RequireCompiles(program);
  CompareWithCpu(*model, program);
}

TEST_CASE("int64 arithmetic keeps the CPU engine's integer rules", "[cuda][codegen]") {
  auto model = Body(R"(graph t (int64[4,32] %a, int64[4,32] %b) -> (int64[4,32] %q, int64[4,32] %r, bool[4,32] %l)
  init int64[] %seven = [7]
{
  %p = Mul(%a, %seven)
  %q = Div(%p, %b)
  %r = Mod(%p, %b)
  %l = Less(%a, %b)
}
)");
  GeneratedProgram program = Generate(*model);
  REQUIRE(Contains(program.source, "((long long)7LL)"));
  REQUIRE(Contains(program.source, "fo_python_mod"));
  REQUIRE(Contains(program.description, "2-wide vectors"));  // 16 bytes of int64
  RequireCompiles(program);
  CompareWithCpu(*model, program);
}

TEST_CASE("casts, clips and activations match the CPU runtime", "[cuda][codegen]") {
  auto model = Body(R"(graph t (float[2,64] %x, int32[2,64] %n) -> (float16[2,64] %h, float[2,64] %z, int32[2,64] %m)
  init float[] %lo = [-1.0]
  init float[] %hi = [1.5]
{
  %c = Clip(%x, %lo, %hi)
  %s = Sigmoid(%x)
  %g = Gelu(%x) {approximate: "tanh"}
  %sum = Sum(%c, %s, %g)
  %h = Cast(%sum) {to: 10}
  %f = Cast(%n) {to: 1}
  %hs = HardSigmoid(%f)
  %z = Max(%hs, %c)
  %m = Abs(%n)
}
)",
                    20);  // Gelu is opset 20
  GeneratedProgram program = Generate(*model);
  RequireCompiles(program);
  CompareWithCpu(*model, program);
}

TEST_CASE("bfloat16, double and narrow integers", "[cuda][codegen]") {
  auto model = Body(R"(graph t (bfloat16[4,32] %b, double[4,32] %d, uint8[4,32] %u) -> (bfloat16[4,32] %y, double[4,32] %e, uint8[4,32] %w)
  init bfloat16[32] %scale = [1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]
  init uint8[] %three = [3]
{
  %m = Mul(%b, %scale)
  %y = Tanh(%m)
  %a = Abs(%d)
  %e = Sqrt(%a)
  %w = Mul(%u, %three)
}
)");
  GeneratedProgram program = Generate(*model);
  REQUIRE(Contains(program.source, "fo_round_bfloat16(tanhf("));
  REQUIRE(Contains(program.source, "sqrt(t"));  // double math for double values
  REQUIRE(Contains(program.source, "((unsigned char)3LL)"));
  REQUIRE(Contains(program.description, "2-wide vectors"));  // 16 bytes of double
  RequireCompiles(program);
  CompareWithCpu(*model, program);  // uint8 products wrap around like the CPU engine's
}

TEST_CASE("bodies outside the elementwise family are Unsupported with the reason", "[cuda][codegen]") {
  auto matmul = Body("graph t (float[2,3] %a, float[3,4] %b) -> (float[2,4] %y) {\n  %y = MatMul(%a, %b)\n}\n");
  auto refused = GenerateElementwise(*matmul->graph, "k");
  REQUIRE(refused.status().code() == ErrorCode::kUnsupported);
  REQUIRE(Contains(refused.status().message(), "MatMul"));
  auto through_entry = GenerateKernel(*matmul->graph, "k");
  REQUIRE(through_entry.status().code() == ErrorCode::kUnsupported);
  REQUIRE(Contains(through_entry.status().message(), "MatMul"));

  auto dynamic = Body("graph t (float[N,4] %a) -> (float[N,4] %y) {\n  %y = Relu(%a)\n}\n");
  auto symbolic = GenerateElementwise(*dynamic->graph, "k");
  REQUIRE(symbolic.status().code() == ErrorCode::kUnsupported);
  REQUIRE(Contains(symbolic.status().message(), "'a'"));

  auto shapes = Body("graph t (float[2,4] %a, float[4] %b) -> (float[2,4] %y, float[4] %z) {\n"
                     "  %y = Add(%a, %b)\n  %z = Neg(%b)\n}\n");
  auto different = GenerateElementwise(*shapes->graph, "k");
  REQUIRE(different.status().code() == ErrorCode::kUnsupported);
  REQUIRE(Contains(different.status().message(), "outputs of different shapes"));

  auto float_mod = Body("graph t (float[4] %a, float[4] %b) -> (float[4] %y) {\n  %y = Mod(%a, %b)\n}\n");
  auto mod = GenerateElementwise(*float_mod->graph, "k");
  REQUIRE(mod.status().code() == ErrorCode::kUnsupported);
  REQUIRE(Contains(mod.status().message(), "Mod"));
}

TEST_CASE("CIdentifier makes names valid C identifiers", "[cuda][codegen]") {
  REQUIRE(CIdentifier("FusedGelu_3") == "FusedGelu_3");
  REQUIRE(CIdentifier("/encoder/layer.0/Add") == "_encoder_layer_0_Add");
  REQUIRE(CIdentifier("3x") == "k_3x");
  REQUIRE(CIdentifier("") == "k_");
}

}  // namespace
}  // namespace fusionopt::cuda
