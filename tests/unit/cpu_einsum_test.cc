// Einsum on the CPU runtime: hand-computed numbers for each kind of equation, a brute-force
// oracle over the layouts the matmul path arranges differently, the equation parser and
// label binding, and the errors a bad model must produce (at Create when the equation or
// declared shapes show it, else at Run).
#include <catch2/catch.hpp>

#include <map>

#include "cpu_runtime/einsum/einsum.h"
#include "cpu_runtime/engine/session.h"
#include "cpu_test_support.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

namespace {

// 0, 1, 2, ... in the shape `dims`.
RtTensor Counting(DataType dtype, std::vector<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  std::vector<double> values;
  for (int64_t i = 0; i < count; ++i) values.push_back(static_cast<double>(i));
  return Filled(dtype, std::move(dims), values);
}

// A model with one Einsum node over inputs %x0, %x1, ... of the given (declared) types.
std::string EinsumModel(const std::string& equation, const std::vector<std::string>& input_types,
                        const std::string& output_type = "float") {
  std::string inputs, operands;
  for (size_t i = 0; i < input_types.size(); ++i) {
    inputs += (i ? ", " : "") + input_types[i] + " %x" + std::to_string(i);
    operands += (i ? ", " : "") + std::string("%x") + std::to_string(i);
  }
  return "ir_version 8\nopset \"\" 17\ngraph g (" + inputs + ") -> (" + output_type + " %y) {\n  %y = Einsum(" +
         operands + ") {equation: \"" + equation + "\"}\n}";
}

std::vector<NamedTensor> Feeds(const std::vector<RtTensor>& tensors) {
  std::vector<NamedTensor> feeds;
  for (size_t i = 0; i < tensors.size(); ++i) feeds.push_back({"x" + std::to_string(i), tensors[i]});
  return feeds;
}

// Runs `equation` on `inputs` (declared with rank unknown, dtype of the first input).
RtTensor Einsum(const std::string& equation, const std::vector<RtTensor>& inputs) {
  const std::string dtype(NameOf(inputs[0].dtype()));
  std::vector<std::string> types(inputs.size(), dtype);
  auto outputs = Prepare(EinsumModel(equation, types, dtype)).session->Run(Feeds(inputs));
  INFO(equation << ": " << outputs.status().message());
  REQUIRE(outputs.ok());
  return (*outputs)[0].tensor;
}

std::string RunError(const std::string& equation, const std::vector<RtTensor>& inputs) {
  std::vector<std::string> types(inputs.size(), "float");
  auto outputs = Prepare(EinsumModel(equation, types)).session->Run(Feeds(inputs));
  REQUIRE_FALSE(outputs.ok());
  return outputs.status().message();
}

// The oracle: for explicit equations of letters only, every assignment of the letters.
std::vector<double> BruteForce(const std::string& equation, const std::vector<RtTensor>& inputs,
                               std::vector<int64_t>& output_dims) {
  const size_t arrow = equation.find("->");
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = equation.find(',', start);
    terms.push_back(equation.substr(start, std::min(comma, arrow) - start));
    if (comma == std::string::npos || comma > arrow) break;
    start = comma + 1;
  }
  const std::string output = equation.substr(arrow + 2);
  std::map<char, int64_t> sizes;
  for (size_t t = 0; t < terms.size(); ++t) {
    for (size_t axis = 0; axis < terms[t].size(); ++axis) sizes[terms[t][axis]] = inputs[t].dim(axis);
  }
  output_dims.clear();
  for (char letter : output) output_dims.push_back(sizes[letter]);
  int64_t total = 1, out_count = 1;
  for (const auto& [letter, size] : sizes) total *= size;
  for (int64_t dim : output_dims) out_count *= dim;
  std::vector<double> out(static_cast<size_t>(out_count), 0.0);
  for (int64_t assignment = 0; assignment < total; ++assignment) {
    std::map<char, int64_t> index;
    int64_t rest = assignment;
    for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
      index[it->first] = rest % it->second;
      rest /= it->second;
    }
    auto offset = [&](const std::string& term, const std::vector<int64_t>& dims) {
      int64_t position = 0;
      for (size_t axis = 0; axis < term.size(); ++axis) position = position * dims[axis] + index[term[axis]];
      return position;
    };
    double product = 1;
    for (size_t t = 0; t < terms.size(); ++t) product *= inputs[t].ValueAsDouble(offset(terms[t], inputs[t].dims()));
    out[static_cast<size_t>(offset(output, output_dims))] += product;
  }
  return out;
}

