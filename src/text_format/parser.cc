// ParseModel: text form -> IR (grammar in docs/ir-text.md).
//
// Two steps. The parser reads the whole text into a syntax tree that keeps value names as
// strings with their positions; the builder then creates the graph. Building after reading
// is what lets a node use a value that a later line defines, and lets a subgraph read a
// value of its enclosing graph that is defined after the node holding the subgraph.
#include <charconv>
#include <set>

#include "text_format/text_format.h"
#include "text_format/internal.h"

namespace fusionopt {
namespace {

using text_detail::AttributeSyntax;
using text_detail::Cursor;
using text_detail::GraphSyntax;
using text_detail::InitSyntax;
using text_detail::NameRef;
using text_detail::NodeSyntax;
using text_detail::NumberToken;
using text_detail::TypedName;

struct TensorTypeSyntax {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  size_t offset = 0;
};

std::string Describe(const TensorTypeSyntax& type) {
  std::string out = std::string(NameOf(type.dtype)) + "[";
  for (size_t i = 0; i < type.dims.size(); ++i) {
    out += (i > 0 ? "," : "") + std::to_string(type.dims[i]);
  }
  return out + "]";
}

template <typename T>
T Identity(T value) {
  return value;
}

template <typename T>
Result<T> ToInteger(const Cursor& cursor, const NumberToken& token, std::string_view type) {
  if (token.is_float) {
    return cursor.ErrorAt(token.offset, "expected an integer (" + std::string(type) +
                                            ") but found '" + token.text + "'");
  }
  T value{};
  const char* end = token.text.data() + token.text.size();
  auto result = std::from_chars(token.text.data(), end, value);
  if (result.ec != std::errc() || result.ptr != end) {
    return cursor.ErrorAt(token.offset, "'" + token.text + "' is out of range for " +
                                            std::string(type));
  }
  return value;
}

template <typename T>
Result<T> ToFloating(const Cursor& cursor, const NumberToken& token, std::string_view type) {
  T value{};
  const char* end = token.text.data() + token.text.size();
  auto result = std::from_chars(token.text.data(), end, value);
  if (result.ec != std::errc() || result.ptr != end) {
    return cursor.ErrorAt(token.offset, "'" + token.text + "' is out of range for " +
                                            std::string(type));
  }
  return value;
}

std::optional<AttributeKind> AttributeKindNamed(std::string_view name) {
  using K = AttributeKind;
  for (K kind : {K::kFloat, K::kInt, K::kString, K::kTensor, K::kGraph, K::kFloats, K::kInts,
                 K::kStrings, K::kTensors, K::kGraphs}) {
    if (NameOf(kind) == name) return kind;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- text -> syntax tree

// A model-local function: its header fields, and its body as a graph.
struct FunctionSyntax {
  size_t offset = 0;
  std::string domain;
  std::string name;
  std::vector<std::string> attribute_names;
  std::vector<OpsetImport> opsets;
  std::unique_ptr<GraphSyntax> body;
};

std::string FunctionLabel(const FunctionSyntax& function) {
  return (function.domain.empty() ? "" : function.domain + "::") + function.name;
}

struct ModelSyntax {
  std::unique_ptr<GraphSyntax> graph;
  std::vector<FunctionSyntax> functions;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : cursor_(text) {}

  // Fills the model's header fields and returns the syntax of the main graph and functions.
  Result<ModelSyntax> ParseModelText(Model& model) {
    ModelSyntax syntax;
    FUSIONOPT_RETURN_IF_ERROR(Header(model));
    FUSIONOPT_ASSIGN_OR_RETURN(syntax.graph, Graph());
    while (cursor_.PeekWord() == "function") {
      FUSIONOPT_ASSIGN_OR_RETURN(FunctionSyntax function, Function());
      syntax.functions.push_back(std::move(function));
    }
    if (!cursor_.AtEnd()) {
      return cursor_.Error("unexpected " + cursor_.DescribeNext() +
                           (syntax.functions.empty() ? " after the main graph" : " after a function"));
    }
    return syntax;
  }

 private:
  Status Header(Model& model) {
    while (cursor_.PeekWord() != "graph") {
      const size_t at = cursor_.offset();
      if (cursor_.TryKeyword("ir_version")) {
        FUSIONOPT_ASSIGN_OR_RETURN(model.ir_version, Int64("an IR version"));
      } else if (cursor_.TryKeyword("opset")) {
        FUSIONOPT_RETURN_IF_ERROR(Opset(at, model.opsets));
      } else if (cursor_.TryKeyword("producer")) {
        FUSIONOPT_ASSIGN_OR_RETURN(model.producer_name, cursor_.QuotedString("a producer name"));
        FUSIONOPT_ASSIGN_OR_RETURN(model.producer_version,
                                   cursor_.QuotedString("a producer version"));
      } else if (cursor_.TryKeyword("domain")) {
        FUSIONOPT_ASSIGN_OR_RETURN(model.domain, cursor_.QuotedString("a model domain"));
      } else if (cursor_.TryKeyword("model_version")) {
        FUSIONOPT_ASSIGN_OR_RETURN(model.model_version, Int64("a model version"));
      } else if (cursor_.TryKeyword("metadata")) {
        std::pair<std::string, std::string> entry;
        FUSIONOPT_ASSIGN_OR_RETURN(entry.first, cursor_.QuotedString("a metadata key"));
        FUSIONOPT_ASSIGN_OR_RETURN(entry.second, cursor_.QuotedString("a metadata value"));
        model.metadata.push_back(std::move(entry));
      } else {
        return cursor_.Error("expected a header line (ir_version, opset, producer, domain, "
                             "model_version, metadata) or 'graph' but found " +
                             cursor_.DescribeNext());
      }
    }
    return Status::Ok();
  }

  // `opset <domain> <version>` after its keyword; `at` is where the keyword started.
  Status Opset(size_t at, std::vector<OpsetImport>& opsets) {
    OpsetImport opset;
    FUSIONOPT_ASSIGN_OR_RETURN(opset.domain, cursor_.WordOrString("an opset domain"));
    FUSIONOPT_ASSIGN_OR_RETURN(opset.version, Int64("an opset version"));
    auto canonical = [](std::string_view domain) { return domain == "ai.onnx" ? std::string_view() : domain; };
    for (const OpsetImport& existing : opsets) {
      if (canonical(existing.domain) == canonical(opset.domain)) {
        return cursor_.ErrorAt(at, "domain \"" + opset.domain + "\" is imported twice");
      }
    }
    opsets.push_back(std::move(opset));
    return Status::Ok();
  }

  Result<std::unique_ptr<GraphSyntax>> Graph() {
    auto graph = std::make_unique<GraphSyntax>();
    if (!cursor_.TryKeyword("graph")) {
      return cursor_.Error("expected 'graph' but found " + cursor_.DescribeNext());
    }
    if (cursor_.Peek() != '(') {
      FUSIONOPT_ASSIGN_OR_RETURN(graph->name, cursor_.NameHere("a graph name or '('"));
    }
    FUSIONOPT_RETURN_IF_ERROR(Signature(*graph));
    FUSIONOPT_RETURN_IF_ERROR(DeclarationsAndBody(*graph, /*initializers_allowed=*/true));
    return graph;
  }

  // `function [domain ::] Name (...) -> (...) [attributes [...]] {opset ...} {value ...} {...}`
  Result<FunctionSyntax> Function() {
    FunctionSyntax function;
    function.offset = cursor_.offset();
    cursor_.TryKeyword("function");
    FUSIONOPT_ASSIGN_OR_RETURN(std::string callee, cursor_.WordOrString("a function name"));
    if (cursor_.TryConsume("::")) {
      function.domain = std::move(callee);
      FUSIONOPT_ASSIGN_OR_RETURN(function.name, cursor_.WordOrString("a function name"));
    } else {
      function.name = std::move(callee);
    }
    function.body = std::make_unique<GraphSyntax>();
    FUSIONOPT_RETURN_IF_ERROR(Signature(*function.body));
    if (cursor_.TryKeyword("attributes")) {
      FUSIONOPT_ASSIGN_OR_RETURN(function.attribute_names, AttributeNames());
    }
    for (size_t at = cursor_.offset(); cursor_.TryKeyword("opset"); at = cursor_.offset()) {
      FUSIONOPT_RETURN_IF_ERROR(Opset(at, function.opsets));
    }
    FUSIONOPT_RETURN_IF_ERROR(DeclarationsAndBody(*function.body, /*initializers_allowed=*/false));
    return function;
  }

  Result<std::vector<std::string>> AttributeNames() {
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("["));
    std::vector<std::string> names;
    std::set<std::string> seen;
    if (cursor_.TryConsume("]")) return names;
    do {
      const size_t at = cursor_.offset();
      FUSIONOPT_ASSIGN_OR_RETURN(std::string name, cursor_.WordOrString("an attribute name"));
      if (!seen.insert(name).second) return cursor_.ErrorAt(at, "attribute '" + name + "' is listed twice");
      names.push_back(std::move(name));
    } while (cursor_.TryConsume(","));
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("]"));
    return names;
  }

  Status Signature(GraphSyntax& graph) {
    FUSIONOPT_ASSIGN_OR_RETURN(graph.inputs, TypedList());
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("->"));
    FUSIONOPT_ASSIGN_OR_RETURN(graph.outputs, TypedList());
    return Status::Ok();
  }

