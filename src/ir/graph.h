// The graph IR: Model → Graph → Node / Value, with use lists and subgraphs.
//
// Ownership: a Graph owns its Nodes and Values; a Node owns its attributes, and graph
// attributes (If/Loop/Scan bodies) own their subgraphs. Values are referred to by pointer.
// A subgraph may read values of an enclosing graph (ONNX outer-scope references): such an
// input is a pointer into the parent graph, and the use is recorded on that outer Value, so
// dead-code elimination and rewrites see every reader.
//
// Losslessness: everything the IR does not model (doc strings the passes need not read,
// metadata, fields of newer ONNX versions) travels in `residual` strings — serialized
// protobuf of the same message type with the modelled fields cleared — and is merged back
// on save.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/dtype.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace fusionopt {

class Graph;
class Node;

// One dimension: a known size, a named symbol ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // non-empty when symbolic

  static Dim Known(int64_t size) { return Dim{size, {}}; }
  static Dim Symbol(std::string name) { return Dim{-1, std::move(name)}; }
  static Dim Unknown() { return Dim{}; }
  bool is_known() const { return value >= 0; }
  bool is_symbolic() const { return value < 0 && !symbol.empty(); }
  bool operator==(const Dim& other) const = default;
};

using Shape = std::vector<Dim>;

std::string ShapeToString(const Shape& shape);  // "[N,3,224,224]", "?" for unknown dims
// The dims of `shape` as numbers, when every one is known; nullopt otherwise.
std::optional<std::vector<int64_t>> KnownDims(const Shape& shape);

// The static type of a value. Tensors are modelled (dtype and optional shape); sequence,
// map and optional types are kept opaque as a serialized TypeProto in `opaque_type`.
struct ValueType {
  DataType dtype = DataType::kUndefined;
  std::optional<Shape> shape;  // nullopt: rank unknown
  std::string opaque_type;     // non-empty for non-tensor types
  std::string residual;        // TypeProto fields beyond elem_type/shape (denotations)

  bool is_tensor() const { return opaque_type.empty(); }
};

struct Use {
  Node* node = nullptr;
  int input_index = 0;
  bool operator==(const Use& other) const = default;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  Graph* graph() const { return graph_; }
  Node* producer() const { return producer_; }
  int producer_output_index() const { return producer_index_; }
  const std::vector<Use>& uses() const { return uses_; }

  ValueType& type() { return type_; }
  const ValueType& type() const { return type_; }
  DataType dtype() const { return type_.dtype; }
  const std::optional<Shape>& shape() const { return type_.shape; }

  // Initializers carry their tensor here; `constant()` is null for computed values.
  const TensorPtr& initializer() const { return initializer_; }
  bool is_initializer() const { return initializer_ != nullptr; }
  bool is_graph_input() const { return is_graph_input_; }
  bool is_graph_output() const;

  // Whether the model listed this value in value_info; such values are written back as
  // value_info, in declaration order.
  bool has_declared_type() const { return declaration_order_ >= 0; }
  void MarkDeclared();

  // The type exactly as the model declared it (input, output or value_info), kept apart
  // from `type()` — which inference refines — so an unoptimized model saves unchanged.
  // A declaration without a type (legal in ONNX) is declared with `type` nullopt.
  const std::optional<ValueType>& declared_type() const { return declared_type_; }
  bool is_declared() const { return is_declared_; }
  void set_declared_type(std::optional<ValueType> type) {
    declared_type_ = std::move(type);
    is_declared_ = true;
  }

  // Serialized ValueInfoProto residual (doc_string, metadata) for inputs/outputs/value_info.
  std::string& info_residual() { return info_residual_; }
  const std::string& info_residual() const { return info_residual_; }

 private:
  friend class Graph;
  friend class Node;
  void EraseUse(Node* node, int input_index);

