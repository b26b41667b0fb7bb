// The elementwise generator (elementwise_codegen.h): plans operands, broadcasts and the vector
// width of a typed body, then writes one CUDA C++ translation unit: helper functions, a
// per-element function holding the body's expressions (elementwise_emit.h), and the kernel's
// grid-stride loops around it.
#include "cuda_runtime/codegen/elementwise_codegen.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/elementwise_emit.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "cuda_runtime/codegen/typed_body.h"
#include "ir/dtype.h"

namespace fusionopt::cuda {
namespace {

using elementwise::ElementScope;

constexpr uint32_t kVectorBytes = 16;  // one 128-bit load or store

// How an operand's elements are found from the output's linear index `i`.
enum class Access { kDirect, kScalar, kBroadcast };

// A tensor the kernel reads through a pointer parameter: a body input or a large initializer.
struct Operand {
  const Value* value = nullptr;
  std::string pointer;     // its parameter's name
  Access access = Access::kDirect;
  std::string offset;      // kBroadcast: the element's offset as an expression of i
};

struct Plan {
  std::vector<int64_t> dims;  // the output's (every output's) dims
  int64_t count = 1;          // elements of the output
  std::string index_type;     // "unsigned int" or "unsigned long long"
  std::vector<std::string> parameters;  // in contract order
  std::vector<Operand> operands;        // what the body reads through pointers
  std::vector<std::string> outputs;     // output pointer names, in graph-output order
  std::vector<std::string> constant_inputs;
  uint32_t vector_width = 1;  // elements per 16-byte access; 1: no vector loop
};

std::string IndexLiteral(int64_t value) {
  return std::to_string(value) + (value > std::numeric_limits<int32_t>::max() ? "ULL" : "");
}

// The offset of operand element for output index `i`, broadcasting folded: dims of the same
// kind (real or broadcast) are merged, and each real group contributes
// ((i / output_stride) % size) * operand_stride, without the trivial divisions and moduli.
std::string BroadcastOffset(const std::vector<int64_t>& operand, const std::vector<int64_t>& full) {
  struct Group {
    int64_t size;
    bool real;
  };
  std::vector<Group> groups;  // innermost first
  const size_t rank = full.size(), pad = rank - operand.size();
  for (size_t k = rank; k-- > 0;) {
    if (full[k] == 1) continue;
    const bool real = k >= pad && operand[k - pad] == full[k];
    if (!groups.empty() && groups.back().real == real) {
      groups.back().size *= full[k];
    } else {
      groups.push_back({full[k], real});
    }
  }
  std::string sum;
  int64_t output_stride = 1, operand_stride = 1;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].real) {
      std::string term = output_stride == 1 ? "i" : "(i / " + IndexLiteral(output_stride) + ")";
      if (g + 1 < groups.size()) term = "(" + term + " % " + IndexLiteral(groups[g].size) + ")";
      if (operand_stride != 1) term += " * " + IndexLiteral(operand_stride);
      sum += (sum.empty() ? "" : " + ") + term;
      operand_stride *= groups[g].size;
    }
    output_stride *= groups[g].size;
  }
  return sum.empty() ? "0" : sum;
}

Status CheckBroadcasts(const Value& value, const std::vector<int64_t>& full) {
  const std::vector<int64_t> dims = StaticDims(value);
  bool fits = dims.size() <= full.size();
  for (size_t k = 0; fits && k < dims.size(); ++k) {
    const int64_t target = full[full.size() - dims.size() + k];
    fits = dims[k] == target || dims[k] == 1;
  }
  if (fits) return Status::Ok();
  return Unsupported("value '" + value.name() + "' " + ShapeToString(*value.shape()) +
                     " does not broadcast to the output's shape");
}

Result<std::string> StorageOf(const Value& value) {
  auto type = StorageType(value.dtype());
  if (!type) return Unsupported("value '" + value.name() + "' of dtype " + std::string(NameOf(value.dtype())));
  return std::string(*type);
}

Result<Operand> MakeOperand(const Value& value, std::string pointer, const Plan& plan) {
  FUSIONOPT_RETURN_IF_ERROR(CheckBroadcasts(value, plan.dims));
  Operand operand;
  operand.value = &value;
  operand.pointer = std::move(pointer);
  const std::vector<int64_t> dims = StaticDims(value);
  if (ElementCount(dims) == plan.count) {
    operand.access = Access::kDirect;  // broadcast-compatible with the same count: same layout
  } else if (ElementCount(dims) == 1) {
    operand.access = Access::kScalar;
  } else {
    operand.access = Access::kBroadcast;
    operand.offset = BroadcastOffset(dims, plan.dims);
  }
  return operand;
}

