// Data-movement kernels: Transpose, Expand, Tile, Slice, Gather, GatherElements, GatherND, Concat, Split, Pad,
// DepthToSpace, SpaceToDepth (data_movement_codegen.h).
#include "cuda_runtime/codegen/data_movement_codegen.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "ir/constant_value.h"

namespace fusionopt::cuda {
namespace {

// What one op's generator contributes: the loop body copying element i (Split: input element i
// to its output; every other op: output element i from its source).
struct Emitted {
  Emitted(std::string loop_body, std::string what, std::string before_loop = {})
      : body(std::move(loop_body)), description(std::move(what)), prologue(std::move(before_loop)) {}
  std::string body;         // statements inside the loop, `i` and the coordinates in scope
  std::string description;  // "transpose", ...
  std::string prologue;     // statements before the loop (per thread), if any
};

class Emitter {
 public:
  Emitter(const Graph& body, const Node& node) : body_(body), node_(node), parameters_(body) {}

  const Node& node() const { return node_; }
  KernelParameters& parameters() { return parameters_; }
  // Input `index` as a bits pointer expression.
  std::string In(size_t index) { return Cast(parameters_.PointerTo(*node_.input(index)), *node_.input(index), true); }
  std::string Out(size_t index) {
    return Cast(parameters_.OutputPointer(OutputIndex(index)), *node_.output(index), false);
  }
  std::vector<int64_t> InDims(size_t index) const { return StaticDims(*node_.input(index)); }
  std::vector<int64_t> OutDims(size_t index = 0) const { return StaticDims(*node_.output(index)); }
  std::string Bits() const { return *BitsType(node_.output(0)->dtype()); }

