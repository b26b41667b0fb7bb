// Contractions: MatMul (numpy matmul with batch broadcasting), Gemm, Einsum.
#include <cctype>
#include <map>

#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

bool KnownAndDifferent(const Dim& a, const Dim& b) {
  return a.is_known() && b.is_known() && a.value != b.value;
}

}  // namespace

// [..., M, K] x [..., K, N] -> [broadcast(...), M, N]; a 1-D operand is promoted to a
// matrix and its added dim dropped again from the result.
std::optional<Shape> MatMulOutputShape(InferenceContext& context, size_t a_input, size_t b_input) {
  const Shape* a = context.InputShape(a_input);
  const Shape* b = context.InputShape(b_input);
  if (a == nullptr || b == nullptr) return std::nullopt;
  if (a->empty() || b->empty()) {
    context.Warn("MatMul operands must have rank >= 1");
    return std::nullopt;
  }
  Shape lhs = a->size() == 1 ? Shape{Dim::Known(1), a->front()} : *a;
  Shape rhs = b->size() == 1 ? Shape{b->front(), Dim::Known(1)} : *b;
  const Dim& lhs_k = lhs[lhs.size() - 1];
  const Dim& rhs_k = rhs[rhs.size() - 2];
  if (KnownAndDifferent(lhs_k, rhs_k)) {
    context.Warn("inner dims differ: " + ShapeToString(*a) + " x " + ShapeToString(*b));
    return std::nullopt;
  }
  Shape lhs_batch(lhs.begin(), lhs.end() - 2);
  Shape rhs_batch(rhs.begin(), rhs.end() - 2);
  std::optional<Shape> out = BroadcastShapes(lhs_batch, rhs_batch);
  if (!out) {
    context.Warn("batch dims " + ShapeToString(lhs_batch) + " and " + ShapeToString(rhs_batch) +
                 " do not broadcast");
    return std::nullopt;
  }
  if (a->size() > 1) out->push_back(lhs[lhs.size() - 2]);
  if (b->size() > 1) out->push_back(rhs[rhs.size() - 1]);
  return out;
}

// Y = alpha * A' B' + beta * C with A' = transA ? A^T : A: [M, K] x [K, N] -> [M, N].
std::optional<Shape> GemmOutputShape(InferenceContext& context, size_t a_input, size_t b_input) {
  const Shape* a = context.InputShape(a_input);
  const Shape* b = context.InputShape(b_input);
  if (a == nullptr || b == nullptr) return std::nullopt;
  if (a->size() != 2 || b->size() != 2) {
    context.Warn("Gemm operands must be 2-D, got " + ShapeToString(*a) + " and " +
                 ShapeToString(*b));
    return std::nullopt;
  }
  bool trans_a = context.node().GetInt("transA", 0) != 0;
  bool trans_b = context.node().GetInt("transB", 0) != 0;
  const Dim& m = (*a)[trans_a ? 1 : 0];
  const Dim& a_k = (*a)[trans_a ? 0 : 1];
  const Dim& b_k = (*b)[trans_b ? 1 : 0];
  const Dim& n = (*b)[trans_b ? 0 : 1];
  if (KnownAndDifferent(a_k, b_k)) {
    context.Warn("inner dims differ: " + ShapeToString(*a) + " x " + ShapeToString(*b));
    return std::nullopt;
  }
  return Shape{m, n};
}

namespace {

void MatMulRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  if (auto out = MatMulOutputShape(context, 0, 1)) context.SetOutputShape(0, *out);
}

void GemmRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  if (auto out = GemmOutputShape(context, 0, 1)) context.SetOutputShape(0, *out);
}

// One operand's subscripts: letters, with the position of "..." if present.
struct Subscripts {
  std::string letters;
  std::optional<size_t> ellipsis_at;  // index into letters where "..." stands
};

std::optional<Subscripts> ParseSubscripts(std::string_view term) {
  Subscripts parsed;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (parsed.ellipsis_at || term.substr(i, 3) != "...") return std::nullopt;
      parsed.ellipsis_at = parsed.letters.size();
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      parsed.letters.push_back(c);
    } else {
      return std::nullopt;
    }
  }
  return parsed;
}

