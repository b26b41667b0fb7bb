// RotaryEmbedding as one generated kernel (rotary_codegen.h).
#include "cuda_runtime/codegen/rotary_codegen.h"

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"

namespace fusionopt::cuda {
namespace {

// X's geometry as (batch, heads, sequence, depth) with the element strides of each.
struct HeadLayout {
  int64_t batch = 0, heads = 0, sequence = 0, depth = 0;
  int64_t batch_stride = 0, head_stride = 0, sequence_stride = 0;
};

Result<HeadLayout> LayoutOf(const std::vector<int64_t>& x, int64_t num_heads) {
  HeadLayout layout;
  if (x.size() == 4) {
    layout = {x[0], x[1], x[2], x[3], x[1] * x[2] * x[3], x[2] * x[3], x[3]};
  } else if (x.size() == 3 && num_heads > 0 && x[2] % num_heads == 0) {
    layout = {x[0], num_heads, x[1], x[2] / num_heads, x[1] * x[2], x[2] / num_heads, x[2]};
  } else {
    return Unsupported("RotaryEmbedding X of rank " + std::to_string(x.size()) +
                       (x.size() == 3 ? " without a num_heads that divides its last dim" : ""));
  }
  return layout;
}

bool IsRotaryFloat(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

}  // namespace

Result<GeneratedProgram> GenerateRotary(const Graph& typed_body, std::string_view name) {
  const Node* node = SingleOp(typed_body);
  if (node == nullptr || !IsDefaultDomain(*node) || node->op_type() != "RotaryEmbedding") {
    return Unsupported("not a RotaryEmbedding");
  }
  if (node->inputs().size() > 3 && node->input(3) != nullptr) return Unsupported("RotaryEmbedding with position_ids");
  const DataType dtype = node->output(0)->dtype();
  if (!IsRotaryFloat(dtype)) return Unsupported("RotaryEmbedding of " + std::string(NameOf(dtype)));
  for (size_t k = 1; k < 3; ++k) {
    if (node->input(k) == nullptr || node->input(k)->dtype() != dtype) return Unsupported("RotaryEmbedding caches of another dtype");
  }
  const std::vector<int64_t> x = StaticDims(*node->input(0)), cache = StaticDims(*node->input(1));
  FUSIONOPT_ASSIGN_OR_RETURN(HeadLayout layout, LayoutOf(x, node->GetInt("num_heads", 0)));
  const int64_t rotated = node->GetInt("rotary_embedding_dim", 0) > 0 ? node->GetInt("rotary_embedding_dim", 0) : layout.depth;
  const int64_t half = rotated / 2;
  if (rotated % 2 != 0 || rotated > layout.depth || cache != StaticDims(*node->input(2)) || cache.size() != 3 ||
      cache[1] != layout.sequence || cache[2] != half || (cache[0] != layout.batch && cache[0] != 1)) {
    return Unsupported("RotaryEmbedding caches that do not fit X");
  }
  const bool interleaved = node->GetInt("interleaved", 0) != 0;
  const int64_t total = ElementCount(x);
  if (total == 0) return Unsupported("an empty tensor needs no kernel");
  KernelParameters parameters(typed_body);
  const std::string in = parameters.PointerTo(*node->input(0)), cos = parameters.PointerTo(*node->input(1)),
                    sin = parameters.PointerTo(*node->input(2)), out = parameters.OutputPointer(0);
  const std::string index_type = IndexType(total);
  auto n = [](int64_t value) { return std::to_string(value) + "LL"; };
  // Coordinates of element i: x's own dims split, then (b, h, s, d) from them.
  std::string code = "    long long rest = (long long)i;\n";
  code += "    const long long d = (rest % " + n(layout.depth) + ");\n";
  if (x.size() == 4) {
    code += "    rest /= " + n(layout.depth) + ";\n    const long long s = rest % " + n(layout.sequence) + ";\n";
    code += "    const long long b = rest / " + n(layout.sequence * layout.heads) + ";\n";
  } else {
    code += "    rest /= " + n(layout.depth * layout.heads) + ";\n    const long long s = rest % " + n(layout.sequence) + ";\n";
    code += "    const long long b = rest / " + n(layout.sequence) + ";\n";
  }
  const std::string load_self = LoadAsCompute(dtype, in + "[i]");
  code += "    if (d >= " + n(rotated) + ") {\n      " + out + "[i] = " + in + "[i];\n      continue;\n    }\n";
  // The pair's first feature, its offset to the second, and the cache column.
  code += interleaved ? "    const bool second = (d & 1) != 0;\n    const long long j = d / 2;\n    const long long step = 1;\n"
                      : "    const bool second = d >= " + n(half) + ";\n    const long long j = second ? d - " + n(half) +
                            " : d;\n    const long long step = " + n(half) + ";\n";
  code += "    const long long table = b * " + n(cache[0] == 1 ? 0 : layout.sequence * half) + " + s * " + n(half) + " + j;\n";
  code += "    const float c = " + LoadAsCompute(dtype, cos + "[table]") + ", sn = " + LoadAsCompute(dtype, sin + "[table]") + ";\n";
  code += "    const float self = " + load_self + ";\n";
  code += "    const float partner = " + LoadAsCompute(dtype, in + "[second ? (long long)i - step : (long long)i + step]") + ";\n";
  code += "    " + out + "[i] = " + StoreFromCompute(dtype, "second ? self * c + partner * sn : self * c - partner * sn") + ";\n";
  return GridStrideProgram(name, parameters, total, index_type, code,
                           std::string("rotary embedding, ") + (interleaved ? "interleaved" : "rotate-half") + ", " +
                               std::to_string(rotated) + " of " + std::to_string(layout.depth) + " features");
}

}  // namespace fusionopt::cuda
