// Content hashing for constants (passes/util/content_hash.h): HashCombine and HashBytes are
// deterministic and tell order, seed and length apart; tensor hashes cover dtype, dims and
// bytes; the sample reads only 64 chunks of a large tensor; TensorContentIndex finds equal ones.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/util/content_hash.h"

using namespace fusionopt;
using namespace fusionopt::passes;

namespace {

TensorPtr Floats(std::vector<int64_t> dims, std::vector<float> values) {
  return std::make_shared<Tensor>(Tensor::FromValues<float>(DataType::kFloat, std::move(dims), values));
}

// 2048 floats (8192 bytes, twice the sample's 4 KiB): chunk 0 reads bytes [0, 64), chunk 1
// starts at byte 8128 / 63 = 129, so float 25 (bytes 100..103) is never sampled.
std::vector<float> Large() {
  std::vector<float> values(2048);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  return values;
}

}  // namespace

TEST_CASE("content hash: HashCombine and HashBytes are deterministic and order-, seed- and length-sensitive",
          "[passes]") {
  CHECK(HashCombine(7, 3) == HashCombine(7, 3));
  CHECK(HashCombine(0, 1) != HashCombine(0, 2));
  CHECK(HashCombine(HashCombine(0, 1), 2) != HashCombine(HashCombine(0, 2), 1));

  const std::vector<uint8_t> bytes = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  CHECK(HashBytes(bytes) == HashBytes(std::vector<uint8_t>(bytes)));
  CHECK(HashBytes(bytes, 1) != HashBytes(bytes, 2));
  std::vector<uint8_t> changed_tail = bytes;
  changed_tail.back() = 12;  // a byte past the last whole 8-byte word
  CHECK(HashBytes(bytes) != HashBytes(changed_tail));
  // Zero bytes of different lengths differ: the length is mixed in first.
  CHECK(HashBytes(std::vector<uint8_t>{0}) != HashBytes(std::vector<uint8_t>{0, 0}));
}

TEST_CASE("content hash: a tensor's hash covers dtype, dims and bytes, strings by value", "[passes]") {
  CHECK(HashTensorContent(*Floats({2, 2}, {1, 2, 3, 4})) == HashTensorContent(*Floats({2, 2}, {1, 2, 3, 4})));
  CHECK(HashTensorContent(*Floats({2, 2}, {1, 2, 3, 4})) != HashTensorContent(*Floats({4}, {1, 2, 3, 4})));
  CHECK(HashTensorContent(*Floats({4}, {1, 2, 3, 4})) != HashTensorContent(*Floats({4}, {1, 2, 3, 5})));
  // The same four bytes as float and as int32.
  Tensor as_int = Tensor::FromValues<int32_t>(DataType::kInt32, {1}, {0x3f800000});
  CHECK(HashTensorContent(as_int) != HashTensorContent(*Floats({1}, {1.0f})));

  Tensor words = Tensor::Strings({2}, {"ab", "c"});
  CHECK(HashTensorContent(words) == HashTensorContent(Tensor::Strings({2}, {"ab", "c"})));
  CHECK(HashTensorContent(words) != HashTensorContent(Tensor::Strings({2}, {"a", "bc"})));
  CHECK(HashTensorSample(words) == 0);  // strings are never sampled
}

TEST_CASE("content hash: the sample is every byte of a small tensor, 64 chunks of a large one", "[passes]") {
  TensorPtr small = Floats({3}, {1, 2, 3});
  CHECK(HashTensorSample(*small) == HashBytes(small->bytes()));

  std::vector<float> values = Large();
  TensorPtr large = Floats({2048}, values);
  values[25] = -1;  // between the first two chunks
  TensorPtr unsampled_change = Floats({2048}, values);
  values[25] = 25;
  values[0] = -1;  // in the first chunk
  TensorPtr sampled_change = Floats({2048}, values);
  CHECK(HashTensorSample(*large) == HashTensorSample(*unsampled_change));
  CHECK(HashTensorContent(*large) != HashTensorContent(*unsampled_change));
  CHECK(HashTensorSample(*large) != HashTensorSample(*sampled_change));
}

TEST_CASE("TensorContentIndex: the first value added with equal content", "[passes]") {
  Graph graph;
  Value* a = graph.CreateValue("a");
  Value* b = graph.CreateValue("b");
  Value* c = graph.CreateValue("c");
  Value* d = graph.CreateValue("d");
  Value* e = graph.CreateValue("e");
  Value* f = graph.CreateValue("f");
  TensorContentIndex index;
  CHECK(index.FindOrAdd(a, Floats({2}, {1, 2})) == nullptr);  // first of its content
  CHECK(index.FindOrAdd(b, Floats({1, 2}, {1, 2})) == nullptr);  // same bytes, other dims
  CHECK(index.FindOrAdd(c, Floats({2}, {1, 3})) == nullptr);  // same dims, other bytes
  CHECK(index.FindOrAdd(d, Floats({2}, {1, 2})) == a);
  CHECK(index.FindOrAdd(e, Floats({1, 2}, {1, 2})) == b);
  CHECK(index.FindOrAdd(f, Floats({2}, {1, 3})) == c);

  // Large tensors whose samples agree are still told apart by their full content.
  std::vector<float> values = Large();
  TensorContentIndex large;
  CHECK(large.FindOrAdd(a, Floats({2048}, values)) == nullptr);
  values[25] = -1;
  CHECK(large.FindOrAdd(b, Floats({2048}, values)) == nullptr);
  CHECK(large.FindOrAdd(c, Floats({2048}, values)) == b);
  CHECK(large.FindOrAdd(d, Floats({2048}, Large())) == a);
}