  std::string name_;
  Graph* graph_ = nullptr;
  Node* producer_ = nullptr;
  int producer_index_ = -1;
  std::vector<Use> uses_;
  ValueType type_;
  TensorPtr initializer_;
  bool is_graph_input_ = false;
  int64_t declaration_order_ = -1;
  std::optional<ValueType> declared_type_;
  bool is_declared_ = false;
  std::string info_residual_;
  std::list<std::unique_ptr<Value>>::iterator position_;  // in graph_->values_: O(1) removal
};

// The dims of `value` as numbers, when its shape is known and complete; nullopt otherwise.
inline std::optional<std::vector<int64_t>> KnownDims(const Value& value) {
  return value.shape() ? KnownDims(*value.shape()) : std::nullopt;
}

enum class AttributeKind {
  kUndefined, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings, kTensors,
  kGraphs, kOpaque,  // kOpaque: sparse tensors / type protos, kept as serialized AttributeProto
};

struct Attribute {
  std::string name;
  AttributeKind kind = AttributeKind::kUndefined;
  int64_t i = 0;
  float f = 0;
  std::string s;
  TensorPtr t;
  std::unique_ptr<Graph> g;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::vector<TensorPtr> tensors;
  std::vector<std::unique_ptr<Graph>> graphs;
  std::string ref_attr_name;  // function attribute reference
  std::string residual;       // doc_string etc.; the whole AttributeProto for kOpaque

  // A copy of every field but the subgraphs (g, graphs): a copied subgraph needs its new
  // owner node, so callers that copy graph attributes attach those themselves.
  Attribute CopyWithoutGraphs() const;

  // The attributes rewrites write most: one int, one float, a list of ints.
  static Attribute Int(std::string name, int64_t value);
  static Attribute Float(std::string name, float value);
  static Attribute Ints(std::string name, std::vector<int64_t> values);
};

std::string_view NameOf(AttributeKind kind);

class Node {
 public:
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }  // "" is the default ONNX domain
  const std::string& name() const { return name_; }
  void set_name(std::string name);  // keeps the graph's node-name index current
  Graph* graph() const { return graph_; }

  // Omitted optional inputs/outputs (empty names in ONNX) are nullptr.
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }

  void ReplaceInput(int index, Value* value);  // keeps use lists consistent
  void AddInput(Value* value);

  const std::vector<Attribute>& attributes() const { return attributes_; }
  std::vector<Attribute>& mutable_attributes() { return attributes_; }
  const Attribute* FindAttribute(std::string_view name) const;
  int64_t GetInt(std::string_view name, int64_t fallback) const;
  float GetFloat(std::string_view name, float fallback) const;
  std::string GetString(std::string_view name, std::string fallback) const;
  std::optional<std::vector<int64_t>> GetInts(std::string_view name) const;
  void SetAttribute(Attribute attribute);  // replaces one of the same name

  std::string& residual() { return residual_; }
  const std::string& residual() const { return residual_; }

  // Subgraphs held by graph attributes, in attribute order.
  std::vector<Graph*> Subgraphs() const;

 private:
  friend class Graph;

  std::string op_type_;
  std::string domain_;
  std::string name_;
  Graph* graph_ = nullptr;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Attribute> attributes_;
  std::string residual_;
  std::list<std::unique_ptr<Node>>::iterator position_;  // in graph_->nodes_: O(1) removal
  uint64_t order_key_ = 0;                                // Graph::OrderKey
};

// "node 'name' (domain::Op)": how errors and logs name a node.
std::string DescribeNode(const Node& node);

class Graph {
 public:
  explicit Graph(Graph* parent = nullptr) : parent_(parent) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  Graph* parent() const { return parent_; }
  // The node whose attribute holds this subgraph (null for the main graph).
  Node* owner_node() const { return owner_node_; }
  void AttachTo(Node* owner);  // sets parent and owner node