 private:
  int OutputIndex(size_t index) const {
    const auto& outputs = body_.outputs();
    return static_cast<int>(std::find(outputs.begin(), outputs.end(), node_.output(index)) - outputs.begin());
  }
  std::string Cast(const std::string& pointer, const Value& value, bool is_const) const {
    return "reinterpret_cast<" + std::string(is_const ? "const " : "") + *BitsType(value.dtype()) + "*>(" + pointer +
           ")";
  }
  const Graph& body_;
  const Node& node_;
  KernelParameters parameters_;
};

std::string Sum(const std::vector<std::string>& terms) {
  std::string out;
  for (const std::string& term : terms) out += (out.empty() ? "" : " + ") + term;
  return out.empty() ? "0LL" : "(" + out + ")";
}

std::string Times(const std::string& coordinate, int64_t stride) {
  if (stride == 0 || coordinate == "0") return "";
  return "(long long)(" + coordinate + ")" + (stride == 1 ? "" : " * " + std::to_string(stride) + "LL");
}

std::string Copy(Emitter& emitter, size_t input, const std::string& offset) {
  return "    " + emitter.Out(0) + "[i] = " + emitter.In(input) + "[" + offset + "];\n";
}

// Output coordinate names `o<axis>` (SplitIndex's, "0" for size-1 axes).
using Coordinates = std::vector<std::string>;

Result<Emitted> Transpose(Emitter& e, const Coordinates& c) {
  const std::vector<int64_t> in = e.InDims(0);
  std::vector<int64_t> perm(in.size());
  for (size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int64_t>(perm.size() - 1 - k);
  if (auto given = e.node().GetInts("perm")) perm = *given;
  if (perm.size() != in.size()) return Unsupported("Transpose perm of the wrong length");
  const std::vector<int64_t> strides = RowMajorStrides(in);
  std::vector<std::string> terms;
  for (size_t j = 0; j < perm.size(); ++j) {
    if (perm[j] < 0 || perm[j] >= static_cast<int64_t>(in.size())) return Unsupported("bad perm");
    std::string term = Times(c[j], strides[static_cast<size_t>(perm[j])]);
    if (!term.empty()) terms.push_back(term);
  }
  return Emitted{Copy(e, 0, Sum(terms)), "transpose"};
}

Result<Emitted> Expand(Emitter& e, const Coordinates& c) {
  return Emitted{Copy(e, 0, BroadcastOffset(e.InDims(0), e.OutDims(), c)), "expand"};
}

Result<Emitted> Tile(Emitter& e, const Coordinates& c) {
  const std::vector<int64_t> in = e.InDims(0), out = e.OutDims();
  if (in.size() != out.size()) return Unsupported("Tile changes the rank");
  const std::vector<int64_t> strides = RowMajorStrides(in);
  std::vector<std::string> terms;
  for (size_t a = 0; a < in.size(); ++a) {
    if (in[a] == 0 || out[a] % in[a] != 0) return Unsupported("Tile output not a multiple of input");
    if (in[a] == 1) continue;
    const std::string coordinate = in[a] == out[a] ? c[a] : "(" + c[a] + " % " + std::to_string(in[a]) + ")";
    terms.push_back(Times(coordinate, strides[a]));
  }
  return Emitted{Copy(e, 0, Sum(terms)), "tile"};
}

// Slice with starts/ends/axes/steps read at run time (computed by shape arithmetic the host
// does not fold): each thread derives every axis's first element and step once, before its
// loop. The output's static dims stand for the ends; a source coordinate outside the input
// (values that disagree with the shapes the kernel was built for) is written as zero bits.
Result<Emitted> SliceAtRunTime(Emitter& e, const Coordinates& c) {
  const Node& node = e.node();
  const std::vector<int64_t> in = e.InDims(0);
  for (size_t k = 1; k < node.inputs().size(); ++k) {
    const Value* input = node.input(k);
    if (input != nullptr && input->dtype() != DataType::kInt32 && input->dtype() != DataType::kInt64) {
      return Unsupported("Slice parameters of " + std::string(NameOf(input->dtype())));
    }
  }
  const int64_t count = ElementCount(e.InDims(1));
  const size_t rank = in.size();
  auto read = [&](size_t input, const std::string& fallback) {
    return node.input(input) == nullptr ? fallback
                                        : "(long long)" + e.parameters().PointerTo(*node.input(input)) + "[k]";
  };
  std::string setup = "  long long first[" + std::to_string(rank) + "], step[" + std::to_string(rank) + "];\n";
  for (size_t a = 0; a < rank; ++a) setup += "  first[" + std::to_string(a) + "] = 0; step[" + std::to_string(a) + "] = 1;\n";
  setup += "#pragma unroll\n  for (int k = 0; k < " + std::to_string(count) + "; ++k) {\n";
  setup += "    long long axis = " + read(3, "k") + ";\n    if (axis < 0) axis += " + std::to_string(rank) + ";\n";
  setup += "    const long long s = " + read(4, "1") + ";\n    long long start = " + read(1, "0") + ";\n";
  setup += "#pragma unroll\n    for (int a = 0; a < " + std::to_string(rank) + "; ++a) {\n";
  setup += "      if (axis != a) continue;\n      const long long dim = fo_dims[a];\n";
  setup += "      if (start < 0) start += dim;\n";
  setup += "      start = start < 0 ? 0 : start;\n";
  setup += "      start = s > 0 ? (start > dim ? dim : start) : (start > dim - 1 ? dim - 1 : start);\n";
  setup += "      first[a] = start;\n      step[a] = s;\n    }\n  }\n";
  std::string dims = "  const long long fo_dims[" + std::to_string(rank) + "] = {";
  for (size_t a = 0; a < rank; ++a) dims += (a ? ", " : "") + std::to_string(in[a]) + "LL";
  setup = dims + "};\n" + setup;
  const std::vector<int64_t> strides = RowMajorStrides(in);
  std::string body = "    bool inside = true;\n    long long source = 0;\n";
  for (size_t a = 0; a < rank; ++a) {
    const std::string at = "first[" + std::to_string(a) + "] + (long long)(" + c[a] + ") * step[" + std::to_string(a) + "]";
    body += "    { const long long x = " + at + "; inside = inside && x >= 0 && x < " + std::to_string(in[a]) +
            "LL; source += x * " + std::to_string(strides[a]) + "LL; }\n";
  }
  body += "    " + e.Out(0) + "[i] = inside ? " + e.In(0) + "[source] : (" + e.Bits() + ")0;\n";
  return Emitted{body, "slice (parameters read at run time)", setup};
}

// Slice's per-axis first element and step, from constant inputs (opset >= 10) or attributes,
// folded into the index expression; parameters computed at run time take SliceAtRunTime.
Result<Emitted> Slice(Emitter& e, const Coordinates& c) {
  const Node& node = e.node();
  const std::vector<int64_t> in = e.InDims(0), out = e.OutDims();
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (node.inputs().size() >= 3) {
    starts = ConstantInts(node.input(1), InitializerRule::kAllConstant), ends = ConstantInts(node.input(2), InitializerRule::kAllConstant);
    if (node.input(3) != nullptr && !(axes = ConstantInts(node.input(3), InitializerRule::kAllConstant))) starts.reset();
    if (node.input(4) != nullptr && !(steps = ConstantInts(node.input(4), InitializerRule::kAllConstant))) starts.reset();
    if (!starts || !ends) return SliceAtRunTime(e, c);
  } else {
    starts = node.GetInts("starts"), ends = node.GetInts("ends"), axes = node.GetInts("axes");
  }
  if (!starts || !ends || starts->size() != ends->size()) return Unsupported("Slice without starts/ends");
  std::vector<int64_t> first(in.size(), 0), step(in.size(), 1);
  for (size_t k = 0; k < starts->size(); ++k) {
    int64_t axis = axes ? (*axes)[k] : static_cast<int64_t>(k);
    if (axis < 0) axis += static_cast<int64_t>(in.size());
    if (axis < 0 || axis >= static_cast<int64_t>(in.size())) return Unsupported("Slice axis out of range");
    const int64_t dim = in[static_cast<size_t>(axis)];
    const int64_t s = steps ? (*steps)[k] : 1;
    if (s == 0) return Unsupported("Slice step 0");
    int64_t start = (*starts)[k];
    if (start < 0) start += dim;
    start = s > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
    first[static_cast<size_t>(axis)] = start;
    step[static_cast<size_t>(axis)] = s;
  }
  const std::vector<int64_t> strides = RowMajorStrides(in);
  std::vector<std::string> terms;
  int64_t base = 0;
  for (size_t a = 0; a < in.size(); ++a) {
    base += first[a] * strides[a];
    std::string term = Times(c[a], step[a] * strides[a]);
    if (!term.empty()) terms.push_back(term);
  }
  terms.push_back(std::to_string(base) + "LL");
  return Emitted{Copy(e, 0, Sum(terms)), "slice"};
}

Status CheckIndexType(const Node& node, size_t input) {
  const DataType type = node.input(input)->dtype();
  if (type != DataType::kInt32 && type != DataType::kInt64) {
    return Unsupported(node.op_type() + " indices of " + std::string(NameOf(type)));
  }
  return Status::Ok();
}

// An index read at run time, negative ones counted from the end; `valid` collects the range
// checks (an index out of range writes zero bits, as Gather's does).
std::string ReadIndex(const std::string& name, const std::string& pointer, const std::string& offset, int64_t dim,
                      std::string& valid) {
  const std::string size = std::to_string(dim) + "LL";
  valid += " && " + name + " >= 0 && " + name + " < " + size;
  return "    long long " + name + " = (long long)" + pointer + "[" + offset + "];\n    if (" + name + " < 0) " + name +
         " += " + size + ";\n";
}

Result<Emitted> Gather(Emitter& e, const Coordinates& c) {
  const std::vector<int64_t> data = e.InDims(0), indices = e.InDims(1);
  int64_t axis = e.node().GetInt("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(data.size());
  if (axis < 0 || axis >= static_cast<int64_t>(data.size())) return Unsupported("Gather axis out of range");
  FUSIONOPT_RETURN_IF_ERROR(CheckIndexType(e.node(), 1));
  const size_t a = static_cast<size_t>(axis), q = indices.size();
  const std::vector<int64_t> data_strides = RowMajorStrides(data), index_strides = RowMajorStrides(indices);
  std::vector<std::string> index_terms, data_terms;
  for (size_t k = 0; k < q; ++k) index_terms.push_back(Times(c[a + k], index_strides[k]));
  for (size_t k = 0; k < data.size(); ++k) {
    if (k == a) continue;
    data_terms.push_back(Times(c[k < a ? k : k + q - 1], data_strides[k]));
  }
  std::erase(index_terms, std::string());
  std::erase(data_terms, std::string());
  const std::string indices_pointer = e.parameters().PointerTo(*e.node().input(1));
  const std::string dim = std::to_string(data[a]);
  std::string body = "    long long index = (long long)" + indices_pointer + "[" + Sum(index_terms) + "];\n";
  body += "    if (index < 0) index += " + dim + "LL;\n";
  body += "    " + e.Out(0) + "[i] = (index >= 0 && index < " + dim + "LL) ? " + e.In(0) + "[" + Sum(data_terms) +
          " + index * " + std::to_string(data_strides[a]) + "LL] : (" + e.Bits() + ")0;\n";
  return Emitted{body, "gather"};
}

Result<int64_t> AxisAttribute(const Node& node, size_t rank) {
  int64_t axis = node.GetInt("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(rank);
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) return Unsupported(node.op_type() + " axis out of range");
  return axis;
}

// GatherElements: the output has the indices' shape; element c reads data at c with its
// `axis` coordinate replaced by the index there.
Result<Emitted> GatherElements(Emitter& e, const Coordinates& c) {
  const std::vector<int64_t> data = e.InDims(0), indices = e.InDims(1);
  if (data.size() != indices.size()) return Unsupported("GatherElements indices of another rank");
  FUSIONOPT_RETURN_IF_ERROR(CheckIndexType(e.node(), 1));
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t axis, AxisAttribute(e.node(), data.size()));
  const std::vector<int64_t> data_strides = RowMajorStrides(data), index_strides = RowMajorStrides(indices);
  std::vector<std::string> index_terms, data_terms;
  for (size_t k = 0; k < data.size(); ++k) {
    index_terms.push_back(Times(c[k], index_strides[k]));
    if (static_cast<int64_t>(k) != axis) data_terms.push_back(Times(c[k], data_strides[k]));
  }
  std::erase(index_terms, std::string());
  std::erase(data_terms, std::string());
  std::string valid = "true";
  std::string body = ReadIndex("index", e.parameters().PointerTo(*e.node().input(1)), Sum(index_terms),
                               data[static_cast<size_t>(axis)], valid);
  data_terms.push_back("index * " + std::to_string(data_strides[static_cast<size_t>(axis)]) + "LL");
  body += "    " + e.Out(0) + "[i] = (" + valid + ") ? " + e.In(0) + "[" + Sum(data_terms) + "] : (" + e.Bits() + ")0;\n";
  return Emitted{body, "gather elements"};
}

// GatherND with batch_dims b: output coordinates are the indices' leading q-1 (the first b
// shared with data) then the coordinates inside the gathered slice; the last index axis holds
// k coordinates into data's axes b..b+k-1.
Result<Emitted> GatherND(Emitter& e, const Coordinates& c) {
  const std::vector<int64_t> data = e.InDims(0), indices = e.InDims(1);
  FUSIONOPT_RETURN_IF_ERROR(CheckIndexType(e.node(), 1));
  const int64_t batch = e.node().GetInt("batch_dims", 0);
  if (indices.empty()) return Unsupported("GatherND with scalar indices");
  const int64_t k = indices.back();
  const auto q = static_cast<int64_t>(indices.size()), r = static_cast<int64_t>(data.size());
  if (batch < 0 || batch >= q || batch + k > r) return Unsupported("GatherND batch_dims or index depth out of range");
  const std::vector<int64_t> data_strides = RowMajorStrides(data), index_strides = RowMajorStrides(indices);
  std::vector<std::string> index_base, data_terms;
  for (int64_t j = 0; j < q - 1; ++j) index_base.push_back(Times(c[static_cast<size_t>(j)], index_strides[static_cast<size_t>(j)]));
  for (int64_t j = 0; j < batch; ++j) data_terms.push_back(Times(c[static_cast<size_t>(j)], data_strides[static_cast<size_t>(j)]));
  for (int64_t m = 0; m < r - batch - k; ++m) {
    data_terms.push_back(Times(c[static_cast<size_t>(q - 1 + m)], data_strides[static_cast<size_t>(batch + k + m)]));
  }
  std::erase(index_base, std::string());
  std::string valid = "true", body;
  const std::string pointer = e.parameters().PointerTo(*e.node().input(1));
  for (int64_t t = 0; t < k; ++t) {
    const std::string name = "index" + std::to_string(t);
    std::vector<std::string> at = index_base;
    at.push_back(std::to_string(t) + "LL");
    body += ReadIndex(name, pointer, Sum(at), data[static_cast<size_t>(batch + t)], valid);
    data_terms.push_back(name + " * " + std::to_string(data_strides[static_cast<size_t>(batch + t)]) + "LL");
  }
  std::erase(data_terms, std::string());
  body += "    " + e.Out(0) + "[i] = (" + valid + ") ? " + e.In(0) + "[" + Sum(data_terms) + "] : (" + e.Bits() + ")0;\n";
  return Emitted{body, "gather nd"};
}

Result<Emitted> Concat(Emitter& e, const Coordinates& c) {
  const std::vector<int64_t> out = e.OutDims();
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t axis, AxisAttribute(e.node(), out.size()));
  const size_t a = static_cast<size_t>(axis);
  std::string body;
  int64_t offset = 0;
  for (size_t k = 0; k < e.node().inputs().size(); ++k) {
    const std::vector<int64_t> in = e.InDims(k);
    if (in.size() != out.size()) return Unsupported("Concat inputs of different ranks");
    if (in[a] == 0) continue;
    const std::vector<int64_t> strides = RowMajorStrides(in);
    std::vector<std::string> terms;
    for (size_t j = 0; j < in.size(); ++j) {
      const std::string coordinate = j == a ? "(" + c[j] + " - " + std::to_string(offset) + ")" : c[j];
      if (in[j] != 1 || j == a) terms.push_back(Times(coordinate, strides[j]));
    }
    std::erase(terms, std::string());
    offset += in[a];
    body += std::string(body.empty() ? "    if" : "    else if") + " (" + c[a] + " < " + std::to_string(offset) +
            ") " + e.Out(0) + "[i] = " + e.In(k) + "[" + Sum(terms) + "];\n";
  }
  if (offset != out[a]) return InternalError("Concat input widths do not add up to the output's");
  return Emitted{body, "concat of " + std::to_string(e.node().inputs().size())};
}

// Split walks its input: `c` are the input's coordinates, and each output takes its run.
Result<Emitted> Split(Emitter& e, const Coordinates& c) {
  const std::vector<int64_t> in = e.InDims(0);
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t axis, AxisAttribute(e.node(), in.size()));
  const size_t a = static_cast<size_t>(axis);
  std::string body;
  int64_t offset = 0;
  for (size_t k = 0; k < e.node().outputs().size(); ++k) {
    if (e.node().output(k) == nullptr) return Unsupported("Split with an omitted output");
    const std::vector<int64_t> out = e.OutDims(k);
    if (out[a] == 0) continue;
    const std::vector<int64_t> strides = RowMajorStrides(out);
    std::vector<std::string> terms;
    for (size_t j = 0; j < out.size(); ++j) {
      const std::string coordinate = j == a ? "(" + c[j] + " - " + std::to_string(offset) + ")" : c[j];
      if (out[j] != 1 || j == a) terms.push_back(Times(coordinate, strides[j]));
    }
    std::erase(terms, std::string());
    offset += out[a];
    body += std::string(body.empty() ? "    if" : "    else if") + " (" + c[a] + " < " + std::to_string(offset) +
            ") " + e.Out(k) + "[" + Sum(terms) + "] = " + e.In(0) + "[i];\n";
  }
  if (offset != in[a]) return InternalError("Split output widths do not add up to the input's");
  return Emitted{body, "split into " + std::to_string(e.node().outputs().size())};
}

// Pad's begin pads per axis, from the constant pads (and axes) input or the attribute.
Result<std::vector<int64_t>> BeginPads(const Node& node, size_t rank) {
  std::optional<std::vector<int64_t>> pads = node.GetInts("pads");
  std::optional<std::vector<int64_t>> axes;
  if (node.input(1) != nullptr) {
    pads = ConstantInts(node.input(1), InitializerRule::kAllConstant);
    if (node.input(3) != nullptr && !(axes = ConstantInts(node.input(3), InitializerRule::kAllConstant))) pads.reset();
  }
  if (!pads) return Unsupported("Pad with pads or axes not constant");
  std::vector<int64_t> begin(rank, 0);
  const size_t count = axes ? axes->size() : rank;
  if (pads->size() != 2 * count) return Unsupported("Pad pads of the wrong length");
  for (size_t k = 0; k < count; ++k) {
    int64_t axis = axes ? (*axes)[k] : static_cast<int64_t>(k);
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank)) return Unsupported("Pad axis out of range");
    begin[static_cast<size_t>(axis)] = (*pads)[k];
  }
  return begin;
}