// Small integers with a sign, so float32 sums are exact.
RtTensor Pattern(DataType dtype, std::vector<int64_t> dims, int seed) {
  RtTensor tensor = Counting(dtype, dims);
  std::vector<double> values;
  for (double value : Values(tensor)) {
    values.push_back(static_cast<double>((static_cast<int>(value) * 7 + seed) % 5 - 2));
  }
  return Filled(dtype, std::move(dims), values);
}

}  // namespace

TEST_CASE("Einsum: matmul, batch matmul, transpose, inner and outer products", "[cpu][einsum]") {
  RtTensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  RtTensor b = Floats({3, 2}, {1, 0, 0, 1, 1, 1});
  CheckClose(Einsum("ij,jk->ik", {a, b}), {2, 2}, {4, 5, 10, 11});
  // The result transposed: computed as b' a' with nothing copied.
  CheckClose(Einsum("ij,jk->ki", {a, b}), {2, 2}, {4, 10, 5, 11});

  RtTensor batch_a = Floats({2, 1, 2}, {1, 2, 3, 4});
  RtTensor batch_b = Floats({2, 2, 1}, {1, 1, 2, -1});
  CheckClose(Einsum("bij,bjk->bik", {batch_a, batch_b}), {2, 1, 1}, {3, 2});

  CheckClose(Einsum("ij->ji", {a}), {3, 2}, {1, 4, 2, 5, 3, 6});
  CheckClose(Einsum("i,i", {Floats({3}, {1, 2, 3}), Floats({3}, {4, 5, 6})}), {}, {32});
  CheckClose(Einsum("i,j->ij", {Floats({2}, {1, 2}), Floats({3}, {1, 10, 100})}), {2, 3}, {1, 10, 100, 2, 20, 200});
}

TEST_CASE("Einsum: sums, diagonals and ellipsis broadcasting", "[cpu][einsum]") {
  RtTensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  CheckClose(Einsum("ij->", {a}), {}, {21});
  CheckClose(Einsum("ij->i", {a}), {2}, {6, 15});
  CheckClose(Einsum("ij->j", {a}), {3}, {5, 7, 9});

  RtTensor square = Counting(DataType::kFloat, {3, 3});
  CheckClose(Einsum("ii->i", {square}), {3}, {0, 4, 8});
  CheckClose(Einsum("ii", {square}), {}, {12});  // implicit: 'i' appears twice, so it is summed
  RtTensor batch = Counting(DataType::kFloat, {2, 2, 2});
  CheckClose(Einsum("bii->bi", {batch}), {2, 2}, {0, 3, 4, 7});
  CheckClose(Einsum("...ii->...i", {batch}), {2, 2}, {0, 3, 4, 7});
  // A diagonal feeding the matmul path: sum_i a[i,i] * b[i,j].
  CheckClose(Einsum("ii,ij->j", {square, Floats({3, 2}, {1, 0, 0, 1, 1, 1})}), {2}, {8, 12});

  // "..." dims broadcast: [2,1] against [3] gives [2,3]; letters contract as usual.
  RtTensor left = Counting(DataType::kFloat, {2, 1, 2});
  RtTensor right = Floats({3, 2}, {1, 0, 0, 1, 1, 1});
  CheckClose(Einsum("...k,...k->...", {left, right}), {2, 3}, {0, 1, 1, 2, 3, 5});
  CheckClose(Einsum("...ij,jk->...ik", {Counting(DataType::kFloat, {2, 1, 2}), Floats({2, 1}, {1, 1})}), {2, 1, 1},
              {1, 5});
}

