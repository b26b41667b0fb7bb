// Program building, numpy broadcasting and the tiled single-pass evaluation loop.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "cpu_runtime/elementwise_internal.h"

namespace fusionopt::cpu::ew {

std::optional<Lane> LaneOf(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat: case DataType::kFloat16: case DataType::kBFloat16: return Lane::kF32;
    case DataType::kDouble: return Lane::kF64;
    case DataType::kBool: return Lane::kBool;
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
      return Lane::kI64;
    default: return std::nullopt;
  }
}

bool StoredAsLane(DataType dtype, Lane lane) {
  switch (dtype) {
    case DataType::kFloat: return lane == Lane::kF32;
    case DataType::kDouble: return lane == Lane::kF64;
    case DataType::kInt64: return lane == Lane::kI64;
    case DataType::kBool: return lane == Lane::kBool;
    default: return false;
  }
}

// ---------------------------------------------------------------- builder

namespace {

bool IsComparison(Op op) {
  return op == Op::kEqual || op == Op::kLess || op == Op::kLessOrEqual || op == Op::kGreater ||
         op == Op::kGreaterOrEqual;
}

bool IsPredicate(Op op) {
  return op == Op::kIsNaN || op == Op::kIsInf || op == Op::kIsInfPositive || op == Op::kIsInfNegative;
}

size_t Arity(Op op) {
  if (op == Op::kWhere || op == Op::kClip) return 3;
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

}  // namespace

ProgramBuilder::ProgramBuilder(const std::vector<DataType>& input_dtypes) {
  program_.num_inputs = static_cast<int>(input_dtypes.size());
  program_.register_dtypes = input_dtypes;
}

int ProgramBuilder::NewRegister(DataType dtype) {
  program_.register_dtypes.push_back(dtype);
  return static_cast<int>(program_.register_dtypes.size() - 1);
}

Result<int> ProgramBuilder::Convert(int reg, DataType to) {
  if (dtype(reg) == to) return reg;
  if (!LaneOf(to)) return Unsupported("cannot compute " + std::string(NameOf(to)) + " values");
  int dst = NewRegister(to);
  program_.code.push_back(Instr{Op::kConvert, dst, reg});
  return dst;
}

Result<int> ProgramBuilder::Fill(double value, DataType dtype) {
  if (!LaneOf(dtype)) return Unsupported("cannot compute " + std::string(NameOf(dtype)) + " values");
  int dst = NewRegister(dtype);
  Instr instr{Op::kFill, dst};
  instr.value = value;
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
  return dst;
}

Program ProgramBuilder::Finish(std::string label) {
  program_.label = std::move(label);
  return std::move(program_);
}

// ---------------------------------------------------------------- broadcasting

Result<std::vector<int64_t>> BroadcastDims(const std::vector<const RtTensor*>& inputs) {
  size_t rank = 0;
  for (const RtTensor* input : inputs) rank = std::max(rank, input->rank());
  std::vector<int64_t> out(rank, 1);
  for (const RtTensor* input : inputs) {
    size_t offset = rank - input->rank();
    for (size_t axis = 0; axis < input->rank(); ++axis) {
      int64_t dim = input->dim(axis);
      int64_t& target = out[offset + axis];
      if (dim == target || dim == 1) continue;
      if (target != 1) {
        std::string shapes;
        for (const RtTensor* each : inputs) shapes += (shapes.empty() ? "" : " and ") + DimsToString(each->dims());
        return InvalidModel("shapes " + shapes + " do not broadcast");
      }
      target = dim;
    }
  }
  return out;
}

namespace {

// The output index space with each input's element strides (0 where it broadcasts), with
// adjacent axes merged wherever every input walks them contiguously.
struct Layout {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;  // per input, per axis
};

Layout MakeLayout(const std::vector<int64_t>& out_dims, const std::vector<const RtTensor*>& inputs) {
  Layout layout;
  std::vector<size_t> kept;
  for (size_t axis = 0; axis < out_dims.size(); ++axis) {
    if (out_dims[axis] != 1) kept.push_back(axis);
  }
  std::vector<std::vector<int64_t>> full(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const RtTensor& input = *inputs[k];
    std::vector<int64_t> strides(out_dims.size(), 0);
    int64_t stride = 1;
    for (size_t i = input.rank(); i-- > 0;) {
      size_t axis = out_dims.size() - input.rank() + i;
      strides[axis] = input.dim(i) == 1 ? 0 : stride;
      stride *= input.dim(i);
    }
    full[k] = std::move(strides);
  }
  layout.strides.resize(inputs.size());
  for (size_t axis : kept) {
    bool merge = !layout.dims.empty();
    for (size_t k = 0; merge && k < inputs.size(); ++k) {
      merge = layout.strides[k].back() == full[k][axis] * out_dims[axis];
    }
    if (merge) {
      layout.dims.back() *= out_dims[axis];
      for (size_t k = 0; k < inputs.size(); ++k) layout.strides[k].back() = full[k][axis];
    } else {
      layout.dims.push_back(out_dims[axis]);
      for (size_t k = 0; k < inputs.size(); ++k) layout.strides[k].push_back(full[k][axis]);
    }
  }
  if (layout.dims.empty()) {  // a scalar result
    layout.dims.push_back(1);
    for (auto& strides : layout.strides) strides.push_back(0);
  }
  return layout;
}

template <typename Src, typename Dst>
void LoadRun(Dst* dst, const Src* src, int64_t stride, int n) {
  if (stride == 0) {
    Dst value = static_cast<Dst>(src[0]);
    std::fill(dst, dst + n, value);
  } else {
    for (int i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i]);
  }
}

template <typename Dst, typename Convert>
void LoadRunConverted(Dst* dst, const uint16_t* src, int64_t stride, int n, Convert convert) {
  if (stride == 0) {
    std::fill(dst, dst + n, static_cast<Dst>(convert(src[0])));
  } else {
    for (int i = 0; i < n; ++i) dst[i] = static_cast<Dst>(convert(src[i]));
  }
}

// Copies `n` elements of `input` starting at element `offset` (stride 0 or 1) into `dst`,
// converting to the register's lane.
template <typename Dst>
void LoadTyped(Dst* dst, const RtTensor& input, int64_t offset, int64_t stride, int n) {
  const uint8_t* base = input.raw();
  switch (input.dtype()) {
    case DataType::kFloat: return LoadRun(dst, reinterpret_cast<const float*>(base) + offset, stride, n);
    case DataType::kDouble: return LoadRun(dst, reinterpret_cast<const double*>(base) + offset, stride, n);
    case DataType::kFloat16:
      return LoadRunConverted(dst, reinterpret_cast<const uint16_t*>(base) + offset, stride, n, HalfToFloat);
    case DataType::kBFloat16:
      return LoadRunConverted(dst, reinterpret_cast<const uint16_t*>(base) + offset, stride, n, BFloat16ToFloat);
    case DataType::kInt64: return LoadRun(dst, reinterpret_cast<const int64_t*>(base) + offset, stride, n);
    case DataType::kInt32: return LoadRun(dst, reinterpret_cast<const int32_t*>(base) + offset, stride, n);
    case DataType::kInt16: return LoadRun(dst, reinterpret_cast<const int16_t*>(base) + offset, stride, n);
    case DataType::kInt8: return LoadRun(dst, reinterpret_cast<const int8_t*>(base) + offset, stride, n);
    case DataType::kUint64: return LoadRun(dst, reinterpret_cast<const uint64_t*>(base) + offset, stride, n);
    case DataType::kUint32: return LoadRun(dst, reinterpret_cast<const uint32_t*>(base) + offset, stride, n);
    case DataType::kUint16: return LoadRun(dst, reinterpret_cast<const uint16_t*>(base) + offset, stride, n);
    case DataType::kUint8: case DataType::kBool:
      return LoadRun(dst, reinterpret_cast<const uint8_t*>(base) + offset, stride, n);
    default: FUSIONOPT_CHECK(false, "dtype validated by the builder");
  }
}

void Load(const TileRegisters& regs, int reg, const RtTensor& input, int64_t offset, int64_t stride,
          int at, int n) {
  switch (regs.lane(reg)) {
    case Lane::kF32: return LoadTyped(regs.at<float>(reg) + at, input, offset, stride, n);
    case Lane::kF64: return LoadTyped(regs.at<double>(reg) + at, input, offset, stride, n);
    case Lane::kI64: return LoadTyped(regs.at<int64_t>(reg) + at, input, offset, stride, n);
    case Lane::kBool: return LoadTyped(regs.at<uint8_t>(reg) + at, input, offset, stride, n);
  }
}

template <typename Src, typename Dst>
void StoreRun(Dst* dst, const Src* src, int n) {
  for (int i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i]);
}