// The pad value's bits: a constant's, the attribute's (opset < 11), or read at run time.
Result<std::string> PadValueBits(Emitter& e) {
  const Node& node = e.node();
  const DataType dtype = node.output(0)->dtype();
  const Value* value = node.input(2);
  if (value != nullptr) {
    TensorPtr constant = ConstantValueOf(*value, InitializerRule::kAllConstant);
    if (constant == nullptr) return "reinterpret_cast<const " + e.Bits() + "*>(" + e.parameters().PointerTo(*value) + ")[0]";
    if (constant->dtype() != dtype || constant->NumElements() != 1) return Unsupported("bad Pad value");
    uint64_t bits = 0;
    std::memcpy(&bits, constant->bytes().data(), std::min<size_t>(sizeof bits, constant->bytes().size()));
    return "(" + e.Bits() + ")" + std::to_string(bits) + "ULL";
  }
  const float attribute = node.GetFloat("value", 0.0f);
  if (attribute != 0.0f && dtype != DataType::kFloat) return Unsupported("Pad value attribute on non-float");
  uint32_t bits = 0;
  std::memcpy(&bits, &attribute, sizeof bits);
  return "(" + e.Bits() + ")" + std::to_string(bits) + "U";
}

Result<Emitted> Pad(Emitter& e, const Coordinates& c) {
  const std::vector<int64_t> in = e.InDims(0), out = e.OutDims();
  const std::string mode = e.node().GetString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap") {
    return Unsupported("Pad mode '" + mode + "'");
  }
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> begin, BeginPads(e.node(), in.size()));
  const std::vector<int64_t> strides = RowMajorStrides(in);
  std::string body = "    bool inside = true;\n    long long source = 0;\n";
  for (size_t a = 0; a < in.size(); ++a) {
    if (in[a] == 0) return Unsupported("Pad of an empty axis");
    const std::string x = "x" + std::to_string(a), n = std::to_string(in[a]) + "LL";
    body += "    {\n      long long " + x + " = (long long)(" + c[a] + ") - " + std::to_string(begin[a]) + "LL;\n";
    if (mode == "constant") {
      body += "      inside = inside && " + x + " >= 0 && " + x + " < " + n + ";\n";
    } else if (mode == "edge") {
      body += "      " + x + " = " + x + " < 0 ? 0 : (" + x + " >= " + n + " ? " + n + " - 1 : " + x + ");\n";
    } else if (mode == "wrap") {
      body += "      " + x + " = ((" + x + " % " + n + ") + " + n + ") % " + n + ";\n";
    } else {
      const std::string period = std::to_string(2 * (in[a] - 1)) + "LL";
      body += in[a] == 1 ? "      " + x + " = 0;\n"
                         : "      { long long m = ((" + x + " % " + period + ") + " + period + ") % " + period + "; " +
                               x + " = m < " + n + " ? m : " + period + " - m; }\n";
    }
    body += "      source += " + x + " * " + std::to_string(strides[a]) + "LL;\n    }\n";
  }
  std::string value = "0";
  if (mode == "constant") {
    FUSIONOPT_ASSIGN_OR_RETURN(value, PadValueBits(e));
  }
  body += "    " + e.Out(0) + "[i] = inside ? " + e.In(0) + "[source] : " + value + ";\n";
  return Emitted{body, "pad (" + mode + ")"};
}

