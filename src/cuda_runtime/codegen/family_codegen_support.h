// Pieces the row, attention, data-movement and pooling generators share: reading a typed
// body (static dims, constant arguments), naming kernel parameters in the order the contract
// fixes (generated_kernel.h), folding broadcast and coordinate arithmetic into C expressions,
// and recognising composites in a typed body whose constant arguments were folded.
//
// Why recognition needs a copy: TypedBodyOf turns a constant argument (a LayerNorm's gamma, an
// attention's mask buffer or split sizes) into an initializer the body's nodes read instead of
// the formal input, while the recognisers (patterns/composite/composite.h, patterns/attention/attention.h) describe
// operands as formal inputs. UnfoldedBody gives them a copy that reads the inputs again and
// remembers which initializer stands behind each, so the kernel reads it through a
// constant_inputs pointer the plugin uploads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/broadcast.h"
#include "ir/graph.h"
#include "patterns/composite/composite.h"
#include "ir/status.h"

namespace fusionopt::cuda {

// `name` as a C identifier (other characters become '_', a leading digit gets a prefix).
std::string KernelIdentifier(std::string_view name);

// The static dims of a fully typed value (CheckFullyTyped has run).
std::vector<int64_t> StaticDims(const Value& value);
int64_t ElementCount(const std::vector<int64_t>& dims);

// A float as an exact CUDA C++ float literal (hex float; infinities and NaN spelled out).
std::string FloatLiteral(double value);
// A double as an exact CUDA C++ double literal (hex float; infinities and NaN spelled out).
std::string DoubleLiteral(double value);

// A copy of the body whose nodes read the formal inputs that TypedBodyOf folded into
// initializers, with the initializer behind each such input.
struct UnfoldedBody {
  std::unique_ptr<Graph> graph;
  std::vector<const Value*> folded;  // per formal input of the original body: its initializer, or null
};
UnfoldedBody Unfold(const Graph& typed_body);

// RecognizeComposite for a body whose opset is not known: tries the ReduceMean spellings of
// opset 18 and of opset 13-17. Unsupported when a Softmax in the body relies on the
// opset-dependent default axis and its input is of rank > 2 (the default then decides which
// axis is normalized).
Result<std::optional<FusedComposite>> RecognizeCompositeOfTypedBody(const Graph& unfolded);

// The kernel parameter list of a program (generated_kernel.h): every formal input, then the
// initializers read through pointers, then every output. Inputs that were folded are read
// through their initializer's parameter.
class KernelParameters {
 public:
  // `unfolded` supplies which inputs were folded; `body` is the typed body itself.
  KernelParameters(const Graph& body, const UnfoldedBody& unfolded);
  explicit KernelParameters(const Graph& body);  // a body read without recognition

  // The parameter through which the kernel reads formal input `index` (the input's own, or
  // its folded initializer's, which is then added to constant_inputs).
  std::string InputPointer(int index);
  // The parameter of an initializer value of the body read by a node (added to constant_inputs).
  std::string InitializerPointer(const Value& initializer);
  // The parameter of formal input or initializer `value`, whichever it is.
  std::string PointerTo(const Value& value);
  std::string OutputPointer(int index) const { return "out" + std::to_string(index); }
  // The parameter list, to put between the entry's parentheses.
  std::string Declaration() const;
  const std::vector<std::string>& constant_inputs() const { return constant_names_; }

 private:
  const Graph& body_;
  std::vector<const Value*> folded_;
  std::vector<std::string> constant_names_;
};

// A program of one kernel, its constants those `parameters` gave pointers to.
GeneratedProgram SingleKernelProgram(std::string_view name, std::string source, std::string description,
                                     GeneratedKernel kernel, const KernelParameters& parameters);

// Strides of a row-major tensor of `dims`.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims);

// The element offset into an operand of `operand_dims` (numpy-broadcast to `out_dims`) for the
// output element whose coordinates are `coordinates[axis]` (C expressions). Broadcast axes
// contribute nothing; "0" when nothing varies.
std::string BroadcastOffset(const std::vector<int64_t>& operand_dims, const std::vector<int64_t>& out_dims,
                            const std::vector<std::string>& coordinates);

// Statements that split linear index `index` of a tensor of `dims` into coordinates named
// `prefix`0, `prefix`1, ... (of `index_type`); size-1 axes become the constant 0. Returns the
// statements and fills `coordinates` with the expressions to use.
std::string SplitIndex(const std::vector<int64_t>& dims, std::string_view index, std::string_view index_type,
                       std::string_view prefix, std::vector<std::string>& coordinates);

// "int" when every index below `elements`, plus one grid-stride step, fits in 31 bits, else
// "long long".
std::string IndexType(int64_t elements);

// A grid-stride kernel over `total` elements: one 1-D launch of 256-thread blocks, at most
// 8192 of them (the loop covers the rest).
GeneratedKernel GridStrideLaunch(std::string entry, int64_t total);
inline constexpr uint32_t kGridStrideThreads = 256;

// The opening of a grid-stride loop over `total` elements with loop variable `i`.
std::string GridStrideLoop(int64_t total, std::string_view index_type);

// A one-kernel grid-stride program: `globals` (constant tables) at file scope, `prologue` per
// thread before the loop, then `loop_body` for each element index `i` of `total`, which
// GridStrideLoop's statements declare with `index_type`. The shape of every per-element family
// (data movement, lines, resize, rotary, pooling, LRN).
GeneratedProgram GridStrideProgram(std::string_view name, const KernelParameters& parameters, int64_t total,
                                   std::string_view index_type, const std::string& loop_body, std::string description,
                                   const std::string& prologue = {}, const std::string& globals = {});

// The unsigned integer type of a dtype's width ("unsigned short" for float16, ...): elements
// copied as raw bits; nullopt for dtypes without a storage type or of another width.
std::optional<std::string> BitsType(DataType dtype);

// The one non-Constant node of a single-op body, or null when there are several.
const Node* SingleOp(const Graph& body);

}  // namespace fusionopt::cuda
