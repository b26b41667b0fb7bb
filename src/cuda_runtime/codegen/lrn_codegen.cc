#include "cuda_runtime/codegen/lrn_codegen.h"

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"

namespace fusionopt::cuda {

Result<GeneratedProgram> GenerateLrn(const Graph& typed_body, std::string_view name) {
  const Node* node = SingleOp(typed_body);
  if (node == nullptr || !IsDefaultDomain(*node) || node->op_type() != "LRN") return Unsupported("not an LRN node");
  const DataType dtype = node->input(0)->dtype();
  if (dtype != DataType::kFloat && dtype != DataType::kFloat16 && dtype != DataType::kBFloat16) {
    return Unsupported("LRN of " + std::string(NameOf(dtype)) + " (float, float16 and bfloat16 only)");
  }
  const std::vector<int64_t> dims = StaticDims(*node->input(0));
  if (dims.size() < 3) return Unsupported("LRN needs [N,C,spatial...]");
  const int64_t size = node->GetInt("size", 0);
  if (size < 1) return Unsupported("LRN without a positive size");
  const double alpha = node->GetFloat("alpha", 1e-4f), beta = node->GetFloat("beta", 0.75f),
               bias = node->GetFloat("bias", 1.0f);
  const int64_t channels = dims[1];
  const int64_t spatial = ElementCount(dims) / std::max<int64_t>(dims[0] * channels, 1);
  const int64_t total = ElementCount(dims);
  if (total == 0) return Unsupported("an empty tensor");
  const std::string index = IndexType(total);
  KernelParameters parameters(typed_body);
  const std::string x = parameters.InputPointer(0);
  const std::string before = std::to_string((size - 1) / 2), after = std::to_string(size / 2);
  const std::string c_count = std::to_string(channels), s_count = std::to_string(spatial);

  std::string code = "    const " + index + " s = i % " + s_count + ";\n";
  code += "    const " + index + " c = (i / " + s_count + ") % " + c_count + ";\n";
  code += "    const " + index + " plane0 = i - (c * " + s_count + ") - s;  // element (n, 0, 0)\n";
  code += "    const " + index + " first = c - " + before + " > 0 ? c - " + before + " : 0;\n";
  code += "    const " + index + " last = c + " + after + " < " + c_count + " - 1 ? c + " + after + " : " + c_count +
          " - 1;\n";
  code += "    float sum = 0.0f;\n";
  code += "    for (" + index + " k = first; k <= last; ++k) {\n";
  code += "      const float v = " + LoadAsCompute(dtype, x + "[plane0 + k * " + s_count + " + s]") + ";\n";
  code += "      sum += v * v;\n    }\n";
  code += "    const float value = " + LoadAsCompute(dtype, x + "[i]") + ";\n";
  code += "    const float scale = " + FloatLiteral(bias) + " + " + FloatLiteral(alpha / static_cast<double>(size)) +
          " * sum;\n";
  code += "    " + parameters.OutputPointer(0) + "[i] = " +
          StoreFromCompute(dtype, "value / powf(scale, " + FloatLiteral(beta) + ")") + ";\n";
  return GridStrideProgram(name, parameters, total, index, code,
                           "LRN across " + std::to_string(size) + " channels, one thread per element");
}

}  // namespace fusionopt::cuda
