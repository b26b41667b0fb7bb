// Internals shared by the shape inference driver and the per-family rule files.
//
// A rule is a plain function that reads one node's inputs through an InferenceContext and
// proposes output types; the context merges every proposal into the output Value right away
// (declared information wins, conflicts become warnings), so a rule never has to care what
// the model declared. Rules are found in a RuleRegistry keyed by (domain, op_type); each
// family file contributes its rules through one Register*Rules function.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/constant_value.h"
#include "ir/graph.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::shape_inference {

// Integer tensors longer than this are data, not shape arithmetic; they are not tracked.
constexpr size_t kMaxSymbolicElements = 64;

// Ranks computed from argument lengths beyond this come from malformed models; such outputs
// stay unknown rather than being materialised as huge shapes.
constexpr int64_t kMaxRank = 64;

// One element of a small integer tensor: a number (negative allowed, unlike Dim), a
// symbolic dimension, or unknown.
struct SymbolicInt {
  std::optional<int64_t> value;
  std::string symbol;

  static SymbolicInt Known(int64_t number) { return SymbolicInt{number, {}}; }
  static SymbolicInt Symbol(std::string name) { return SymbolicInt{std::nullopt, std::move(name)}; }
  static SymbolicInt Unknown() { return {}; }
  static SymbolicInt FromDim(const Dim& dim);
  bool is_known() const { return value.has_value(); }
  bool is_symbolic() const { return !value && !symbol.empty(); }
  bool operator==(const SymbolicInt& other) const = default;
};

// The content of a scalar or 1-D integer tensor, as far as it is known.
struct SymbolicData {
  std::vector<SymbolicInt> elements;
  bool is_scalar = false;  // rank 0 (one element); otherwise rank 1
};

// Tri-state of an int-list argument that moved from an attribute to an input in some opset
// (axes, pads, split sizes): absent, present with known values, or present but computed.
struct IntListArgument {
  bool present = false;
  std::optional<std::vector<int64_t>> values;
  std::optional<int64_t> length;  // element count, known even when the values are not
};

class InferenceState;

// Output types of one function call, as inferred from its body.
struct FunctionCallResult {
  std::vector<ValueType> outputs;
  std::vector<std::optional<SymbolicData>> data;
};

// Shared by the state of the main graph and the states that infer function bodies.
struct FunctionCalls {
  // Keyed by function, argument types and data, and the caller's attributes.
  std::map<std::string, FunctionCallResult> memo;
  std::vector<const Function*> in_progress;  // the call chain being inferred
  Status error;                              // the first recursive call found
};

class InferenceContext {
 public:
  InferenceContext(Node& node, int64_t opset, InferenceState& state)
      : node_(node), opset_(opset), state_(state) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }

  // Inputs. Absent optional inputs and non-tensor (sequence/map) values read as unknown.
  size_t num_inputs() const { return node_.inputs().size(); }
  bool HasInput(size_t index) const { return node_.input(index) != nullptr; }
  DataType InputDtype(size_t index) const;
  const Shape* InputShape(size_t index) const;  // nullptr when absent or rank unknown
  std::optional<size_t> InputRank(size_t index) const;
  // Element count of a 1-D input when its only dim is known (scalars count 1).
  std::optional<int64_t> InputLength(size_t index) const;
  // The tensor of an initializer or Constant node; null for computed values and for
  // initializers that are also graph inputs where a caller may override them (IR >= 4).
  TensorPtr InputConstant(size_t index) const;
  // Integer content: a constant, or tracked data whose every element is known.
  std::optional<std::vector<int64_t>> InputInts(size_t index) const;
  std::optional<std::vector<double>> InputFloats(size_t index) const;  // constants only
  // Tracked content of a small integer tensor (constants included), symbols allowed.
  std::optional<SymbolicData> InputData(size_t index) const;

  // An int-list argument read from `attribute` before `input_since_opset` and from input
  // `input_index` from that opset on.
  IntListArgument ReadIntList(std::string_view attribute, size_t input_index,
                              int64_t input_since_opset) const;

  // Outputs. Proposals are merged at once; absent outputs are ignored.
  size_t num_outputs() const { return node_.outputs().size(); }
  bool HasOutput(size_t index) const { return node_.output(index) != nullptr; }
  void SetOutputDtype(size_t index, DataType dtype);
  void SetOutputShape(size_t index, const Shape& shape);
  void SetOutputType(size_t index, DataType dtype, const std::optional<Shape>& shape);
  // Rank known, dims unknown; a negative or implausible rank (> kMaxRank) is a warning.
  void SetOutputRank(size_t index, int64_t rank);
  void SetOutputData(size_t index, SymbolicData data);
  // The output's type after merging (what later nodes will see).
  const ValueType* OutputType(size_t index) const;

  // Records "node '<name>': <message>".
  void Warn(const std::string& message) const;

  // Infers a subgraph of this node (its inputs typed by the caller beforehand).
  void InferSubgraph(Graph& graph);
  // Proposes a type for a subgraph input or any other value (declared info still wins).
  void MergeInto(Value& value, DataType dtype, const std::optional<Shape>& shape);

 private:
  Value* MutableOutput(size_t index) const { return node_.output(index); }

  Node& node_;
  int64_t opset_;
  InferenceState& state_;
};

