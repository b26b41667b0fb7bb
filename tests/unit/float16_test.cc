// IEEE half conversions (ir/float16.h): the bulk conversions give the scalar ones' bits for
// every half and for floats across the whole range, NaNs and rounding ties included.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "ir/float16.h"

using namespace fusionopt;

namespace {

uint32_t Bits(float value) { return std::bit_cast<uint32_t>(value); }
float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

}  // namespace

TEST_CASE("half to float: the bulk conversion gives every half's scalar bits", "[ir][float16]") {
  std::vector<uint16_t> halves(65536 + 5);  // a tail past the vector width
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> bulk(halves.size());
  HalfToFloatN(halves.data(), bulk.data(), static_cast<int64_t>(halves.size()));
  int mismatches = 0;
  for (size_t i = 0; i < halves.size(); ++i) mismatches += Bits(bulk[i]) != Bits(HalfToFloat(halves[i]));
  CHECK(mismatches == 0);
  CHECK(HalfToFloat(0x3c00) == 1.0f);
  CHECK(HalfToFloat(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(HalfToFloat(0x7bff) == 65504.0f);
  CHECK(std::isinf(HalfToFloat(0xfc00)));
  CHECK(Bits(HalfToFloat(0x7c01)) == 0x7fc02000u);  // a signaling NaN comes back quiet, payload kept
}

TEST_CASE("float to half: the bulk conversion gives the scalar bits across the float range", "[ir][float16]") {
  std::vector<float> floats;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4093) floats.push_back(FromBits(static_cast<uint32_t>(bits)));
  // Ties to even at both ends of the normal range and in the subnormals, overflow, NaNs.
  for (float value : {65504.0f, 65519.99f, 65520.0f, 1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11),
                      std::ldexp(1.0f, -25), std::ldexp(3.0f, -26), std::ldexp(1.0f, -26), -0.0f,
                      std::numeric_limits<float>::infinity(), FromBits(0x7fa00001u), FromBits(0xffc12345u)}) {
    floats.push_back(value);
  }
  std::vector<uint16_t> bulk(floats.size());
  FloatToHalfN(floats.data(), bulk.data(), static_cast<int64_t>(floats.size()));
  int mismatches = 0;
  for (size_t i = 0; i < floats.size(); ++i) {
    if (bulk[i] != FloatToHalf(floats[i])) {
      if (++mismatches <= 5) WARN("float bits " << std::hex << Bits(floats[i]) << ": bulk " << bulk[i] << ", scalar " << FloatToHalf(floats[i]));
    }
  }
  CHECK(mismatches == 0);
  CHECK(FloatToHalf(65519.99f) == 0x7bff);
  CHECK(FloatToHalf(65520.0f) == 0x7c00);                            // rounds up to infinity
  CHECK(FloatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);        // tie to even: down
  CHECK(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);    // tie to even: up
  CHECK(FloatToHalf(std::ldexp(1.0f, -25)) == 0x0000);               // half the smallest subnormal: to even
  CHECK(FloatToHalf(std::ldexp(3.0f, -26)) == 0x0001);
  CHECK(FloatToHalf(FromBits(0x7fa00001u)) == 0x7f00);               // NaN: quiet, top payload bits kept
}

TEST_CASE("round through half: the bulk round trip gives the scalar one's bits", "[ir][float16]") {
  std::vector<float> floats;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 8191) floats.push_back(FromBits(static_cast<uint32_t>(bits)));
  floats.push_back(1.0f + std::ldexp(1.0f, -11));  // a tie: to even, down to 1
  floats.push_back(70000.0f);                      // past the largest half: infinity
  std::vector<float> bulk = floats;
  RoundThroughHalfN(bulk.data(), static_cast<int64_t>(bulk.size()));
  int mismatches = 0;
  for (size_t i = 0; i < floats.size(); ++i) mismatches += Bits(bulk[i]) != Bits(HalfToFloat(FloatToHalf(floats[i])));
  CHECK(mismatches == 0);
  CHECK(bulk[bulk.size() - 2] == 1.0f);
  CHECK(std::isinf(bulk.back()));
}

TEST_CASE("bfloat16 and the run-time choice of 16-bit type: bulk conversions give the scalar bits", "[ir][float16]") {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  std::vector<float> widened(bits.size());
  SixteenBitToFloatN(/*bfloat16=*/true, bits.data(), widened.data(), static_cast<int64_t>(bits.size()));
  int mismatches = 0;
  for (size_t i = 0; i < bits.size(); ++i) mismatches += Bits(widened[i]) != Bits(BFloat16ToFloat(bits[i]));
  CHECK(mismatches == 0);
  std::vector<float> floats;
  for (uint64_t value = 0; value <= 0xffffffffull; value += 65521) floats.push_back(FromBits(static_cast<uint32_t>(value)));
  std::vector<uint16_t> bf16(floats.size()), half(floats.size());
  FloatToSixteenBitN(/*bfloat16=*/true, floats.data(), bf16.data(), static_cast<int64_t>(floats.size()));
  FloatToSixteenBitN(/*bfloat16=*/false, floats.data(), half.data(), static_cast<int64_t>(floats.size()));
  mismatches = 0;
  for (size_t i = 0; i < floats.size(); ++i) {
    mismatches += bf16[i] != FloatToBFloat16(floats[i]);
    mismatches += half[i] != FloatToHalf(floats[i]);
  }
  CHECK(mismatches == 0);
  CHECK(FloatToBFloat16(1.0f) == 0x3f80);
}
