// Tensor::ReleaseMappedPages and the passes that call it: a mapped weight's pages leave the
// process's resident set once read, and reading it again gives the same bytes (issue 8: a
// >2 GB model optimizes with peak RSS within 1.5x its size).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <vector>

#include "ir/tensor.h"
#include "passes/util/content_hash.h"
#include "scratch_dir.h"

using namespace fusionopt;

namespace {

constexpr uint64_t kFileBytes = 32ull << 20;

// Resident pages of this process, as /proc/self/statm counts them (file pages included).
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t total_pages = 0, resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return resident_pages * ::sysconf(_SC_PAGESIZE);
}

uint8_t PatternByte(uint64_t index) { return static_cast<uint8_t>((index * 2654435761u) >> 13); }

// A file of two equal halves, so two mapped tensors over it compare equal.
std::string WritePatternFile(const test_support::ScratchDir& dir) {
  std::string path = (dir / "weights.bin").string();
  std::vector<uint8_t> bytes(kFileBytes);
  for (uint64_t i = 0; i < kFileBytes; ++i) bytes[i] = PatternByte(i % (kFileBytes / 2));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return path;
}

uint64_t Checksum(const Tensor& tensor) {
  uint64_t sum = 0;
  for (uint8_t byte : tensor.bytes()) sum = sum * 31 + byte;
  return sum;
}

Tensor MappedHalf(const std::shared_ptr<MappedFile>& file, int half) {
  const uint64_t floats = kFileBytes / 2 / sizeof(float);
  return Tensor::Mapped(DataType::kFloat, {static_cast<int64_t>(floats)}, file, half * kFileBytes / 2, kFileBytes / 2);
}

}  // namespace

TEST_CASE("a released mapped tensor leaves the resident set and reads back the same bytes", "[tensor][mapped]") {
  test_support::ScratchDir dir("mapped_pages");
  auto file = MappedFile::Open(WritePatternFile(dir)).value();
  Tensor whole = Tensor::Mapped(DataType::kUint8, {static_cast<int64_t>(kFileBytes)}, file, 0, kFileBytes);

  const int64_t before = ResidentBytes();
  const uint64_t first_read = Checksum(whole);
  const int64_t touched = ResidentBytes();
  REQUIRE(touched - before >= static_cast<int64_t>(kFileBytes) * 3 / 4);

  whole.ReleaseMappedPages();
  REQUIRE(touched - ResidentBytes() >= static_cast<int64_t>(kFileBytes) * 3 / 4);
  REQUIRE(Checksum(whole) == first_read);
  REQUIRE(whole.bytes()[12345] == PatternByte(12345));
}

TEST_CASE("releasing an owned tensor changes nothing", "[tensor][mapped]") {
  auto owned = Tensor::FromValues<float>(DataType::kFloat, {3}, {1.0f, -2.0f, 3.5f});
  owned.ReleaseMappedPages();
  REQUIRE(owned.AsDoubles() == std::vector<double>{1.0, -2.0, 3.5});
  Tensor().ReleaseMappedPages();  // empty: no bytes, no mapping
}

TEST_CASE("content hashing of mapped weights keeps them out of the resident set", "[tensor][mapped]") {
  test_support::ScratchDir dir("mapped_hash");
  auto file = MappedFile::Open(WritePatternFile(dir)).value();
  auto first = std::make_shared<Tensor>(MappedHalf(file, 0));
  auto second = std::make_shared<Tensor>(MappedHalf(file, 1));
  auto different = std::make_shared<Tensor>(
      Tensor::FromValues<float>(DataType::kFloat, first->dims(), std::vector<float>(first->NumElements(), 1.0f)));
  Graph graph;
  Value* a = graph.CreateValue("a");
  Value* b = graph.CreateValue("b");
  Value* c = graph.CreateValue("c");

  const int64_t before = ResidentBytes();
  passes::TensorContentIndex index;
  REQUIRE(index.FindOrAdd(a, first) == nullptr);
  REQUIRE(index.FindOrAdd(c, different) == nullptr);  // same shape, other bytes: hashed, kept apart
  REQUIRE(index.FindOrAdd(b, second) == a);           // the two halves hold equal bytes
  // Both halves were hashed and compared in full; at most a few pages stay resident.
  REQUIRE(ResidentBytes() - before < static_cast<int64_t>(kFileBytes) / 4);
}