std::vector<std::string_view> SplitTerms(std::string_view text) {
  std::vector<std::string_view> terms;
  size_t start = 0;
  for (size_t comma = text.find(','); comma != std::string_view::npos;
       comma = text.find(',', start)) {
    terms.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  terms.push_back(text.substr(start));
  return terms;
}

// What the operands tell about each subscript: letters bind to dims (a known size wins over
// a symbol; two known sizes must agree) and the "..." parts of all operands broadcast.
struct EinsumBindings {
  std::map<char, Dim> letter_dims;
  std::map<char, int> letter_counts;
  std::optional<Shape> ellipsis;  // set once any operand has "..."

  // Binds one operand; false (after a warning) when it does not fit.
  bool Bind(const InferenceContext& context, std::string_view term, const Subscripts& subscripts,
            const Shape& shape) {
    size_t letters = subscripts.letters.size();
    size_t ellipsis_rank = shape.size() - std::min(shape.size(), letters);
    if (shape.size() != letters + (subscripts.ellipsis_at ? ellipsis_rank : 0)) {
      context.Warn("term '" + std::string(term) + "' does not fit input shape " +
                   ShapeToString(shape));
      return false;
    }
    auto axis = shape.begin();
    for (size_t i = 0; i <= letters; ++i) {
      if (subscripts.ellipsis_at == i) {
        Shape part(axis, axis + static_cast<std::ptrdiff_t>(ellipsis_rank));
        std::optional<Shape> combined = BroadcastShapes(ellipsis.value_or(Shape{}), part);
        if (!combined) {
          context.Warn("'...' dims " + ShapeToString(part) + " do not broadcast");
          return false;
        }
        ellipsis = std::move(combined);
        axis += static_cast<std::ptrdiff_t>(ellipsis_rank);
      }
      if (i < letters && !BindLetter(context, subscripts.letters[i], *axis++)) return false;
    }
    return true;
  }

  bool BindLetter(const InferenceContext& context, char letter, const Dim& dim) {
    ++letter_counts[letter];
    auto [it, inserted] = letter_dims.emplace(letter, dim);
    if (inserted) return true;
    if (KnownAndDifferent(it->second, dim)) {
      context.Warn("subscript '" + std::string(1, letter) + "' has sizes " +
                   std::to_string(it->second.value) + " and " + std::to_string(dim.value));
      return false;
    }
    if (!it->second.is_known()) it->second = dim;
    return true;
  }

  std::optional<Shape> ExplicitOutput(const InferenceContext& context,
                                      const Subscripts& output) const {
    Shape out;
    for (size_t i = 0; i <= output.letters.size(); ++i) {
      if (output.ellipsis_at == i && ellipsis)
        out.insert(out.end(), ellipsis->begin(), ellipsis->end());
      if (i == output.letters.size()) break;
      auto it = letter_dims.find(output.letters[i]);
      if (it == letter_dims.end()) {
        context.Warn("output subscript '" + std::string(1, output.letters[i]) +
                     "' is not in any input");
        return std::nullopt;
      }
      out.push_back(it->second);
    }
    return out;
  }

  // Without "->": the "..." dims, then the letters used once, in alphabetical order.
  Shape ImplicitOutput() const {
    Shape out = ellipsis.value_or(Shape{});
    for (const auto& [letter, count] : letter_counts) {
      if (count == 1) out.push_back(letter_dims.at(letter));
    }
    return out;
  }
};

void EinsumRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  std::string equation = context.node().GetString("equation", "");
  size_t arrow = equation.find("->");
  std::vector<std::string_view> terms = SplitTerms(std::string_view(equation).substr(0, arrow));
  if (terms.size() != context.num_inputs()) {
    context.Warn("equation '" + equation + "' does not match the number of inputs");
    return;
  }
  EinsumBindings bindings;
  for (size_t input = 0; input < terms.size(); ++input) {
    std::optional<Subscripts> subscripts = ParseSubscripts(terms[input]);
    if (!subscripts) {
      context.Warn("cannot parse equation '" + equation + "'");
      return;
    }
    const Shape* shape = context.InputShape(input);
    if (shape == nullptr || !bindings.Bind(context, terms[input], *subscripts, *shape)) return;
  }
  if (arrow == std::string::npos) {
    context.SetOutputShape(0, bindings.ImplicitOutput());
    return;
  }
  std::optional<Subscripts> output = ParseSubscripts(std::string_view(equation).substr(arrow + 2));
  if (!output) {
    context.Warn("cannot parse equation '" + equation + "'");
    return;
  }
  if (auto shape = bindings.ExplicitOutput(context, *output)) context.SetOutputShape(0, *shape);
}

}  // namespace

void RegisterMatMulRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"MatMul"}, MatMulRule);
  registry.AddTypeRule("", {"Gemm"}, GemmRule);
  registry.AddTypeRule("", {"Einsum"}, EinsumRule);
}

}  // namespace fusionopt::shape_inference
