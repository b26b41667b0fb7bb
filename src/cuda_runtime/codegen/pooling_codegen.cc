// MaxPool / AveragePool (2-D windows) and GlobalMaxPool / GlobalAveragePool (pooling_codegen.h).
#include "cuda_runtime/codegen/pooling_codegen.h"

#include <algorithm>
#include <array>

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"

namespace fusionopt::cuda {
namespace {

constexpr int kGlobalWarpsPerBlock = 8;

struct Window {
  std::array<int64_t, 2> input{}, output{}, kernel{}, stride{1, 1}, dilation{1, 1}, pad_begin{}, pad_end{};
};

bool IsPoolFloat(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

// The dtype's lowest finite value: a MaxPool window with no tap in the input.
std::string LowestLiteral(DataType dtype) {
  if (dtype == DataType::kFloat16) return "-65504.0f";
  if (dtype == DataType::kBFloat16) return "__int_as_float(0xff7f0000)";
  return "-3.40282347e+38f";
}

Result<std::array<int64_t, 2>> Pair(const Node& node, const char* name, int64_t fallback) {
  std::array<int64_t, 2> out = {fallback, fallback};
  if (auto values = node.GetInts(name)) {
    if (values->size() != 2) return Unsupported(std::string(name) + " must have 2 entries (2-D windows)");
    out = {(*values)[0], (*values)[1]};
  }
  return out;
}

Result<Window> WindowOf(const Node& node, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() != 4 || out.size() != 4) return Unsupported(node.op_type() + " of other than 2-D windows");
  Window window;
  window.input = {in[2], in[3]};
  window.output = {out[2], out[3]};
  FUSIONOPT_ASSIGN_OR_RETURN(window.kernel, Pair(node, "kernel_shape", 0));
  FUSIONOPT_ASSIGN_OR_RETURN(window.stride, Pair(node, "strides", 1));
  FUSIONOPT_ASSIGN_OR_RETURN(window.dilation, Pair(node, "dilations", 1));
  const std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> pads = node.GetInts("pads").value_or(std::vector<int64_t>(4, 0));
    if (pads.size() != 4) return Unsupported("pads must have 4 entries (2-D windows)");
    window.pad_begin = {pads[0], pads[1]};
    window.pad_end = {pads[2], pads[3]};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t a = 0; a < 2; ++a) {
      const int64_t extent = (window.kernel[a] - 1) * window.dilation[a] + 1;
      const int64_t total = std::max<int64_t>(0, (window.output[a] - 1) * window.stride[a] + extent - window.input[a]);
      window.pad_begin[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      window.pad_end[a] = total - window.pad_begin[a];
    }
  } else if (auto_pad != "VALID") {
    return Unsupported("auto_pad '" + auto_pad + "'");
  }
  for (size_t a = 0; a < 2; ++a) {
    if (window.kernel[a] <= 0 || window.stride[a] <= 0 || window.dilation[a] <= 0) {
      return Unsupported("kernel_shape, strides and dilations must be positive");
    }
  }
  return window;
}

// The loop body for output element i: coordinates, window taps, the result.
std::string WindowBody(const Window& w, bool max, bool count_include_pad, DataType dtype) {
  auto n = [](int64_t value) { return std::to_string(value); };
  std::string code;
  code += "    const int ow = (int)(i % " + n(w.output[1]) + ");\n";
  code += "    const int oh = (int)((i / " + n(w.output[1]) + ") % " + n(w.output[0]) + ");\n";
  code += "    const long long plane = (long long)(i / " + n(w.output[0] * w.output[1]) + ");\n";
  code += "    const long long base = plane * " + n(w.input[0] * w.input[1]) + "LL;\n";
  code += "    float result = 0.0f;\n    int count = 0;\n";
  code += "#pragma unroll\n    for (int kh = 0; kh < " + n(w.kernel[0]) + "; ++kh) {\n";
  code += "      const int y = oh * " + n(w.stride[0]) + " - " + n(w.pad_begin[0]) + " + kh * " + n(w.dilation[0]) + ";\n";
  code += "      if (y < 0 || y >= " + n(w.input[0]) + ") continue;\n";
  code += "#pragma unroll\n      for (int kw = 0; kw < " + n(w.kernel[1]) + "; ++kw) {\n";
  code += "        const int x = ow * " + n(w.stride[1]) + " - " + n(w.pad_begin[1]) + " + kw * " + n(w.dilation[1]) +
          ";\n";
  code += "        if (x < 0 || x >= " + n(w.input[1]) + ") continue;\n";
  code += "        const float value = " + LoadAsCompute(dtype, "in0[base + y * " + n(w.input[1]) + " + x]") + ";\n";
  code += "        ++count;\n";
  code += max ? "        if (count == 1 || value > result) result = value;\n" : "        result += value;\n";
  code += "      }\n    }\n";
  if (max) {
    code += "    if (count == 0) result = " + LowestLiteral(dtype) + ";\n";
  } else if (count_include_pad) {
    // Taps inside the padded extent, per axis: [-pad_begin, input + pad_end).
    code += "    int padded_h = 0, padded_w = 0;\n";
    code += "    for (int kh = 0; kh < " + n(w.kernel[0]) + "; ++kh) { const int y = oh * " + n(w.stride[0]) + " - " +
            n(w.pad_begin[0]) + " + kh * " + n(w.dilation[0]) + "; padded_h += y >= " + n(-w.pad_begin[0]) +
            " && y < " + n(w.input[0] + w.pad_end[0]) + "; }\n";
    code += "    for (int kw = 0; kw < " + n(w.kernel[1]) + "; ++kw) { const int x = ow * " + n(w.stride[1]) + " - " +
            n(w.pad_begin[1]) + " + kw * " + n(w.dilation[1]) + "; padded_w += x >= " + n(-w.pad_begin[1]) +
            " && x < " + n(w.input[1] + w.pad_end[1]) + "; }\n";
    code += "    const int divisor = padded_h * padded_w;\n";
    code += "    result = divisor > 0 ? result / (float)divisor : 0.0f;\n";
  } else {
    code += "    result = count > 0 ? result / (float)count : 0.0f;\n";
  }
  code += "    out0[i] = " + StoreFromCompute(dtype, "result") + ";\n";
  return code;
}

Result<GeneratedProgram> WindowPool(const Graph& body, const Node& node, bool max, std::string_view name) {
  if (node.outputs().size() > 1 && node.output(1) != nullptr) return Unsupported("MaxPool's Indices output");
  const std::vector<int64_t> in = StaticDims(*node.input(0)), out = StaticDims(*node.output(0));
  FUSIONOPT_ASSIGN_OR_RETURN(Window window, WindowOf(node, in, out));
  const DataType dtype = node.input(0)->dtype();
  const int64_t total = ElementCount(out);
  if (total == 0) return Unsupported("an empty output needs no kernel");
  KernelParameters parameters(body);
  const std::string index_type = IndexType(std::max(total, ElementCount(in)));
  const bool include_pad = !max && node.GetInt("count_include_pad", 0) != 0;
  return GridStrideProgram(name, parameters, total, index_type, WindowBody(window, max, include_pad, dtype),
                           std::string(max ? "max" : "average") + " pool " + std::to_string(window.kernel[0]) + "x" +
                               std::to_string(window.kernel[1]) + ", one thread per output, grid-stride");
}

Result<GeneratedProgram> GlobalPool(const Graph& body, const Node& node, bool max, std::string_view name) {
  const std::vector<int64_t> in = StaticDims(*node.input(0));
  if (in.size() < 3) return Unsupported("a global pool needs [N,C,spatial...]");
  const int64_t planes = in[0] * in[1];
  const int64_t size = ElementCount(in) / std::max<int64_t>(planes, 1);
  if (planes == 0 || size == 0) return Unsupported("an empty tensor");
  const int64_t blocks = (planes + kGlobalWarpsPerBlock - 1) / kGlobalWarpsPerBlock;
  if (blocks > 0x7fffffffLL) return Unsupported("more planes than one grid holds");
  const DataType dtype = node.input(0)->dtype();
  KernelParameters parameters(body);
  const std::string entry = KernelIdentifier(name);
  std::string code = "\nextern \"C\" __global__ void __launch_bounds__(" + std::to_string(kGlobalWarpsPerBlock * 32) +
                     ") " + entry + "(" + parameters.Declaration() + ") {\n";
  code += "  const long long plane = (long long)blockIdx.x * " + std::to_string(kGlobalWarpsPerBlock) +
          " + (threadIdx.x >> 5);\n";
  code += "  if (plane >= " + std::to_string(planes) + "LL) return;\n";
  code += "  const int lane = threadIdx.x & 31;\n";
  code += "  float result = " + std::string(max ? "__int_as_float(0xff800000)" : "0.0f") + ";\n";
  code += "  for (long long k = lane; k < " + std::to_string(size) + "LL; k += 32) {\n";
  code += "    const float value = " + LoadAsCompute(dtype, "in0[plane * " + std::to_string(size) + "LL + k]") + ";\n";
  code += max ? "    result = value > result ? value : result;\n" : "    result += value;\n";
  code += "  }\n#pragma unroll\n  for (int offset = 16; offset > 0; offset >>= 1) {\n";
  code += "    const float other = __shfl_xor_sync(0xffffffffu, result, offset);\n";
  code += max ? "    result = other > result ? other : result;\n" : "    result += other;\n";
  code += "  }\n";
  if (!max) code += "  result = result / " + std::to_string(size) + ".0f;\n";
  code += "  if (lane == 0) out0[plane] = " + StoreFromCompute(dtype, "result") + ";\n}\n";
  GeneratedKernel kernel;
  kernel.entry = entry;
  kernel.grid = {static_cast<uint32_t>(blocks), 1, 1};
  kernel.block = {kGlobalWarpsPerBlock * 32, 1, 1};
  return SingleKernelProgram(name, std::string(SourcePrelude()) + code,
                 std::string("global ") + (max ? "max" : "average") + " pool, one warp per plane", kernel, parameters);
}

}  // namespace

Result<GeneratedProgram> GeneratePooling(const Graph& typed_body, std::string_view name) {
  const Node* node = SingleOp(typed_body);
  if (node == nullptr || !IsDefaultDomain(*node)) return Unsupported("not a single standard op");
  const std::string& op = node->op_type();
  const bool window = op == "MaxPool" || op == "AveragePool";
  const bool global = op == "GlobalMaxPool" || op == "GlobalAveragePool";
  if (!window && !global) return Unsupported(op + " is not a pooling op");
  if (!IsPoolFloat(node->input(0)->dtype())) {
    return Unsupported(op + " of " + std::string(NameOf(node->input(0)->dtype())) +
                       " (float, float16 and bfloat16 only)");
  }
  const bool max = op == "MaxPool" || op == "GlobalMaxPool";
  return window ? WindowPool(typed_body, *node, max, name) : GlobalPool(typed_body, *node, max, name);
}

}  // namespace fusionopt::cuda
