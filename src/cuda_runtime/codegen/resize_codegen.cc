// Resize as one generated kernel over ir/resize_sampling.h's tables (resize_codegen.h).
#include "cuda_runtime/codegen/resize_codegen.h"

#include <cstring>
#include <functional>

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "ir/constant_value.h"
#include "ir/resize_sampling.h"

namespace fusionopt::cuda {
namespace {

constexpr int64_t kMaxTableEntries = 1 << 16;
// ReadResizeAttributes' opset: the newest semantics of every attribute (see the header).
constexpr int64_t kAttributeOpset = 19;

// An optional argument's constant values: nullopt when absent (or empty), Unsupported when
// computed at run time.
Result<std::optional<std::vector<double>>> ConstantArgument(const Node& node, size_t index, const char* what) {
  const Value* value = node.input(index);
  if (value == nullptr) return std::optional<std::vector<double>>();
  TensorPtr constant = ConstantValueOf(*value, InitializerRule::kAllConstant);
  if (constant == nullptr) return Unsupported(std::string("Resize ") + what + " computed at run time");
  std::optional<std::vector<double>> values = constant->AsDoubles();
  if (!values) return Unsupported(std::string("Resize ") + what + " of " + std::string(NameOf(constant->dtype())));
  if (values->empty()) return std::optional<std::vector<double>>();
  return values;
}

Result<std::vector<AxisSampling>> Samplings(const Node& node, const ResizeAttributes& attributes) {
  const std::vector<int64_t> in = StaticDims(*node.input(0)), out = StaticDims(*node.output(0));
  FUSIONOPT_ASSIGN_OR_RETURN(auto roi, ConstantArgument(node, 1, "roi"));
  FUSIONOPT_ASSIGN_OR_RETURN(auto scales, ConstantArgument(node, 2, "scales"));
  std::optional<std::vector<int64_t>> sizes;
  if (node.input(3) != nullptr) {
    if (!(sizes = ConstantInts(node.input(3), InitializerRule::kAllConstant))) return Unsupported("Resize sizes computed at run time");
  }
  FUSIONOPT_ASSIGN_OR_RETURN(ResizeGeometry geometry,
                             ResolveResizeGeometry(attributes, in, scales.value_or(std::vector<double>()), sizes,
                                                   roi.value_or(std::vector<double>())));
  if (geometry.out_dims != out) return InternalError("Resize's geometry disagrees with its output's static shape");
  return PlanResize(attributes.options, in, geometry);
}

bool HasOutside(const AxisSampling& sampling) {
  for (uint8_t flag : sampling.extrapolated) {
    if (flag != 0) return true;
  }
  return false;
}

// The tables of axis `axis` as constant arrays: fo_index<axis>, fo_weight<axis> (interpolation)
// and fo_outside<axis> (where tf_crop_and_resize maps outside the input).
std::string Tables(const AxisSampling& sampling, size_t axis, bool weights, const std::string& weight_type) {
  const std::string a = std::to_string(axis);
  std::string index = "__device__ const int fo_index" + a + "[] = {";
  std::string weight = "__device__ const " + weight_type + " fo_weight" + a + "[] = {";
  for (size_t k = 0; k < sampling.index.size(); ++k) {
    index += (k ? "," : "") + std::to_string(sampling.index[k]);
    weight += (k ? "," : "") + (weight_type == "float" ? FloatLiteral(sampling.weight[k]) : DoubleLiteral(sampling.weight[k]));
  }
  std::string out = index + "};\n" + (weights ? weight + "};\n" : "");
  if (HasOutside(sampling)) {
    out += "__device__ const unsigned char fo_outside" + a + "[] = {";
    for (size_t k = 0; k < sampling.extrapolated.size(); ++k) out += (k ? "," : "") + std::to_string(sampling.extrapolated[k]);
    out += "};\n";
  }
  return out;
}

// The condition under which the element lies outside the input on some axis ("false" if never).
std::string OutsideCondition(const std::vector<AxisSampling>& samplings, const std::vector<std::string>& c) {
  std::string condition;
  for (size_t a = 0; a < samplings.size(); ++a) {
    if (HasOutside(samplings[a])) condition += (condition.empty() ? "" : " || ") + ("fo_outside" + std::to_string(a) + "[" + c[a] + "]");
  }
  return condition.empty() ? "false" : condition;
}

std::string NearestBody(const std::vector<AxisSampling>& samplings, const std::vector<int64_t>& in,
                        const std::vector<std::string>& c, const std::string& source, const std::string& out,
                        const std::string& bits, const std::string& fill) {
  const std::vector<int64_t> strides = RowMajorStrides(in);
  std::string offset = "0LL";
  for (size_t a = 0; a < in.size(); ++a) {
    if (in[a] == 1) continue;
    const std::string at = samplings[a].IsIdentity() ? "(long long)(" + c[a] + ")" : "(long long)fo_index" + std::to_string(a) + "[" + c[a] + "]";
    offset += " + " + at + " * " + std::to_string(strides[a]) + "LL";
  }
  return "    " + out + "[i] = (" + OutsideCondition(samplings, c) + ") ? (" + bits + ")" + fill + " : " + source + "[" +
         offset + "];\n";
}

// Nested tap loops over the resized axes, the first pass innermost; `compute` the sum's type.
// `load(offset)` is the input element at `offset` in the compute type.
std::string InterpolateBody(const std::vector<AxisSampling>& samplings, const std::vector<size_t>& order,
                            const std::vector<int64_t>& in, const std::vector<std::string>& c,
                            const std::function<std::string(const std::string&)>& load, const std::string& compute) {
  const std::vector<int64_t> strides = RowMajorStrides(in);
  std::string fixed = "0LL";
  for (size_t a = 0; a < in.size(); ++a) {
    if (in[a] == 1 || !samplings[a].IsIdentity()) continue;
    fixed += " + (long long)(" + c[a] + ") * " + std::to_string(strides[a]) + "LL";
  }
  // Innermost: the first pass's sum of loads; each outer pass sums its taps of the inner sums.
  std::string code = "    const long long fixed = " + fixed + ";\n";
  std::function<std::string(size_t, const std::string&, const std::string&)> level =
      [&](size_t depth, const std::string& offset, const std::string& indent) -> std::string {
    const size_t a = order[depth];
    const std::string s = std::to_string(a), taps = std::to_string(samplings[a].taps);
    const std::string sum = "sum" + s, slot = "(" + c[a] + ") * " + taps + " + t" + s;
    std::string text = indent + compute + " " + sum + " = 0;\n";
    text += indent + "for (int t" + s + " = 0; t" + s + " < " + taps + "; ++t" + s + ") {\n";
    const std::string at = offset + " + (long long)fo_index" + s + "[" + slot + "] * " + std::to_string(strides[a]) + "LL";
    if (depth == 0) {
      text += indent + "  " + sum + " += fo_weight" + s + "[" + slot + "] * " + load(at) + ";\n";
    } else {
      const std::string inner = "sum" + std::to_string(order[depth - 1]);
      text += level(depth - 1, at, indent + "  ");
      text += indent + "  " + sum + " += fo_weight" + s + "[" + slot + "] * " + inner + ";\n";
    }
    return text + indent + "}\n";
  };
  return code + level(order.size() - 1, "fixed", "    ");
}

}  // namespace

Result<GeneratedProgram> GenerateResize(const Graph& typed_body, std::string_view name) {
  const Node* node = SingleOp(typed_body);
  if (node == nullptr || !IsDefaultDomain(*node) || node->op_type() != "Resize") return Unsupported("not a Resize");
  FUSIONOPT_ASSIGN_OR_RETURN(ResizeAttributes attributes, ReadResizeAttributes(*node, kAttributeOpset));
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<AxisSampling> samplings, Samplings(*node, attributes));
  const DataType dtype = node->output(0)->dtype();
  const bool nearest = attributes.options.mode == ResizeMode::kNearest;
  std::optional<std::string_view> storage = StorageType(dtype);
  if (!storage) return Unsupported("Resize of " + std::string(NameOf(dtype)));
  const bool floating = dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
  if (!nearest && !floating && dtype != DataType::kDouble) {
    return Unsupported("linear and cubic Resize of " + std::string(NameOf(dtype)));
  }
  const std::string compute = dtype == DataType::kDouble ? "double" : "float";
  for (const AxisSampling& sampling : samplings) {
    if (static_cast<int64_t>(sampling.index.size()) > kMaxTableEntries) return Unsupported("a Resize table too large to compile in");
  }
  const std::vector<int64_t> in = StaticDims(*node->input(0)), out = StaticDims(*node->output(0));
  const int64_t total = ElementCount(out);
  if (total == 0) return Unsupported("an empty tensor needs no kernel");