  // `init` and `value` lines, then the nodes between braces. A function body has no
  // initializers (FunctionProto cannot hold them): its constants are Constant nodes.
  Status DeclarationsAndBody(GraphSyntax& graph, bool initializers_allowed) {
    while (true) {
      const size_t at = cursor_.offset();
      if (cursor_.TryKeyword("init")) {
        if (!initializers_allowed) {
          return cursor_.ErrorAt(at, "a function body has no initializers; use a Constant node");
        }
        FUSIONOPT_RETURN_IF_ERROR(Init(graph));
      } else if (cursor_.TryKeyword("value")) {
        FUSIONOPT_ASSIGN_OR_RETURN(TypedName declaration, TypedValue());
        graph.value_declarations.push_back(std::move(declaration));
      } else {
        break;
      }
    }
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("{"));
    while (cursor_.Peek() != '}') {
      if (cursor_.AtEnd()) return cursor_.Error("expected '}' but found the end of the text");
      FUSIONOPT_ASSIGN_OR_RETURN(NodeSyntax node, Node());
      graph.nodes.push_back(std::move(node));
    }
    return cursor_.Expect("}");
  }

  Result<std::vector<TypedName>> TypedList() {
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("("));
    std::vector<TypedName> list;
    if (cursor_.TryConsume(")")) return list;
    do {
      FUSIONOPT_ASSIGN_OR_RETURN(TypedName item, TypedValue());
      list.push_back(std::move(item));
    } while (cursor_.TryConsume(","));
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect(")"));
    return list;
  }

  Result<TypedName> TypedValue() {
    TypedName item;
    FUSIONOPT_ASSIGN_OR_RETURN(item.type, TypeIfAny());
    FUSIONOPT_ASSIGN_OR_RETURN(item.ref, ValueRef());
    return item;
  }

  Result<NameRef> ValueRef() {
    NameRef ref;
    ref.offset = cursor_.offset();
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("%"));
    FUSIONOPT_ASSIGN_OR_RETURN(ref.name, cursor_.NameHere("a value name after '%'"));
    return ref;
  }

  Result<std::optional<ValueType>> TypeIfAny() {
    if (cursor_.Peek() == '%') return std::optional<ValueType>();
    const size_t at = cursor_.offset();
    FUSIONOPT_ASSIGN_OR_RETURN(std::string word, cursor_.Word("a type or a '%' value name"));
    ValueType type;
    if (word == "opaque") {
      FUSIONOPT_ASSIGN_OR_RETURN(type.opaque_type, HexBytes("an opaque type"));
      if (type.opaque_type.empty()) return cursor_.ErrorAt(at, "an opaque type needs bytes");
      return std::optional<ValueType>(std::move(type));
    }
    if (word != "undefined") {
      FUSIONOPT_ASSIGN_OR_RETURN(type.dtype, DataTypeNamed(word, at));
    }
    if (cursor_.Peek() == '[') {
      FUSIONOPT_ASSIGN_OR_RETURN(type.shape, ShapeText());
    }
    return std::optional<ValueType>(std::move(type));
  }

  Result<DataType> DataTypeNamed(const std::string& word, size_t at) {
    std::optional<DataType> dtype = ParseDataType(word);
    if (!dtype) return cursor_.ErrorAt(at, "unknown data type '" + word + "'");
    return *dtype;
  }

  Result<Shape> ShapeText() {
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("["));
    Shape shape;
    if (cursor_.TryConsume("]")) return shape;
    do {
      const char next = cursor_.Peek();
      if (cursor_.TryConsume("?")) {
        shape.push_back(Dim::Unknown());
      } else if (next == '"' || text_detail::IsWordStart(next)) {
        FUSIONOPT_ASSIGN_OR_RETURN(std::string symbol, cursor_.WordOrString("a dimension"));
        shape.push_back(Dim::Symbol(std::move(symbol)));
      } else {
        FUSIONOPT_ASSIGN_OR_RETURN(int64_t size, NonNegative("a dimension"));
        shape.push_back(Dim::Known(size));
      }
    } while (cursor_.TryConsume(","));
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("]"));
    return shape;
  }

  Result<int64_t> Int64(std::string_view what) {
    FUSIONOPT_ASSIGN_OR_RETURN(NumberToken token, cursor_.Number(what));
    return ToInteger<int64_t>(cursor_, token, "int64");
  }

  Result<int64_t> NonNegative(std::string_view what) {
    const size_t at = cursor_.offset();
    FUSIONOPT_ASSIGN_OR_RETURN(int64_t value, Int64(what));
    if (value < 0) return cursor_.ErrorAt(at, std::string(what) + " cannot be negative");
    return value;
  }

  Result<std::string> HexBytes(std::string_view what) {
    const size_t at = cursor_.offset();
    FUSIONOPT_ASSIGN_OR_RETURN(std::string hex,
                               cursor_.QuotedString("the hex bytes of " + std::string(what)));
    std::optional<std::string> bytes = text_detail::FromHex(hex);
    if (!bytes) return cursor_.ErrorAt(at, "expected pairs of hex digits");
    return *bytes;
  }

  // ------------------------------------------------------------ tensors

  Status Init(GraphSyntax& graph) {
    FUSIONOPT_ASSIGN_OR_RETURN(TensorTypeSyntax type, TensorType());
    InitSyntax init;
    FUSIONOPT_ASSIGN_OR_RETURN(init.ref, ValueRef());
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("="));
    FUSIONOPT_ASSIGN_OR_RETURN(init.tensor, TensorContents(type));
    graph.initializers.push_back(std::move(init));
    return Status::Ok();
  }

  Result<TensorPtr> Tensor() {
    FUSIONOPT_ASSIGN_OR_RETURN(TensorTypeSyntax type, TensorType());
    return TensorContents(type);
  }

  Result<TensorTypeSyntax> TensorType() {
    TensorTypeSyntax type;
    type.offset = cursor_.offset();
    FUSIONOPT_ASSIGN_OR_RETURN(std::string word, cursor_.Word("a tensor data type"));
    FUSIONOPT_ASSIGN_OR_RETURN(type.dtype, DataTypeNamed(word, type.offset));
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("["));
    if (!cursor_.TryConsume("]")) {
      do {
        FUSIONOPT_ASSIGN_OR_RETURN(int64_t dim, NonNegative("a tensor dimension"));
        type.dims.push_back(dim);
      } while (cursor_.TryConsume(","));
      FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("]"));
    }
    return type;
  }

  Result<TensorPtr> TensorContents(const TensorTypeSyntax& type) {
    const size_t at = cursor_.offset();
    if (cursor_.Peek() == '<') {
      return cursor_.Error("the printer elided this tensor's contents, so they cannot be read "
                           "back; print it with a larger PrintOptions::max_literal_elements");
    }
    constexpr uint64_t kMaxLiteralElements = uint64_t{1} << 32;
    uint64_t count = 1;
    for (int64_t dim : type.dims) {
      if (dim != 0 && count > kMaxLiteralElements / static_cast<uint64_t>(dim)) {
        return cursor_.ErrorAt(type.offset, Describe(type) + " is too large for a literal");
      }
      count *= static_cast<uint64_t>(dim);
    }
    if (cursor_.TryKeyword("raw")) return RawTensor(type, count);
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("["));
    std::vector<NumberToken> numbers;
    std::vector<std::string> strings;
    if (!cursor_.TryConsume("]")) {
      do {
        if (type.dtype == DataType::kString) {
          FUSIONOPT_ASSIGN_OR_RETURN(std::string text, cursor_.QuotedString("a string element"));
          strings.push_back(std::move(text));
        } else {
          FUSIONOPT_ASSIGN_OR_RETURN(NumberToken number, cursor_.Number("a tensor element"));
          numbers.push_back(std::move(number));
        }
      } while (cursor_.TryConsume(","));
      FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("]"));
    }
    const uint64_t found = strings.size() + numbers.size();
    if (found != count) {
      return cursor_.ErrorAt(at, Describe(type) + " needs " + std::to_string(count) +
                                     " values but the literal has " + std::to_string(found));
    }
    if (type.dtype == DataType::kString) {
      return std::make_shared<const fusionopt::Tensor>(
          Tensor::Strings(type.dims, std::move(strings)));
    }
    return NumericTensor(type, numbers);
  }

  Result<TensorPtr> RawTensor(const TensorTypeSyntax& type, uint64_t count) {
    const size_t at = cursor_.offset();
    FUSIONOPT_ASSIGN_OR_RETURN(std::string bytes, HexBytes("a raw tensor"));
    if (type.dtype == DataType::kString) {
      return cursor_.ErrorAt(at, "string tensors have no raw form; list the strings");
    }
    const uint64_t expected = ByteSizeOf(type.dtype, count);
    if (bytes.size() != expected) {
      return cursor_.ErrorAt(at, Describe(type) + " needs " + std::to_string(expected) +
                                     " raw bytes but the literal has " +
                                     std::to_string(bytes.size()));
    }
    return std::make_shared<const fusionopt::Tensor>(fusionopt::Tensor::Owned(
        type.dtype, type.dims, std::vector<uint8_t>(bytes.begin(), bytes.end())));
  }

  Result<TensorPtr> NumericTensor(const TensorTypeSyntax& type,
                                  const std::vector<NumberToken>& numbers) {
    using text_detail::DoubleToBFloat16;
    using text_detail::DoubleToFloat16;
    switch (type.dtype) {
      case DataType::kFloat: return FloatTensor<float>(type, numbers, Identity<float>);
      case DataType::kDouble: return FloatTensor<double>(type, numbers, Identity<double>);
      case DataType::kFloat16: return FloatTensor<double>(type, numbers, DoubleToFloat16);
      case DataType::kBFloat16: return FloatTensor<double>(type, numbers, DoubleToBFloat16);
      case DataType::kInt8: return IntegerTensor<int8_t>(type, numbers);
      case DataType::kInt16: return IntegerTensor<int16_t>(type, numbers);
      case DataType::kInt32: return IntegerTensor<int32_t>(type, numbers);
      case DataType::kInt64: return IntegerTensor<int64_t>(type, numbers);
      case DataType::kUint8: case DataType::kBool: return IntegerTensor<uint8_t>(type, numbers);
      case DataType::kUint16: return IntegerTensor<uint16_t>(type, numbers);
      case DataType::kUint32: return IntegerTensor<uint32_t>(type, numbers);
      case DataType::kUint64: return IntegerTensor<uint64_t>(type, numbers);
      default:
        return cursor_.ErrorAt(type.offset, std::string(NameOf(type.dtype)) +
                                                " tensors have no decimal literal; write their "
                                                "bytes as raw \"<hex>\"");
    }
  }

  template <typename Parsed, typename Stored>
  Result<TensorPtr> FloatTensor(const TensorTypeSyntax& type,
                                const std::vector<NumberToken>& numbers,
                                Stored (*encode)(Parsed)) {
    std::vector<Stored> values;
    for (const NumberToken& token : numbers) {
      FUSIONOPT_ASSIGN_OR_RETURN(Parsed value,
                                 ToFloating<Parsed>(cursor_, token, NameOf(type.dtype)));
      values.push_back(encode(value));
    }
    return std::make_shared<const fusionopt::Tensor>(
        fusionopt::Tensor::FromValues(type.dtype, type.dims, values));
  }

  template <typename T>
  Result<TensorPtr> IntegerTensor(const TensorTypeSyntax& type,
                                  const std::vector<NumberToken>& numbers) {
    std::vector<T> values;
    for (const NumberToken& token : numbers) {
      FUSIONOPT_ASSIGN_OR_RETURN(T value, ToInteger<T>(cursor_, token, NameOf(type.dtype)));
      if (type.dtype == DataType::kBool && value > 1) {
        return cursor_.ErrorAt(token.offset, "bool elements are 0 or 1");
      }
      values.push_back(value);
    }
    return std::make_shared<const fusionopt::Tensor>(
        fusionopt::Tensor::FromValues(type.dtype, type.dims, values));
  }

  // ------------------------------------------------------------ nodes

  Result<NodeSyntax> Node() {
    NodeSyntax node;
    const char first = cursor_.Peek();
    if (first == '%' || first == ',') {
      FUSIONOPT_ASSIGN_OR_RETURN(node.outputs, Slots('='));
      FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("="));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(std::string callee, cursor_.WordOrString("an operator"));
    if (cursor_.TryConsume("::")) {
      node.domain = std::move(callee);
      FUSIONOPT_ASSIGN_OR_RETURN(node.op_type, cursor_.WordOrString("an operator"));
    } else {
      node.op_type = std::move(callee);
    }
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("("));
    FUSIONOPT_ASSIGN_OR_RETURN(node.inputs, Slots(')'));
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect(")"));
    if (cursor_.Peek() == '{') {
      FUSIONOPT_ASSIGN_OR_RETURN(node.attributes, Attributes());
    }
    if (cursor_.TryConsume("@")) {
      FUSIONOPT_ASSIGN_OR_RETURN(node.name, cursor_.NameHere("a node name after '@'"));
    }
    return node;
  }

  // Comma-separated value slots up to `terminator`; an empty slot is an omitted value.
  Result<std::vector<NameRef>> Slots(char terminator) {
    std::vector<NameRef> slots;
    if (cursor_.Peek() == terminator) return slots;
    while (true) {
      NameRef slot;
      slot.offset = cursor_.offset();
      if (cursor_.Peek() == '%') {
        FUSIONOPT_ASSIGN_OR_RETURN(slot, ValueRef());
      }
      slots.push_back(std::move(slot));
      if (cursor_.TryConsume(",")) continue;
      if (cursor_.Peek() == terminator) return slots;
      return cursor_.Error("expected ',' or '" + std::string(1, terminator) + "' but found " +
                           cursor_.DescribeNext());
    }
  }

  Result<std::vector<AttributeSyntax>> Attributes() {
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("{"));
    std::vector<AttributeSyntax> attributes;
    std::set<std::string> seen;
    if (cursor_.TryConsume("}")) return attributes;
    do {
      const size_t at = cursor_.offset();
      AttributeSyntax attribute;
      FUSIONOPT_ASSIGN_OR_RETURN(attribute.attribute.name,
                                 cursor_.WordOrString("an attribute name"));
      if (!seen.insert(attribute.attribute.name).second) {
        return cursor_.ErrorAt(at, "attribute '" + attribute.attribute.name + "' is given twice");
      }
      FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect(":"));
      FUSIONOPT_RETURN_IF_ERROR(AttributeValue(attribute));
      attributes.push_back(std::move(attribute));
    } while (cursor_.TryConsume(","));
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("}"));
    return attributes;
  }

  enum class Element { kNone, kNumber, kString, kTensor, kGraph };

  Element ElementAhead() {
    const char next = cursor_.Peek();
    const std::string_view word = cursor_.PeekWord();
    if (next == '"') return Element::kString;
    if (next == '-' || (next >= '0' && next <= '9') || word == "inf" || word == "nan") {
      return Element::kNumber;
    }
    if (word == "tensor") return Element::kTensor;
    if (word == "graph") return Element::kGraph;
    return Element::kNone;
  }

  Status AttributeValue(AttributeSyntax& out) {
    Attribute& attribute = out.attribute;
    const std::string word(cursor_.PeekWord());
    if (cursor_.Peek() == '[') return List(out, std::nullopt);
    if (std::optional<AttributeKind> kind = AttributeKindNamed(word);
        kind && word.back() == 's') {  // typed list: ints[...], floats[...], ...
      cursor_.TryKeyword(word);
      return List(out, kind);
    }
    switch (ElementAhead()) {
      case Element::kString: {
        attribute.kind = AttributeKind::kString;
        FUSIONOPT_ASSIGN_OR_RETURN(attribute.s, cursor_.QuotedString("a string"));
        return Status::Ok();
      }
      case Element::kNumber: return Scalar(attribute);
      case Element::kTensor: {
        cursor_.TryKeyword("tensor");
        attribute.kind = AttributeKind::kTensor;
        FUSIONOPT_ASSIGN_OR_RETURN(attribute.t, Tensor());
        return Status::Ok();
      }
      case Element::kGraph: {
        attribute.kind = AttributeKind::kGraph;
        FUSIONOPT_ASSIGN_OR_RETURN(auto graph, Graph());
        out.graphs.push_back(std::move(graph));
        return Status::Ok();
      }
      case Element::kNone: break;
    }
    if (cursor_.TryKeyword("ref")) return Reference(attribute);
    if (cursor_.TryKeyword("opaque")) {
      attribute.kind = AttributeKind::kOpaque;
      FUSIONOPT_ASSIGN_OR_RETURN(attribute.residual, HexBytes("an opaque attribute"));
      return Status::Ok();
    }
    if (cursor_.TryKeyword("undefined")) {
      attribute.kind = AttributeKind::kUndefined;
      return Status::Ok();
    }
    return cursor_.Error("expected an attribute value but found " + cursor_.DescribeNext());
  }

  Status Scalar(Attribute& attribute) {
    FUSIONOPT_ASSIGN_OR_RETURN(NumberToken token, cursor_.Number("a number"));
    if (token.is_float) {
      attribute.kind = AttributeKind::kFloat;
      FUSIONOPT_ASSIGN_OR_RETURN(attribute.f, ToFloating<float>(cursor_, token, "float"));
    } else {
      attribute.kind = AttributeKind::kInt;
      FUSIONOPT_ASSIGN_OR_RETURN(attribute.i, ToInteger<int64_t>(cursor_, token, "int64"));
    }
    return Status::Ok();
  }

  // `ref <kind> <name>`: a function body's attribute that takes the caller's value.
  Status Reference(Attribute& attribute) {
    const size_t at = cursor_.offset();
    FUSIONOPT_ASSIGN_OR_RETURN(std::string kind_name, cursor_.Word("an attribute kind"));
    std::optional<AttributeKind> kind = AttributeKindNamed(kind_name);
    if (!kind) return cursor_.ErrorAt(at, "unknown attribute kind '" + kind_name + "'");
    attribute.kind = *kind;
    FUSIONOPT_ASSIGN_OR_RETURN(attribute.ref_attr_name,
                               cursor_.WordOrString("the referenced attribute's name"));
    return Status::Ok();
  }

  // `[...]`, or `ints[...]` etc. when `forced` names the kind (required for empty lists).
  Status List(AttributeSyntax& out, std::optional<AttributeKind> forced) {
    const size_t at = cursor_.offset();
    FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("["));
    Attribute& attribute = out.attribute;
    Element kind = Element::kNone;
    std::vector<NumberToken> numbers;
    if (!cursor_.TryConsume("]")) {
      do {
        const size_t element_at = cursor_.offset();
        const Element element = ElementAhead();
        if (element == Element::kNone) {
          return cursor_.Error("expected a list element but found " + cursor_.DescribeNext());
        }
        if (kind != Element::kNone && element != kind) {
          return cursor_.ErrorAt(element_at, "a list holds elements of one kind only");
        }
        kind = element;
        FUSIONOPT_RETURN_IF_ERROR(ListElement(out, element, numbers));
      } while (cursor_.TryConsume(","));
      FUSIONOPT_RETURN_IF_ERROR(cursor_.Expect("]"));
    }
    std::optional<AttributeKind> found;
    switch (kind) {
      case Element::kNone: found = forced; break;
      case Element::kNumber: {
        bool any_float = forced == AttributeKind::kFloats;
        for (const auto& number : numbers) any_float = any_float || number.is_float;
        found = any_float ? AttributeKind::kFloats : AttributeKind::kInts;
        break;
      }
      case Element::kString: found = AttributeKind::kStrings; break;
      case Element::kTensor: found = AttributeKind::kTensors; break;
      case Element::kGraph: found = AttributeKind::kGraphs; break;
    }
    if (!found) {
      return cursor_.ErrorAt(at, "an empty list needs its kind: write ints[], floats[], "
                                 "strings[], tensors[] or graphs[]");
    }
    if (forced && forced != found) {
      return cursor_.ErrorAt(at, "the elements do not fit a list of " +
                                     std::string(NameOf(*forced)));
    }
    attribute.kind = *found;
    for (const NumberToken& number : numbers) {
      if (attribute.kind == AttributeKind::kInts) {
        FUSIONOPT_ASSIGN_OR_RETURN(int64_t value, ToInteger<int64_t>(cursor_, number, "int64"));
        attribute.ints.push_back(value);
      } else {
        FUSIONOPT_ASSIGN_OR_RETURN(float value, ToFloating<float>(cursor_, number, "float"));
        attribute.floats.push_back(value);
      }
    }
    return Status::Ok();
  }

  Status ListElement(AttributeSyntax& out, Element element, std::vector<NumberToken>& numbers) {
    switch (element) {
      case Element::kNumber: {
        FUSIONOPT_ASSIGN_OR_RETURN(NumberToken number, cursor_.Number("a number"));
        numbers.push_back(std::move(number));
        break;
      }
      case Element::kString: {
        FUSIONOPT_ASSIGN_OR_RETURN(std::string text, cursor_.QuotedString("a string"));
        out.attribute.strings.push_back(std::move(text));
        break;
      }
      case Element::kTensor: {
        cursor_.TryKeyword("tensor");
        FUSIONOPT_ASSIGN_OR_RETURN(TensorPtr tensor, Tensor());
        out.attribute.tensors.push_back(std::move(tensor));
        break;
      }
      case Element::kGraph: {
        FUSIONOPT_ASSIGN_OR_RETURN(auto graph, Graph());
        out.graphs.push_back(std::move(graph));
        break;
      }
      case Element::kNone: break;
    }
    return Status::Ok();
  }

  Cursor cursor_;
};

}  // namespace

