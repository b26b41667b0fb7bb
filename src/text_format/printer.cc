// PrintModel / PrintGraph: the canonical text form (grammar in docs/ir-text.md).
#include <span>
#include <string>
#include <vector>

#include "text_format/text_format.h"
#include "text_format/internal.h"

namespace fusionopt {
namespace {

using text_detail::FormatName;
using text_detail::FormatWord;
using text_detail::Quote;

template <typename Item, typename Format>
std::string Join(const std::vector<Item>& items, Format format) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += format(items[i]);
  }
  return out;
}

template <typename T, typename Format>
std::string JoinSpan(std::span<const T> items, Format format) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += format(items[i]);
  }
  return out + "]";
}

std::string FormatInt(int64_t value) { return std::to_string(value); }
std::string QuoteString(const std::string& text) { return Quote(text); }

std::string ValueRef(const Value* value) { return "%" + FormatName(value->name()); }

// Input and output lists of a node. An omitted slot is written as nothing; when no slot of
// the list names a value it is spelled %"" instead, so that "()" keeps meaning "no slots".
std::string Slots(const std::vector<Value*>& values) {
  bool any_named = false;
  for (const Value* value : values) any_named = any_named || value != nullptr;
  std::string out = Join(values, [&](const Value* value) {
    if (value != nullptr) return ValueRef(value);
    return std::string(any_named ? "" : "%\"\"");
  });
  if (!out.empty() && out.back() == ' ') out.pop_back();  // "%a, " -> "%a," (trailing slot)
  return out;
}

// Dims print without spaces ("[N,3,224,224]") so they read apart from element lists.
template <typename Item, typename Format>
std::string DimList(const std::vector<Item>& dims, Format format) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i > 0 ? "," : "") + format(dims[i]);
  return out + "]";
}

std::string FormatDim(const Dim& dim) {
  if (dim.is_known()) return std::to_string(dim.value);
  return dim.is_symbolic() ? FormatWord(dim.symbol) : "?";
}

std::string FormatIntDims(const std::vector<int64_t>& dims) {
  return DimList(dims, FormatInt);
}

// "" when nothing is known, so the value prints as just its name.
std::string FormatType(const ValueType& type) {
  if (!type.is_tensor()) return "opaque " + Quote(text_detail::ToHex(type.opaque_type));
  if (type.dtype == DataType::kUndefined && !type.shape) return "";
  std::string out(NameOf(type.dtype));
  if (type.shape) out += DimList(*type.shape, FormatDim);
  return out;
}

std::string TypedValue(const Value* value) {
  std::string type = FormatType(value->type());
  return type.empty() ? ValueRef(value) : type + " " + ValueRef(value);
}

class Printer {
 public:
  explicit Printer(const PrintOptions& options) : options_(options) {}

  void PrintHeader(const Model& model) {
    out_ += "ir_version " + std::to_string(model.ir_version) + "\n";
    for (const auto& opset : model.opsets) {
      out_ += "opset " + Quote(opset.domain) + " " + std::to_string(opset.version) + "\n";
    }
    if (!model.producer_name.empty() || !model.producer_version.empty()) {
      out_ += "producer " + Quote(model.producer_name) + " " + Quote(model.producer_version) +
              "\n";
    }
    if (!model.domain.empty()) out_ += "domain " + Quote(model.domain) + "\n";
    if (model.model_version != 0) {
      out_ += "model_version " + std::to_string(model.model_version) + "\n";
    }
    for (const auto& [key, value] : model.metadata) {
      out_ += "metadata " + Quote(key) + " " + Quote(value) + "\n";
    }
  }

  // Writes `graph ... }` starting at the current position; `indent` is the indentation of
  // the line the block starts on, so nested bodies line up with the node that holds them.
  void PrintGraphBlock(const Graph& graph, const std::string& indent) {
    out_ += "graph ";
    if (!graph.name().empty()) out_ += FormatName(graph.name()) + " ";
    PrintSignature(graph);
    PrintDeclarationsAndBody(graph, indent);
  }