bool IsRead(const Graph& body, const Value* value) {
  if (value == nullptr) return false;
  if (!value->uses().empty()) return true;
  return std::find(body.outputs().begin(), body.outputs().end(), value) != body.outputs().end();
}

Status PlanOutputs(const Graph& body, Plan& plan) {
  if (body.outputs().empty()) return Unsupported("a body without outputs");
  plan.dims = StaticDims(*body.outputs()[0]);
  for (const Value* output : body.outputs()) {
    if (StaticDims(*output) != plan.dims) {
      return Unsupported("outputs of different shapes (" + ShapeToString(*body.outputs()[0]->shape()) + " and " +
                         ShapeToString(*output->shape()) + ")");
    }
  }
  plan.count = ElementCount(plan.dims);
  plan.index_type = plan.count > std::numeric_limits<int32_t>::max() ? "unsigned long long" : "unsigned int";
  return Status::Ok();
}

// Parameters in contract order (generated_kernel.h); binds scalar initializers as literals.
Status PlanParameters(const Graph& body, Plan& plan, ElementScope& scope) {
  for (size_t k = 0; k < body.inputs().size(); ++k) {
    const Value* input = body.inputs()[k];
    const std::string name = "in" + std::to_string(k);
    if (!IsRead(body, input)) {
      plan.parameters.push_back("const void* " + name);  // an omitted or folded-away input
      continue;
    }
    FUSIONOPT_ASSIGN_OR_RETURN(std::string storage, StorageOf(*input));
    plan.parameters.push_back("const " + storage + "* __restrict__ " + name);
    FUSIONOPT_ASSIGN_OR_RETURN(Operand operand, MakeOperand(*input, name, plan));
    plan.operands.push_back(std::move(operand));
  }
  for (const Value* initializer : body.initializers()) {
    if (!IsRead(body, initializer)) continue;
    if (initializer->initializer()->NumElements() == 1) {
      FUSIONOPT_ASSIGN_OR_RETURN(std::string literal, elementwise::Literal(*initializer->initializer(), 0));
      scope.Bind(initializer, literal);
      continue;
    }
    const std::string name = "constant" + std::to_string(plan.constant_inputs.size());
    FUSIONOPT_ASSIGN_OR_RETURN(std::string storage, StorageOf(*initializer));
    plan.parameters.push_back("const " + storage + "* __restrict__ " + name);
    plan.constant_inputs.push_back(initializer->name());
    FUSIONOPT_ASSIGN_OR_RETURN(Operand operand, MakeOperand(*initializer, name, plan));
    plan.operands.push_back(std::move(operand));
  }
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    FUSIONOPT_ASSIGN_OR_RETURN(std::string storage, StorageOf(*body.outputs()[k]));
    plan.outputs.push_back("out" + std::to_string(k));
    plan.parameters.push_back(storage + "* " + plan.outputs.back());
  }
  return Status::Ok();
}

// 16 bytes of the widest direct operand or output; 1 when a vector loop cannot help.
void PlanVectorWidth(const Graph& body, Plan& plan) {
  int widest = 0;
  for (const Operand& operand : plan.operands) {
    if (operand.access == Access::kDirect) widest = std::max(widest, BitsOf(operand.value->dtype()) / 8);
  }
  for (const Value* output : body.outputs()) widest = std::max(widest, BitsOf(output->dtype()) / 8);
  const uint32_t width = widest > 0 ? kVectorBytes / static_cast<uint32_t>(widest) : 1;
  plan.vector_width = static_cast<int64_t>(width) <= plan.count && width > 1 ? width : 1;
}

// The per-element function: direct operands arrive as compute-type values, broadcast ones as
// pointers; the outputs leave through references.
std::string ElementFunction(const Graph& body, const Plan& plan, ElementScope& scope) {
  std::string parameters = plan.index_type + " i", loads;
  for (const Operand& operand : plan.operands) {
    const DataType dtype = operand.value->dtype();
    const std::string compute(*ComputeType(dtype)), local = "x_" + operand.pointer;
    if (operand.access == Access::kDirect) {
      parameters += ", const " + compute + " " + local;
    } else {
      parameters += ", const " + std::string(*StorageType(dtype)) + "* __restrict__ " + operand.pointer;
      const std::string at = operand.access == Access::kScalar ? "0" : operand.offset;
      loads += "  const " + compute + " " + local + " = " + LoadAsCompute(dtype, operand.pointer + "[" + at + "]") + ";\n";
    }
  }
  std::string stores;
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    const Value* output = body.outputs()[k];
    parameters += ", " + std::string(*ComputeType(output->dtype())) + "& y" + std::to_string(k);
    stores += "  y" + std::to_string(k) + " = " + scope.Of(output) + ";\n";
  }
  return "static __device__ __forceinline__ void fo_element(" + parameters + ") {\n" + loads + scope.statements() +
         stores + "}\n";
}

