#include <catch2/catch.hpp>

#include "text_format/text_format.h"

using namespace fusionopt;

namespace {

std::string ParseError(std::string_view text) {
  auto parsed = ParseModel(text);
  REQUIRE_FALSE(parsed.ok());
  REQUIRE(parsed.status().code() == ErrorCode::kInvalidModel);
  return parsed.status().message();
}

}  // namespace

TEST_CASE("parse errors name the line and column", "[text]") {
  SECTION("undefined value") {
    REQUIRE(ParseError("graph g (float %x) -> (%y) {\n  %y = Add(%x, %nope)\n}\n") ==
            "line 2, column 16: undefined value '%nope'");
    REQUIRE(ParseError("graph g (float %x) -> (%missing) {\n}\n") ==
            "line 1, column 24: undefined value '%missing'");
    // A subgraph's names are not visible to its enclosing graph.
    REQUIRE(ParseError("graph g (bool %c) -> () {\n"
                       "  %r = If(%c) {then_branch: graph () -> (%t) {\n    %t = Neg(%c)\n  }}\n"
                       "  %s = Neg(%t)\n}\n") ==
            "line 5, column 12: undefined value '%t'");
  }
  SECTION("duplicate definition") {
    REQUIRE(ParseError("graph g (float %x) -> () {\n  %a = Relu(%x)\n  %a = Neg(%x)\n}\n") ==
            "line 3, column 3: value '%a' is already defined at line 2");
    REQUIRE(ParseError("graph g (float %x, float %x) -> () {\n}\n") ==
            "line 1, column 26: value '%x' is already defined at line 1");
    // A subgraph may not reuse a name of its enclosing graph, even one defined later.
    REQUIRE(ParseError("graph g (bool %c) -> () {\n"
                       "  %r = If(%c) {then_branch: graph () -> (%late) {\n"
                       "    %late = Neg(%c)\n  }}\n"
                       "  %late = Neg(%c)\n}\n") ==
            "line 3, column 5: value '%late' is already defined at line 5");
    REQUIRE(ParseError("graph g () -> ()\n  init float[1] %w = [1.0]\n  init float[1] %w = "
                       "[2.0]\n{\n}\n") ==
            "line 3, column 17: value '%w' is already defined at line 2");
  }
  SECTION("bad dtype") {
    REQUIRE(ParseError("graph g (flaot[2] %x) -> () {\n}\n") ==
            "line 1, column 10: unknown data type 'flaot'");
    REQUIRE(ParseError("graph g () -> ()\n  init int65[1] %w = [1]\n{\n}\n") ==
            "line 2, column 8: unknown data type 'int65'");
  }
  SECTION("unterminated string") {
    REQUIRE(ParseError("graph g (float %x) -> () {\n  Foo(%x) @\"name\n}\n") ==
            "line 2, column 12: unterminated string");
    REQUIRE(ParseError("graph g (float %\"x) -> () {\n}\n") ==
            "line 1, column 17: unterminated string");
  }
  SECTION("missing ')'") {
    REQUIRE(ParseError("graph g (float %a) -> () {\n  %y = Add(%a, %a {axis: 1}\n}\n") ==
            "line 2, column 19: expected ',' or ')' but found '{'");
    REQUIRE(ParseError("graph g (float %a -> () {\n}\n") ==
            "line 1, column 19: expected ')' but found '-'");
  }
  SECTION("malformed literals and lists") {
    REQUIRE(ParseError("graph g () -> ()\n  init int8[1] %w = [300]\n{\n}\n") ==
            "line 2, column 22: '300' is out of range for int8");
    REQUIRE(ParseError("graph g () -> ()\n  init float[3] %w = [1.0, 2.0]\n{\n}\n") ==
            "line 2, column 22: float[3] needs 3 values but the literal has 2");
    REQUIRE(ParseError("graph g () -> ()\n  init bool[1] %w = [2]\n{\n}\n") ==
            "line 2, column 22: bool elements are 0 or 1");
    REQUIRE(ParseError("graph g () -> ()\n  init int64[1] %w = [1.5]\n{\n}\n") ==
            "line 2, column 23: expected an integer (int64) but found '1.5'");
    REQUIRE(ParseError("graph g () -> ()\n  init float8e5m2[2] %w = [1.0, 2.0]\n{\n}\n") ==
            "line 2, column 8: float8e5m2 tensors have no decimal literal; write their bytes "
            "as raw \"<hex>\"");
    REQUIRE(ParseError("graph g () -> ()\n  init float8e5m2[2] %w = raw \"00\"\n{\n}\n") ==
            "line 2, column 31: float8e5m2[2] needs 2 raw bytes but the literal has 1");
    REQUIRE(ParseError("graph g () -> () {\n  Foo() {a: []}\n}\n") ==
            "line 2, column 13: an empty list needs its kind: write ints[], floats[], "
            "strings[], tensors[] or graphs[]");
    REQUIRE(ParseError("graph g () -> () {\n  Foo() {a: [1, \"x\"]}\n}\n") ==
            "line 2, column 17: a list holds elements of one kind only");
    REQUIRE(ParseError("graph g () -> () {\n  Foo() {a: ints[1.5]}\n}\n") ==
            "line 2, column 17: the elements do not fit a list of ints");
    REQUIRE(ParseError("graph g () -> () {\n  Foo() {a: 1, a: 2}\n}\n") ==
            "line 2, column 16: attribute 'a' is given twice");
    REQUIRE(ParseError("graph g () -> () {\n  Foo() {f: 1e39}\n}\n") ==
            "line 2, column 13: '1e39' is out of range for float");
    REQUIRE(ParseError("graph g () -> () {\n  Foo() {e: 1e}\n}\n") ==
            "line 2, column 13: malformed number exponent");
    REQUIRE(ParseError("graph g () -> () {\n  Foo() {h: 0x10}\n}\n") ==
            "line 2, column 13: malformed number '0x'");
    REQUIRE(ParseError("graph g () -> () {\n  Foo() {s: \"\\q\"}\n}\n") ==
            "line 2, column 14: unknown escape '\\q'");
  }
  SECTION("misplaced declarations and stray text") {
    REQUIRE(ParseError("graph g (float %x) -> ()\n  value float %x\n{\n}\n") ==
            "line 2, column 15: '%x' is a graph input or output; its type belongs in the "
            "graph's signature");
    REQUIRE(ParseError("graph g (float[2] %x) -> (float[3] %x) {\n}\n") ==
            "line 1, column 36: graph output '%x' has a different type where it is declared");
    REQUIRE(ParseError("graph g () -> () {\n}\nextra") ==
            "line 3, column 1: unexpected 'extra' after the main graph");
    REQUIRE(ParseError("opset \"\" 17\nopset \"ai.onnx\" 18\ngraph g () -> () {\n}\n") ==
            "line 2, column 1: domain \"ai.onnx\" is imported twice");
    REQUIRE(ParseError("graph g () -> () {\n  %y = Relu(%)\n}\n") ==
            "line 2, column 14: expected a value name after '%' but found ')'");
    REQUIRE(ParseError("graph g () -> () {\n  %y = Relu(\n") ==
            "line 3, column 1: expected ',' or ')' but found the end of the text");
  }
}
