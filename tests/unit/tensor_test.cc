#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "ir/tensor.h"
#include "scratch_dir.h"

using namespace fusionopt;

TEST_CASE("dtype table matches ONNX numbering", "[tensor]") {
  REQUIRE(static_cast<int>(DataType::kFloat16) == 10);
  REQUIRE(NameOf(DataType::kBFloat16) == "bfloat16");
  REQUIRE(ParseDataType("int64") == DataType::kInt64);
  REQUIRE_FALSE(ParseDataType("int65").has_value());
  REQUIRE(ByteSizeOf(DataType::kInt4, 3) == 2);  // packed pairs round up
  REQUIRE(ByteSizeOf(DataType::kFloat, 3) == 12);
  REQUIRE(ByteSizeOf(DataType::kString, 3) == 0);
  REQUIRE_FALSE(IsKnownDataType(0));
  // IR 12-14's types: float8e8m0, 2-bit integers packed four to a byte, 6-bit floats packed
  // four in three bytes.
  REQUIRE(IsKnownDataType(24));
  REQUIRE(NameOf(DataType::kFloat8E8M0) == "float8e8m0");
  REQUIRE(ByteSizeOf(DataType::kInt2, 5) == 2);
  REQUIRE(ByteSizeOf(DataType::kFloat6E2M3, 4) == 3);
  REQUIRE(ByteSizeOf(DataType::kFloat6E3M2, 5) == 4);
  REQUIRE(ParseDataType("uint2") == DataType::kUint2);
  REQUIRE_FALSE(IsKnownDataType(29));
}

TEST_CASE("integer tensors widen to int64", "[tensor]") {
  auto tensor = Tensor::FromValues<int32_t>(DataType::kInt32, {3}, {1, -2, 3});
  REQUIRE(tensor.NumElements() == 3);
  REQUIRE(tensor.AsInt64s() == std::vector<int64_t>{1, -2, 3});
  auto floats = Tensor::FromValues<float>(DataType::kFloat, {2}, {1.5f, 2.0f});
  REQUIRE_FALSE(floats.AsInt64s().has_value());
  REQUIRE(floats.AsDoubles() == std::vector<double>{1.5, 2.0});
}

TEST_CASE("float16 and bfloat16 decode exactly", "[tensor]") {
  // 1.0, -2.0, 65504 (max half), smallest subnormal 2^-24
  auto half = Tensor::FromValues<uint16_t>(DataType::kFloat16, {4}, {0x3c00, 0xc000, 0x7bff, 0x0001});
  auto values = half.AsDoubles().value();
  REQUIRE(values[0] == 1.0);
  REQUIRE(values[1] == -2.0);
  REQUIRE(values[2] == 65504.0);
  REQUIRE(values[3] == Approx(5.9604644775390625e-08).epsilon(0));
  auto bf = Tensor::FromValues<uint16_t>(DataType::kBFloat16, {1}, {0x3fc0});
  REQUIRE(bf.AsDoubles().value()[0] == 1.5);
}

TEST_CASE("content equality compares dtype, dims and bytes", "[tensor]") {
  auto a = Tensor::FromValues<float>(DataType::kFloat, {2}, {1, 2});
  auto b = Tensor::FromValues<float>(DataType::kFloat, {2}, {1, 2});
  auto c = Tensor::FromValues<float>(DataType::kFloat, {1, 2}, {1, 2});
  auto d = Tensor::FromValues<float>(DataType::kFloat, {2}, {1, 3});
  REQUIRE(a.ContentEquals(b));
  REQUIRE_FALSE(a.ContentEquals(c));
  REQUIRE_FALSE(a.ContentEquals(d));
  auto s1 = Tensor::Strings({2}, {"x", "y"});
  auto s2 = Tensor::Strings({2}, {"x", "z"});
  REQUIRE_FALSE(s1.ContentEquals(s2));
}

TEST_CASE("mapped tensors point into the file without copying", "[tensor]") {
  test_support::ScratchDir scratch("tensor_test");
  std::string path = (scratch / "weights.bin").string();
  {
    std::ofstream out(path, std::ios::binary);
    float values[4] = {1, 2, 3, 4};
    out.write(reinterpret_cast<const char*>(values), sizeof(values));
  }
  auto file = MappedFile::Open(path);
  REQUIRE(file.ok());
  auto tensor = Tensor::Mapped(DataType::kFloat, {2}, *file, 8, 8);
  REQUIRE(tensor.bytes().data() == (*file)->data() + 8);
  REQUIRE(tensor.values<float>()[0] == 3.0f);
  REQUIRE(tensor.external_source()->offset == 8);

  auto missing = MappedFile::Open((scratch / "no_such_file.bin").string());
  REQUIRE(missing.status().code() == ErrorCode::kIo);
}