// Whole-run state: the model's opsets, tracked data, the report being built. Inside a
// function body, opsets are the function's.
class InferenceState {
 public:
  explicit InferenceState(const Model& model)
      : model_(model), calls_(std::make_shared<FunctionCalls>()) {}

  void InferGraph(Graph& graph);
  ShapeInferenceReport TakeReport();

  void Warn(std::string message) { report_.warnings.push_back(std::move(message)); }
  // Merge a proposal into `value`; `where` ("node 'x'") prefixes conflict warnings.
  void MergeDtype(Value& value, DataType dtype, const std::string& where);
  void MergeShape(Value& value, const Shape& shape, const std::string& where);
  const SymbolicData* DataOf(const Value* value) const;
  // The content of `value` as far as it is known: tracked data, else a small integer constant
  // (initializer or Constant node). What a node's shape rule, or a called function's body,
  // sees of an argument.
  std::optional<SymbolicData> ContentOf(const Value* value) const;
  // Whether an initializer listed as a graph input may be replaced by the caller's tensor.
  // IR version 3 lists every initializer as an input, so there they are constants (as in
  // onnxruntime); from IR version 4 on such an initializer is only a default.
  InitializerRule Initializers() const { return InitializerRuleOf(model_); }
  void SetData(const Value* value, SymbolicData data);

 private:
  InferenceState(const Model& model, const Function& function, std::shared_ptr<FunctionCalls> calls)
      : model_(model), function_(&function), calls_(std::move(calls)) {}

  std::optional<int64_t> OpsetFor(std::string_view domain) const;
  void InferNode(Node& node);
  void TypeInitializer(Value& value);
  void MarkImproved(Value& value);

  // Model-local function calls (functions.cc).
  const Function* CalledFunction(const Node& node) const;
  void InferFunctionCall(Node& node, const Function& function);
  FunctionCallResult InferFunctionBody(const Node& node, const Function& function);
  void ApplyCallResult(Node& node, const FunctionCallResult& result);

  const Model& model_;
  const Function* function_ = nullptr;  // whose body this state infers; null for the model's
  std::shared_ptr<FunctionCalls> calls_;
  ShapeInferenceReport report_;
  std::set<std::string> unsupported_;
  std::unordered_set<const Value*> improved_;
  std::unordered_map<const Value*, SymbolicData> data_;
};

using Rule = void (*)(InferenceContext& context);

class RuleRegistry {
 public:
  struct Entry {
    Rule type = nullptr;  // dtype and shape of the outputs
    Rule data = nullptr;  // content of small integer outputs (runs after `type`)
  };

  // `domain` "" is the default ONNX domain ("ai.onnx" is folded into it).
  void AddTypeRule(std::string_view domain, std::initializer_list<std::string_view> op_types,
                   Rule rule);
  void AddDataRule(std::string_view domain, std::initializer_list<std::string_view> op_types,
                   Rule rule);
  const Entry* Find(std::string_view domain, std::string_view op_type) const;

 private:
  std::map<std::pair<std::string, std::string>, Entry> entries_;
};

// The registry with every family's rules, built once.
const RuleRegistry& Rules();