// Arguments of a fo_element call: `direct(operand)` gives each direct operand's value.
template <typename DirectValue>
std::string ElementCall(const Graph& body, const Plan& plan, const std::string& index, DirectValue direct) {
  std::string call = "fo_element(" + index;
  for (const Operand& operand : plan.operands) {
    call += ", " + (operand.access == Access::kDirect ? direct(operand) : operand.pointer);
  }
  for (size_t k = 0; k < body.outputs().size(); ++k) call += ", y" + std::to_string(k);
  return call + ");\n";
}

std::string DeclareResults(const Graph& body, const std::string& indent) {
  std::string text;
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    text += indent + std::string(*ComputeType(body.outputs()[k]->dtype())) + " y" + std::to_string(k) + ";\n";
  }
  return text;
}

std::string ScalarLoop(const Graph& body, const Plan& plan) {
  std::string text = "  for (" + plan.index_type + " i = scalar_begin + first; i < count; i += stride) {\n";
  text += DeclareResults(body, "    ");
  text += "    " + ElementCall(body, plan, "i", [](const Operand& operand) {
    return LoadAsCompute(operand.value->dtype(), operand.pointer + "[i]");
  });
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    const std::string y = "y" + std::to_string(k);
    text += "    " + plan.outputs[k] + "[i] = " + StoreFromCompute(body.outputs()[k]->dtype(), y) + ";\n";
  }
  return text + "  }\n";
}

std::string PackOf(DataType dtype, uint32_t width) {
  return "fo_pack<" + std::string(*StorageType(dtype)) + ", " + std::to_string(width) + ">";
}

// The 128-bit loop, entered when every direct operand and output is aligned to its vector.
std::string VectorLoop(const Graph& body, const Plan& plan) {
  const uint32_t width = plan.vector_width;
  const std::string w = std::to_string(width);
  std::string aligned;
  auto require = [&](const std::string& pointer, DataType dtype) {
    const uint32_t bytes = width * static_cast<uint32_t>(BitsOf(dtype) / 8);
    aligned += std::string(aligned.empty() ? "" : " && ") + "fo_aligned(" + pointer + ", " + std::to_string(bytes) + ")";
  };
  for (const Operand& operand : plan.operands) {
    if (operand.access == Access::kDirect) require(operand.pointer, operand.value->dtype());
  }
  for (size_t k = 0; k < body.outputs().size(); ++k) require(plan.outputs[k], body.outputs()[k]->dtype());
  std::string text = "  if (" + aligned + ") {\n";
  text += "    const " + plan.index_type + " vectors = count / " + w + ";\n";
  text += "    for (" + plan.index_type + " v = first; v < vectors; v += stride) {\n";
  for (const Operand& operand : plan.operands) {
    if (operand.access != Access::kDirect) continue;
    const std::string pack = PackOf(operand.value->dtype(), width);
    text += "      const " + pack + " v_" + operand.pointer + " = reinterpret_cast<const " + pack + "*>(" +
            operand.pointer + ")[v];\n";
  }
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    text += "      " + PackOf(body.outputs()[k]->dtype(), width) + " r" + std::to_string(k) + ";\n";
  }
  text += "#pragma unroll\n      for (int j = 0; j < " + w + "; ++j) {\n";
  text += DeclareResults(body, "        ");
  text += "        " + ElementCall(body, plan, "v * " + w + " + j", [](const Operand& operand) {
    return LoadAsCompute(operand.value->dtype(), "v_" + operand.pointer + ".v[j]");
  });
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    const std::string y = "y" + std::to_string(k);
    text += "        r" + std::to_string(k) + ".v[j] = " + StoreFromCompute(body.outputs()[k]->dtype(), y) + ";\n";
  }
  text += "      }\n";
  for (size_t k = 0; k < body.outputs().size(); ++k) {
    const std::string pack = PackOf(body.outputs()[k]->dtype(), width);
    text += "      reinterpret_cast<" + pack + "*>(" + plan.outputs[k] + ")[v] = r" + std::to_string(k) + ";\n";
  }
  text += "    }\n    scalar_begin = vectors * " + w + ";\n  }\n";
  return text;
}