  KernelParameters parameters(typed_body);
  const std::string source_pointer = parameters.PointerTo(*node->input(0));
  const std::string out_pointer = parameters.OutputPointer(0);
  std::string tables;
  for (size_t a = 0; a < samplings.size(); ++a) {
    if (!samplings[a].IsIdentity() || HasOutside(samplings[a])) tables += Tables(samplings[a], a, !nearest, compute);
  }
  const std::string index_type = IndexType(std::max(total, ElementCount(in)));
  std::vector<std::string> c;
  const std::string split = SplitIndex(out, "i", index_type, "o", c);
  std::string body;
  const std::vector<size_t> order = InterpolationOrder(samplings);
  const double fill = attributes.options.extrapolation_value;
  if (nearest) {
    const std::string bits = *BitsType(dtype);
    if (fill != 0.0 && dtype != DataType::kFloat) return Unsupported("a nonzero extrapolation value on " + std::string(NameOf(dtype)));
    uint32_t fill_bits = 0;
    const float fill_float = static_cast<float>(fill);
    std::memcpy(&fill_bits, &fill_float, sizeof fill_bits);
    body = NearestBody(samplings, in, c, "reinterpret_cast<const " + bits + "*>(" + source_pointer + ")",
                       "reinterpret_cast<" + bits + "*>(" + out_pointer + ")", bits, std::to_string(fill_bits) + "U");
  } else if (order.empty()) {
    body = "    " + out_pointer + "[i] = " + source_pointer + "[i];\n";
  } else {
    auto load = [&](const std::string& offset) {
      return "(" + compute + ")(" + LoadAsCompute(dtype, source_pointer + "[" + offset + "]") + ")";
    };
    const std::string sums = InterpolateBody(samplings, order, in, c, load, compute);
    const std::string last = "sum" + std::to_string(order.back());
    const std::string value = "(" + OutsideCondition(samplings, c) + ") ? (" + compute + ")" +
                              (compute == "float" ? FloatLiteral(fill) : DoubleLiteral(fill)) + " : " + last;
    body = sums + "    " + out_pointer + "[i] = " + StoreFromCompute(dtype, value) + ";\n";
  }
  const char* modes[] = {"nearest", "linear", "cubic"};
  return GridStrideProgram(name, parameters, total, index_type, split + body,
                           std::string("resize: ") + modes[static_cast<int>(attributes.options.mode)] + ", " +
                               std::to_string(order.size()) + " resized axes, tables compiled in",
                           {}, tables);
}

}  // namespace fusionopt::cuda
