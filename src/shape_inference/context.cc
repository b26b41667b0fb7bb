// InferenceContext (what a rule sees of its node) and helpers shared by the rule files.
#include "shape_inference/context.h"

#include "ir/constant_value.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace fusionopt::shape_inference {
SymbolicInt SymbolicInt::FromDim(const Dim& dim) {
  if (dim.is_known()) return Known(dim.value);
  return dim.is_symbolic() ? Symbol(dim.symbol) : Unknown();
}

// ---------------------------------------------------------------- inputs

DataType InferenceContext::InputDtype(size_t index) const {
  const Value* value = node_.input(index);
  if (value == nullptr || !value->type().is_tensor()) return DataType::kUndefined;
  return value->dtype();
}

const Shape* InferenceContext::InputShape(size_t index) const {
  const Value* value = node_.input(index);
  if (value == nullptr || !value->type().is_tensor() || !value->shape()) return nullptr;
  return &*value->shape();
}

std::optional<size_t> InferenceContext::InputRank(size_t index) const {
  const Shape* shape = InputShape(index);
  if (shape == nullptr) return std::nullopt;
  return shape->size();
}

std::optional<int64_t> InferenceContext::InputLength(size_t index) const {
  const Shape* shape = InputShape(index);
  if (shape == nullptr || shape->size() > 1) return std::nullopt;
  if (shape->empty()) return 1;
  return KnownSize(shape->front());
}

TensorPtr InferenceContext::InputConstant(size_t index) const {
  const Value* value = node_.input(index);
  if (value == nullptr) return nullptr;
  return ConstantValueOf(*value, state_.Initializers());
}

namespace {

// Shape arguments (axes, pads, sizes, scales) are short; a huge constant in their place is a
// malformed model, and reading it would only waste memory.
constexpr int64_t kMaxArgumentElements = 1 << 16;

bool IsArgumentSized(const TensorPtr& constant) {
  return constant->NumElements() <= kMaxArgumentElements;
}

}  // namespace

std::optional<std::vector<int64_t>> InferenceContext::InputInts(size_t index) const {
  if (TensorPtr constant = InputConstant(index)) {
    return IsArgumentSized(constant) ? constant->AsInt64s() : std::nullopt;
  }
  std::optional<SymbolicData> data = InputData(index);
  if (!data) return std::nullopt;
  std::vector<int64_t> ints;
  for (const SymbolicInt& element : data->elements) {
    if (!element.is_known()) return std::nullopt;
    ints.push_back(*element.value);
  }
  return ints;
}

std::optional<std::vector<double>> InferenceContext::InputFloats(size_t index) const {
  TensorPtr constant = InputConstant(index);
  if (constant == nullptr || !IsArgumentSized(constant)) return std::nullopt;
  if (auto floats = constant->AsDoubles()) return floats;
  auto ints = constant->AsInt64s();
  if (!ints) return std::nullopt;
  return std::vector<double>(ints->begin(), ints->end());
}

std::optional<SymbolicData> InferenceContext::InputData(size_t index) const {
  return state_.ContentOf(node_.input(index));
}

IntListArgument InferenceContext::ReadIntList(std::string_view attribute, size_t input_index,
                                              int64_t input_since_opset) const {
  IntListArgument argument;
  if (opset_ < input_since_opset) {
    if (auto ints = node_.GetInts(attribute)) {
      argument.present = true;
      argument.length = static_cast<int64_t>(ints->size());
      argument.values = std::move(ints);
    }
    return argument;
  }
  if (!HasInput(input_index)) return argument;
  argument.present = true;
  argument.values = InputInts(input_index);
  argument.length =
      argument.values ? static_cast<int64_t>(argument.values->size()) : InputLength(input_index);
  return argument;
}

// ---------------------------------------------------------------- outputs

void InferenceContext::SetOutputDtype(size_t index, DataType dtype) {
  if (Value* value = MutableOutput(index)) state_.MergeDtype(*value, dtype, NodeLabel(node_));
}

