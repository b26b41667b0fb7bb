#include "ir/graph.h"
#include "ir/numbered_name.h"

#include <utility>

#include <algorithm>
#include <atomic>
#include <queue>
#include <set>
#include <unordered_map>

namespace fusionopt {

std::optional<std::vector<int64_t>> KnownDims(const Shape& shape) {
  std::vector<int64_t> dims;
  dims.reserve(shape.size());
  for (const Dim& dim : shape) {
    if (!dim.is_known()) return std::nullopt;
    dims.push_back(dim.value);
  }
  return dims;
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ",";
    const Dim& dim = shape[i];
    out += dim.is_known() ? std::to_string(dim.value) : (dim.is_symbolic() ? dim.symbol : "?");
  }
  return out + "]";
}

std::string_view NameOf(AttributeKind kind) {
  switch (kind) {
    case AttributeKind::kFloat: return "float";
    case AttributeKind::kInt: return "int";
    case AttributeKind::kString: return "string";
    case AttributeKind::kTensor: return "tensor";
    case AttributeKind::kGraph: return "graph";
    case AttributeKind::kFloats: return "floats";
    case AttributeKind::kInts: return "ints";
    case AttributeKind::kStrings: return "strings";
    case AttributeKind::kTensors: return "tensors";
    case AttributeKind::kGraphs: return "graphs";
    case AttributeKind::kOpaque: return "opaque";
    case AttributeKind::kUndefined: break;
  }
  return "undefined";
}

// ---------------------------------------------------------------- Value

bool Value::is_graph_output() const {
  const auto& outputs = graph_->outputs();
  return std::find(outputs.begin(), outputs.end(), this) != outputs.end();
}

void Value::MarkDeclared() {
  if (declaration_order_ < 0) declaration_order_ = graph_->next_declaration_++;
}

// ---------------------------------------------------------------- Node

void Value::EraseUse(Node* node, int input_index) {
  auto it = std::find(uses_.begin(), uses_.end(), Use{node, input_index});
  FUSIONOPT_CHECK(it != uses_.end(), "use list out of sync for " + name_);
  uses_.erase(it);
}

void Node::ReplaceInput(int index, Value* value) {
  FUSIONOPT_CHECK(index >= 0 && static_cast<size_t>(index) < inputs_.size(), "input index");
  if (inputs_[index] != nullptr) inputs_[index]->EraseUse(this, index);
  inputs_[index] = value;
  if (value != nullptr) value->uses_.push_back(Use{this, index});
  if (graph_ != nullptr) graph_->Touch();
}

void Node::AddInput(Value* value) {
  inputs_.push_back(value);
  if (value != nullptr) value->uses_.push_back(Use{this, static_cast<int>(inputs_.size() - 1)});
  if (graph_ != nullptr) graph_->Touch();
}

void Node::set_name(std::string name) {
  if (graph_ != nullptr) {
    graph_->CountNodeName(name_, -1);
    graph_->CountNodeName(name, +1);
  }
  name_ = std::move(name);
}

const Attribute* Node::FindAttribute(std::string_view name) const {
  for (const auto& attribute : attributes_) {
    if (attribute.name == name) return &attribute;
  }
  return nullptr;
}

int64_t Node::GetInt(std::string_view name, int64_t fallback) const {
  const Attribute* attribute = FindAttribute(name);
  return attribute != nullptr && attribute->kind == AttributeKind::kInt ? attribute->i : fallback;
}

float Node::GetFloat(std::string_view name, float fallback) const {
  const Attribute* attribute = FindAttribute(name);
  return attribute != nullptr && attribute->kind == AttributeKind::kFloat ? attribute->f
                                                                           : fallback;
}

std::string Node::GetString(std::string_view name, std::string fallback) const {
  const Attribute* attribute = FindAttribute(name);
  return attribute != nullptr && attribute->kind == AttributeKind::kString ? attribute->s
                                                                            : fallback;
}

std::optional<std::vector<int64_t>> Node::GetInts(std::string_view name) const {
  const Attribute* attribute = FindAttribute(name);
  if (attribute == nullptr || attribute->kind != AttributeKind::kInts) return std::nullopt;
  return attribute->ints;
}

Attribute Attribute::Int(std::string name, int64_t value) {
  Attribute attribute;
  attribute.name = std::move(name);
  attribute.kind = AttributeKind::kInt;
  attribute.i = value;
  return attribute;
}

