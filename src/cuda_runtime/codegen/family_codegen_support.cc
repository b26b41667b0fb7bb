// Shared pieces of the row, attention, data-movement and pooling generators
// (family_codegen_support.h).
#include "cuda_runtime/codegen/family_codegen_support.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "cuda_runtime/codegen/cuda_types.h"
#include "ir/constant_value.h"
#include "ir/function_body.h"

namespace fusionopt::cuda {
namespace {

int InputIndex(const Graph& body, const Value* value) {
  const auto& inputs = body.inputs();
  auto it = std::find(inputs.begin(), inputs.end(), value);
  return it == inputs.end() ? -1 : static_cast<int>(it - inputs.begin());
}

// Whether `initializer` is the name TypedBodyOf gives the folded copy of `input`:
// UniqueName(input + "_constant"), i.e. that name or it with "_<n>" appended.
bool IsFoldedName(std::string_view initializer, std::string_view input) {
  const std::string base = std::string(input) + "_constant";
  if (initializer.substr(0, base.size()) != base) return false;
  std::string_view rest = initializer.substr(base.size());
  if (rest.empty()) return true;
  if (rest.size() < 2 || rest[0] != '_') return false;
  return std::all_of(rest.begin() + 1, rest.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string PointerDeclaration(const Value* value, bool is_const, const std::string& name) {
  std::optional<std::string_view> storage;
  if (value != nullptr) storage = StorageType(value->dtype());
  const std::string type = storage ? std::string(*storage) : std::string("void");
  return std::string(is_const ? "const " : "") + type + "* __restrict__ " + name;
}

}  // namespace

std::string KernelIdentifier(std::string_view name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

std::vector<int64_t> StaticDims(const Value& value) { return KnownDims(value).value_or(std::vector<int64_t>{}); }

int64_t ElementCount(const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  return count;
}

GeneratedProgram SingleKernelProgram(std::string_view name, std::string source, std::string description,
                                     GeneratedKernel kernel, const KernelParameters& parameters) {
  GeneratedProgram program;
  program.name = KernelIdentifier(name);
  program.source = std::move(source);
  program.description = std::move(description);
  program.kernels.push_back(std::move(kernel));
  program.constant_inputs = parameters.constant_inputs();
  return program;
}

std::string FloatLiteral(double value) {
  const float rounded = static_cast<float>(value);
  if (std::isnan(rounded)) return "__int_as_float(0x7fc00000)";
  if (std::isinf(rounded)) return rounded > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%af", static_cast<double>(rounded));
  return std::string("(") + buffer + ")";
}

std::string DoubleLiteral(double value) {
  char text[64];
  if (!std::isfinite(value)) {  // the exact bits: NaN payloads and infinities included
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    std::snprintf(text, sizeof text, "__longlong_as_double(0x%016llxLL)", static_cast<unsigned long long>(bits));
    return text;
  }
  std::snprintf(text, sizeof text, "%a", value);
  return std::string("(") + text + ")";
}

UnfoldedBody Unfold(const Graph& typed_body) {
  UnfoldedBody unfolded;
  unfolded.graph = CopyGraph(typed_body);
  unfolded.folded.assign(typed_body.inputs().size(), nullptr);
  for (size_t i = 0; i < typed_body.inputs().size(); ++i) {
    const Value* input = typed_body.inputs()[i];
    if (input == nullptr || !input->uses().empty()) continue;
    const Value* best = nullptr;
    for (const Value* initializer : typed_body.initializers()) {
      if (IsFoldedName(initializer->name(), input->name()) && !initializer->uses().empty()) best = initializer;
    }
    if (best == nullptr) continue;
    unfolded.folded[i] = best;
    Value* copy_initializer = unfolded.graph->FindValue(best->name());
    Value* copy_input = unfolded.graph->inputs()[i];
    if (copy_initializer != nullptr && copy_input != nullptr) unfolded.graph->ReplaceAllUses(copy_initializer, copy_input);
  }
  return unfolded;
}

Result<std::optional<FusedComposite>> RecognizeCompositeOfTypedBody(const Graph& unfolded) {
  for (const auto& node : unfolded.nodes()) {
    if (node->op_type() != "Softmax" || !IsDefaultDomain(*node) || node->FindAttribute("axis") != nullptr) continue;
    const Value* input = node->input(0);
    if (input != nullptr && StaticDims(*input).size() > 2) {
      return Unsupported("Softmax without an axis attribute on a rank > 2 input: its default axis depends on the "
                         "opset, which a typed body does not carry");
    }
  }
  for (int64_t opset : {18, 17}) {
    if (std::optional<FusedComposite> composite = RecognizeComposite(unfolded, opset)) return composite;
  }
  return std::optional<FusedComposite>();
}

KernelParameters::KernelParameters(const Graph& body, const UnfoldedBody& unfolded)
    : body_(body), folded_(unfolded.folded) {}

KernelParameters::KernelParameters(const Graph& body) : body_(body), folded_(body.inputs().size(), nullptr) {}

std::string KernelParameters::InputPointer(int index) {
  const size_t at = static_cast<size_t>(index);
  if (at < folded_.size() && folded_[at] != nullptr) return InitializerPointer(*folded_[at]);
  return "in" + std::to_string(index);
}

std::string KernelParameters::InitializerPointer(const Value& initializer) {
  auto it = std::find(constant_names_.begin(), constant_names_.end(), initializer.name());
  if (it == constant_names_.end()) {
    constant_names_.push_back(initializer.name());
    it = constant_names_.end() - 1;
  }
  return "c" + std::to_string(it - constant_names_.begin());
}

std::string KernelParameters::PointerTo(const Value& value) {
  const int index = InputIndex(body_, &value);
  if (index >= 0) return InputPointer(index);
  FUSIONOPT_CHECK(value.is_initializer(), "a kernel operand is neither an input nor an initializer");
  return InitializerPointer(value);
}

std::string KernelParameters::Declaration() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < body_.inputs().size(); ++i) {
    parts.push_back(PointerDeclaration(body_.inputs()[i], true, "in" + std::to_string(i)));
  }
  for (size_t i = 0; i < constant_names_.size(); ++i) {
    parts.push_back(PointerDeclaration(body_.FindValue(constant_names_[i]), true, "c" + std::to_string(i)));
  }
  for (size_t i = 0; i < body_.outputs().size(); ++i) {
    parts.push_back(PointerDeclaration(body_.outputs()[i], false, OutputPointer(static_cast<int>(i))));
  }
  std::string joined;
  for (size_t i = 0; i < parts.size(); ++i) joined += (i ? ",\n    " : "\n    ") + parts[i];
  return joined;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t axis = dims.size(); axis-- > 1;) strides[axis - 1] = strides[axis] * dims[axis];
  return strides;
}

std::string BroadcastOffset(const std::vector<int64_t>& operand_dims, const std::vector<int64_t>& out_dims,
                            const std::vector<std::string>& coordinates) {
  FUSIONOPT_CHECK(operand_dims.size() <= out_dims.size(), "operand of higher rank than its broadcast");
  const size_t offset = out_dims.size() - operand_dims.size();
  const std::vector<int64_t> strides = RowMajorStrides(operand_dims);
  std::string expression;
  for (size_t axis = 0; axis < operand_dims.size(); ++axis) {
    if (operand_dims[axis] == 1) continue;
    std::string term = "(long long)(" + coordinates[offset + axis] + ")";
    if (strides[axis] != 1) term += " * " + std::to_string(strides[axis]) + "LL";
    expression += (expression.empty() ? "" : " + ") + term;
  }
  return expression.empty() ? "0LL" : "(" + expression + ")";
}

std::string SplitIndex(const std::vector<int64_t>& dims, std::string_view index, std::string_view index_type,
                       std::string_view prefix, std::vector<std::string>& coordinates) {
  coordinates.assign(dims.size(), "0");
  if (std::all_of(dims.begin(), dims.end(), [](int64_t dim) { return dim == 1; })) return "";
  std::string code = "    " + std::string(index_type) + " rest = " + std::string(index) + ";\n";
  for (size_t axis = dims.size(); axis-- > 0;) {
    if (dims[axis] == 1) continue;
    const std::string name = std::string(prefix) + std::to_string(axis);
    coordinates[axis] = name;
    bool outermost = true;  // no larger axis left to divide for
    for (size_t above = 0; above < axis; ++above) outermost &= dims[above] == 1;
    if (outermost) {
      code += "    const " + std::string(index_type) + " " + name + " = rest;\n";
      break;
    }
    code += "    const " + std::string(index_type) + " " + name + " = rest % " + std::to_string(dims[axis]) + ";\n";
    code += "    rest /= " + std::to_string(dims[axis]) + ";\n";
  }
  code += "    (void)rest;\n";
  return code;
}

std::string IndexType(int64_t elements) {
  // Headroom for the grid-stride step (at most 8192 · 256) past the last element.
  return elements < (int64_t{1} << 31) - (int64_t{1} << 22) ? "int" : "long long";
}

GeneratedKernel GridStrideLaunch(std::string entry, int64_t total) {
  constexpr int64_t kMaxBlocks = 8192;  // ~8 waves of 256-thread blocks on 132 SMs; the loop covers the rest
  GeneratedKernel kernel;
  kernel.entry = std::move(entry);
  const int64_t blocks = std::clamp<int64_t>((total + kGridStrideThreads - 1) / kGridStrideThreads, 1, kMaxBlocks);
  kernel.grid = {static_cast<uint32_t>(blocks), 1, 1};
  kernel.block = {kGridStrideThreads, 1, 1};
  return kernel;
}

std::string GridStrideLoop(int64_t total, std::string_view index_type) {
  const std::string type(index_type);
  return "  for (" + type + " i = (" + type + ")blockIdx.x * " + std::to_string(kGridStrideThreads) +
         " + threadIdx.x; i < (" + type + ")" + std::to_string(total) + "LL; i += (" + type + ")gridDim.x * " +
         std::to_string(kGridStrideThreads) + ") {\n";
}

GeneratedProgram GridStrideProgram(std::string_view name, const KernelParameters& parameters, int64_t total,
                                   std::string_view index_type, const std::string& loop_body, std::string description,
                                   const std::string& prologue, const std::string& globals) {
  const std::string entry = KernelIdentifier(name);
  std::string source = std::string(SourcePrelude()) + globals + "\nextern \"C\" __global__ void __launch_bounds__(" +
                       std::to_string(kGridStrideThreads) + ") " + entry + "(" + parameters.Declaration() + ") {\n" +
                       prologue + GridStrideLoop(total, index_type) + loop_body + "  }\n}\n";
  return SingleKernelProgram(entry, std::move(source), std::move(description), GridStrideLaunch(entry, total), parameters);
}

std::optional<std::string> BitsType(DataType dtype) {
  if (!StorageType(dtype)) return std::nullopt;
  switch (ByteSizeOf(dtype, 1)) {
    case 1: return "unsigned char";
    case 2: return "unsigned short";
    case 4: return "unsigned int";
    case 8: return "unsigned long long";
    default: return std::nullopt;
  }
}

const Node* SingleOp(const Graph& body) {
  const Node* found = nullptr;
  for (const auto& node : body.nodes()) {
    if (node->op_type() == "Constant" && IsDefaultDomain(*node)) continue;
    if (found != nullptr) return nullptr;
    found = node.get();
  }
  return found;
}

}  // namespace fusionopt::cuda