TEST_CASE("Einsum: implicit outputs sort the letters used once after the '...' dims", "[cpu][einsum]") {
  RtTensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  RtTensor b = Floats({3, 2}, {1, 0, 0, 1, 1, 1});
  CheckClose(Einsum("ij,jk", {a, b}), {2, 2}, {4, 5, 10, 11});  // -> ik
  CheckClose(Einsum("ji", {a}), {3, 2}, {1, 4, 2, 5, 3, 6});     // -> ij: a transpose
  CheckClose(Einsum("jk,ij", {b, a}), {2, 2}, {4, 5, 10, 11});   // -> ik whatever the term order
  // Upper case sorts before lower case.
  CheckClose(Einsum("aB", {a}), {3, 2}, {1, 4, 2, 5, 3, 6});
  CheckClose(Einsum("...j,j", {Counting(DataType::kFloat, {2, 1, 3}), Floats({3}, {1, 1, 1})}), {2, 1}, {3, 12});
}

TEST_CASE("Einsum: three operands fold left to right", "[cpu][einsum]") {
  RtTensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  RtTensor b = Floats({3, 2}, {1, 0, 0, 1, 1, 1});
  RtTensor c = Floats({2}, {1, -1});
  // (a b) c: [[4,5],[10,11]] . [1,-1] = [-1, -1].
  CheckClose(Einsum("ij,jk,k->i", {a, b, c}), {2}, {-1, -1});
  // The middle operand's label 'i' is needed by the last one, so the first step keeps it.
  CheckClose(Einsum("i,j,i->j", {Floats({2}, {1, 2}), Floats({2}, {3, 4}), Floats({2}, {5, 6})}), {2}, {51, 68});
}

TEST_CASE("Einsum: int64, int32, double and float16", "[cpu][einsum]") {
  RtTensor a = Filled(DataType::kInt64, {2, 2}, {1, -2, 3, 4});
  RtTensor b = Filled(DataType::kInt64, {2, 1}, {5, 6});
  RtTensor product = Einsum("ij,jk->ik", {a, b});
  REQUIRE(product.dtype() == DataType::kInt64);
  CheckClose(product, {2, 1}, {-7, 39});
  CheckClose(Einsum("ii->", {a}), {}, {5});
  RtTensor ints = Einsum("ij->ji", {Filled(DataType::kInt32, {1, 2}, {7, -8})});
  REQUIRE(ints.dtype() == DataType::kInt32);
  CheckClose(ints, {2, 1}, {7, -8});

  RtTensor wide =
      Einsum("bij,bjk->bik", {Counting(DataType::kDouble, {2, 2, 2}), Counting(DataType::kDouble, {2, 2, 1})});
  REQUIRE(wide.dtype() == DataType::kDouble);
  CheckClose(wide, {2, 2, 1}, {1, 3, 23, 33});

  RtTensor half = Einsum("ij,j->i", {Filled(DataType::kFloat16, {2, 2}, {1, 2, 3, 4}),
                                     Filled(DataType::kFloat16, {2}, {0.5, 0.25})});
  REQUIRE(half.dtype() == DataType::kFloat16);
  CheckClose(half, {2}, {1, 2.5});
}

TEST_CASE("Einsum: every layout the matmul path arranges agrees with brute force", "[cpu][einsum]") {
  const std::vector<std::pair<std::string, std::vector<std::vector<int64_t>>>> cases = {
      {"ij,jk->ik", {{2, 3}, {3, 4}}},
      {"ij,kj->ik", {{2, 3}, {4, 3}}},              // B read transposed in place
      {"ji,jk->ik", {{3, 2}, {3, 4}}},              // A read transposed in place
      {"ij,jk->ki", {{2, 3}, {3, 4}}},              // operands swapped
      {"bhid,bhjd->bhij", {{2, 3, 4, 5}, {2, 3, 6, 5}}},
      {"bhij,bhjd->bhid", {{2, 2, 3, 4}, {2, 2, 4, 5}}},
      {"bqhd,bkhd->bhqk", {{2, 3, 2, 4}, {2, 5, 2, 4}}},  // both copied into shape
      {"ibd,jbd->bij", {{3, 2, 4}, {5, 2, 4}}},
      {"ij,jk->k", {{2, 3}, {3, 4}}},               // 'i' summed before the matmul
      {"ij,ij->", {{3, 4}, {3, 4}}},
      {"ij,ij->ij", {{3, 4}, {3, 4}}},              // all batch: an elementwise product
      {"ijk,jil->kl", {{2, 3, 4}, {3, 2, 5}}},
      {"abc,cd,de->abe", {{2, 3, 4}, {4, 3}, {3, 2}}},
      {"ab,ab,ab->b", {{3, 4}, {3, 4}, {3, 4}}},
  };
  for (DataType dtype : {DataType::kFloat, DataType::kDouble}) {
    for (const auto& [equation, shapes] : cases) {
      std::vector<RtTensor> inputs;
      for (size_t i = 0; i < shapes.size(); ++i) inputs.push_back(Pattern(dtype, shapes[i], static_cast<int>(i)));
      std::vector<int64_t> dims;
      const std::vector<double> expected = BruteForce(equation, inputs, dims);
      INFO(equation << " in " << NameOf(dtype));
      CheckClose(Einsum(equation, inputs), dims, expected);
    }
  }
}