std::string Kernel(const Graph& body, const Plan& plan, const std::string& entry) {
  std::string parameters;
  for (const std::string& parameter : plan.parameters) parameters += (parameters.empty() ? "" : ", ") + parameter;
  std::string text = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kElementwiseBlockThreads) +
                     ") " + entry + "(" + parameters + ") {\n";
  text += "  const " + plan.index_type + " count = " + IndexLiteral(plan.count) + ";\n";
  text += "  const " + plan.index_type + " first = (" + plan.index_type + ")blockIdx.x * blockDim.x + threadIdx.x;\n";
  text += "  const " + plan.index_type + " stride = (" + plan.index_type + ")gridDim.x * blockDim.x;\n";
  text += "  " + plan.index_type + " scalar_begin = 0;\n";
  if (plan.vector_width > 1) text += VectorLoop(body, plan);
  return text + ScalarLoop(body, plan) + "}\n";
}

constexpr std::string_view kPackHelpers = R"(// 128-bit (or narrower) vector of N elements: one load or store instruction.
template <typename T, int N> struct alignas(sizeof(T) * N) fo_pack { T v[N]; };
__device__ __forceinline__ bool fo_aligned(const void* pointer, unsigned long long bytes) {
  return reinterpret_cast<unsigned long long>(pointer) % bytes == 0;
}
)";

std::string Description(const Graph& body, const Plan& plan) {
  int broadcasts = 0;
  for (const Operand& operand : plan.operands) broadcasts += operand.access == Access::kBroadcast ? 1 : 0;
  std::string text = "elementwise, " + std::to_string(body.num_nodes()) + " ops, ";
  text += plan.vector_width > 1 ? std::to_string(plan.vector_width) + "-wide vectors (scalar path if unaligned)"
                                : std::string("scalar");
  text += ", " + std::to_string(broadcasts) + " broadcast operands, ";
  text += plan.index_type == "unsigned int" ? "32-bit indexing" : "64-bit indexing";
  return text;
}

GeneratedKernel LaunchOf(const Plan& plan, const std::string& entry) {
  const int64_t work = plan.vector_width > 1 ? (plan.count + plan.vector_width - 1) / plan.vector_width : plan.count;
  const int64_t blocks = (work + kElementwiseBlockThreads - 1) / kElementwiseBlockThreads;
  GeneratedKernel kernel;
  kernel.entry = entry;
  kernel.grid = {static_cast<uint32_t>(std::clamp<int64_t>(blocks, 1, kElementwiseMaxBlocks)), 1, 1};
  kernel.block = {kElementwiseBlockThreads, 1, 1};
  return kernel;
}

}  // namespace

std::string CIdentifier(std::string_view name) {
  std::string identifier;
  for (char c : name) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    identifier += word ? c : '_';
  }
  if (identifier.empty() || (identifier[0] >= '0' && identifier[0] <= '9')) identifier = "k_" + identifier;
  return identifier;
}

Result<GeneratedProgram> GenerateElementwise(const Graph& typed_body, std::string_view name) {
  for (const auto& node : typed_body.nodes()) FUSIONOPT_RETURN_IF_ERROR(elementwise::CheckElementwiseOp(*node));
  FUSIONOPT_RETURN_IF_ERROR(CheckFullyTyped(typed_body));
  Plan plan;
  ElementScope scope;
  FUSIONOPT_RETURN_IF_ERROR(PlanOutputs(typed_body, plan));
  FUSIONOPT_RETURN_IF_ERROR(PlanParameters(typed_body, plan, scope));
  for (const Operand& operand : plan.operands) scope.Bind(operand.value, "x_" + operand.pointer);
  for (const auto& node : typed_body.nodes()) {
    FUSIONOPT_RETURN_IF_ERROR(elementwise::EmitNode(*node, scope));
    FUSIONOPT_RETURN_IF_ERROR(CheckBroadcasts(*node->output(0), plan.dims));
  }
  for (const Value* output : typed_body.outputs()) {
    if (!scope.Has(output)) return Unsupported("output '" + output->name() + "' is computed by nothing");
  }
  PlanVectorWidth(typed_body, plan);

  GeneratedProgram program;
  program.name = CIdentifier(name);
  program.kernels.push_back(LaunchOf(plan, program.name));
  program.constant_inputs = plan.constant_inputs;
  program.description = Description(typed_body, plan);
  program.source = "// " + program.name + ": " + program.description + " (generated by fusionopt)\n";
  program.source += std::string(SourcePrelude()) + "\n" + std::string(elementwise::HelperFunctions());
  program.source += std::string(kPackHelpers) + "\n" + ElementFunction(typed_body, plan, scope) + "\n";
  program.source += Kernel(typed_body, plan, program.name);
  return program;
}

}  // namespace fusionopt::cuda