Attribute Attribute::Float(std::string name, float value) {
  Attribute attribute;
  attribute.name = std::move(name);
  attribute.kind = AttributeKind::kFloat;
  attribute.f = value;
  return attribute;
}

Attribute Attribute::Ints(std::string name, std::vector<int64_t> values) {
  Attribute attribute;
  attribute.name = std::move(name);
  attribute.kind = AttributeKind::kInts;
  attribute.ints = std::move(values);
  return attribute;
}

Attribute Attribute::CopyWithoutGraphs() const {
  Attribute copy;
  copy.name = name;
  copy.kind = kind;
  copy.i = i;
  copy.f = f;
  copy.s = s;
  copy.t = t;
  copy.ints = ints;
  copy.floats = floats;
  copy.strings = strings;
  copy.tensors = tensors;
  copy.ref_attr_name = ref_attr_name;
  copy.residual = residual;
  return copy;
}

void Node::SetAttribute(Attribute attribute) {
  if (graph_ != nullptr) graph_->Touch();
  for (auto& existing : attributes_) {
    if (existing.name == attribute.name) {
      existing = std::move(attribute);
      return;
    }
  }
  attributes_.push_back(std::move(attribute));
}

std::vector<Graph*> Node::Subgraphs() const {
  std::vector<Graph*> out;
  for (const auto& attribute : attributes_) {
    if (attribute.g) out.push_back(attribute.g.get());
    for (const auto& graph : attribute.graphs) out.push_back(graph.get());
  }
  return out;
}

std::string DescribeNode(const Node& node) {
  return (node.name().empty() ? "node" : "node '" + node.name() + "'") + " (" + OpLabel(node) + ")";
}

// ---------------------------------------------------------------- Graph

void Graph::AttachTo(Node* owner) {
  owner_node_ = owner;
  parent_ = owner->graph();
}

Value* Graph::CreateValue(const std::string& name) {
  FUSIONOPT_CHECK(name.empty() || by_name_.find(name) == by_name_.end(),
                  "duplicate value name " + name);
  auto value = std::make_unique<Value>();
  value->name_ = name;
  value->graph_ = this;
  Value* raw = value.get();
  values_.push_back(std::move(value));
  raw->position_ = std::prev(values_.end());
  if (!name.empty()) by_name_.emplace(name, raw);
  return raw;
}