  // Values. Names are unique within a graph and its enclosing scopes.
  Value* CreateValue(const std::string& name);
  Value* FindValue(std::string_view name) const;         // this graph only
  Value* LookupValue(std::string_view name) const;       // this graph, then enclosing ones
  // base, base_1, base_2 ... the first unused here and in enclosing scopes. Amortized constant
  // time in the main graph (the first suffix per base that may be free is kept, and lowered
  // when a name is freed); a subgraph looks from base each time.
  std::string UniqueName(std::string_view base) const;

  void AddInput(Value* value);
  void RemoveInput(Value* value);  // the value stays (an initializer, or read by nothing)
  void AddOutput(Value* value);
  void SetInitializer(Value* value, TensorPtr tensor);  // adds to the initializer list
  // Drops an unused initializer that is not a graph input or output, and its value.
  void RemoveInitializer(Value* value);
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  std::vector<Value*>& mutable_outputs() { return outputs_; }
  const std::vector<Value*>& initializers() const { return initializers_; }
  // Values with a declared type that are neither inputs nor outputs (value_info order).
  std::vector<Value*> IntermediateValuesInOrder() const;

  // Nodes, in the order they will be saved (kept topological by passes).
  Node* CreateNode(std::string op_type, std::string domain, const std::vector<Value*>& inputs,
                   const std::vector<Value*>& outputs, std::string name = {});
  void RemoveNode(Node* node);  // node must have no used outputs; its outputs are erased
  // Makes `to` the producer of `value` at output `index` (which must be empty), leaving the
  // old producer's slot empty: the value keeps its name, type, declaration and uses. How a
  // rewrite replaces nodes without renaming what the rest of the model reads.
  void TransferProducer(Value* value, Node* to, int index);
  // Leaves `value` without a producer (its producer's output slot becomes empty), so it can
  // become an initializer under its own name or be written by another node.
  void DetachProducer(Value* value);
  // Erases a value nothing produces or reads and the graph does not list (no input, output
  // or initializer).
  void EraseValue(Value* value);
  // Moves `node` to just before `anchor` in the node order (null anchor: to the end). The
  // caller keeps the order topological (or sorts afterwards).
  void MoveBefore(Node* node, Node* anchor);
  // The node after (before) `node` in the node order, or null at the end (start).
  Node* NodeAfter(const Node* node) const;
  Node* NodeBefore(const Node* node) const;
  // A number that grows along the node order: OrderKey(a) < OrderKey(b) exactly when `a`
  // comes before `b`. Kept current by every change of the order (a node moved between two
  // others takes a key between theirs; when none is left the graph is renumbered), so passes
  // can sort or compare nodes by position without walking the list.
  uint64_t OrderKey(const Node* node) const;
  // `stem`, or `stem_1`, `stem_2`, ...: the first name no node of this graph has. Amortized
  // constant time, so passes naming a node per rewrite stay linear: an index of node names is
  // built on first use and kept current from then on, with the first suffix per stem that
  // may be free.
  std::string UniqueNodeName(const std::string& stem) const;
  // Changes whenever nodes, edges, node order, attributes set through SetAttribute, graph
  // inputs or initializers do; unique across every graph of the process, so a cache of a
  // graph-wide analysis can tell it is stale. Types and attributes edited in place (type(),
  // mutable_attributes()) do not change it.
  uint64_t revision() const { return revision_; }
  // The node of this graph that is `node` or holds it in a nested subgraph (a reader inside
  // an If branch counts as its If), or null when `node` is outside this graph.
  const Node* EnclosingNode(const Node* node) const;
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  size_t num_nodes() const { return nodes_.size(); }

  // Rewrites every use of `from` (in this graph and nested subgraphs) to `to`.
  void ReplaceAllUses(Value* from, Value* to);

  // Sorts nodes topologically, keeping the current order where it already is (stable).
  // Fails with the names of the nodes on a cycle.
  Status SortTopologically();

  std::string& residual() { return residual_; }
  const std::string& residual() const { return residual_; }

