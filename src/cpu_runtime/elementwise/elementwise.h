// The elementwise engine: ONE mechanism that evaluates an expression of elementwise ops over
// numpy-broadcast inputs in a single pass over memory (DESIGN.md §5, family 1).
//
// An expression is a small register program. The engine walks the output in tiles of a few
// hundred elements: it gathers each input's tile (broadcasting folded into index arithmetic,
// never materialising an expanded tensor), runs the program on the tile with every
// intermediate in cache, and stores the outputs. A single ONNX op is a one-instruction
// program, and a fused group from the passes is a longer one, so a measured speed-up of a
// fusion is the fusion's, not a better kernel's.
//
// Registers have an ONNX dtype; they are computed in float (float, float16, bfloat16 — the
// result is rounded back when stored or cast), double, int64 (every integer type) or bool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cpu_runtime/engine/rt_tensor.h"
#include "ir/status.h"

namespace fusionopt::cpu::ew {

enum class Op : uint8_t {
  // unary, numeric
  kNeg, kAbs, kSign, kReciprocal, kFloor, kCeil, kRound, kSqrt, kExp, kLog, kErf,
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kTanh, kAsinh, kAcosh, kAtanh,
  kRelu, kSigmoid, kSoftplus, kSoftsign, kMish, kGeluErf, kGeluTanh,
  kSwish,  // x·sigmoid(alpha·x): SiLU at alpha 1, one pass where Sigmoid then Mul take two
  kLeakyRelu, kElu, kSelu, kCelu, kThresholdedRelu, kHardSigmoid, kHardSwish, kShrink,
  kIsNaN, kIsInfPositive, kIsInfNegative, kIsInf,
  // binary, numeric
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kModInteger, kModFloat, kPRelu,
  kBitShiftLeft, kBitShiftRight, kBitwiseAnd, kBitwiseOr, kBitwiseXor, kBitwiseNot,
  // comparisons -> bool
  kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual,
  // logical, bool
  kAnd, kOr, kXor, kNot,
  // other
  kWhere,   // (cond, x, y)
  kClip,    // (x, lo, hi)
  // (x, scale, zero_point) on float: clamp(round_half_even(x / scale) + zero_point, alpha, beta),
  // the range of the quantized type (QuantizeLinear; NaN gives alpha, as onnxruntime's vector
  // kernels do). A later Convert to the integer type is then exact.
  kQuantize,
  kConvert, // to the destination register's dtype (Cast); rounds to float16/bfloat16
  kFill,    // the constant `value` (inlined scalars, defaults of omitted inputs)
  // (index) on an 8-bit integer register: entry `index` (its byte) of `table`, 256 values in the
  // destination's lane representation. A program's tail that depends on one 8-bit value only
  // (what follows a QuantizeLinear) runs as one lookup per element (fused/program.h).
  kLookup,
};

struct Instr {
  Op op;
  int dst = -1;
  int a = -1, b = -1, c = -1;
  float alpha = 0.0f, beta = 0.0f;
  double value = 0.0;  // kFill
  const void* table = nullptr;  // kLookup: owned by the program's `tables`
};

struct Program {
  int num_inputs = 0;
  std::vector<DataType> register_dtypes;  // inputs first, then temporaries
  // Each temporary is the destination of exactly one instruction and inputs of none: the
  // engine keeps input tiles and constants in registers across tiles.
  std::vector<Instr> code;
  std::vector<int> outputs;               // registers stored to the outputs, in order
  std::vector<std::shared_ptr<const std::vector<uint64_t>>> tables;  // what kLookup reads
  // Short description for errors and traces: "Add", "fused(Mul,Add,Relu)".
  std::string label;
};

// Builds a Program for known input dtypes, checking every op against its operand types.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(const std::vector<DataType>& input_dtypes);

  int input(int index) const { return index; }
  DataType dtype(int reg) const { return program_.register_dtypes[static_cast<size_t>(reg)]; }

  // Emits `op` on operand registers; the result's dtype follows ONNX (comparisons and
  // logical ops give bool, IsNaN/IsInf give bool, the rest keep the first operand's dtype).
  Result<int> Emit(Op op, const std::vector<int>& operands, float alpha = 0.0f, float beta = 0.0f);
  Result<int> Convert(int reg, DataType to);
  Result<int> Fill(double value, DataType dtype);
  // kLookup of `index` (a uint8 or int8 register) into `table`: 256 values of
  // LaneStorage(dtype), the result a register of `dtype`.
  Result<int> Lookup(int index, DataType dtype, const RtTensor& table);
  void AddOutput(int reg) { program_.outputs.push_back(reg); }
  // The float register that holds the same integer values as integer register `reg`, where
  // `reg` is a QuantizeLinear's rounded result converted (its kQuantize register, whose values
  // are integers of at most 16 bits and so exact in float): a DequantizeLinear right after reads
  // it and skips the round trip through the integer lanes. nullopt otherwise.
  std::optional<int> FloatTwin(int reg) const;
  // Drops instructions nothing reads (a quantized value only its float twin served), then
  // folds Swish.
  Program Finish(std::string label);

 private:
  int NewRegister(DataType dtype);
  Program program_;
  std::vector<int> float_twin_;  // per register: its float twin, or -1
  // Per register made by kQuantize: the range it clamps to.
  std::vector<std::optional<std::pair<float, float>>> rounded_range_;
};

// Whether registers can hold values of `dtype` (not strings, complex, 4-bit or float8).
bool Computes(DataType dtype);

// The dtype stored exactly as registers of `dtype` hold their values while computing: float for
// float16 and bfloat16, int64 for every integer type. `dtype` must be one Computes accepts.
DataType LaneStorage(DataType dtype);

// Output dims of numpy broadcasting; an error names the two incompatible shapes.
Result<std::vector<int64_t>> BroadcastDims(const std::vector<const RtTensor*>& inputs);

// Runs `program` over `inputs` (numpy-broadcast); `outputs` are allocated by the caller with
// the broadcast dims and the output registers' dtypes.
Status Evaluate(const Program& program, const std::vector<const RtTensor*>& inputs,
                const std::vector<RtTensor*>& outputs);

// `program` run on float32 values that a kernel computed itself, held in the kernel's own
// buffers: a convolution's output tiles getting their epilogue while still in cache. Every
// input register and the one output are float32; `n` is at most kTile (elementwise/internal.h).
// Not thread-safe: one per thread. Accepts only programs whose result is written last.
class BufferProgram {
 public:
  explicit BufferProgram(const Program& program);
  ~BufferProgram();
  BufferProgram(BufferProgram&&) noexcept;
  // Whether `program` has the form Run takes.
  static bool Accepts(const Program& program);
  // inputs[k] holds program input k's `n` values; the result goes to `output`, which may be
  // one of the inputs.
  void Run(const float* const* inputs, float* output, int n);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fusionopt::cpu::ew