void RegisterElementwiseRules(RuleRegistry& registry);
void RegisterNormalizationRules(RuleRegistry& registry);
void RegisterConvPoolRules(RuleRegistry& registry);
void RegisterMatMulRules(RuleRegistry& registry);
void RegisterTensorRules(RuleRegistry& registry);
void RegisterSlicingRules(RuleRegistry& registry);
void RegisterIndexingRules(RuleRegistry& registry);
void RegisterGeneratorRules(RuleRegistry& registry);
void RegisterResizeRules(RuleRegistry& registry);
void RegisterReduceRules(RuleRegistry& registry);
void RegisterControlFlowRules(RuleRegistry& registry);
void RegisterDataPropagationRules(RuleRegistry& registry);
void RegisterContribRules(RuleRegistry& registry);
void RegisterAttentionRules(RuleRegistry& registry);
void RegisterQuantizationRules(RuleRegistry& registry);

// ---- helpers shared by rule files

// Axis in [-rank, rank) made non-negative; nullopt when out of range.
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank);
// Every axis normalized and unique; nullopt (after a warning) when any is invalid.
std::optional<std::vector<int64_t>> NormalizeAxes(const InferenceContext& context,
                                                  const std::vector<int64_t>& axes, int64_t rank);
Shape UnknownDims(size_t rank);

// Same dtype and shape as input `input` (unknown parts stay unknown).
void PropagateInput(InferenceContext& context, size_t input, size_t output);

// Output shapes of the float ops whose quantized forms (QLinearConv, QGemm, QLinearConcat, ...)
// read their operands at other input positions: the same rule, with the operands named.
std::optional<Shape> ConvOutputShape(InferenceContext& context, size_t x_input, size_t w_input);
std::optional<Shape> PoolOutputShape(InferenceContext& context, const Shape* x);
std::optional<Shape> GlobalPoolOutputShape(const Shape* x);
std::optional<Shape> MatMulOutputShape(InferenceContext& context, size_t a_input, size_t b_input);
std::optional<Shape> GemmOutputShape(InferenceContext& context, size_t a_input, size_t b_input);
std::optional<Shape> ConcatOutputShape(InferenceContext& context, const std::vector<size_t>& inputs);

// Statistics outputs of layer-norm-like ops (Mean, InvStdDev): input 0's shape with the
// normalized axes (from `axis` on) set to 1, in the stash_type attribute's type (float).
void SetNormalizationStatistics(InferenceContext& context, int64_t axis,
                                const std::vector<size_t>& outputs);

// Broadcast of several inputs; warns and returns nullopt on a mismatch or unknown rank.
std::optional<Shape> BroadcastInputs(InferenceContext& context, const std::vector<size_t>& inputs);

// A product of dims as constant × symbols, for -1 in Reshape and Flatten's merged dims. A product
// symbol ("4*batch") multiplies in as its factors, and a product of several factors is written
// back as one, so [batch,4,S,D] -> [4*batch,-1,D] infers S and back again.
struct DimProduct {
  int64_t constant = 1;
  std::multiset<std::string> symbols;
  bool has_unknown = false;

  void Multiply(const Dim& dim);
  // This / other when it divides exactly (other's symbols cancel, constants divide).
  std::optional<DimProduct> DividedBy(const DimProduct& other) const;
  // Known when no symbols remain, the symbol itself for 1 × symbol, else the product symbol
  // ("4*batch", "batch*sequence").
  Dim ToDim() const;
};
DimProduct ProductOf(const Shape& shape, size_t begin, size_t end);

// ONNX Slice on one axis of known `size` (negative bounds count from the end, bounds are
// clamped, step != 0): the first index taken and how many elements are taken.
struct SliceRange {
  int64_t first = 0;
  int64_t count = 0;
};
SliceRange ClampSlice(int64_t size, int64_t start, int64_t end, int64_t step);

// Known dim arithmetic that stays unknown when an operand is not known.
Dim KnownOrUnknown(std::optional<int64_t> size);
// A size computed in floating point (Resize, Range, a float OneHot depth): truncated, and
// unknown when negative, not finite or too large to be a dim.
Dim SizeFromFloat(double size);
// a * b, unknown when either is unknown or the product overflows.
Dim MultiplyDims(const Dim& a, int64_t factor);
std::optional<int64_t> KnownSize(const Dim& dim);

// "node '<name>'" or, for unnamed nodes, "node <OpType> -> '<first output>'".
std::string NodeLabel(const Node& node);

}  // namespace fusionopt::shape_inference