Value* Graph::FindValue(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Value* Graph::LookupValue(std::string_view name) const {
  for (const Graph* scope = this; scope != nullptr; scope = scope->parent_) {
    if (Value* value = scope->FindValue(name)) return value;
  }
  return nullptr;
}

std::string Graph::UniqueName(std::string_view base) const {
  auto numbered = [&](int64_t suffix) { return NumberedName(base, suffix); };
  if (parent_ != nullptr) {  // enclosing scopes' names count, and their changes are not seen here
    int64_t suffix = 0;
    while (LookupValue(numbered(suffix)) != nullptr) ++suffix;
    return numbered(suffix);
  }
  int64_t& suffix = first_free_value_suffix_[std::string(base)];
  while (FindValue(numbered(suffix)) != nullptr) ++suffix;
  return numbered(suffix);
}

void Graph::AddInput(Value* value) {
  FUSIONOPT_CHECK(value->graph_ == this, "graph input must belong to the graph");
  value->is_graph_input_ = true;
  inputs_.push_back(value);
  Touch();
}

void Graph::RemoveInput(Value* value) {
  auto it = std::find(inputs_.begin(), inputs_.end(), value);
  FUSIONOPT_CHECK(it != inputs_.end(), "graph input " + value->name());
  inputs_.erase(it);
  value->is_graph_input_ = false;
  Touch();
}

void Graph::AddOutput(Value* value) {
  outputs_.push_back(value);
  Touch();
}

void Graph::SetInitializer(Value* value, TensorPtr tensor) {
  FUSIONOPT_CHECK(value->graph_ == this, "initializer must belong to the graph");
  if (value->initializer_ == nullptr) initializers_.push_back(value);
  value->initializer_ = std::move(tensor);
  Touch();
}

void Graph::RemoveInitializer(Value* value) {
  FUSIONOPT_CHECK(value->graph_ == this && value->is_initializer(), "initializer of this graph");
  FUSIONOPT_CHECK(value->uses_.empty() && !value->is_graph_input_ && !value->is_graph_output(),
                  "removing initializer " + value->name() + " that is still used");
  initializers_.erase(std::find(initializers_.begin(), initializers_.end(), value));
  ForgetValueName(value->name_);
  by_name_.erase(value->name_);
  values_.erase(value->position_);
  Touch();
}

std::vector<Value*> Graph::IntermediateValuesInOrder() const {
  std::vector<Value*> out;
  for (const auto& value : values_) {
    if (value->has_declared_type() && !value->is_graph_input_ && !value->is_graph_output()) {
      out.push_back(value.get());
    }
  }
  std::sort(out.begin(), out.end(), [](const Value* a, const Value* b) {
    return a->declaration_order_ < b->declaration_order_;
  });
  return out;
}

Node* Graph::CreateNode(std::string op_type, std::string domain,
                        const std::vector<Value*>& inputs, const std::vector<Value*>& outputs,
                        std::string name) {
  auto node = std::make_unique<Node>();
  node->op_type_ = std::move(op_type);
  node->domain_ = std::move(domain);
  node->name_ = std::move(name);
  node->graph_ = this;
  Node* raw = node.get();
  for (Value* input : inputs) raw->AddInput(input);
  for (size_t i = 0; i < outputs.size(); ++i) {
    Value* output = outputs[i];
    if (output != nullptr) {
      FUSIONOPT_CHECK(output->graph_ == this && output->producer_ == nullptr,
                      "output " + output->name() + " already has a producer");
      output->producer_ = raw;
      output->producer_index_ = static_cast<int>(i);
    }
    raw->outputs_.push_back(output);
  }
  nodes_.push_back(std::move(node));
  raw->position_ = std::prev(nodes_.end());
  AssignOrderKey(raw);
  CountNodeName(raw->name_, +1);
  Touch();
  return raw;
}

void Graph::RemoveNode(Node* node) {
  for (size_t i = 0; i < node->inputs_.size(); ++i) {
    if (node->inputs_[i] != nullptr) node->inputs_[i]->EraseUse(node, static_cast<int>(i));
  }
  std::set<Value*> dropped;
  for (Value* output : node->outputs_) {
    if (output == nullptr) continue;
    FUSIONOPT_CHECK(output->uses_.empty() && !output->is_graph_output(),
                    "removing node whose output " + output->name() + " is still used");
    output->producer_ = nullptr;
    dropped.insert(output);
  }
  for (Value* value : dropped) {
    ForgetValueName(value->name_);
  by_name_.erase(value->name_);
    values_.erase(value->position_);
  }
  CountNodeName(node->name_, -1);
  nodes_.erase(node->position_);
  Touch();
}

void Graph::TransferProducer(Value* value, Node* to, int index) {
  FUSIONOPT_CHECK(value->graph_ == this && to->graph_ == this, "value and node of this graph");
  FUSIONOPT_CHECK(index >= 0 && static_cast<size_t>(index) < to->outputs_.size() &&
                      to->outputs_[static_cast<size_t>(index)] == nullptr,
                  "an empty output slot");
  DetachProducer(value);
  value->producer_ = to;
  value->producer_index_ = index;
  to->outputs_[static_cast<size_t>(index)] = value;
  Touch();
}

void Graph::DetachProducer(Value* value) {
  FUSIONOPT_CHECK(value->graph_ == this, "value of this graph");
  if (value->producer_ == nullptr) return;
  value->producer_->outputs_[static_cast<size_t>(value->producer_index_)] = nullptr;
  value->producer_ = nullptr;
  value->producer_index_ = -1;
  Touch();
}

void Graph::EraseValue(Value* value) {
  FUSIONOPT_CHECK(value->graph_ == this && value->producer_ == nullptr && value->uses_.empty() &&
                      !value->is_graph_input_ && !value->is_graph_output() && !value->is_initializer(),
                  "erasing value " + value->name() + " that the graph still lists, produces or reads");
  ForgetValueName(value->name_);
  by_name_.erase(value->name_);
  values_.erase(value->position_);
  Touch();
}

void Graph::MoveBefore(Node* node, Node* anchor) {
  FUSIONOPT_CHECK(node->graph_ == this && (anchor == nullptr || anchor->graph_ == this), "nodes of this graph");
  nodes_.splice(anchor == nullptr ? nodes_.end() : anchor->position_, nodes_, node->position_);
  AssignOrderKey(node);
  Touch();
}

namespace {
// Room for 2^32 nodes after a renumbering, and 32 halvings of a gap before the next one.
constexpr uint64_t kOrderKeyGap = uint64_t{1} << 32;
}  // namespace

void Graph::AssignOrderKey(Node* node) {
  const Node* before = NodeBefore(node);
  const Node* after = NodeAfter(node);
  const uint64_t low = before == nullptr ? 0 : before->order_key_;
  if (after == nullptr) {
    if (low <= UINT64_MAX - kOrderKeyGap) {
      node->order_key_ = low + kOrderKeyGap;
      return;
    }
  } else if (after->order_key_ - low >= 2) {
    node->order_key_ = low + (after->order_key_ - low) / 2;
    return;
  }
  RenumberOrderKeys();
}

void Graph::RenumberOrderKeys() {
  uint64_t key = 0;
  for (auto& node : nodes_) node->order_key_ = key += kOrderKeyGap;
}

uint64_t Graph::OrderKey(const Node* node) const {
  FUSIONOPT_CHECK(node->graph_ == this, "node of this graph");
  return node->order_key_;
}

const Node* Graph::EnclosingNode(const Node* node) const {
  while (node != nullptr && node->graph() != this) node = node->graph()->owner_node();
  return node;
}

Node* Graph::NodeAfter(const Node* node) const {
  FUSIONOPT_CHECK(node->graph_ == this, "node of this graph");
  auto next = std::next(node->position_);
  return next == nodes_.end() ? nullptr : next->get();
}

Node* Graph::NodeBefore(const Node* node) const {
  FUSIONOPT_CHECK(node->graph_ == this, "node of this graph");
  return node->position_ == nodes_.begin() ? nullptr : std::prev(node->position_)->get();
}

uint64_t Graph::NextRevision() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

std::string Graph::UniqueNodeName(const std::string& stem) const {
  if (!node_names_indexed_) {
    for (const auto& node : nodes_) ++node_name_counts_[node->name_];
    node_names_indexed_ = true;
  }
  int64_t& suffix = first_free_suffix_[stem];
  for (;; ++suffix) {
    std::string name = NumberedName(stem, suffix);
    if (!node_name_counts_.count(name)) return name;
  }
}


void Graph::ForgetValueName(const std::string& name) {
  if (first_free_value_suffix_.empty()) return;
  // As for node names: a base whose search had moved past the freed name looks from it again.
  if (auto as_base = first_free_value_suffix_.find(name); as_base != first_free_value_suffix_.end()) {
    as_base->second = 0;
  }
  auto [base, suffix] = SplitNumberedName(name);
  if (suffix == 0) return;
  auto numbered = first_free_value_suffix_.find(std::string(base));
  if (numbered != first_free_value_suffix_.end() && numbered->second > suffix) numbered->second = suffix;
}

void Graph::CountNodeName(const std::string& name, int64_t delta) {
  if (!node_names_indexed_) return;
  auto it = node_name_counts_.try_emplace(name, 0).first;
  it->second += delta;
  if (it->second > 0) return;
  node_name_counts_.erase(it);
  // The name is free again: a stem whose search had moved past it must look from it again.
  if (auto as_stem = first_free_suffix_.find(name); as_stem != first_free_suffix_.end()) as_stem->second = 0;
  auto [stem, suffix] = SplitNumberedName(name);
  if (suffix == 0) return;
  auto numbered = first_free_suffix_.find(std::string(stem));
  if (numbered != first_free_suffix_.end() && numbered->second > suffix) numbered->second = suffix;
}

void Graph::ReplaceAllUses(Value* from, Value* to) {
  std::vector<Use> uses = from->uses_;
  for (const Use& use : uses) use.node->ReplaceInput(use.input_index, to);
  for (auto& output : outputs_) {
    if (output == from) output = to;
  }
}

namespace {


// Nodes of `graph` whose results `node` (or anything in its subgraphs) reads. Edges inside
// a subgraph map back to `top` itself and are not dependencies.
void CollectProducersIn(const Graph* graph, const Node* top, const Node* node,
                        std::vector<const Node*>& out) {
  for (const Value* input : node->inputs()) {
    if (input == nullptr || input->producer() == nullptr) continue;
    const Node* producer = graph->EnclosingNode(input->producer());
    // An edge between two nodes inside `top`'s subgraphs maps back to `top` and is not a
    // dependency; `top` reading its own output (directly or from a subgraph) is a cycle.
    bool internal_edge = producer == top && input->producer() != top;
    if (producer != nullptr && !internal_edge) out.push_back(producer);
  }
  for (const Graph* subgraph : node->Subgraphs()) {
    for (const auto& inner : subgraph->nodes()) CollectProducersIn(graph, top, inner.get(), out);
  }
}

}  // namespace

Status Graph::SortTopologically() {
  std::unordered_map<const Node*, size_t> position;
  std::vector<Node*> order;
  for (const auto& node : nodes_) {
    position[node.get()] = order.size();
    order.push_back(node.get());
  }
  std::vector<std::vector<size_t>> consumers(order.size());
  std::vector<size_t> pending(order.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    std::vector<const Node*> producers;
    CollectProducersIn(this, order[i], order[i], producers);
    std::set<size_t> unique;
    for (const Node* producer : producers) {
      if (producer != order[i]) unique.insert(position.at(producer));
      else return InvalidModel("node '" + order[i]->name() + "' (" + order[i]->op_type() +
                               ") consumes its own output");
    }
    pending[i] = unique.size();
    for (size_t p : unique) consumers[p].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < order.size(); ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<size_t> sorted;
  while (!ready.empty()) {
    size_t next = ready.top();
    ready.pop();
    sorted.push_back(next);
    for (size_t consumer : consumers[next]) {
      if (--pending[consumer] == 0) ready.push(consumer);
    }
  }
  if (sorted.size() != order.size()) {
    std::string names;
    for (size_t i = 0; i < order.size(); ++i) {
      if (pending[i] == 0) continue;
      if (!names.empty()) names += ", ";
      names += "'" + (order[i]->name().empty() ? order[i]->op_type() : order[i]->name()) + "'";
      if (names.size() > 200) { names += ", ..."; break; }
    }
    return InvalidModel("graph '" + name_ + "' has a cycle through nodes " + names);
  }
  std::vector<std::unique_ptr<Node>> owned;
  for (auto& node : nodes_) owned.push_back(std::move(node));
  nodes_.clear();
  for (size_t index : sorted) {
    nodes_.push_back(std::move(owned[index]));
    nodes_.back()->position_ = std::prev(nodes_.end());
  }
  RenumberOrderKeys();
  Touch();
  return Status::Ok();
}

std::vector<const Value*> Graph::AllValues() const {
  std::vector<const Value*> out;
  for (const auto& value : values_) out.push_back(value.get());
  return out;
}

// ---------------------------------------------------------------- Model

namespace {

std::optional<int64_t> FindOpset(const std::vector<OpsetImport>& opsets, std::string_view domain) {
  auto canonical = [](std::string_view d) { return d == "ai.onnx" ? std::string_view{} : d; };
  for (const auto& opset : opsets) {
    if (canonical(opset.domain) == canonical(domain)) return opset.version;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> Function::OpsetFor(std::string_view domain) const { return FindOpset(opsets, domain); }

std::optional<int64_t> Model::OpsetFor(std::string_view domain) const { return FindOpset(opsets, domain); }

const Function* Model::FindFunction(std::string_view domain, std::string_view name) const {
  for (const auto& function : functions) {
    if (function->domain == domain && function->name == name) return function.get();
  }
  return nullptr;
}

Function* Model::FindFunction(std::string_view domain, std::string_view name) {
  return const_cast<Function*>(std::as_const(*this).FindFunction(domain, name));
}

void RaiseIrVersion(Model& model, int64_t version) {
  if (model.ir_version >= version) return;
  if (model.ir_version < 4 && version >= 4) {
    std::vector<Value*> listed;
    for (Value* input : model.graph->inputs()) {
      if (input->is_initializer()) listed.push_back(input);
    }
    for (Value* input : listed) model.graph->RemoveInput(input);
  }
  model.ir_version = version;
}

std::string OpLabel(const Node& node) {
  return IsDefaultDomain(node) ? node.op_type() : node.domain() + "::" + node.op_type();
}

bool IsDefaultDomain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool IsDefaultOp(const Node* node, std::string_view op_type) {
  return node != nullptr && node->op_type() == op_type && IsDefaultDomain(*node);
}

}  // namespace fusionopt
