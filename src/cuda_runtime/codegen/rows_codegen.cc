// Row kernels: LayerNorm, RMSNorm, Softmax and last-axis reductions (rows_codegen.h).
#include "cuda_runtime/codegen/rows_codegen.h"

#include <algorithm>
#include <set>

#include "cuda_runtime/codegen/cuda_types.h"
#include "cuda_runtime/codegen/family_codegen_support.h"
#include "ir/constant_value.h"

namespace fusionopt::cuda {
namespace {

struct RowLayout {
  int64_t rows = 0, n = 0;
  int threads = 32, rows_per_block = 1, items = 1;
};

Result<RowLayout> ChooseLayout(int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return Unsupported("an empty tensor has no row to reduce");
  if (n > kMaxRowElements) {
    return Unsupported("a row of " + std::to_string(n) + " elements is longer than " +
                       std::to_string(kMaxRowElements) + " (the row is held in registers)");
  }
  RowLayout layout;
  layout.rows = rows;
  layout.n = n;
  while (layout.threads < 1024 && layout.threads * 8 < n) layout.threads *= 2;
  layout.items = static_cast<int>((n + layout.threads - 1) / layout.threads);
  layout.rows_per_block = layout.threads == 32 ? 4 : 1;
  if ((rows + layout.rows_per_block - 1) / layout.rows_per_block > 0x7fffffffLL) {
    return Unsupported("more rows than one grid holds");
  }
  return layout;
}

GeneratedKernel LaunchOf(const RowLayout& layout, std::string entry) {
  GeneratedKernel kernel;
  kernel.entry = std::move(entry);
  kernel.grid = {static_cast<uint32_t>((layout.rows + layout.rows_per_block - 1) / layout.rows_per_block), 1, 1};
  kernel.block = {static_cast<uint32_t>(layout.threads), static_cast<uint32_t>(layout.rows_per_block), 1};
  return kernel;
}

// Device helpers every row kernel uses: NaN-propagating max/min (as the CPU's MaxOf), and a
// reduction of one value per thread over the threads of a row.
constexpr const char* kRowHelpers = R"(
struct FoSum { __device__ float operator()(float a, float b) const { return a + b; } };
struct FoMax { __device__ float operator()(float a, float b) const { return (b > a || b != b) ? b : a; } };
struct FoMin { __device__ float operator()(float a, float b) const { return (b < a || b != b) ? b : a; } };

// Every thread of the row gets the result. With more than one warp per row the CTA holds one
// row, so the __syncthreads are reached by every thread of the CTA.
template <int kThreads, typename Op>
__device__ __forceinline__ float FoRowReduce(float value, float identity, float* scratch, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  if (kThreads == 32) return value;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous reduction has read scratch
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < kThreads / 32 ? scratch[lane] : identity;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
)";

bool IsRowFloat(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

// `expression` (compute type) rounded to how `dtype` stores it.
std::string Rounded(DataType dtype, const std::string& expression) {
  if (dtype == DataType::kFloat) return expression;
  return LoadAsCompute(dtype, StoreFromCompute(dtype, expression));
}

// One operand as the kernel reads it per row: pointer, row-start offset, stride along the row.
struct RowRead {
  std::string pointer;
  std::string row_offset;
  bool along_row = true;  // false: one value repeated along the row
  DataType dtype = DataType::kFloat;
  std::string At(const std::string& j) const {
    return pointer + "[" + row_offset + (along_row ? " + " + j : std::string()) + "]";
  }
  std::string Load(const std::string& j) const { return LoadAsCompute(dtype, At(j)); }
};

// The kernel's opening: row index, outer coordinates of the row, the register array.
std::string KernelHead(const std::string& entry, const std::string& parameters, const RowLayout& layout,
                       const std::vector<int64_t>& out_dims, std::vector<std::string>& coordinates) {
  std::string code = "\nextern \"C\" __global__ void __launch_bounds__(" +
                     std::to_string(layout.threads * layout.rows_per_block) + ") " + entry + "(" + parameters +
                     ") {\n";
  code += "  __shared__ float scratch[32];\n  (void)scratch;\n";
  code += "  const long long row = (long long)blockIdx.x * " + std::to_string(layout.rows_per_block) +
          " + threadIdx.y;\n";
  code += "  if (row >= " + std::to_string(layout.rows) + "LL) return;\n";
  std::vector<int64_t> outer(out_dims.begin(), out_dims.end() - 1);
  std::vector<std::string> outer_coordinates;
  code += SplitIndex(outer, "row", "long long", "r", outer_coordinates);
  for (const std::string& coordinate : outer_coordinates) {
    if (coordinate != "0") code += "  (void)" + coordinate + ";  // read only by broadcast operands\n";
  }
  coordinates = outer_coordinates;
  coordinates.push_back("0");
  code += "  float v[" + std::to_string(layout.items) + "];\n";
  return code;
}

std::string ForEachItem(const RowLayout& layout, const std::string& body) {
  return "#pragma unroll\n  for (int k = 0; k < " + std::to_string(layout.items) +
         "; ++k) {\n    const int j = threadIdx.x + k * " + std::to_string(layout.threads) + ";\n" + body + "  }\n";
}

std::string Reduce(const RowLayout& layout, const std::string& value, const char* op, const char* identity) {
  return "FoRowReduce<" + std::to_string(layout.threads) + ">(" + value + ", " + identity + ", scratch, " + op +
         "())";
}

RowRead ReadOf(std::string pointer, const Value& value, const std::vector<int64_t>& out_dims,
               const std::vector<std::string>& coordinates) {
  RowRead read;
  read.pointer = std::move(pointer);
  const std::vector<int64_t> dims = StaticDims(value);
  // A full-shape operand's row starts where the output's does.
  read.row_offset = dims == out_dims ? "row * " + std::to_string(out_dims.back()) + "LL"
                                     : BroadcastOffset(dims, out_dims, coordinates);
  read.along_row = !dims.empty() && dims.back() != 1;
  read.dtype = value.dtype();
  return read;
}

std::string LayoutNote(const RowLayout& layout) {
  return layout.rows_per_block > 1 ? "one warp per row, " + std::to_string(layout.rows_per_block) + " rows per CTA"
                                   : "one " + std::to_string(layout.threads) + "-thread CTA per row";
}

// ---------------------------------------------------------------- reductions

struct ReductionOp {
  const char* op;
  const char* functor;
  const char* identity;
  bool mean;
};

std::optional<ReductionOp> ReductionOf(std::string_view op_type) {
  if (op_type == "ReduceSum") return ReductionOp{"sum", "FoSum", "0.0f", false};
  if (op_type == "ReduceMean") return ReductionOp{"mean", "FoSum", "0.0f", true};
  if (op_type == "ReduceMax") return ReductionOp{"max", "FoMax", "__int_as_float(0xff800000)", false};
  if (op_type == "ReduceMin") return ReductionOp{"min", "FoMin", "__int_as_float(0x7f800000)", false};
  return std::nullopt;
}

// How many trailing axes `node` reduces of an input of `rank`; Unsupported unless they are a
// trailing run.
Result<size_t> TrailingReducedAxes(const Node& node, size_t rank) {
  std::optional<std::vector<int64_t>> axes = node.GetInts("axes");
  if (node.input(1) != nullptr) {
    axes = ConstantInts(node.input(1), InitializerRule::kAllConstant);
    if (!axes) return Unsupported(node.op_type() + " with axes computed at run time");
  }
  if (!axes || axes->empty()) {
    if (node.GetInt("noop_with_empty_axes", 0) != 0) return Unsupported("a no-op reduction is a copy");
    return rank;
  }
  std::set<int64_t> normalized;
  for (int64_t axis : *axes) {
    const int64_t at = axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
    if (at < 0 || at >= static_cast<int64_t>(rank)) return Unsupported("reduction axis out of range");
    normalized.insert(at);
  }
  if (*normalized.rbegin() != static_cast<int64_t>(rank) - 1 ||
      *normalized.begin() != static_cast<int64_t>(rank - normalized.size())) {
    return Unsupported(node.op_type() + " over axes that are not a trailing run of the input's");
  }
  return normalized.size();
}

Result<GeneratedProgram> GenerateReduction(const Graph& body, const Node& node, const ReductionOp& reduction,
                                           std::string_view name) {
  const Value& x = *node.input(0);
  if (!IsRowFloat(x.dtype())) {
    return Unsupported(node.op_type() + " on " + std::string(NameOf(x.dtype())) +
                       " (float, float16 and bfloat16 only)");
  }
  if (node.outputs().size() != 1 || body.outputs().size() != 1 || body.outputs()[0] != node.output(0)) {
    return Unsupported("a reduction body must return the reduction's one result");
  }
  const std::vector<int64_t> dims = StaticDims(x);
  FUSIONOPT_ASSIGN_OR_RETURN(size_t reduced, TrailingReducedAxes(node, dims.size()));
  const int64_t n = ElementCount(std::vector<int64_t>(dims.end() - static_cast<ptrdiff_t>(reduced), dims.end()));
  const int64_t rows = ElementCount(std::vector<int64_t>(dims.begin(), dims.end() - static_cast<ptrdiff_t>(reduced)));
  if (ElementCount(StaticDims(*node.output(0))) != rows) return InternalError("reduction output size mismatch");
  FUSIONOPT_ASSIGN_OR_RETURN(RowLayout layout, ChooseLayout(rows, n));

  KernelParameters parameters(body);
  const std::string x_pointer = parameters.PointerTo(x);
  const std::string entry = KernelIdentifier(name);
  const DataType dtype = x.dtype();
  std::vector<std::string> coordinates;
  std::string code = KernelHead(entry, parameters.Declaration(), layout, {rows, n}, coordinates);
  code += "  float partial = " + std::string(reduction.identity) + ";\n";
  code += ForEachItem(layout, "    if (j < " + std::to_string(n) + ") partial = " + reduction.functor + "()(partial, " +
                                  LoadAsCompute(dtype, x_pointer + "[row * " + std::to_string(n) + "LL + j]") + ");\n");
  code += "  float result = " + Reduce(layout, "partial", reduction.functor, reduction.identity) + ";\n";
  if (reduction.mean) code += "  result = result / " + std::to_string(n) + ".0f;\n";
  code += "  if (threadIdx.x == 0) out0[row] = " + StoreFromCompute(dtype, "result") + ";\n}\n";
  std::string source = std::string(SourcePrelude()) + kRowHelpers + code;
  return SingleKernelProgram(name, std::move(source),
                 "row reduction (" + std::string(reduction.op) + " of " + std::to_string(n) + "), " + LayoutNote(layout),
                 LaunchOf(layout, entry), parameters);
}

// ---------------------------------------------------------------- composites

// The value a recognised operand names in the unfolded body, and the pointer reading it.
struct Operand {
  const Value* value = nullptr;
  std::string pointer;
};

Result<Operand> OperandOf(const CompositeOperand& operand, const Graph& body, KernelParameters& parameters) {
  Operand out;
  if (operand.input >= 0) {
    out.value = body.inputs()[static_cast<size_t>(operand.input)];
    out.pointer = parameters.InputPointer(operand.input);
  } else if (operand.constant != nullptr) {
    return Unsupported("a non-scalar Constant node inside the body (it has no kernel parameter)");
  }
  return out;
}

Status CheckDtype(const Operand& operand, DataType expected, const char* role) {
  if (operand.value == nullptr || operand.value->dtype() == expected) return Status::Ok();
  return Unsupported(std::string(role) + " of " + std::string(NameOf(operand.value->dtype())) +
                     ", not the row's " + std::string(NameOf(expected)));
}

Status CheckLastAxis(const FusedComposite& composite, size_t rank) {
  if (rank == 0 || NormalizedAxis(composite.axis, static_cast<int64_t>(rank)) != static_cast<int64_t>(rank) - 1) {
    return Unsupported(std::string(NameOf(composite.kind)) + " over axis " +
                       std::to_string(composite.axis) + " of a rank-" + std::to_string(rank) +
                       " tensor (only the last axis is a row)");
  }
  return Status::Ok();
}

std::vector<int64_t> DimsOf(const Operand& operand) {
  return operand.value ? StaticDims(*operand.value) : std::vector<int64_t>{};
}

Result<GeneratedProgram> GenerateNorm(const Graph& body, const Graph& unfolded, const UnfoldedBody& folding,
                                      const FusedComposite& composite, std::string_view name) {
  KernelParameters parameters(body, folding);
  FUSIONOPT_ASSIGN_OR_RETURN(Operand x, OperandOf(composite.x, unfolded, parameters));
  FUSIONOPT_ASSIGN_OR_RETURN(Operand residual, OperandOf(composite.residual, unfolded, parameters));
  FUSIONOPT_ASSIGN_OR_RETURN(Operand gamma, OperandOf(composite.gamma, unfolded, parameters));
  FUSIONOPT_ASSIGN_OR_RETURN(Operand beta, OperandOf(composite.beta, unfolded, parameters));
  const DataType dtype = x.value->dtype();
  if (!IsRowFloat(dtype)) return Unsupported("a norm of " + std::string(NameOf(dtype)));
  // Between float32 Casts (a float16 export's norm), the kernel computes in float32 as it always
  // does and stores x's type, which is what the Casts do only when they cast back to it.
  if (composite.cast_back_to != 0 && composite.cast_back_to != static_cast<int64_t>(dtype)) {
    return Unsupported("the norm's Cast back is not to its input's type");
  }
  FUSIONOPT_RETURN_IF_ERROR(CheckDtype(residual, dtype, "residual"));
  FUSIONOPT_RETURN_IF_ERROR(CheckDtype(gamma, dtype, "gamma"));
  FUSIONOPT_RETURN_IF_ERROR(CheckDtype(beta, dtype, "beta"));
  std::optional<std::vector<int64_t>> sum_dims = BroadcastDims({DimsOf(x), DimsOf(residual)});
  if (!sum_dims || sum_dims->empty()) return Unsupported("norm operands do not broadcast to a row");
  FUSIONOPT_RETURN_IF_ERROR(CheckLastAxis(composite, sum_dims->size()));
  std::optional<std::vector<int64_t>> out_dims = BroadcastDims({*sum_dims, DimsOf(gamma), DimsOf(beta)});
  if (!out_dims || out_dims->back() != sum_dims->back()) return Unsupported("gamma/beta widen the row");
  const bool writes_sum = composite.residual_sum_output >= 0;
  if (writes_sum && *out_dims != *sum_dims) return Unsupported("gamma/beta broadcast the residual sum");
  if (StaticDims(*body.outputs()[static_cast<size_t>(composite.result_output)]) != *out_dims) {
    return InternalError("the norm's output shape disagrees with its operands'");
  }
  const int64_t n = out_dims->back();
  FUSIONOPT_ASSIGN_OR_RETURN(RowLayout layout, ChooseLayout(ElementCount(*out_dims) / n, n));

  const std::string entry = KernelIdentifier(name);
  std::vector<std::string> coordinates;
  std::string code = KernelHead(entry, parameters.Declaration(), layout, *out_dims, coordinates);
  const std::string row_start = "row * " + std::to_string(n) + "LL";
  const RowRead x_read = ReadOf(x.pointer, *x.value, *out_dims, coordinates);
  std::string load = "      float value = " + x_read.Load("j") + ";\n";
  if (residual.value != nullptr) {
    const RowRead r_read = ReadOf(residual.pointer, *residual.value, *out_dims, coordinates);
    load += "      value = " + Rounded(dtype, "value + " + r_read.Load("j")) + ";\n";
    if (writes_sum) {
      load += "      " + parameters.OutputPointer(composite.residual_sum_output) + "[" + row_start + " + j] = " +
              StoreFromCompute(dtype, "value") + ";\n";
    }
  }
  code += ForEachItem(layout, "    v[k] = 0.0f;\n    if (j < " + std::to_string(n) + ") {\n" + load +
                                  "      v[k] = value;\n    }\n");
  const bool centered = composite.kind == CompositeKind::kLayerNorm;
  code += "  float mean = 0.0f;\n";
  if (centered) {
    code += "  {\n    float partial = 0.0f;\n";
    code += "#pragma unroll\n    for (int k = 0; k < " + std::to_string(layout.items) + "; ++k) partial += v[k];\n";
    code += "    mean = " + Reduce(layout, "partial", "FoSum", "0.0f") + " / " + std::to_string(n) + ".0f;\n  }\n";
  }
  code += "  float squares = 0.0f;\n";
  code += ForEachItem(layout, "    const float deviation = j < " + std::to_string(n) +
                                  " ? v[k] - mean : 0.0f;\n    squares += deviation * deviation;\n");
  code += "  const float variance = " + Reduce(layout, "squares", "FoSum", "0.0f") + " / " + std::to_string(n) + ".0f;\n";
  code += "  const float inv_std = 1.0f / sqrtf(variance + " + FloatLiteral(composite.epsilon) + ");\n";
  std::string scale = "(v[k] - mean) * inv_std";
  if (gamma.value != nullptr) scale += " * " + ReadOf(gamma.pointer, *gamma.value, *out_dims, coordinates).Load("j");
  if (beta.value != nullptr) scale += " + " + ReadOf(beta.pointer, *beta.value, *out_dims, coordinates).Load("j");
  code += ForEachItem(layout, "    if (j < " + std::to_string(n) + ") " +
                                  parameters.OutputPointer(composite.result_output) + "[" + row_start + " + j] = " +
                                  StoreFromCompute(dtype, scale) + ";\n");
  code += "}\n";
  std::string description = std::string(centered ? "row layernorm" : "row rmsnorm") +
                            (residual.value ? " with residual prologue" : "") + ", " + LayoutNote(layout);
  return SingleKernelProgram(name, std::string(SourcePrelude()) + kRowHelpers + code, std::move(description),
                 LaunchOf(layout, entry), parameters);
}

// The logits of element j as the body computes them: scaled, then masked.
Result<std::string> SoftmaxLogits(const FusedComposite& composite, const Graph& unfolded, KernelParameters& parameters,
                                  const std::vector<int64_t>& out_dims, const std::vector<std::string>& coordinates,
                                  const Operand& x, DataType dtype) {
  std::string code = "      float z = " + ReadOf(x.pointer, *x.value, out_dims, coordinates).Load("j") + ";\n";
  if (composite.scale) {
    const std::string scale = Rounded(dtype, FloatLiteral(*composite.scale));
    code += "      z = " + Rounded(dtype, composite.scale_divides ? "z / " + scale : "z * " + scale) + ";\n";
  }
  FUSIONOPT_ASSIGN_OR_RETURN(Operand mask, OperandOf(composite.mask, unfolded, parameters));
  if (mask.value != nullptr) {
    FUSIONOPT_RETURN_IF_ERROR(CheckDtype(mask, dtype, "mask"));
    code += "      z = " + Rounded(dtype, "z + " + ReadOf(mask.pointer, *mask.value, out_dims, coordinates).Load("j")) +
            ";\n";
  }
  FUSIONOPT_ASSIGN_OR_RETURN(Operand condition, OperandOf(composite.condition, unfolded, parameters));
  if (condition.value != nullptr) {
    if (condition.value->dtype() != DataType::kBool || !composite.fill) {
      return Unsupported("a Where mask needs a bool condition and a constant fill");
    }
    const RowRead read = ReadOf(condition.pointer, *condition.value, out_dims, coordinates);
    code += "      if (" + read.At("j") + " == " + (composite.fill_when_true ? "true" : "false") + ") z = " +
            Rounded(dtype, FloatLiteral(*composite.fill)) + ";\n";
  }
  return code;
}

Result<GeneratedProgram> GenerateSoftmax(const Graph& body, const Graph& unfolded, const UnfoldedBody& folding,
                                         const FusedComposite& composite, std::string_view name) {
  KernelParameters parameters(body, folding);
  FUSIONOPT_ASSIGN_OR_RETURN(Operand x, OperandOf(composite.x, unfolded, parameters));
  FUSIONOPT_ASSIGN_OR_RETURN(Operand mask, OperandOf(composite.mask, unfolded, parameters));
  FUSIONOPT_ASSIGN_OR_RETURN(Operand condition, OperandOf(composite.condition, unfolded, parameters));
  const DataType dtype = x.value->dtype();
  if (!IsRowFloat(dtype)) return Unsupported("a softmax of " + std::string(NameOf(dtype)));
  std::optional<std::vector<int64_t>> out_dims = BroadcastDims({DimsOf(x), DimsOf(mask), DimsOf(condition)});
  if (!out_dims || out_dims->empty()) return Unsupported("softmax operands do not broadcast to a row");
  FUSIONOPT_RETURN_IF_ERROR(CheckLastAxis(composite, out_dims->size()));
  if (StaticDims(*body.outputs()[static_cast<size_t>(composite.result_output)]) != *out_dims) {
    return InternalError("the softmax's output shape disagrees with its operands'");
  }
  const int64_t n = out_dims->back();
  FUSIONOPT_ASSIGN_OR_RETURN(RowLayout layout, ChooseLayout(ElementCount(*out_dims) / n, n));

  const std::string entry = KernelIdentifier(name);
  std::vector<std::string> coordinates;
  std::string code = KernelHead(entry, "", layout, *out_dims, coordinates);
  FUSIONOPT_ASSIGN_OR_RETURN(std::string logits,
                             SoftmaxLogits(composite, unfolded, parameters, *out_dims, coordinates, x, dtype));
  // The parameter list is complete only once every operand has been named.
  code = KernelHead(entry, parameters.Declaration(), layout, *out_dims, coordinates);
  code += "  float row_max = __int_as_float(0xff800000);\n";
  code += ForEachItem(layout, "    v[k] = __int_as_float(0xff800000);\n    if (j < " + std::to_string(n) + ") {\n" +
                                  logits + "      v[k] = z;\n      row_max = FoMax()(row_max, z);\n    }\n");
  code += "  row_max = " + Reduce(layout, "row_max", "FoMax", "__int_as_float(0xff800000)") + ";\n";
  // exp(-inf - -inf) is NaN: an all -inf row gives NaN everywhere, as the CPU runtime does.
  code += "  float partial = 0.0f;\n";
  code += ForEachItem(layout, "    v[k] = j < " + std::to_string(n) + " ? expf(v[k] - row_max) : 0.0f;\n" +
                                  "    partial += v[k];\n");
  code += "  const float inv_sum = 1.0f / " + Reduce(layout, "partial", "FoSum", "0.0f") + ";\n";
  code += ForEachItem(layout, "    if (j < " + std::to_string(n) + ") " +
                                  parameters.OutputPointer(composite.result_output) + "[row * " + std::to_string(n) +
                                  "LL + j] = " + StoreFromCompute(dtype, "v[k] * inv_sum") + ";\n");
  code += "}\n";
  std::string description = "row softmax" + std::string(composite.scale ? ", scaled" : "") +
                            (mask.value ? ", additive mask" : "") + (condition.value ? ", Where mask" : "") + ", " +
                            LayoutNote(layout);
  return SingleKernelProgram(name, std::string(SourcePrelude()) + kRowHelpers + code, std::move(description),
                 LaunchOf(layout, entry), parameters);
}

}  // namespace

Result<GeneratedProgram> GenerateRows(const Graph& typed_body, std::string_view name) {
  if (const Node* op = SingleOp(typed_body); op != nullptr && IsDefaultDomain(*op)) {
    if (std::optional<ReductionOp> reduction = ReductionOf(op->op_type())) {
      return GenerateReduction(typed_body, *op, *reduction, name);
    }
  }
  UnfoldedBody unfolded = Unfold(typed_body);
  FUSIONOPT_ASSIGN_OR_RETURN(std::optional<FusedComposite> composite, RecognizeCompositeOfTypedBody(*unfolded.graph));
  if (!composite) {
    return Unsupported("the body is no LayerNorm, RMSNorm, Softmax or trailing-axis ReduceMean/Sum/Max/Min");
  }
  switch (composite->kind) {
    case CompositeKind::kLayerNorm:
    case CompositeKind::kRmsNorm:
      return GenerateNorm(typed_body, *unfolded.graph, unfolded, *composite, name);
    case CompositeKind::kSoftmax:
      return GenerateSoftmax(typed_body, *unfolded.graph, unfolded, *composite, name);
    case CompositeKind::kGelu:
    case CompositeKind::kSilu:
      break;
  }
  return Unsupported(std::string(NameOf(composite->kind)) + " is elementwise (the elementwise family's)");
}

}  // namespace fusionopt::cuda
