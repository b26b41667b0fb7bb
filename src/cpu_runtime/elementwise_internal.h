// Internals shared by the elementwise engine files: register lanes and tile storage.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu_runtime/elementwise.h"

namespace fusionopt::cpu::ew {

// How a register's values are held while computing.
enum class Lane : uint8_t { kF32, kF64, kI64, kBool };

// nullopt for dtypes the engine does not compute (strings, complex, 4-bit, float8).
std::optional<Lane> LaneOf(DataType dtype);

// Elements per tile: small enough that every register of a long fused expression stays in
// L1/L2, large enough to amortise the per-tile index arithmetic.
constexpr int kTile = 512;

// One thread's registers for one tile: 8 bytes per element per register. A register can be
// bound to tensor memory instead (a contiguous input read in place, an output written in
// place) when the tensor stores exactly the register's lane type, which saves a pass through
// L1 per operand on bandwidth-bound programs.
class TileRegisters {
 public:
  explicit TileRegisters(const Program& program);
  template <typename T>
  T* at(int reg) const {
    void* bound = bound_[static_cast<size_t>(reg)];
    if (bound != nullptr) return static_cast<T*>(bound);
    return reinterpret_cast<T*>(const_cast<uint64_t*>(storage_.data()) + static_cast<size_t>(reg) * kTile);
  }
  void Bind(int reg, void* memory) { bound_[static_cast<size_t>(reg)] = memory; }
  void* ptr(int reg) const { return at<uint8_t>(reg); }
  Lane lane(int reg) const { return lanes_[static_cast<size_t>(reg)]; }
  DataType dtype(int reg) const { return dtypes_[static_cast<size_t>(reg)]; }

 private:
  std::vector<uint64_t> storage_;
  std::vector<void*> bound_;
  std::vector<Lane> lanes_;
  std::vector<DataType> dtypes_;
};

// Rounds freshly computed values to what `dtype` can hold (float16/bfloat16 rounding,
// integer wrap-around for types narrower than int64), so a register always holds a value
// its ONNX dtype could store.
void RoundToStorage(DataType dtype, void* values, int n);

// True when `dtype`'s storage is exactly `lane`'s in-register representation.
bool StoredAsLane(DataType dtype, Lane lane);

void Execute(const TileRegisters& regs, const Instr& instruction, int n);
bool Supports(Op op, Lane operand, Lane result);

}  // namespace fusionopt::cpu::ew