// DepthToSpace / SpaceToDepth on [N,C,H,W]: the source channel and position of each output element.
Result<Emitted> DepthSpace(Emitter& e, const Coordinates& c, bool to_space) {
  const std::vector<int64_t> in = e.InDims(0);
  const int64_t block = e.node().GetInt("blocksize", 0);
  if (in.size() != 4 || block <= 0) return Unsupported(e.node().op_type() + " needs [N,C,H,W]");
  const std::string b = std::to_string(block), C = std::to_string(in[1]), H = std::to_string(in[2]),
                    W = std::to_string(in[3]);
  std::string channel, row, column;
  if (to_space) {
    const int64_t out_channels = in[1] / (block * block);
    const std::string y = "(" + c[2] + " % " + b + ")", x = "(" + c[3] + " % " + b + ")";
    const bool crd = e.node().GetString("mode", "DCR") == "CRD";
    channel = crd ? "(long long)(" + c[1] + ") * " + std::to_string(block * block) + " + " + y + " * " + b + " + " + x
                  : "((long long)" + y + " * " + b + " + " + x + ") * " + std::to_string(out_channels) + " + " + c[1];
    row = "(" + c[2] + " / " + b + ")", column = "(" + c[3] + " / " + b + ")";
  } else {
    // out[n][(y·b + x)·C + ch][h][w] = in[n][ch][h·b + y][w·b + x]
    const std::string plane = "((long long)(" + c[1] + ") / " + C + ")";
    channel = "((long long)(" + c[1] + ") % " + C + ")";
    row = "(long long)(" + c[2] + ") * " + b + " + " + plane + " / " + b;
    column = "(long long)(" + c[3] + ") * " + b + " + " + plane + " % " + b;
  }
  const std::string offset = "((((long long)(" + c[0] + ") * " + C + " + " + channel + ") * " + H + " + " + row +
                             ") * " + W + " + " + column + ")";
  return Emitted{Copy(e, 0, offset), to_space ? "depth to space" : "space to depth"};
}