template <typename Src>
void StoreTyped(const Src* src, RtTensor& output, int64_t offset, int n) {
  uint8_t* base = output.raw();
  switch (output.dtype()) {
    case DataType::kFloat: return StoreRun(reinterpret_cast<float*>(base) + offset, src, n);
    case DataType::kDouble: return StoreRun(reinterpret_cast<double*>(base) + offset, src, n);
    case DataType::kFloat16:
      for (int i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(base)[offset + i] = FloatToHalf(static_cast<float>(src[i]));
      return;
    case DataType::kBFloat16:
      for (int i = 0; i < n; ++i) {
        reinterpret_cast<uint16_t*>(base)[offset + i] = FloatToBFloat16(static_cast<float>(src[i]));
      }
      return;
    case DataType::kInt64: return StoreRun(reinterpret_cast<int64_t*>(base) + offset, src, n);
    case DataType::kInt32: return StoreRun(reinterpret_cast<int32_t*>(base) + offset, src, n);
    case DataType::kInt16: return StoreRun(reinterpret_cast<int16_t*>(base) + offset, src, n);
    case DataType::kInt8: return StoreRun(reinterpret_cast<int8_t*>(base) + offset, src, n);
    case DataType::kUint64: return StoreRun(reinterpret_cast<uint64_t*>(base) + offset, src, n);
    case DataType::kUint32: return StoreRun(reinterpret_cast<uint32_t*>(base) + offset, src, n);
    case DataType::kUint16: return StoreRun(reinterpret_cast<uint16_t*>(base) + offset, src, n);
    case DataType::kUint8: return StoreRun(reinterpret_cast<uint8_t*>(base) + offset, src, n);
    case DataType::kBool:
      for (int i = 0; i < n; ++i) base[offset + i] = src[i] != Src(0);
      return;
    default: FUSIONOPT_CHECK(false, "dtype validated by the builder");
  }
}

void Store(const TileRegisters& regs, int reg, RtTensor& output, int64_t offset, int n) {
  switch (regs.lane(reg)) {
    case Lane::kF32: return StoreTyped(regs.at<float>(reg), output, offset, n);
    case Lane::kF64: return StoreTyped(regs.at<double>(reg), output, offset, n);
    case Lane::kI64: return StoreTyped(regs.at<int64_t>(reg), output, offset, n);
    case Lane::kBool: return StoreTyped(regs.at<uint8_t>(reg), output, offset, n);
  }
}

// Gathers the tile [start, start + n) of every input into its register, walking runs along
// the innermost merged axis.
void GatherTile(const Layout& layout, const std::vector<const RtTensor*>& inputs, const TileRegisters& regs,
                int64_t start, int n) {
  size_t rank = layout.dims.size();
  std::vector<int64_t> index(rank);
  int64_t rest = start;
  for (size_t axis = rank; axis-- > 0;) {
    index[axis] = rest % layout.dims[axis];
    rest /= layout.dims[axis];
  }
  int done = 0;
  while (done < n) {
    int run = static_cast<int>(std::min<int64_t>(layout.dims[rank - 1] - index[rank - 1], n - done));
    for (size_t k = 0; k < inputs.size(); ++k) {
      int64_t offset = 0;
      for (size_t axis = 0; axis < rank; ++axis) offset += index[axis] * layout.strides[k][axis];
      Load(regs, static_cast<int>(k), *inputs[k], offset, layout.strides[k][rank - 1], done, run);
    }
    done += run;
    index[rank - 1] += run;
    for (size_t axis = rank - 1; axis > 0 && index[axis] == layout.dims[axis]; --axis) {
      index[axis] = 0;
      ++index[axis - 1];
    }
  }
}

// When every input is contiguous or a broadcast scalar over one merged axis, each tile is a
// plain slice of every operand: inputs stored as their lane type are read in place, outputs
// stored as their lane type are written in place, and only the rest go through the register
// copies.
struct DirectTiles {
  std::vector<bool> input_in_place;
  std::vector<bool> output_in_place;

  DirectTiles(const Layout& layout, const std::vector<const RtTensor*>& inputs,
              const std::vector<RtTensor*>& outputs, const Program& program) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      Lane lane = *LaneOf(program.register_dtypes[k]);
      input_in_place.push_back(layout.strides[k][0] == 1 && StoredAsLane(inputs[k]->dtype(), lane));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      int reg = program.outputs[i];
      bool written_once = std::count(program.outputs.begin(), program.outputs.end(), reg) == 1;
      Lane lane = *LaneOf(program.register_dtypes[static_cast<size_t>(reg)]);
      output_in_place.push_back(reg >= program.num_inputs && written_once &&
                                StoredAsLane(outputs[i]->dtype(), lane));
    }
  }

  void Run(const Layout& layout, const std::vector<const RtTensor*>& inputs,
           const std::vector<RtTensor*>& outputs, const Program& program, TileRegisters& regs,
           int64_t start, int n) const {
    for (size_t k = 0; k < inputs.size(); ++k) {
      int reg = static_cast<int>(k);
      const RtTensor& input = *inputs[k];
      if (input_in_place[k]) {
        regs.Bind(reg, const_cast<uint8_t*>(input.raw()) + start * ByteSizeOf(input.dtype(), 1));
      } else {
        int64_t stride = layout.strides[k][0];
        Load(regs, reg, input, start * stride, stride, 0, n);
      }
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (output_in_place[i]) {
        regs.Bind(program.outputs[i], outputs[i]->raw() + start * ByteSizeOf(outputs[i]->dtype(), 1));
      }
    }
    for (const Instr& instruction : program.code) Execute(regs, instruction, n);
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!output_in_place[i]) Store(regs, program.outputs[i], *outputs[i], start, n);
    }
  }
};

}  // namespace

