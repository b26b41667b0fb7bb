// Internals shared by the elementwise engine files: register lanes, tile storage, and moving
// values between tensors and registers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cpu_runtime/elementwise/elementwise.h"

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
  // Room for `capacity` (at most kTile) elements per register: a small tensor's evaluation
  // should not pay for clearing full tiles.
  TileRegisters(const Program& program, int capacity);
  template <typename T>
  T* at(int reg) const {
    void* bound = bound_[static_cast<size_t>(reg)];
    if (bound != nullptr) return static_cast<T*>(bound);
    return reinterpret_cast<T*>(const_cast<uint64_t*>(storage_.data()) +
                                static_cast<size_t>(reg) * static_cast<size_t>(capacity_));
  }
  void Bind(int reg, void* memory) { bound_[static_cast<size_t>(reg)] = memory; }
  void* ptr(int reg) const { return at<uint8_t>(reg); }
  Lane lane(int reg) const { return lanes_[static_cast<size_t>(reg)]; }
  DataType dtype(int reg) const { return dtypes_[static_cast<size_t>(reg)]; }

 private:
  int capacity_;
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

// Copies `n` elements of `input` from element `offset` into register `reg` at position `at`,
// converting to the register's lane; `stride` is 1 (a run) or 0 (one value repeated).
void Load(const TileRegisters& regs, int reg, const RtTensor& input, int64_t offset, int64_t stride, int at,
          int n);

// Writes the first `n` values of register `reg` to `output` from element `offset`, converting
// to the output's dtype.
void Store(const TileRegisters& regs, int reg, RtTensor& output, int64_t offset, int n);

// Runs one instruction on a tile, on the build for the active vector instruction set
// (engine/vector_isa.h).
void Execute(const TileRegisters& regs, const Instr& instruction, int n);
void ExecuteBaseline(const TileRegisters& regs, const Instr& instruction, int n);
void ExecuteAvx2(const TileRegisters& regs, const Instr& instruction, int n);    // AVX2 CPUs only
void ExecuteAvx512(const TileRegisters& regs, const Instr& instruction, int n);  // AVX-512 CPUs only
bool Supports(Op op, Lane operand, Lane result);

}  // namespace fusionopt::cpu::ew
