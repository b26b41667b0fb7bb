// Runs each instruction on the build of elementwise/ops.cc for the active vector instruction
// set (engine/vector_isa.h).
#include "cpu_runtime/elementwise/internal.h"
#include "cpu_runtime/engine/vector_isa.h"

namespace fusionopt::cpu::ew {

void Execute(const TileRegisters& regs, const Instr& instruction, int n) {
  switch (ActiveVectorIsa()) {
    case VectorIsa::kAvx512: return ExecuteAvx512(regs, instruction, n);
    case VectorIsa::kAvx2: return ExecuteAvx2(regs, instruction, n);
    case VectorIsa::kBaseline: return ExecuteBaseline(regs, instruction, n);
  }
}

}  // namespace fusionopt::cpu::ew