TileRegisters::TileRegisters(const Program& program)
    : storage_(program.register_dtypes.size() * kTile),
      bound_(program.register_dtypes.size(), nullptr),
      dtypes_(program.register_dtypes) {
  for (DataType dtype : dtypes_) lanes_.push_back(*LaneOf(dtype));
}

Status Evaluate(const Program& program, const std::vector<const RtTensor*>& inputs,
                const std::vector<RtTensor*>& outputs) {
  FUSIONOPT_CHECK(static_cast<int>(inputs.size()) == program.num_inputs, "one tensor per program input");
  FUSIONOPT_CHECK(outputs.size() == program.outputs.size(), "one tensor per program output");
  for (size_t k = 0; k < inputs.size(); ++k) {
    FUSIONOPT_CHECK(inputs[k]->dtype() == program.register_dtypes[k], "input dtype matches the program");
  }
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, BroadcastDims(inputs));
  int64_t total = 1;
  for (int64_t dim : out_dims) total *= dim;
  if (total == 0) return Status::Ok();
  Layout layout = MakeLayout(out_dims, inputs);
  int64_t tiles = (total + kTile - 1) / kTile;
  bool parallel = total >= (int64_t{1} << 15) && omp_get_max_threads() > 1;
  std::optional<DirectTiles> direct;
  if (layout.dims.size() == 1) direct.emplace(layout, inputs, outputs, program);