// The matmul path reads operands already laid out as matrices in place: the only memory a
// run takes from the pool is its output (sizes here are powers of two, the pool's classes).
TEST_CASE("Einsum: transformer contractions copy nothing but their output", "[cpu][einsum]") {
  auto peak_bytes = [](const std::string& equation, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    auto stats = RunStats{};
    auto prepared = Prepare(EinsumModel(equation, {"float", "float"}));
    auto outputs = prepared.session->Run(Feeds({Pattern(DataType::kFloat, a, 0), Pattern(DataType::kFloat, b, 1)}),
                                         &stats);
    INFO(equation << ": " << outputs.status().message());
    REQUIRE(outputs.ok());
    CHECK((*outputs)[0].tensor.nbytes() == 8192);
    return stats.peak_intermediate_bytes;
  };
  CHECK(peak_bytes("bhid,bhjd->bhij", {1, 2, 32, 16}, {1, 2, 32, 16}) == 8192);
  CHECK(peak_bytes("bhij,bhjd->bhid", {1, 2, 32, 8}, {1, 2, 8, 32}) == 8192);
  CHECK(peak_bytes("bij,bjk->bik", {2, 32, 4}, {2, 4, 32}) == 8192);
  CHECK(peak_bytes("ij,jk->ik", {32, 4}, {4, 64}) == 8192);
  CHECK(peak_bytes("ij,jk->ki", {32, 4}, {4, 64}) == 8192);
  CHECK(peak_bytes("ij,kj->ik", {32, 4}, {64, 4}) == 8192);
  // Heads in the middle cannot be read as a batch of matrices: both operands are copied.
  CHECK(peak_bytes("bihd,bjhd->bhij", {1, 32, 2, 16}, {1, 32, 2, 16}) > 8192);
}

TEST_CASE("Einsum: empty operands give empty or zero results", "[cpu][einsum]") {
  CheckClose(Einsum("ij,jk->ik", {Floats({2, 0}, {}), Floats({0, 3}, {})}), {2, 3}, {0, 0, 0, 0, 0, 0});
  CheckClose(Einsum("ij,jk->ik", {Floats({0, 2}, {}), Floats({2, 3}, {1, 1, 1, 1, 1, 1})}), {0, 3}, {});
  CheckClose(Einsum("ij->", {Floats({0, 2}, {})}), {}, {0});
}