void InferenceContext::SetOutputShape(size_t index, const Shape& shape) {
  if (Value* value = MutableOutput(index)) state_.MergeShape(*value, shape, NodeLabel(node_));
}

void InferenceContext::SetOutputType(size_t index, DataType dtype,
                                     const std::optional<Shape>& shape) {
  SetOutputDtype(index, dtype);
  if (shape) SetOutputShape(index, *shape);
}

void InferenceContext::SetOutputRank(size_t index, int64_t rank) {
  if (rank < 0 || rank > kMaxRank) {
    Warn("implausible output rank " + std::to_string(rank));
    return;
  }
  SetOutputShape(index, UnknownDims(static_cast<size_t>(rank)));
}

void InferenceContext::SetOutputData(size_t index, SymbolicData data) {
  const Value* value = node_.output(index);
  if (value == nullptr || data.elements.size() > kMaxSymbolicElements) return;
  if (data.is_scalar && data.elements.size() != 1) return;
  state_.SetData(value, std::move(data));
}

const ValueType* InferenceContext::OutputType(size_t index) const {
  const Value* value = node_.output(index);
  return value == nullptr ? nullptr : &value->type();
}

void InferenceContext::Warn(const std::string& message) const {
  state_.Warn(NodeLabel(node_) + ": " + message);
}

void InferenceContext::InferSubgraph(Graph& graph) { state_.InferGraph(graph); }

void InferenceContext::MergeInto(Value& value, DataType dtype, const std::optional<Shape>& shape) {
  state_.MergeDtype(value, dtype, NodeLabel(node_));
  if (shape) state_.MergeShape(value, *shape, NodeLabel(node_));
}

// ---------------------------------------------------------------- helpers

std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::optional<std::vector<int64_t>> NormalizeAxes(const InferenceContext& context,
                                                  const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> normalized;
  if (axes.size() > static_cast<size_t>(kMaxRank)) {
    context.Warn(std::to_string(axes.size()) + " axes are more than any tensor has");
    return std::nullopt;
  }
  for (int64_t axis : axes) {
    std::optional<int64_t> valid = NormalizeAxis(axis, rank);
    if (!valid) {
      context.Warn("axis " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(rank));
      return std::nullopt;
    }
    if (std::find(normalized.begin(), normalized.end(), *valid) != normalized.end()) {
      context.Warn("axis " + std::to_string(axis) + " is repeated");
      return std::nullopt;
    }
    normalized.push_back(*valid);
  }
  return normalized;
}

Shape UnknownDims(size_t rank) { return Shape(rank, Dim::Unknown()); }

void PropagateInput(InferenceContext& context, size_t input, size_t output) {
  const Shape* shape = context.InputShape(input);
  context.SetOutputType(output, context.InputDtype(input),
                        shape ? std::optional<Shape>(*shape) : std::nullopt);
}