#pragma omp parallel if (parallel)
  {
    TileRegisters regs(program);
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      int64_t start = tile * kTile;
      int n = static_cast<int>(std::min<int64_t>(kTile, total - start));
      if (direct) {
        direct->Run(layout, inputs, outputs, program, regs, start, n);
        continue;
      }
      GatherTile(layout, inputs, regs, start, n);
      for (const Instr& instruction : program.code) Execute(regs, instruction, n);
      for (size_t i = 0; i < outputs.size(); ++i) Store(regs, program.outputs[i], *outputs[i], start, n);
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- rounding

void RoundToStorage(DataType dtype, void* values, int n) {
  auto wrap = [&](auto narrow) {
    auto* v = static_cast<int64_t*>(values);
    for (int i = 0; i < n; ++i) v[i] = static_cast<int64_t>(static_cast<decltype(narrow)>(v[i]));
  };
  switch (dtype) {
    case DataType::kFloat16: {
      auto* v = static_cast<float*>(values);
      for (int i = 0; i < n; ++i) v[i] = HalfToFloat(FloatToHalf(v[i]));
      return;
    }
    case DataType::kBFloat16: {
      auto* v = static_cast<float*>(values);
      for (int i = 0; i < n; ++i) v[i] = BFloat16ToFloat(FloatToBFloat16(v[i]));
      return;
    }
    case DataType::kInt32: return wrap(int32_t{});
    case DataType::kInt16: return wrap(int16_t{});
    case DataType::kInt8: return wrap(int8_t{});
    case DataType::kUint32: return wrap(uint32_t{});
    case DataType::kUint16: return wrap(uint16_t{});
    case DataType::kUint8: return wrap(uint8_t{});
    default: return;
  }
}

}  // namespace fusionopt::cpu::ew