TEST_CASE("Einsum equations: parsing and label binding", "[cpu][einsum]") {
  auto parsed = einsum::ParseEquation(" bij , bjk -> bik ");
  REQUIRE(parsed.ok());
  REQUIRE(parsed->inputs.size() == 2);
  CHECK(parsed->inputs[1].letters == "bjk");
  REQUIRE(parsed->output.has_value());
  CHECK(parsed->output->letters == "bik");

  auto ellipsis = einsum::ParseEquation("a...b,b");
  REQUIRE(ellipsis.ok());
  CHECK(ellipsis->inputs[0].ellipsis_at == 1u);
  CHECK_FALSE(ellipsis->output.has_value());
  // "..." in the middle: the operand of rank 4 gives it two dims; the output gets them first.
  auto labeling = einsum::Bind(*ellipsis, {{2, 5, 1, 3}, {3}});
  REQUIRE(labeling.ok());
  CHECK(labeling->operands[0] == std::vector<int>{26, 52, 53, 27});  // a, ..., b
  CHECK(labeling->output == std::vector<int>{52, 53, 26});           // ..., a (b is summed)
  CHECK(labeling->sizes[52] == 5);
  CHECK(labeling->sizes[53] == 1);

  CHECK_THAT(einsum::ParseEquation("ij,j1").status().message(), Catch::Contains("character '1'"));
  CHECK_THAT(einsum::ParseEquation("i..j").status().message(), Catch::Contains("'.' outside '...'"));
  CHECK_THAT(einsum::ParseEquation("...i...").status().message(), Catch::Contains("'...' twice"));
  CHECK_THAT(einsum::ParseEquation("ij->ii").status().message(), Catch::Contains("output label 'i' appears twice"));
  CHECK_THAT(einsum::ParseEquation("ij->i->j").status().message(), Catch::Contains("character '-'"));
  CHECK_THAT(einsum::ParseEquation("ij,jk->i,k").status().message(), Catch::Contains("character ','"));

  auto matmul = einsum::ParseEquation("ij,jk->ik");
  REQUIRE(matmul.ok());
  CHECK_THAT(einsum::Bind(*matmul, {{2, 3}, {4, 5}}).status().message(),
             Catch::Contains("label 'j' has sizes 3 and 4"));
  CHECK(einsum::Bind(*matmul, {{2, -1}, {4, 5}}).ok());  // an unknown size binds to anything
  auto broadcast = einsum::ParseEquation("...i,...i->...");
  REQUIRE(broadcast.ok());
  CHECK_THAT(einsum::Bind(*broadcast, {{2, 3}, {4, 3}}).status().message(), Catch::Contains("do not broadcast"));
  auto dropped = einsum::ParseEquation("...i->i");
  REQUIRE(dropped.ok());
  CHECK(einsum::Bind(*dropped, {{4}}).ok());  // no "..." dims to drop
  CHECK_THAT(einsum::Bind(*dropped, {{2, 4}}).status().message(), Catch::Contains("has no '...'"));
}

TEST_CASE("Einsum: bad equations fail at Create, bad shapes at Run", "[cpu][einsum]") {
  CHECK_THAT(CreateError(EinsumModel("ijk,jk->ik", {"float[2,3]", "float[3,4]"})),
             Catch::Contains("operand 0 has rank 2 but its term 'ijk' names 3 axes"));
  CHECK_THAT(CreateError(EinsumModel("...ijk->k", {"float[2,3]"})), Catch::Contains("names 3 axes besides '...'"));
  CHECK_THAT(CreateError(EinsumModel("ij,jk->il", {"float", "float"})),
             Catch::Contains("output label 'l' is in no input term"));
  CHECK_THAT(CreateError(EinsumModel("ij,j%->i", {"float", "float"})), Catch::Contains("character '%'"));
  CHECK_THAT(CreateError(EinsumModel("ij,jk->ik", {"float"})),
             Catch::Contains("has 2 operand terms but the node has 1 inputs"));
  CHECK_THAT(CreateError(EinsumModel("ij,jk->ik", {"float[2,3]", "float[4,5]"})),
             Catch::Contains("label 'j' has sizes 3 and 4"));
  CHECK_THAT(CreateError(EinsumModel("ij,jk->ik", {"float", "int64"})), Catch::Contains("different dtypes"));
  CHECK_THAT(CreateError(EinsumModel("ij->i", {"bool"})), Catch::Contains("does not support dtype bool"));
  CHECK_THAT(CreateError("ir_version 8\nopset \"\" 17\ngraph g (float %x) -> (float %y) {\n  %y = Einsum(%x)\n}"),
             Catch::Contains("needs the 'equation' attribute"));

  // Undeclared shapes are checked when the tensors arrive.
  CHECK_THAT(RunError("ij,jk->ik", {Floats({2, 3}, {1, 2, 3, 4, 5, 6}), Floats({2}, {1, 2})}),
             Catch::Contains("operand 1 has rank 1"));
  CHECK_THAT(RunError("ij,jk->ik", {Floats({1, 2}, {1, 2}), Floats({3, 1}, {1, 2, 3})}),
             Catch::Contains("label 'j' has sizes 2 and 3"));
  CHECK_THAT(RunError("...i->i", {Floats({2, 1}, {1, 2})}), Catch::Contains("has no '...'"));
}
