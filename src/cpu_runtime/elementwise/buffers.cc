// BufferProgram (elementwise.h): the engine's instructions over a kernel's own buffers.
//
// The input registers are bound to the caller's buffers and the output register to the
// output buffer, so a run is the program's instructions and nothing else: no loads, no
// stores, no index arithmetic.
#include <algorithm>
#include <cstring>

#include "cpu_runtime/elementwise/internal.h"

namespace fusionopt::cpu::ew {

struct BufferProgram::State {
  explicit State(const Program& program) : program(program), regs(program, kTile) {}
  const Program& program;
  TileRegisters regs;
};

BufferProgram::BufferProgram(const Program& program) : state_(std::make_unique<State>(program)) {
  FUSIONOPT_CHECK(Accepts(program), "a buffer program reads and writes float32 registers");
}

BufferProgram::~BufferProgram() = default;
BufferProgram::BufferProgram(BufferProgram&&) noexcept = default;

bool BufferProgram::Accepts(const Program& program) {
  if (program.outputs.size() != 1) return false;
  for (int k = 0; k < program.num_inputs; ++k) {
    if (program.register_dtypes[static_cast<size_t>(k)] != DataType::kFloat) return false;
  }
  const int result = program.outputs[0];
  if (program.register_dtypes[static_cast<size_t>(result)] != DataType::kFloat) return false;
  // The output may alias an input: every instruction reads and writes element i together, and
  // nothing reads an input after the result is written.
  return result < program.num_inputs || program.code.back().dst == result;
}

void BufferProgram::Run(const float* const* inputs, float* output, int n) {
  FUSIONOPT_CHECK(n <= kTile, "a buffer program runs at most one tile");
  const Program& program = state_->program;
  TileRegisters& regs = state_->regs;
  for (int k = 0; k < program.num_inputs; ++k) regs.Bind(k, const_cast<float*>(inputs[k]));
  const int result = program.outputs[0];
  if (result < program.num_inputs) {  // the program hands an input on unchanged
    if (inputs[result] != output) std::memmove(output, inputs[result], sizeof(float) * static_cast<size_t>(n));
    return;
  }
  regs.Bind(result, output);
  for (const Instr& instruction : program.code) Execute(regs, instruction, n);
}

}  // namespace fusionopt::cpu::ew
