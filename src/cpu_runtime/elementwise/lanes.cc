// Which build of the elementwise instructions runs (elementwise/ops.cc): chosen once from the
// CPU, switchable by tests.
#include <atomic>

#include "cpu_runtime/elementwise/internal.h"

namespace fusionopt::cpu::ew {
namespace {

bool CpuHasAvx2() {
  // libgcc's check includes the OS saving the YMM registers (XGETBV), not only CPUID.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

std::atomic<Lanes>& Active() {
  static std::atomic<Lanes> lanes{CpuHasAvx2() ? Lanes::kAvx2 : Lanes::kBaseline};
  return lanes;
}

}  // namespace

Lanes ActiveLanes() { return Active().load(std::memory_order_relaxed); }

bool UseLanes(Lanes lanes) {
  if (lanes == Lanes::kAvx2 && !CpuHasAvx2()) return false;
  Active().store(lanes, std::memory_order_relaxed);
  return true;
}

void Execute(const TileRegisters& regs, const Instr& instruction, int n) {
  if (ActiveLanes() == Lanes::kAvx2) {
    ExecuteAvx2(regs, instruction, n);
  } else {
    ExecuteBaseline(regs, instruction, n);
  }
}

}  // namespace fusionopt::cpu::ew
