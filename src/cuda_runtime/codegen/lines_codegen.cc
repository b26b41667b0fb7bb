// CumSum, and Softmax / LogSoftmax along a non-last axis: one thread per line (lines_codegen.h).
#include "cuda_runtime/codegen/lines_codegen.h"

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "ir/constant_value.h"

namespace fusionopt::cuda {
namespace {

// A tensor seen as [outer, n, inner] around one axis.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t count() const { return outer * inner; }
};

Lines Around(const std::vector<int64_t>& dims, size_t axis) {
  Lines lines;
  for (size_t a = 0; a < dims.size(); ++a) {
    if (a < axis) lines.outer *= dims[a];
    if (a > axis) lines.inner *= dims[a];
  }
  lines.n = dims[axis];
  return lines;
}

Result<size_t> LineAxisOf(int64_t axis, size_t rank, const std::string& op) {
  std::optional<int64_t> normalized = NormalizedAxis(axis, static_cast<int64_t>(rank));
  if (!normalized) return Unsupported(op + " axis out of range");
  return static_cast<size_t>(*normalized);
}

// Statements before each line's walk: `base`, the offset of the line's first element.
std::string LineBase(const Lines& lines, const std::string& index_type) {
  const std::string inner = std::to_string(lines.inner) + "LL", n = std::to_string(lines.n) + "LL";
  return "    const " + index_type + " base = (" + index_type + ")((long long)(i / " + inner + ") * " + n + " * " + inner +
         " + (long long)(i % " + inner + "));\n";
}

std::string At(const Lines& lines, const std::string& step) {
  return "base + (" + step + ") * " + std::to_string(lines.inner);
}

struct LineBody {
  std::string code;
  std::string description;
};

Result<LineBody> CumSum(const Node& node, KernelParameters& parameters, const Lines& lines) {
  const DataType dtype = node.output(0)->dtype();
  std::optional<std::string_view> compute = ComputeType(dtype);
  if (!compute || dtype == DataType::kBool) return Unsupported("CumSum of " + std::string(NameOf(dtype)));
  const bool exclusive = node.GetInt("exclusive", 0) != 0, reverse = node.GetInt("reverse", 0) != 0;
  const std::string in = parameters.PointerTo(*node.input(0)), out = parameters.OutputPointer(0);
  const std::string step = reverse ? std::to_string(lines.n - 1) + " - k" : "k";
  std::string code = "    " + std::string(*compute) + " running = 0;\n";
  code += "    for (int k = 0; k < " + std::to_string(lines.n) + "; ++k) {\n";
  code += "      const long long at = " + At(lines, step) + ";\n";
  code += "      const " + std::string(*compute) + " value = " + LoadAsCompute(dtype, in + "[at]") + ";\n";
  const std::string store = "      " + out + "[at] = " + StoreFromCompute(dtype, "running") + ";\n";
  const std::string add = "      running = (" + std::string(*compute) + ")(running + value);\n";
  code += exclusive ? store + add : add + store;
  code += "    }\n";
  return LineBody{code, std::string("cumsum") + (exclusive ? ", exclusive" : "") + (reverse ? ", reverse" : "")};
}

Result<LineBody> Normalize(const Node& node, KernelParameters& parameters, const Lines& lines) {
  const DataType dtype = node.output(0)->dtype();
  if (dtype != DataType::kFloat && dtype != DataType::kFloat16 && dtype != DataType::kBFloat16) {
    return Unsupported(node.op_type() + " of " + std::string(NameOf(dtype)));
  }
  const bool log = node.op_type() == "LogSoftmax";
  const std::string in = parameters.PointerTo(*node.input(0)), out = parameters.OutputPointer(0);
  const std::string n = std::to_string(lines.n);
  auto load = [&](const std::string& step) { return LoadAsCompute(dtype, in + "[" + At(lines, step) + "]"); };
  std::string code = "    float line_max = __int_as_float(0xff800000);\n";
  code += "    for (int k = 0; k < " + n + "; ++k) line_max = fmaxf(line_max, " + load("k") + ");\n";
  code += "    float sum = 0.0f;\n";
  code += "    for (int k = 0; k < " + n + "; ++k) sum += expf(" + load("k") + " - line_max);\n";
  code += log ? "    const float log_sum = logf(sum);\n" : "";
  const std::string value = log ? "(" + load("k") + " - line_max) - log_sum" : "expf(" + load("k") + " - line_max) / sum";
  code += "    for (int k = 0; k < " + n + "; ++k) " + out + "[" + At(lines, "k") + "] = " + StoreFromCompute(dtype, value) +
          ";\n";
  return LineBody{code, log ? "log softmax" : "softmax"};
}

// The axis the op runs along; Softmax on its last axis is the row family's.
Result<size_t> LineAxis(const Node& node, size_t rank) {
  if (node.op_type() == "CumSum") {
    std::optional<std::vector<int64_t>> axis = ConstantInts(node.input(1), InitializerRule::kAllConstant);
    if (!axis || axis->size() != 1) return Unsupported("CumSum with its axis computed at run time");
    return LineAxisOf(axis->front(), rank, "CumSum");
  }
  if (node.FindAttribute("axis") == nullptr) {
    return Unsupported(node.op_type() + " without an axis attribute (its default depends on the opset)");
  }
  FUSIONOPT_ASSIGN_OR_RETURN(size_t axis, LineAxisOf(node.GetInt("axis", -1), rank, node.op_type()));
  if (axis + 1 == rank) return Unsupported(node.op_type() + " over the last axis is a row (the row family's)");
  return axis;
}

}  // namespace

Result<GeneratedProgram> GenerateLines(const Graph& typed_body, std::string_view name) {
  const Node* node = SingleOp(typed_body);
  if (node == nullptr || !IsDefaultDomain(*node)) return Unsupported("not a single standard op");
  const std::string& op = node->op_type();
  if (op != "CumSum" && op != "Softmax" && op != "LogSoftmax") return Unsupported(op + " does not run along lines");
  const std::vector<int64_t> dims = StaticDims(*node->input(0));
  if (dims.empty()) return Unsupported(op + " of a scalar");
  FUSIONOPT_ASSIGN_OR_RETURN(size_t axis, LineAxis(*node, dims.size()));
  const Lines lines = Around(dims, axis);
  if (lines.count() == 0 || lines.n == 0) return Unsupported("an empty tensor needs no kernel");
  KernelParameters parameters(typed_body);
  FUSIONOPT_ASSIGN_OR_RETURN(LineBody body, op == "CumSum" ? CumSum(*node, parameters, lines)
                                                           : Normalize(*node, parameters, lines));
  const std::string index_type = IndexType(ElementCount(dims));
  return GridStrideProgram(name, parameters, lines.count(), index_type, LineBase(lines, index_type) + body.code,
                           "lines: " + body.description + " along axis " + std::to_string(axis) + ", " +
                               std::to_string(lines.count()) + " lines of " + std::to_string(lines.n));
}

}  // namespace fusionopt::cuda