namespace {

bool IsIdentifier(std::string_view text) {
  if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_')) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool IsNumber(std::string_view text) {
  return !text.empty() && text.size() <= 18 &&
         std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// The factors of a product symbol ("4*batch", "batch*sequence": what ToDim writes and what the
// dynamo exporter writes); nullopt for any other symbol, which is one opaque factor.
std::optional<std::vector<std::string_view>> ProductFactors(std::string_view symbol) {
  std::vector<std::string_view> factors;
  size_t start = 0;
  while (true) {
    const size_t star = symbol.find('*', start);
    std::string_view factor = symbol.substr(start, star == std::string_view::npos ? std::string_view::npos : star - start);
    if (!IsIdentifier(factor) && !IsNumber(factor)) return std::nullopt;
    factors.push_back(factor);
    if (star == std::string_view::npos) break;
    start = star + 1;
  }
  if (factors.size() < 2) return std::nullopt;
  return factors;
}

}  // namespace

void DimProduct::Multiply(const Dim& dim) {
  if (dim.is_known()) {
    if (__builtin_mul_overflow(constant, dim.value, &constant)) has_unknown = true;
  } else if (!dim.is_symbolic()) {
    has_unknown = true;
  } else if (std::optional<std::vector<std::string_view>> factors = ProductFactors(dim.symbol)) {
    for (std::string_view factor : *factors) {
      if (IsNumber(factor)) {
        Multiply(Dim::Known(std::stoll(std::string(factor))));
      } else {
        symbols.insert(std::string(factor));
      }
    }
  } else {
    symbols.insert(dim.symbol);
  }
}

std::optional<DimProduct> DimProduct::DividedBy(const DimProduct& other) const {
  if (has_unknown || other.has_unknown || other.constant == 0 || constant % other.constant != 0) {
    return std::nullopt;
  }
  DimProduct quotient{constant / other.constant, symbols, false};
  for (const std::string& symbol : other.symbols) {
    auto it = quotient.symbols.find(symbol);
    if (it == quotient.symbols.end()) return std::nullopt;
    quotient.symbols.erase(it);
  }
  return quotient;
}

Dim DimProduct::ToDim() const {
  if (has_unknown) return Dim::Unknown();
  if (symbols.empty() || constant == 0) return Dim::Known(constant);
  if (symbols.size() == 1 && constant == 1) return Dim::Symbol(*symbols.begin());
  // A product of symbols is a symbol of its own, written the way the dynamo exporter writes
  // them (the constant first, then the symbols in order), so equal products compare equal.
  std::string name = constant != 1 ? std::to_string(constant) : "";
  for (const std::string& symbol : symbols) {
    // A symbol that is no plain name would make the product ambiguous to read back.
    if (!IsIdentifier(symbol)) return Dim::Unknown();
    name += (name.empty() ? "" : "*") + symbol;
  }
  return Dim::Symbol(name);
}

DimProduct ProductOf(const Shape& shape, size_t begin, size_t end) {
  DimProduct product;
  for (size_t axis = begin; axis < end && axis < shape.size(); ++axis) {
    product.Multiply(shape[axis]);
  }
  return product;
}

SliceRange ClampSlice(int64_t size, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += size;
  if (end < 0) end += size;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, 0, size);
    return {start, end > start ? (end - start - 1) / step + 1 : 0};
  }
  start = std::clamp<int64_t>(start, 0, size - 1);
  end = std::clamp<int64_t>(end, -1, size - 1);
  // -step overflows for the most negative step; any step longer than the axis takes one.
  int64_t stride = step < -size ? size + 1 : -step;
  return {start, start > end ? (start - end - 1) / stride + 1 : 0};
}

Dim KnownOrUnknown(std::optional<int64_t> size) {
  return size && *size >= 0 ? Dim::Known(*size) : Dim::Unknown();
}

Dim SizeFromFloat(double size) {
  constexpr double kLargestDim = 4.6e18;  // below INT64_MAX, so the cast is defined
  if (!std::isfinite(size) || size < 0 || size > kLargestDim) return Dim::Unknown();
  return Dim::Known(static_cast<int64_t>(size));
}

Dim MultiplyDims(const Dim& a, int64_t factor) {
  int64_t product = 0;
  if (!a.is_known() || __builtin_mul_overflow(a.value, factor, &product)) return Dim::Unknown();
  return KnownOrUnknown(product);
}

std::optional<int64_t> KnownSize(const Dim& dim) {
  return dim.is_known() ? std::optional<int64_t>(dim.value) : std::nullopt;
}

std::string NodeLabel(const Node& node) {
  if (!node.name().empty()) return "node '" + node.name() + "'";
  const Value* first = node.output(0);
  return "node " + node.op_type() + " -> '" + (first ? first->name() : std::string()) + "'";
}

}  // namespace fusionopt::shape_inference
