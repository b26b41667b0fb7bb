// The tensor-core attention kernel (attention_mma_kernel.cc) in bf16 and fp16 without a GPU:
// generated for sm_90 and run on the host (host_kernel.h emulates mma.sync from the PTX ISA's
// fragment layouts), it must give the scalar kernel's numbers on the same inputs — the scalar
// kernel is checked against the CPU runtime on real exports (host_real_exports_test.cc), which
// holds no bf16 model. Sizes leave tails in both tiles (130 queries: 64 + 64 + 2; 130 keys:
// 4 × 32 + 2), and one query row is masked out entirely.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "attention_test_models.h"
#include "cpu_runtime/engine/inputs.h"
#include "cpu_runtime/engine/rt_tensor.h"
#include "cuda_runtime/codegen/attention_codegen.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "family_codegen_test_support.h"
#include "host_kernel.h"
#include "ir/float16.h"

namespace fusionopt::cuda {
namespace {

using family_test::BodyOf;
using family_test::ParseTyped;

std::string WithDtype(std::string text, const std::string& dtype) {
  for (size_t at = text.find("float"); at != std::string::npos; at = text.find("float", at + dtype.size())) {
    text.replace(at, 5, dtype);
  }
  return text;
}

// Every element of `row` of a [.., rows, columns] mask set to -inf.
void MaskRow(cpu::RtTensor& mask, int64_t row, int64_t columns, DataType dtype) {
  const float infinity = -std::numeric_limits<float>::infinity();
  const uint16_t bits = dtype == DataType::kFloat16 ? FloatToHalf(infinity) : FloatToBFloat16(infinity);
  auto* elements = reinterpret_cast<uint16_t*>(mask.raw());
  for (int64_t column = 0; column < columns; ++column) elements[row * columns + column] = bits;
}

std::vector<double> Run(const GeneratedProgram& program, const Graph& body, std::vector<cpu::RtTensor>& inputs) {
  REQUIRE(program.constant_inputs.empty());
  std::vector<void*> arguments;
  for (cpu::RtTensor& input : inputs) arguments.push_back(input.raw());
  const Value& output = *body.outputs()[0];
  cpu::RtTensor result = cpu::RtTensor::Allocate(output.dtype(), StaticDims(output));
  arguments.push_back(result.raw());
  test_support::ScratchDir scratch("host_tensor_core_attention");
  HostKernel kernel(program, scratch);
  kernel.LaunchCooperative(arguments);
  std::vector<double> values;
  for (int64_t i = 0; i < result.NumElements(); ++i) values.push_back(result.ValueAsDouble(i));
  return values;
}

}  // namespace

TEST_CASE("tensor-core attention gives the scalar kernel's numbers in fp16 and bf16",
          "[cuda][codegen][host][attention]") {
  const std::pair<const char*, double> dtypes[] = {{"float16", 1e-3}, {"bfloat16", 8e-3}};
  for (const auto& [dtype, tolerance] : dtypes) {
    DYNAMIC_SECTION(dtype) {
      auto model = ParseTyped(WithDtype(attention_test::HeadsFirst("[1,1,130,130]", "1,2,130,64"), dtype)
                                  .substr(attention_test::kHeader.size()));
      const Graph& body = BodyOf(*model);
      auto scalar = GenerateAttention(body, "scalar_kernel", CodegenTarget{75});
      auto tensor = GenerateAttention(body, "tensor_kernel", CodegenTarget{90});
      INFO(scalar.status().message() << tensor.status().message());
      REQUIRE((scalar.ok() && tensor.ok()));
      REQUIRE(scalar->description.rfind("flash attention (online softmax", 0) == 0);
      REQUIRE(tensor->description.rfind("flash attention on tensor cores", 0) == 0);

      std::vector<cpu::RtTensor> inputs;
      uint64_t seed = 3;
      for (const Value* input : body.inputs()) {
        auto tensor_value = cpu::RandomTensor(input->dtype(), StaticDims(*input), seed++);
        REQUIRE(tensor_value.ok());
        inputs.push_back(*tensor_value);
      }
      const DataType element = body.inputs()[3]->dtype();
      MaskRow(inputs[3], 5, 130, element);  // query 5 sees no key: both kernels give the softmax's NaN

      const std::vector<double> want = Run(*scalar, body, inputs);
      const std::vector<double> got = Run(*tensor, body, inputs);
      REQUIRE(want.size() == got.size());
      int64_t undefined = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("element " << i);
        if (std::isnan(want[i])) {
          REQUIRE(std::isnan(got[i]));
          ++undefined;
          continue;
        }
        REQUIRE(got[i] == Approx(want[i]).epsilon(tolerance).margin(tolerance));
      }
      CHECK(undefined == 2 * 64);  // the masked row of each head
    }
  }
}

}  // namespace fusionopt::cuda