  std::vector<const Value*> AllValues() const;

 private:
  friend class Node;
  friend class Value;

  std::string name_;
  Graph* parent_ = nullptr;
  Node* owner_node_ = nullptr;
  std::list<std::unique_ptr<Node>> nodes_;
  std::list<std::unique_ptr<Value>> values_;
  std::map<std::string, Value*, std::less<>> by_name_;
  int64_t next_declaration_ = 0;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> initializers_;
  std::string residual_;
  uint64_t revision_ = NextRevision();
  // UniqueNodeName's index, built on its first call (empty and unused until then).
  mutable bool node_names_indexed_ = false;
  mutable std::unordered_map<std::string, int64_t> node_name_counts_;   // name -> nodes so named
  mutable std::unordered_map<std::string, int64_t> first_free_suffix_;  // stem -> every lower one is taken
  mutable std::unordered_map<std::string, int64_t> first_free_value_suffix_;  // UniqueName's, alike

  static uint64_t NextRevision();
  void Touch() { revision_ = NextRevision(); }
  void RenumberOrderKeys();
  void AssignOrderKey(Node* node);  // `node` has just been placed: a key between its neighbours
  void CountNodeName(const std::string& name, int64_t delta);
  void ForgetValueName(const std::string& name);  // `name` is about to be free
};

struct OpsetImport {
  std::string domain;
  int64_t version = 0;
  std::string residual;  // serialized OperatorSetIdProto less version (keeps domain presence)
  bool operator==(const OpsetImport& other) const = default;
};

// A model-local function (FunctionProto). The body is a Graph whose inputs and outputs are
// the formal parameters; they carry types only where the function declared value_info, so
// consumers take types from the calling node's actual arguments. Body nodes may refer to
// the function's formal attributes through Attribute::ref_attr_name.
struct Function {
  std::string domain;
  std::string name;
  std::vector<std::string> attribute_names;  // formal attributes without defaults
  std::vector<OpsetImport> opsets;
  std::unique_ptr<Graph> body;
  std::string residual;  // FunctionProto fields the IR does not model (doc_string, defaults, ...)

  std::optional<int64_t> OpsetFor(std::string_view domain) const;
};

// A whole model: the main graph plus what surrounds it. Training info is not interpreted and
// travels inside `residual`.
struct Model {
  int64_t ir_version = 0;
  std::vector<OpsetImport> opsets;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<std::unique_ptr<Function>> functions;  // model-local functions, in model order
  std::unique_ptr<Graph> graph;
  std::string residual;  // serialized ModelProto without graph and the fields above

  // Folder the model was loaded from; external data paths resolve against it.
  std::string base_dir;
  // External-data files the loaded model referenced (locations as written in the model).
  std::vector<std::string> external_data_files;

  // Opset version imported for `domain` ("" and "ai.onnx" are the same), or nullopt.
  std::optional<int64_t> OpsetFor(std::string_view domain) const;
  // The model-local function a node of (domain, op_type) calls, or null.
  const Function* FindFunction(std::string_view domain, std::string_view name) const;
  Function* FindFunction(std::string_view domain, std::string_view name);
};

// Raises the model's IR version to at least `version`. Crossing version 4 changes what an
// initializer listed as a graph input means (IR 3 had to list every initializer as an input,
// and none could be fed; from IR 4 a listed one may be overridden by the caller), so those
// listings are dropped: the model keeps computing exactly what it did.
void RaiseIrVersion(Model& model, int64_t version);

// The op as messages and reports name it: "domain::Op", the default domain's ops bare.
std::string OpLabel(const Node& node);
// Whether `node` is of the default ONNX domain, however the model spells it ("" or "ai.onnx").
bool IsDefaultDomain(const Node& node);
// Whether `node` is an `op_type` op of the default domain; false for null.
bool IsDefaultOp(const Node* node, std::string_view op_type);

}  // namespace fusionopt