Result<std::unique_ptr<Model>> ParseModel(std::string_view text) {
  auto model = std::make_unique<Model>();
  Parser parser(text);
  FUSIONOPT_ASSIGN_OR_RETURN(ModelSyntax syntax, parser.ParseModelText(*model));
  model->graph = std::make_unique<Graph>();
  FUSIONOPT_RETURN_IF_ERROR(text_detail::BuildGraph(text, *syntax.graph, *model->graph));
  for (FunctionSyntax& function_syntax : syntax.functions) {
    if (model->FindFunction(function_syntax.domain, function_syntax.name) != nullptr) {
      return text_detail::ErrorAt(text, function_syntax.offset,
                                  "function '" + FunctionLabel(function_syntax) + "' is defined twice");
    }
    auto function = std::make_unique<Function>();
    function->domain = std::move(function_syntax.domain);
    function->name = std::move(function_syntax.name);
    function->attribute_names = std::move(function_syntax.attribute_names);
    function->opsets = std::move(function_syntax.opsets);
    function->body = std::make_unique<Graph>();
    FUSIONOPT_RETURN_IF_ERROR(text_detail::BuildGraph(text, *function_syntax.body, *function->body));
    model->functions.push_back(std::move(function));
  }
  return model;
}

}  // namespace fusionopt
