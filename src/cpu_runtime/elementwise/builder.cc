// ProgramBuilder: turns ops into a register program, checking every op against its operand
// types so that evaluation never meets an unsupported combination.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "cpu_runtime/elementwise/internal.h"

namespace fusionopt::cpu::ew {

namespace {

bool IsComparison(Op op) {
  return op == Op::kEqual || op == Op::kLess || op == Op::kLessOrEqual || op == Op::kGreater ||
         op == Op::kGreaterOrEqual;
}

bool IsPredicate(Op op) {
  return op == Op::kIsNaN || op == Op::kIsInf || op == Op::kIsInfPositive || op == Op::kIsInfNegative;
}

size_t Arity(Op op) {
  if (op == Op::kWhere || op == Op::kClip || op == Op::kQuantize) return 3;
  switch (op) {
    case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kDiv: case Op::kPow: case Op::kMax:
    case Op::kMin: case Op::kModInteger: case Op::kModFloat: case Op::kPRelu: case Op::kBitShiftLeft:
    case Op::kBitShiftRight: case Op::kBitwiseAnd: case Op::kBitwiseOr: case Op::kBitwiseXor:
    case Op::kAnd: case Op::kOr: case Op::kXor:
      return 2;
    default:
      return IsComparison(op) ? 2 : 1;
  }
}

// How many instructions read `reg`, plus one for each output it is stored to.
int Readers(const Program& program, int reg) {
  int readers = static_cast<int>(std::count(program.outputs.begin(), program.outputs.end(), reg));
  for (const Instr& instr : program.code) readers += (instr.a == reg) + (instr.b == reg) + (instr.c == reg);
  return readers;
}

// Mul(x, Sigmoid(x)) on float registers, in either order, becomes Swish(x) where nothing else
// reads the sigmoid: one pass over the tile instead of two, and no division result kept
// (SiLU is exported decomposed, so every SiLU a model has reaches the engine this way).
// Float16 and bfloat16 registers keep both steps, whose intermediate the body rounds.
void FoldSwish(Program& program) {
  std::vector<int> producer(program.register_dtypes.size(), -1);
  for (size_t i = 0; i < program.code.size(); ++i) producer[static_cast<size_t>(program.code[i].dst)] = static_cast<int>(i);
  std::vector<bool> removed(program.code.size(), false);
  auto sigmoid_of = [&](int reg, int x) {
    const int at = producer[static_cast<size_t>(reg)];
    return at >= 0 && program.code[static_cast<size_t>(at)].op == Op::kSigmoid &&
           program.code[static_cast<size_t>(at)].a == x && Readers(program, reg) == 1;
  };
  for (Instr& instr : program.code) {
    if (instr.op != Op::kMul || program.register_dtypes[static_cast<size_t>(instr.dst)] != DataType::kFloat) continue;
    const int x = sigmoid_of(instr.b, instr.a) ? instr.a : sigmoid_of(instr.a, instr.b) ? instr.b : -1;
    if (x < 0) continue;
    const int sigmoid = x == instr.a ? instr.b : instr.a;
    removed[static_cast<size_t>(producer[static_cast<size_t>(sigmoid)])] = true;
    instr = Instr{Op::kSwish, instr.dst, x};
    instr.alpha = 1.0f;
  }
  size_t kept = 0;
  for (size_t i = 0; i < program.code.size(); ++i) {
    if (!removed[i]) program.code[kept++] = program.code[i];
  }
  program.code.resize(kept);
}

// Whether integer type `type` holds every integer in [lo, hi].
bool HoldsRange(DataType type, float lo, float hi) {
  double min = 0, max = 0;
  switch (type) {
    case DataType::kInt8: min = -128; max = 127; break;
    case DataType::kUint8: max = 255; break;
    case DataType::kInt16: min = -32768; max = 32767; break;
    case DataType::kUint16: max = 65535; break;
    case DataType::kInt32: case DataType::kInt64: min = -2147483648.0; max = 2147483647.0; break;
    case DataType::kUint32: case DataType::kUint64: max = 4294967295.0; break;
    default: return false;
  }
  return lo >= min && hi <= max;
}

// Removes instructions whose result nothing reads or stores.
void DropUnread(Program& program) {
  std::vector<bool> read(program.register_dtypes.size(), false);
  for (int output : program.outputs) read[static_cast<size_t>(output)] = true;
  std::vector<bool> kept(program.code.size(), false);
  for (size_t i = program.code.size(); i-- > 0;) {
    const Instr& instr = program.code[i];
    if (!read[static_cast<size_t>(instr.dst)]) continue;
    kept[i] = true;
    for (int operand : {instr.a, instr.b, instr.c}) {
      if (operand >= 0) read[static_cast<size_t>(operand)] = true;
    }
  }
  size_t next = 0;
  for (size_t i = 0; i < program.code.size(); ++i) {
    if (kept[i]) program.code[next++] = program.code[i];
  }
  program.code.resize(next);
}

}  // namespace

ProgramBuilder::ProgramBuilder(const std::vector<DataType>& input_dtypes) {
  program_.num_inputs = static_cast<int>(input_dtypes.size());
  program_.register_dtypes = input_dtypes;
  float_twin_.assign(input_dtypes.size(), -1);
  rounded_range_.assign(input_dtypes.size(), std::nullopt);
}

int ProgramBuilder::NewRegister(DataType dtype) {
  program_.register_dtypes.push_back(dtype);
  float_twin_.push_back(-1);
  rounded_range_.emplace_back();
  return static_cast<int>(program_.register_dtypes.size() - 1);
}

Result<int> ProgramBuilder::Convert(int reg, DataType to) {
  if (dtype(reg) == to) return reg;
  if (!LaneOf(to)) return Unsupported("cannot compute " + std::string(NameOf(to)) + " values");
  int dst = NewRegister(to);
  program_.code.push_back(Instr{Op::kConvert, dst, reg});
  // A rounded quantized value (kQuantize clamps it to [alpha, beta]) converted to an integer type
  // that holds that range keeps its values: the float register is its twin.
  const auto& range = rounded_range_[static_cast<size_t>(reg)];
  if (range && HoldsRange(to, range->first, range->second)) float_twin_[static_cast<size_t>(dst)] = reg;
  return dst;
}

std::optional<int> ProgramBuilder::FloatTwin(int reg) const {
  const int twin = float_twin_[static_cast<size_t>(reg)];
  return twin >= 0 ? std::optional<int>(twin) : std::nullopt;
}

Result<int> ProgramBuilder::Fill(double value, DataType dtype) {
  if (!LaneOf(dtype)) return Unsupported("cannot compute " + std::string(NameOf(dtype)) + " values");
  int dst = NewRegister(dtype);
  Instr instr{Op::kFill, dst};
  instr.value = value;
  program_.code.push_back(instr);
  return dst;
}

Result<int> ProgramBuilder::Lookup(int index, DataType dtype, const RtTensor& table) {
  FUSIONOPT_CHECK(this->dtype(index) == DataType::kUint8 || this->dtype(index) == DataType::kInt8,
                  "a lookup is indexed by an 8-bit integer register");
  FUSIONOPT_CHECK(table.dtype() == LaneStorage(dtype) && table.NumElements() == 256 && table.row_major(),
                  "a lookup table holds 256 values as the result's lane stores them");
  auto values = std::make_shared<std::vector<uint64_t>>(256);
  std::memcpy(values->data(), table.raw(), ByteSizeOf(table.dtype(), 256));
  const int dst = NewRegister(dtype);
  Instr instr{Op::kLookup, dst, index};
  instr.table = values->data();
  program_.tables.push_back(std::move(values));
  program_.code.push_back(instr);
  return dst;
}

Result<int> ProgramBuilder::Emit(Op op, const std::vector<int>& operands, float alpha, float beta) {
  FUSIONOPT_CHECK(operands.size() == Arity(op), "operand count matches the op");
  for (int reg : operands) {
    if (!LaneOf(dtype(reg))) {
      return Unsupported("elementwise ops on " + std::string(NameOf(dtype(reg))) + " are not supported");
    }
  }
  std::vector<int> regs = operands;
  // Where's value operands and every other op's operands share one dtype: ONNX requires it,
  // except Pow's exponent and PRelu's slope, which are converted to the base's dtype.
  size_t first_value = op == Op::kWhere ? 1 : 0;
  DataType value_dtype = dtype(regs[first_value]);
  for (size_t i = first_value + 1; i < regs.size(); ++i) {
    if (dtype(regs[i]) == value_dtype) continue;
    if (op != Op::kPow && op != Op::kPRelu && op != Op::kClip) {
      return InvalidModel("operands have different types: " + std::string(NameOf(value_dtype)) + " and " +
                          std::string(NameOf(dtype(regs[i]))));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(regs[i], Convert(regs[i], value_dtype));
  }
  if (op == Op::kWhere && dtype(regs[0]) != DataType::kBool) {
    return InvalidModel("Where's condition must be bool, not " + std::string(NameOf(dtype(regs[0]))));
  }
  if (op == Op::kQuantize && value_dtype != DataType::kFloat) {
    return Unsupported("quantization computes on float registers, not " + std::string(NameOf(value_dtype)));
  }
  bool gives_bool = IsComparison(op) || IsPredicate(op);
  DataType result = gives_bool ? DataType::kBool : value_dtype;
  Lane operand_lane = *LaneOf(value_dtype);
  if (!Supports(op, operand_lane, *LaneOf(result))) {
    return Unsupported("this op is not defined for " + std::string(NameOf(value_dtype)) + " values");
  }
  int dst = NewRegister(result);
  Instr instr{op, dst};
  instr.a = regs[0];
  instr.b = regs.size() > 1 ? regs[1] : -1;
  instr.c = regs.size() > 2 ? regs[2] : -1;
  instr.alpha = alpha;
  instr.beta = beta;
  program_.code.push_back(instr);
  if (op == Op::kQuantize) rounded_range_[static_cast<size_t>(dst)] = std::make_pair(alpha, beta);
  return dst;
}

Program ProgramBuilder::Finish(std::string label) {
  DropUnread(program_);
  FoldSwish(program_);
  program_.label = std::move(label);
  return std::move(program_);
}

}  // namespace fusionopt::cpu::ew