  // `function domain::Name (...) -> (...) attributes [...] opset "" 17 { ... }`.
  void PrintFunction(const Function& function) {
    out_ += "function ";
    if (!function.domain.empty()) out_ += FormatWord(function.domain) + "::";
    out_ += FormatWord(function.name) + " ";
    PrintSignature(*function.body);
    if (!function.attribute_names.empty()) {
      out_ += " attributes [" + Join(function.attribute_names, FormatWord) + "]";
    }
    for (const auto& opset : function.opsets) {
      out_ += " opset " + Quote(opset.domain) + " " + std::to_string(opset.version);
    }
    PrintDeclarationsAndBody(*function.body, "");
    out_ += "\n";
  }

  std::string Take() { return std::move(out_); }

 private:
  void PrintSignature(const Graph& graph) {
    out_ += "(" + Join(graph.inputs(), TypedValue) + ") -> (" +
            Join(graph.outputs(), TypedValue) + ")";
  }

  void PrintDeclarationsAndBody(const Graph& graph, const std::string& indent) {
    std::string declarations;
    for (const Value* value : graph.initializers()) {
      declarations += indent + "  init " + TensorText(*value->initializer(), ValueRef(value) +
                                                                               " = ") + "\n";
    }
    for (const Value* value : graph.IntermediateValuesInOrder()) {
      declarations += indent + "  value " + TypedValue(value) + "\n";
    }
    out_ += declarations.empty() ? " {\n" : "\n" + declarations + indent + "{\n";
    for (const auto& node : graph.nodes()) {
      out_ += indent + "  ";
      PrintNode(*node, indent + "  ");
      out_ += "\n";
    }
    out_ += indent + "}";
  }

  void PrintNode(const Node& node, const std::string& indent) {
    if (!node.outputs().empty()) out_ += Slots(node.outputs()) + " = ";
    if (!node.domain().empty()) out_ += FormatWord(node.domain()) + "::";
    out_ += FormatWord(node.op_type()) + "(" + Slots(node.inputs()) + ")";
    if (!node.attributes().empty()) {
      out_ += " {";
      for (size_t i = 0; i < node.attributes().size(); ++i) {
        const Attribute& attribute = node.attributes()[i];
        if (i > 0) out_ += ", ";
        out_ += FormatWord(attribute.name) + ": ";
        PrintAttributeValue(attribute, indent);
      }
      out_ += "}";
    }
    if (!node.name().empty()) out_ += " @" + FormatName(node.name());
  }

  void PrintAttributeValue(const Attribute& attribute, const std::string& indent) {
    if (!attribute.ref_attr_name.empty()) {
      out_ += "ref " + std::string(NameOf(attribute.kind)) + " " +
              FormatWord(attribute.ref_attr_name);
      return;
    }
    switch (attribute.kind) {
      case AttributeKind::kInt: out_ += std::to_string(attribute.i); break;
      case AttributeKind::kFloat: out_ += text_detail::FormatFloat(attribute.f); break;
      case AttributeKind::kString: out_ += Quote(attribute.s); break;
      case AttributeKind::kInts:
        out_ += attribute.ints.empty() ? "ints[]"
                                       : "[" + Join(attribute.ints, FormatInt) + "]";
        break;
      case AttributeKind::kFloats:
        out_ += attribute.floats.empty()
                    ? "floats[]"
                    : "[" + Join(attribute.floats, text_detail::FormatFloat) + "]";
        break;
      case AttributeKind::kStrings:
        out_ += attribute.strings.empty() ? "strings[]"
                                          : "[" + Join(attribute.strings, QuoteString) + "]";
        break;
      case AttributeKind::kTensor: out_ += "tensor " + TensorText(*attribute.t, ""); break;
      case AttributeKind::kTensors:
        out_ += attribute.tensors.empty()
                    ? "tensors[]"
                    : "[" + Join(attribute.tensors, [&](const TensorPtr& tensor) {
                        return "tensor " + TensorText(*tensor, "");
                      }) + "]";
        break;
      case AttributeKind::kGraph: PrintGraphBlock(*attribute.g, indent); break;
      case AttributeKind::kGraphs: PrintGraphList(attribute.graphs, indent); break;
      case AttributeKind::kOpaque:
        out_ += "opaque " + Quote(text_detail::ToHex(attribute.residual));
        break;
      case AttributeKind::kUndefined: out_ += "undefined"; break;
    }
  }

