// Internals of the text form shared by text_format.cc (lexical level), printer.cc,
// parser.cc (text -> syntax tree) and builder.cc (syntax tree -> graph).
// Not for use outside these files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::text_detail {

// ---------------------------------------------------------------- lexical level

// Characters of a bare (unquoted) value, node or graph name after `%`, `@` or `graph`.
bool IsNameChar(char c);
// Characters of a bare word: op types, domains, dtypes, dim symbols, attribute names.
bool IsWordStart(char c);
bool IsWordChar(char c);

// `name` bare when every character allows it, else quoted with escapes.
std::string FormatName(std::string_view name);
std::string FormatWord(std::string_view word);
std::string Quote(std::string_view text);

std::string ToHex(std::string_view bytes);
std::optional<std::string> FromHex(std::string_view hex);

// Shortest decimal text that reads back to the same value; always marked as a float
// (contains '.', an exponent, "inf" or "nan") so it never reads back as an integer.
std::string FormatFloat(float value);
std::string FormatDouble(double value);
// Same for 16-bit floats given by their bits.
std::string FormatFloat16(uint16_t bits);
std::string FormatBFloat16(uint16_t bits);

// Round-to-nearest-even conversion to the 16-bit float formats.
uint16_t DoubleToFloat16(double value);
uint16_t DoubleToBFloat16(double value);
double Float16ToDouble(uint16_t bits);
double BFloat16ToDouble(uint16_t bits);

// 1-based line of a byte offset, and a Status "line L, column C: <message>" for it.
int LineOf(std::string_view text, size_t offset);
Status ErrorAt(std::string_view text, size_t offset, const std::string& message);

struct NumberToken {
  std::string text;
  bool is_float = false;  // has '.', an exponent, or is inf/nan
  size_t offset = 0;
};

// Reads the text token by token for the parser. Whitespace and '#' comments between tokens
// are skipped; errors name the line and column where the problem starts.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {}

  char Peek();  // next character after space and comments, '\0' at the end
  bool AtEnd();
  size_t offset();

  bool TryConsume(std::string_view token);
  Status Expect(std::string_view token);
  std::string_view PeekWord();  // empty when the next token is not a word
  bool TryKeyword(std::string_view keyword);

  Result<std::string> Word(std::string_view what);
  Result<std::string> QuotedString(std::string_view what);
  Result<std::string> WordOrString(std::string_view what);
  // A bare or quoted name, right after a sigil ('%', '@') with no space, or after `graph`.
  Result<std::string> NameHere(std::string_view what);
  Result<NumberToken> Number(std::string_view what);

  Status Error(const std::string& message);  // at the next token
  Status ErrorAt(size_t offset, const std::string& message) const;
  std::string DescribeNext();

 private:
  void SkipSpace();
  std::string_view PeekWordAt(size_t start) const;
  Result<std::string> StringHere();

  std::string_view text_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------- syntax tree

// What the parser reads: the text's structure with value names still unresolved, each with
// its position for error messages.
struct NameRef {
  std::string name;  // empty: an omitted input/output slot
  size_t offset = 0;
};

struct TypedName {
  std::optional<ValueType> type;
  NameRef ref;
};

struct InitSyntax {
  NameRef ref;
  TensorPtr tensor;
};

struct GraphSyntax;

struct AttributeSyntax {
  Attribute attribute;  // complete except its graphs, which are built once names resolve
  std::vector<std::unique_ptr<GraphSyntax>> graphs;
};

struct NodeSyntax {
  std::vector<NameRef> outputs;
  std::string domain;
  std::string op_type;
  std::vector<NameRef> inputs;
  std::vector<AttributeSyntax> attributes;
  std::string name;
};

struct GraphSyntax {
  std::string name;
  std::vector<TypedName> inputs;
  std::vector<TypedName> outputs;
  std::vector<InitSyntax> initializers;
  std::vector<TypedName> value_declarations;
  std::vector<NodeSyntax> nodes;
};

// Creates `graph` from its syntax: defines every name first, then resolves uses, so uses may
// precede definitions and subgraphs may read values of enclosing graphs. Errors name the
// line and column in `text`.
Status BuildGraph(std::string_view text, GraphSyntax& syntax, Graph& graph);

}  // namespace fusionopt::text_detail
