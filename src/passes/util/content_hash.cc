#include "passes/util/content_hash.h"

#include <cstring>

namespace fusionopt::passes {
namespace {

constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ull;

// MurmurHash3's finalizer: every input bit affects every output bit.
uint64_t Avalanche(uint64_t value) {
  value ^= value >> 33;
  value *= 0xff51afd7ed558ccdull;
  value ^= value >> 33;
  value *= 0xc4ceb9fe1a85ec53ull;
  value ^= value >> 33;
  return value;
}

uint64_t HashShape(const Tensor& tensor) {
  uint64_t hash = HashCombine(0, static_cast<uint64_t>(tensor.dtype()));
  hash = HashCombine(hash, tensor.dims().size());
  for (int64_t dim : tensor.dims()) hash = HashCombine(hash, static_cast<uint64_t>(dim));
  return hash;
}

}  // namespace

uint64_t HashCombine(uint64_t seed, uint64_t value) {
  return Avalanche(seed ^ (value + kMultiplier + (seed << 6) + (seed >> 2)));
}

uint64_t HashBytes(std::span<const uint8_t> bytes, uint64_t seed) {
  uint64_t hash = Avalanche(seed ^ (bytes.size() * kMultiplier));
  size_t offset = 0;
  for (; offset + 8 <= bytes.size(); offset += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + offset, 8);
    hash = (hash ^ Avalanche(word)) * kMultiplier;
    hash ^= hash >> 29;
  }
  uint64_t tail = 0;
  if (offset < bytes.size()) std::memcpy(&tail, bytes.data() + offset, bytes.size() - offset);
  return Avalanche(hash ^ tail);
}

uint64_t HashTensorContent(const Tensor& tensor) {
  uint64_t hash = HashShape(tensor);
  if (tensor.dtype() != DataType::kString) return HashBytes(tensor.bytes(), hash);
  for (const std::string& text : tensor.strings()) {
    auto view = std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    hash = HashBytes(view, hash);
  }
  return hash;
}

uint64_t HashTensorSample(const Tensor& tensor) {
  if (tensor.dtype() == DataType::kString) return 0;  // rare and small: hashed in full
  auto bytes = tensor.bytes();
  constexpr size_t kChunks = 64;
  constexpr size_t kChunkBytes = 64;
  if (bytes.size() <= kChunks * kChunkBytes) return HashBytes(bytes);
  uint64_t hash = 0;
  for (size_t chunk = 0; chunk < kChunks; ++chunk) {
    size_t offset = chunk * (bytes.size() - kChunkBytes) / (kChunks - 1);
    hash = HashBytes(bytes.subspan(offset, kChunkBytes), hash);
  }
  return hash;
}

Value* TensorContentIndex::FindOrAdd(Value* value, TensorPtr tensor) {
  ShapeBucket& bucket = by_shape_[HashShape(*tensor)];
  if (!bucket.unsampled && bucket.by_sample.empty()) {
    bucket.unsampled = Entry{value, std::move(tensor)};
    return nullptr;
  }
  if (bucket.unsampled) {
    Entry lone = std::move(*bucket.unsampled);
    bucket.unsampled.reset();
    uint64_t lone_sample = HashTensorSample(*lone.tensor);
    lone.tensor->ReleaseMappedPages();
    bucket.by_sample[lone_sample].unhashed = std::move(lone);
  }
  uint64_t sample = HashTensorSample(*tensor);
  tensor->ReleaseMappedPages();
  return FindOrAddByContent(bucket.by_sample[sample], value, std::move(tensor));
}

Value* TensorContentIndex::FindOrAddByContent(SampleGroup& group, Value* value, TensorPtr tensor) {
  if (!group.unhashed && group.by_content.empty()) {
    group.unhashed = Entry{value, std::move(tensor)};
    return nullptr;
  }
  // Each mapped weight's pages are dropped once read, so hashing every weight of a model far
  // larger than memory keeps at most one tensor (or one compared pair) resident.
  if (group.unhashed) {
    Entry lone = std::move(*group.unhashed);
    group.unhashed.reset();
    uint64_t lone_hash = HashTensorContent(*lone.tensor);
    lone.tensor->ReleaseMappedPages();
    group.by_content[lone_hash].push_back(std::move(lone));
  }
  std::vector<Entry>& same_hash = group.by_content[HashTensorContent(*tensor)];
  tensor->ReleaseMappedPages();
  for (const Entry& entry : same_hash) {
    bool equal = entry.tensor->ContentEquals(*tensor);
    entry.tensor->ReleaseMappedPages();
    tensor->ReleaseMappedPages();
    if (equal) return entry.value;
  }
  same_hash.push_back(Entry{value, std::move(tensor)});
  return nullptr;
}

}  // namespace fusionopt::passes
