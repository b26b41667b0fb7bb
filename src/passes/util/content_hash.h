// Content hashing for constants: how eliminate-common-subexpressions and
// share-duplicate-initializers find tensors with equal dtype, dims and bytes in linear time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace fusionopt::passes {

// Mixes `value` into `seed` (order-sensitive).
uint64_t HashCombine(uint64_t seed, uint64_t value);

// A 64-bit hash of raw bytes, read in place (memory-mapped external data is not copied).
uint64_t HashBytes(std::span<const uint8_t> bytes, uint64_t seed = 0);

// Hash of everything Tensor::ContentEquals compares: dtype, dims, bytes (strings by value).
uint64_t HashTensorContent(const Tensor& tensor);

// Hash of 64 evenly spread 64-byte chunks of a tensor's bytes (all of them when small):
// weights that differ almost always differ there, so telling them apart reads 4 KiB each.
uint64_t HashTensorSample(const Tensor& tensor);

// Remembers constants and answers "which earlier value holds exactly this tensor?".
// Tensors are bucketed by dtype and dims first, then by a sample of their bytes, and hashed
// in full only when a second tensor with the same dims and sample arrives: a model whose
// weights all differ in shape is never read, and twelve layers of same-shaped random
// weights are told apart from 4 KiB each rather than hashed whole.
class TensorContentIndex {
 public:
  // The first value added with content equal to `tensor`; null after adding `value` as the
  // first of its content.
  Value* FindOrAdd(Value* value, TensorPtr tensor);

 private:
  struct Entry {
    Value* value = nullptr;
    TensorPtr tensor;
  };
  struct SampleGroup {
    std::optional<Entry> unhashed;  // the group's only entry, until a second one comes
    std::unordered_map<uint64_t, std::vector<Entry>> by_content;
  };
  struct ShapeBucket {
    std::optional<Entry> unsampled;  // the bucket's only entry, until a second one comes
    std::unordered_map<uint64_t, SampleGroup> by_sample;
  };

  Value* FindOrAddByContent(SampleGroup& group, Value* value, TensorPtr tensor);

  std::unordered_map<uint64_t, ShapeBucket> by_shape_;
};

}  // namespace fusionopt::passes
