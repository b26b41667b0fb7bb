#include "cpu_runtime/engine/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "ir/status.h"

namespace fusionopt::cpu {

namespace {

constexpr uint64_t kMinBlock = 64;
constexpr size_t kAlignment = 64;  // cache line; also what oneDNN prefers

uint64_t SizeClass(uint64_t bytes) { return std::bit_ceil(std::max(bytes, kMinBlock)); }

}  // namespace

struct Allocator::Pool {
  std::mutex mutex;
  std::map<uint64_t, std::vector<uint8_t*>> free_blocks;  // size class -> blocks
  uint64_t live = 0;
  uint64_t peak = 0;

  ~Pool() {
    for (auto& [size, blocks] : free_blocks) {
      for (uint8_t* block : blocks) std::free(block);
    }
  }

  uint8_t* Take(uint64_t size_class) {
    std::lock_guard<std::mutex> lock(mutex);
    live += size_class;
    peak = std::max(peak, live);
    auto& blocks = free_blocks[size_class];
    if (!blocks.empty()) {
      uint8_t* block = blocks.back();
      blocks.pop_back();
      return block;
    }
    void* block = std::aligned_alloc(kAlignment, size_class);
    FUSIONOPT_CHECK(block != nullptr, "out of memory allocating " + std::to_string(size_class) + " bytes");
    return static_cast<uint8_t*>(block);
  }

  void Give(uint8_t* block, uint64_t size_class) {
    std::lock_guard<std::mutex> lock(mutex);
    live -= size_class;
    free_blocks[size_class].push_back(block);
  }
};

Allocator::Allocator() : pool_(std::make_shared<Pool>()) {}
Allocator::~Allocator() = default;

RtTensor Allocator::Allocate(DataType dtype, std::vector<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  uint64_t size_class = SizeClass(ByteSizeOf(dtype, static_cast<uint64_t>(count)));
  uint8_t* block = pool_->Take(size_class);
  std::shared_ptr<Pool> pool = pool_;  // blocks may outlive the Allocator: keep the pool
  std::shared_ptr<uint8_t> storage(block, [pool, size_class](uint8_t* p) { pool->Give(p, size_class); });
  return RtTensor(dtype, std::move(dims), std::move(storage));
}

uint64_t Allocator::live_bytes() const {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  return pool_->live;
}

uint64_t Allocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  return pool_->peak;
}

void Allocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  pool_->peak = pool_->live;
}

}  // namespace fusionopt::cpu
