#include "cpu_runtime/quantized/quantize_expr.h"

#include <functional>
#include <numeric>

#include "ir/constant_value.h"
#include "ir/minifloat.h"

namespace fusionopt::cpu {

using ew::Op;
using ew::ProgramBuilder;

std::optional<QuantRange> IntegerRange(DataType type) {
  switch (type) {
    case DataType::kInt8: return QuantRange{-128, 127};
    case DataType::kUint8: return QuantRange{0, 255};
    case DataType::kInt16: return QuantRange{-32768, 32767};
    case DataType::kUint16: return QuantRange{0, 65535};
    case DataType::kInt4: return QuantRange{-8, 7};
    case DataType::kUint4: return QuantRange{0, 15};
    case DataType::kInt2: return QuantRange{-2, 1};
    case DataType::kUint2: return QuantRange{0, 3};
    default: return std::nullopt;
  }
}

DataType ComputeStandIn(DataType type) {
  switch (type) {
    case DataType::kInt4: case DataType::kInt2: return DataType::kInt8;
    case DataType::kUint4: case DataType::kUint2: return DataType::kUint8;
    default: return IsMinifloat(type) ? DataType::kFloat : type;
  }
}

bool IsPacked(DataType type) { return ComputeStandIn(type) != type; }

ExprBuilder QuantizeExpr(DataType target, std::optional<QuantRange> range, std::optional<DataType> precision) {
  return [=](ProgramBuilder& b, const std::vector<int>& in) -> Result<int> {
    const DataType divide_in = precision.value_or(b.dtype(in[1]));
    FUSIONOPT_ASSIGN_OR_RETURN(int x, b.Convert(in[0], divide_in));
    FUSIONOPT_ASSIGN_OR_RETURN(int scale, b.Convert(in[1], divide_in));
    if (divide_in != DataType::kFloat) {
      // The quotient rounded to the precision, then quantized against a scale of one.
      FUSIONOPT_ASSIGN_OR_RETURN(int quotient, b.Emit(Op::kDiv, {x, scale}));
      FUSIONOPT_ASSIGN_OR_RETURN(x, b.Convert(quotient, DataType::kFloat));
      FUSIONOPT_ASSIGN_OR_RETURN(scale, b.Fill(1.0, DataType::kFloat));
    }
    int zero_point = -1;
    if (in[2] >= 0) {
      FUSIONOPT_ASSIGN_OR_RETURN(zero_point, b.Convert(in[2], DataType::kFloat));
    } else {
      FUSIONOPT_ASSIGN_OR_RETURN(zero_point, b.Fill(0.0, DataType::kFloat));
    }
    if (!range) {  // a minifloat, rounded when packed
      FUSIONOPT_ASSIGN_OR_RETURN(int quotient, b.Emit(Op::kDiv, {x, scale}));
      FUSIONOPT_ASSIGN_OR_RETURN(int shifted, b.Emit(Op::kAdd, {quotient, zero_point}));
      return b.Convert(shifted, target);
    }
    FUSIONOPT_ASSIGN_OR_RETURN(int quantized, b.Emit(Op::kQuantize, {x, scale, zero_point},
                                                     static_cast<float>(range->lo), static_cast<float>(range->hi)));
    return b.Convert(quantized, target);
  };
}

ExprBuilder DequantizeExpr(DataType output) {
  return [=](ProgramBuilder& b, const std::vector<int>& in) -> Result<int> {
    int x = in[0];
    // Right after a QuantizeLinear: its rounded float values, integers exact in float, so the
    // difference and the product are those of the integer path bit for bit.
    if (const std::optional<int> twin = b.FloatTwin(x); twin && output == DataType::kFloat) {
      int value = *twin;
      if (in[2] >= 0) {
        FUSIONOPT_ASSIGN_OR_RETURN(int zero, b.Convert(in[2], DataType::kFloat));
        FUSIONOPT_ASSIGN_OR_RETURN(value, b.Emit(Op::kSub, {value, zero}));
      }
      FUSIONOPT_ASSIGN_OR_RETURN(int scale, b.Convert(in[1], DataType::kFloat));
      return b.Emit(Op::kMul, {value, scale});
    }
    if (in[2] >= 0) {
      // The difference in int64 is exact (int8 - int8 overflows int8); minifloats subtract as float.
      const DataType wide = IsInteger(b.dtype(x)) ? DataType::kInt64 : DataType::kFloat;
      FUSIONOPT_ASSIGN_OR_RETURN(int wide_x, b.Convert(x, wide));
      FUSIONOPT_ASSIGN_OR_RETURN(int wide_zero, b.Convert(in[2], wide));
      FUSIONOPT_ASSIGN_OR_RETURN(x, b.Emit(Op::kSub, {wide_x, wide_zero}));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(int value, b.Convert(x, output));
    FUSIONOPT_ASSIGN_OR_RETURN(int scale, b.Convert(in[1], output));
    return b.Emit(Op::kMul, {value, scale});
  };
}

Result<ExprBuilder> LinearQuantizationExpr(const KernelInfo& info) {
  const Node& node = info.node;
  if (node.GetInt("block_size", 0) != 0) return info.Error("blocked quantization runs as its own kernel");
  // One value: by its declared shape, or (an outlined body's copied scalar) its Constant node.
  const Value* scale = node.input(1);
  const TensorPtr constant = scale != nullptr && scale->producer() != nullptr ? ConstantNodeValue(*scale->producer()) : nullptr;
  const std::optional<std::vector<int64_t>> dims = scale != nullptr ? KnownDims(*scale) : std::nullopt;
  const bool per_tensor = constant != nullptr ? constant->NumElements() == 1
                                              : dims && std::accumulate(dims->begin(), dims->end(), int64_t{1},
                                                                        std::multiplies<int64_t>()) == 1;
  if (!per_tensor) return info.Error("a scale not known to be one value runs as its own kernel");
  if (node.op_type() == "DequantizeLinear") {
    const int64_t output_dtype = node.GetInt("output_dtype", 0);
    return ExprBuilder([output_dtype](ew::ProgramBuilder& b, const std::vector<int>& in) -> Result<int> {
      const DataType output = output_dtype != 0 ? static_cast<DataType>(output_dtype) : b.dtype(in[1]);
      if (!IsFloatingPoint(output)) return InvalidModel("DequantizeLinear gives a float type");
      return DequantizeExpr(output)(b, in);
    });
  }
  const int64_t output_dtype = node.GetInt("output_dtype", 0);
  const int64_t precision = node.GetInt("precision", 0);
  return ExprBuilder([output_dtype, precision](ew::ProgramBuilder& b, const std::vector<int>& in) -> Result<int> {
    DataType target = in[2] >= 0 ? b.dtype(in[2]) : output_dtype != 0 ? static_cast<DataType>(output_dtype)
                                                                        : DataType::kUint8;
    const std::optional<QuantRange> range = IntegerRange(target);
    if (!range || IsPacked(target)) return Unsupported("quantizing to " + std::string(NameOf(target)) + " runs as its own kernel");
    const DataType divide_in = precision != 0 ? static_cast<DataType>(precision) : b.dtype(in[1]);
    return QuantizeExpr(target, range, divide_in)(b, in);
  });
}

Result<const ew::Program*> ExprPrograms::Get(const std::vector<DataType>& dtypes, const std::vector<int>& registers,
                                             const ExprBuilder& expr, const std::string& label) {
  std::vector<int> key;
  for (DataType dtype : dtypes) key.push_back(static_cast<int>(dtype));
  key.insert(key.end(), registers.begin(), registers.end());
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = programs_.find(key); it != programs_.end()) return &it->second;
  ew::ProgramBuilder builder(dtypes);
  FUSIONOPT_ASSIGN_OR_RETURN(int result, expr(builder, registers));
  builder.AddOutput(result);
  return &programs_.emplace(key, builder.Finish(label)).first->second;
}

namespace {

// 4-bit values two to a byte and 2-bit values four to a byte, the first in the low bits.
int64_t ReadPackedInteger(const uint8_t* bytes, int bits, bool is_signed, int64_t index) {
  const int per_byte = 8 / bits;
  const int shift = static_cast<int>(index % per_byte) * bits;
  const int mask = (1 << bits) - 1;
  int value = (bytes[index / per_byte] >> shift) & mask;
  if (is_signed && value >= (1 << (bits - 1))) value -= 1 << bits;
  return value;
}

}  // namespace

RtTensor Unpacked(const RtTensor& packed, Allocator& allocator) {
  const DataType type = packed.dtype();
  if (!IsPacked(type)) return packed;
  RtTensor out = allocator.Allocate(ComputeStandIn(type), packed.dims());
  const int64_t count = packed.NumElements();
  const uint8_t* bytes = packed.raw();
  if (IsMinifloat(type)) {
    float* values = out.data<float>();
    const int bits = BitsOf(type);
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t code = bits == 8 ? bytes[i] : static_cast<uint8_t>(ReadPackedInteger(bytes, bits, false, i));
      values[i] = MinifloatToFloat(type, code);
    }
    return out;
  }
  const bool is_signed = type == DataType::kInt4 || type == DataType::kInt2;
  const int bits = BitsOf(type);
  auto* values = out.data<uint8_t>();
  for (int64_t i = 0; i < count; ++i) {
    values[i] = static_cast<uint8_t>(ReadPackedInteger(bytes, bits, is_signed, i));
  }
  return out;
}

void Pack(const RtTensor& stand_in, RtTensor& packed, bool saturate) {
  const DataType type = packed.dtype();
  FUSIONOPT_CHECK(stand_in.dtype() == ComputeStandIn(type) && stand_in.NumElements() == packed.NumElements(),
                  "a stand-in of the packed tensor");
  const int64_t count = packed.NumElements();
  const int bits = BitsOf(type);
  uint8_t* bytes = packed.raw();
  if (bits == 8) {  // an 8-bit minifloat
    const float* values = stand_in.data<float>();
    for (int64_t i = 0; i < count; ++i) bytes[i] = FloatToMinifloat(type, values[i], saturate);
    return;
  }
  std::fill(bytes, bytes + packed.nbytes(), uint8_t{0});
  const int per_byte = 8 / bits;
  const int mask = (1 << bits) - 1;
  for (int64_t i = 0; i < count; ++i) {
    const int code = IsMinifloat(type) ? FloatToMinifloat(type, stand_in.data<float>()[i], saturate)
                                       : stand_in.data<uint8_t>()[i] & mask;
    bytes[i / per_byte] |= static_cast<uint8_t>(code << (static_cast<int>(i % per_byte) * bits));
  }
}

}  // namespace fusionopt::cpu
