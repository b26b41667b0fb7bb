// Pooled allocation of intermediate tensors, with the accounting the runtime reports.
//
// Freed blocks are kept in size classes (powers of two from 64 bytes) and handed out again,
// so steady-state inference allocates nothing; `peak_bytes()` is the largest amount of
// intermediate memory alive at once — what the liveness-based reuse achieved.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cpu_runtime/engine/rt_tensor.h"

namespace fusionopt::cpu {

class Allocator {
 public:
  Allocator();
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  RtTensor Allocate(DataType dtype, std::vector<int64_t> dims);

  uint64_t live_bytes() const;
  uint64_t peak_bytes() const;
  void ResetPeak();

 private:
  struct Pool;
  std::shared_ptr<Pool> pool_;  // shared with the deleters of blocks still in use
};

}  // namespace fusionopt::cpu
