#include "passes/cost_model/op_flops.h"

#include <algorithm>
#include <map>
#include <unordered_set>

namespace fusionopt::passes::cost {

// ---------------------------------------------------------------- sizes

bool ShapeLookup::Resolved(const Shape& shape) const {
  return std::all_of(shape.begin(), shape.end(), [](const fusionopt::Dim& dim) { return dim.is_known() || dim.is_symbolic(); });
}

const Shape* ShapeLookup::ShapeOf(const Value& value) const {
  const std::optional<Shape>& own = value.shape();
  if (own && Resolved(*own)) return &*own;
  if (value.graph() == main_graph_ && concrete_) {
    if (const ConcreteValues* concrete = concrete_()) {
      auto it = concrete->shapes.find(value.name());
      if (it != concrete->shapes.end() && Resolved(it->second) && (!own || own->size() == it->second.size())) {
        return &it->second;
      }
    }
  }
  return own ? &*own : nullptr;
}

const Shape* ShapeLookup::SizedShapeOf(const Value& value) const {
  if (value.graph() == main_graph_ && concrete_) {
    if (const ConcreteValues* concrete = concrete_()) {
      auto it = concrete->shapes.find(value.name());
      const bool known = it != concrete->shapes.end() &&
                         std::all_of(it->second.begin(), it->second.end(), [](const fusionopt::Dim& dim) { return dim.is_known(); });
      if (known) return &it->second;
    }
  }
  return ShapeOf(value);
}

const KnownIntegers* ShapeLookup::IntegersOf(const Value& value) const {
  if (value.graph() != main_graph_ || !concrete_) return nullptr;
  const ConcreteValues* concrete = concrete_();
  if (concrete == nullptr) return nullptr;
  auto it = concrete->integers.find(value.name());
  return it == concrete->integers.end() ? nullptr : &it->second;
}

Amount ShapeLookup::Product(const Value& value, size_t first, size_t last) const {
  const Shape* shape = ShapeOf(value);
  if (shape == nullptr) return Amount::Unknown("value '" + value.name() + "' has an unknown rank");
  double product = 1;
  for (size_t i = first; i < last && i < shape->size(); ++i) {
    const fusionopt::Dim& dim = (*shape)[i];
    if (dim.is_known()) {
      product *= static_cast<double>(dim.value);
    } else if (dim.is_symbolic()) {
      product *= static_cast<double>(SizeOfSymbol(symbols_, dim.symbol));
    } else {
      return Amount::Unknown("value '" + value.name() + "' has an unknown dim");
    }
  }
  return Amount::Of(product);
}

Amount ShapeLookup::DimsFrom(const Value* value, size_t first) const {
  if (value == nullptr) return Amount::Unknown("an operand is missing");
  if (!value->type().is_tensor()) return Amount::Unknown("value '" + value->name() + "' is not a tensor");
  return Product(*value, first, SIZE_MAX);
}

Amount ShapeLookup::Dim(const Value* value, int64_t axis) const {
  if (value == nullptr) return Amount::Unknown("an operand is missing");
  const Shape* shape = ShapeOf(*value);
  if (shape == nullptr) return Amount::Unknown("value '" + value->name() + "' has an unknown rank");
  int64_t rank = static_cast<int64_t>(shape->size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return Amount::Unknown("value '" + value->name() + "' has too few dims");
  return Product(*value, static_cast<size_t>(axis), static_cast<size_t>(axis) + 1);
}

Amount ShapeLookup::Bytes(const Value* value) const {
  Amount elements = Elements(value);
  if (!elements.known) return elements;
  int bits = BitsOf(value->dtype());
  if (bits <= 0) return Amount::Unknown("value '" + value->name() + "' has no fixed-size dtype");
  return Amount::Of(elements.value * bits / 8.0);
}

Amount InputBytes(const Node& node, size_t index, const ShapeLookup& shapes) {
  Amount bytes = shapes.Bytes(node.input(index));
  static const std::unordered_set<std::string_view> kSubsetReaders = {"Gather", "GatherElements", "GatherND",
                                                                      "Slice"};
  if (bytes.known && index == 0 && IsDefaultDomain(node) && kSubsetReaders.count(node.op_type())) {
    Amount copied = shapes.Bytes(node.output(0));
    if (copied.known) bytes.value = std::min(bytes.value, copied.value);
  }
  return bytes;
}

// ---------------------------------------------------------------- FLOPs

namespace {

// FLOPs per element of an elementwise op. Arithmetic, comparisons, selects and casts are 1;
// divide, reciprocal and square root run on the special-function units, which issue 16
// results per clock per SM against 64–128 fp32 FMAs (CUDA C Programming Guide, "Arithmetic
// Instructions", compute capability 7.5–9.0): 4; exp/log/trig/tanh/sigmoid/erf-class
// functions are an SFU op plus range reduction and a few FMAs: 8; GELU and Mish compose two of
// those: 16.
double ElementwiseWeight(std::string_view op) {
  static const std::unordered_map<std::string_view, double> kWeights = {
      {"Div", 4},   {"Reciprocal", 4}, {"Sqrt", 4},  {"Mod", 4},      {"Softsign", 4}, {"Clip", 2},
      {"HardSigmoid", 2}, {"HardSwish", 3}, {"Exp", 8}, {"Log", 8},    {"Sin", 8},      {"Cos", 8},
      {"Tan", 8},   {"Sinh", 8},       {"Cosh", 8},  {"Asin", 8},     {"Acos", 8},     {"Atan", 8},
      {"Asinh", 8}, {"Acosh", 8},      {"Atanh", 8}, {"Tanh", 8},     {"Sigmoid", 8},  {"Erf", 8},
      {"Pow", 8},   {"Elu", 8},        {"Selu", 8},  {"Celu", 8},     {"Softplus", 8}, {"Gelu", 16},
      {"Mish", 16},
      // A shift and a scale per element; quantizing also rounds and saturates.
      {"DequantizeLinear", 2}, {"QuantizeLinear", 4},
  };
  auto it = kWeights.find(op);
  return it == kWeights.end() ? 1.0 : it->second;
}

// FLOPs per input element of a reduction-class op. Softmax: max, subtract, exp (8), sum and
// scale = 12; LayerNormalization: mean, subtract, square and sum, scale, gamma, beta ≈ 8;
// RMSNormalization: square and sum, scale, gamma = 4.
double ReductionWeight(std::string_view op) {
  static const std::unordered_map<std::string_view, double> kWeights = {
      {"ReduceL2", 2},  {"ReduceSumSquare", 2}, {"ReduceLogSumExp", 10}, {"Softmax", 12},
      {"LogSoftmax", 12}, {"LayerNormalization", 8}, {"RMSNormalization", 4}, {"MeanVarianceNormalization", 7},
      {"TopK", 2},      {"Hardmax", 2},
      // The range (min and max), then the quantization: six per element.
      {"DynamicQuantizeLinear", 6},
  };
  auto it = kWeights.find(op);
  return it == kWeights.end() ? 1.0 : it->second;
}

Amount Times(Amount a, double factor) {
  if (a.known) a.value *= factor;
  return a;
}

Amount MatMulFlops(const Node& node, const ShapeLookup& shapes) {
  Amount out = shapes.Elements(node.output(0));
  Amount k = shapes.Dim(node.input(0), -1);
  if (!out.known) return out;
  if (!k.known) return k;
  return Amount::Of(2 * out.value * k.value);
}

// Y [.., Sq, Dv] from Q·Kᵀ and P·V over Sk keys (K's second-to-last dim, 3-D or 4-D): 4·|Y|·Sk
// when D = Dv, the softmax's 12 per score aside.
Amount AttentionFlops(const Node& node, const ShapeLookup& shapes) {
  Amount out = shapes.Elements(node.output(0));
  Amount keys = shapes.Dim(node.input(1), -2);
  if (!out.known) return out;
  if (!keys.known) return keys;
  return Amount::Of(4 * out.value * keys.value);
}

Amount GemmFlops(const Node& node, const ShapeLookup& shapes) {
  Amount out = shapes.Elements(node.output(0));
  Amount k = shapes.Dim(node.input(0), node.GetInt("transA", 0) != 0 ? 0 : 1);
  if (!out.known) return out;
  if (!k.known) return k;
  return Amount::Of(2 * out.value * k.value + (node.input(2) != nullptr ? out.value : 0));
}

// Weight [M, Cin/group, k...]: each output element is a dot product over Cin/group · Πk.
Amount ConvFlops(const Node& node, const ShapeLookup& shapes) {
  Amount out = shapes.Elements(node.output(0));
  if (!out.known) return out;
  Amount per_output = shapes.DimsFrom(node.input(1), 1);
  if (!per_output.known) return per_output;
  return Amount::Of(2 * out.value * per_output.value + (node.input(2) != nullptr ? out.value : 0));
}

// Weight [Cin, Cout/group, k...]: each input element is scattered into Cout/group · Πk outputs.
Amount ConvTransposeFlops(const Node& node, const ShapeLookup& shapes) {
  Amount in = shapes.Elements(node.input(0));
  if (!in.known) return in;
  Amount per_input = shapes.DimsFrom(node.input(1), 1);
  if (!per_input.known) return per_input;
  Amount out = shapes.Elements(node.output(0));
  double bias = node.input(2) != nullptr && out.known ? out.value : 0;
  return Amount::Of(2 * in.value * per_input.value + bias);
}

// 2 · Π(size of every index letter) · (ellipsis elements), 1· for a one-operand reduction.
Amount EinsumFlops(const Node& node, const ShapeLookup& shapes) {
  std::string equation;
  for (char c : node.GetString("equation", "")) {
    if (c != ' ') equation += c;
  }
  std::string lhs = equation.substr(0, equation.find("->"));
  std::map<char, double> sizes;
  double ellipsis = 1;
  size_t operand = 0, start = 0;
  while (start <= lhs.size()) {
    size_t end = lhs.find(',', start);
    std::string term = lhs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const Value* input = node.input(operand);
    const Shape* shape = input != nullptr ? shapes.ShapeOf(*input) : nullptr;
    if (shape == nullptr) return Amount::Unknown("an Einsum operand's rank is unknown");
    size_t dots = term.find("...");
    std::string letters = term;
    if (dots != std::string::npos) letters.erase(dots, 3);
    int64_t rank = static_cast<int64_t>(shape->size());
    int64_t ellipsis_rank = rank - static_cast<int64_t>(letters.size());
    if (ellipsis_rank < 0 || (dots == std::string::npos && ellipsis_rank != 0)) {
      return Amount::Unknown("the Einsum equation does not match its operands");
    }
    int64_t axis = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.compare(i, 3, "...") == 0) {
        double span = 1;
        for (int64_t end_axis = axis + ellipsis_rank; axis < end_axis; ++axis) {
          Amount size = shapes.Dim(input, axis);
          if (!size.known) return size;
          span *= size.value;
        }
        ellipsis = std::max(ellipsis, span);
        i += 2;
        continue;
      }
      Amount size = shapes.Dim(input, axis++);
      if (!size.known) return size;
      sizes[term[i]] = std::max(sizes[term[i]], size.value);
    }
    ++operand;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  double product = ellipsis;
  for (const auto& [letter, size] : sizes) product *= size;
  return Amount::Of((operand > 1 ? 2.0 : 1.0) * product);
}

Amount WindowFlops(const Node& node, const ShapeLookup& shapes) {
  const std::string& op = node.op_type();
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return shapes.Elements(node.input(0));
  if (op == "GlobalLpPool") return Times(shapes.Elements(node.input(0)), 2);
  if (op == "BatchNormalization") return Times(shapes.Elements(node.output(0)), 2);
  if (op == "InstanceNormalization") return Times(shapes.Elements(node.output(0)), 8);
  if (op == "LRN") return Times(shapes.Elements(node.output(0)), static_cast<double>(node.GetInt("size", 1)) + 8);
  // MaxPool, AveragePool, LpPool: the window per output element.
  double window = 1;
  if (auto kernel = node.GetInts("kernel_shape")) {
    for (int64_t size : *kernel) window *= static_cast<double>(size);
  }
  return Times(shapes.Elements(node.output(0)), window * (op == "LpPool" ? 2 : 1));
}

}  // namespace

// The FLOPs of a standard node (not a fused call).
Amount StandardFlops(const Node& node, const ShapeLookup& shapes) {
  OpClass op_class = ClassifyOp(node);
  const std::string& op = node.op_type();
  switch (op_class) {
    case OpClass::kElementwise: {
      double operands = 0;
      for (const Value* input : node.inputs()) operands += input != nullptr ? 1 : 0;
      bool variadic = op == "Sum" || op == "Mean" || op == "Max" || op == "Min";
      double applications = variadic ? std::max(1.0, operands - 1) : 1.0;
      return Times(shapes.Elements(node.output(0)), ElementwiseWeight(op) * applications);
    }
    case OpClass::kReduction:
      return Times(shapes.Elements(node.input(0)), ReductionWeight(op));
    case OpClass::kContraction:
      if (op == "MatMul" || op == "MatMulInteger") return MatMulFlops(node, shapes);
      if (op == "Attention") return AttentionFlops(node, shapes);
      if (op == "Gemm") return GemmFlops(node, shapes);
      if (op == "Conv" || op == "ConvInteger") return ConvFlops(node, shapes);
      if (op == "ConvTranspose") return ConvTransposeFlops(node, shapes);
      return EinsumFlops(node, shapes);
    case OpClass::kWindow:
      return WindowFlops(node, shapes);
    case OpClass::kDataMovement:
    case OpClass::kView:
    case OpClass::kShape:
    case OpClass::kControlFlow:
      return Amount::Of(0);
    case OpClass::kFused:
    case OpClass::kOpaque:
      break;
  }
  return Amount::Unknown("no FLOP formula for " + (IsDefaultDomain(node) ? "" : node.domain() + "::") + op);
}

}  // namespace fusionopt::passes::cost