  void PrintGraphList(const std::vector<std::unique_ptr<Graph>>& graphs,
                      const std::string& indent) {
    if (graphs.empty()) {
      out_ += "graphs[]";
      return;
    }
    out_ += "[";
    for (size_t i = 0; i < graphs.size(); ++i) {
      if (i > 0) out_ += ", ";
      PrintGraphBlock(*graphs[i], indent);
    }
    out_ += "]";
  }

  // "float[2,3] <between>[1.0, ...]": the type, then `between`, then the contents.
  std::string TensorText(const Tensor& tensor, const std::string& between) {
    return std::string(NameOf(tensor.dtype())) + FormatIntDims(tensor.dims()) + " " + between +
           TensorContents(tensor);
  }

  std::string TensorContents(const Tensor& tensor) {
    const int64_t count = tensor.NumElements();
    const bool too_big = count < 0 || (options_.max_literal_elements >= 0 &&
                                       count > options_.max_literal_elements);
    if (tensor.dtype() == DataType::kString) {
      uint64_t text_bytes = 0;
      for (const auto& text : tensor.strings()) text_bytes += text.size();
      if (too_big || tensor.strings().size() != static_cast<size_t>(count)) {
        return Elided(text_bytes);
      }
      return "[" + Join(tensor.strings(), QuoteString) + "]";
    }
    // A tensor whose byte count disagrees with its dims cannot be listed element-wise.
    if (too_big || tensor.nbytes() != ByteSizeOf(tensor.dtype(), static_cast<uint64_t>(count))) {
      return Elided(tensor.nbytes());
    }
    return ElementList(tensor);
  }

  static std::string Elided(uint64_t bytes) {
    return "<elided " + std::to_string(bytes) + " bytes>";
  }

  template <typename T>
  static std::string IntegerList(const Tensor& tensor) {
    return JoinSpan(tensor.values<T>(), [](T value) { return std::to_string(value); });
  }

  static std::string ElementList(const Tensor& tensor) {
    switch (tensor.dtype()) {
      case DataType::kFloat:
        return JoinSpan(tensor.values<float>(), text_detail::FormatFloat);
      case DataType::kDouble:
        return JoinSpan(tensor.values<double>(), text_detail::FormatDouble);
      case DataType::kFloat16:
        return JoinSpan(tensor.values<uint16_t>(), text_detail::FormatFloat16);
      case DataType::kBFloat16:
        return JoinSpan(tensor.values<uint16_t>(), text_detail::FormatBFloat16);
      case DataType::kInt8: return IntegerList<int8_t>(tensor);
      case DataType::kInt16: return IntegerList<int16_t>(tensor);
      case DataType::kInt32: return IntegerList<int32_t>(tensor);
      case DataType::kInt64: return IntegerList<int64_t>(tensor);
      case DataType::kUint8: case DataType::kBool: return IntegerList<uint8_t>(tensor);
      case DataType::kUint16: return IntegerList<uint16_t>(tensor);
      case DataType::kUint32: return IntegerList<uint32_t>(tensor);
      case DataType::kUint64: return IntegerList<uint64_t>(tensor);
      default: {
        // Types without a decimal literal (complex, float8, 4-bit) keep their raw bytes.
        auto bytes = tensor.bytes();
        return "raw " + Quote(text_detail::ToHex(std::string_view(
                            reinterpret_cast<const char*>(bytes.data()), bytes.size())));
      }
    }
  }

  const PrintOptions& options_;
  std::string out_;
};

}  // namespace

std::string PrintModel(const Model& model, const PrintOptions& options) {
  Printer printer(options);
  printer.PrintHeader(model);
  std::string out = printer.Take();
  if (model.graph != nullptr) out += PrintGraph(*model.graph, options);
  for (const auto& function : model.functions) {
    Printer function_printer(options);
    function_printer.PrintFunction(*function);
    out += "\n" + function_printer.Take();
  }
  return out;
}

std::string PrintGraph(const Graph& graph, const PrintOptions& options) {
  Printer printer(options);
  printer.PrintGraphBlock(graph, "");
  return printer.Take() + "\n";
}

}  // namespace fusionopt