using Generator = std::function<Result<Emitted>(Emitter&, const Coordinates&)>;

const std::map<std::string, Generator, std::less<>>& Generators() {
  static const std::map<std::string, Generator, std::less<>> kGenerators = {
      {"Transpose", Transpose},
      {"Expand", Expand},
      {"Tile", Tile},
      {"Slice", Slice},
      {"Gather", Gather},
      {"GatherElements", GatherElements},
      {"GatherND", GatherND},
      {"Concat", Concat},
      {"Split", Split},
      {"Pad", Pad},
      {"DepthToSpace", [](Emitter& e, const Coordinates& c) { return DepthSpace(e, c, true); }},
      {"SpaceToDepth", [](Emitter& e, const Coordinates& c) { return DepthSpace(e, c, false); }},
  };
  return kGenerators;
}

bool IsView(std::string_view op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity";
}

Status CheckDtypes(const Node& node) {
  if (node.output(0) == nullptr) return Unsupported(node.op_type() + " with its first output omitted");
  for (const Value* value : node.outputs()) {
    if (value != nullptr && !BitsType(value->dtype())) {
      return Unsupported(node.op_type() + " of " + std::string(NameOf(value->dtype())));
    }
  }
  const size_t data_inputs = node.op_type() == "Concat" ? node.inputs().size() : 1;
  for (size_t k = 0; k < data_inputs; ++k) {
    if (node.input(k) == nullptr || node.input(k)->dtype() != node.output(0)->dtype()) {
      return Unsupported(node.op_type() + " input and output dtypes differ");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<GeneratedProgram> GenerateDataMovement(const Graph& typed_body, std::string_view name) {
  const Node* node = SingleOp(typed_body);
  if (node == nullptr || !IsDefaultDomain(*node)) return Unsupported("not a single standard op");
  if (IsView(node->op_type())) return Unsupported("a view: no kernel");
  auto generator = Generators().find(node->op_type());
  if (generator == Generators().end()) return Unsupported(node->op_type() + " is not a data-movement op");
  FUSIONOPT_RETURN_IF_ERROR(CheckDtypes(*node));
  Emitter emitter(typed_body, *node);
  const bool walks_input = node->op_type() == "Split";
  const std::vector<int64_t> dims = walks_input ? emitter.InDims(0) : emitter.OutDims();
  const int64_t total = ElementCount(dims);
  if (total == 0) return Unsupported("an empty tensor needs no kernel");
  int64_t largest = total;
  for (const Value* value : node->inputs()) {
    if (value != nullptr) largest = std::max(largest, ElementCount(StaticDims(*value)));
  }
  const std::string index_type = IndexType(largest);
  Coordinates coordinates;
  const std::string split = SplitIndex(dims, "i", index_type, "o", coordinates);
  FUSIONOPT_ASSIGN_OR_RETURN(Emitted emitted, generator->second(emitter, coordinates));

  return GridStrideProgram(name, emitter.parameters(), total, index_type, split + emitted.body,
                           "data movement: " + emitted.description + ", grid-stride, " + index_type + " indices",
                           emitted.prologue);
}

}  // namespace fusionopt::cuda
