// ir/why_not.h: the one shape of every "why not" answer — WhyNot (empty: nothing stands in the
// way) and Decided<T> (a value, or the WhyNot that stopped it).
#include <catch2/catch.hpp>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ir/why_not.h"

namespace fusionopt {
namespace {

WhyNot Refuse(bool refuse) {
  if (refuse) return "the scale is not a constant";
  return {};
}

Decided<int> Halve(int value) {
  if (value % 2 != 0) return "odd";
  return value / 2;
}

TEST_CASE("WhyNot: empty allows, a reason refuses and reads as true", "[ir]") {
  CHECK_FALSE(WhyNot());
  CHECK_FALSE(Refuse(false));
  CHECK(WhyNot("") == WhyNot());  // an empty reason is no refusal
  const WhyNot why = Refuse(true);
  REQUIRE(why);
  CHECK(why.reason() == "the scale is not a constant");
  CHECK(why == "the scale is not a constant");
  CHECK(why != WhyNot("another reason"));

  int passed_on = 0;
  for (bool refuse : {false, true}) {
    if (WhyNot stop = Refuse(refuse)) passed_on += static_cast<int>(stop.reason().size());
  }
  CHECK(passed_on == static_cast<int>(why.reason().size()));

  std::ostringstream printed;
  printed << why;
  CHECK(printed.str() == "\"the scale is not a constant\"");
}

TEST_CASE("WhyNot::Prefixed names the part of a larger check that refused, and keeps an allowance empty", "[ir]") {
  CHECK(WhyNot("dtype is not float32").Prefixed("layernorm").reason() == "layernorm: dtype is not float32");
  CHECK_FALSE(WhyNot().Prefixed("layernorm"));
}

TEST_CASE("Decided<T>: the value, or the refusal that stopped it", "[ir]") {
  Decided<int> half = Halve(8);
  REQUIRE(half.ok());
  CHECK(*half == 4);
  CHECK_FALSE(half.why_not());

  Decided<int> odd = Halve(7);
  CHECK_FALSE(odd.ok());
  CHECK_FALSE(static_cast<bool>(odd));
  CHECK(odd.why_not().reason() == "odd");

  // A move-only value moves through; a text value must spell its refusal as a WhyNot.
  Decided<std::unique_ptr<std::vector<int>>> owned = std::make_unique<std::vector<int>>(3, 1);
  REQUIRE(owned);
  CHECK((*owned)->size() == 3);
  Decided<std::string> text = std::string("Gelu");
  CHECK(*text == "Gelu");
  Decided<std::string> refused = WhyNot("no kernel");
  CHECK_FALSE(refused);
  CHECK(refused.why_not().reason() == "no kernel");
}

}  // namespace
}  // namespace fusionopt
