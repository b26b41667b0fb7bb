#include "passes/cost_model/cost_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "ir/constant_value.h"
#include "ir/function_body.h"
#include "shape_inference/shape_inference.h"
#include "passes/cost_model/op_flops.h"
#include "passes/util/outline.h"

namespace fusionopt::passes {
namespace {

// Per-thread registers a generated kernel spends on indices, strides and loop state.
constexpr int64_t kBaseRegisters = 16;
// Registers a reduction or window member holds while it runs: its running value and the
// temporaries of a warp-shuffle tree.
constexpr int64_t kReductionScratchRegisters = 4;
// Fused calls inside fused bodies are costed through their bodies; deeper than this is a
// function calling itself.
constexpr int kMaxCallDepth = 8;

using cost::Amount;
using cost::ShapeLookup;

KernelCost Unknown(std::string why) {
  KernelCost cost;
  cost.known = false;
  cost.unknown_reason = std::move(why);
  return cost;
}

KernelCost LaunchFree() {
  KernelCost cost;
  cost.launches = 0;
  return cost;
}


// Registers one element of `value` occupies: two for 64-bit types.
int64_t RegistersOf(const Value& value) { return BitsOf(value.dtype()) > 32 ? 2 : 1; }

// A value a kernel holds as an immediate rather than in a register: a scalar constant.
bool IsImmediate(const Value& value) {
  if (InlinableConstant(value) != nullptr) return true;
  const Node* producer = value.producer();
  if (producer == nullptr) return false;
  TensorPtr constant = ConstantNodeValue(*producer);
  return constant != nullptr && constant->NumElements() <= 1;
}

// Members in graph order, duplicates kept; a node of another graph than the first member's
// sorts first.
std::vector<const Node*> MembersInGraphOrder(const std::vector<const Node*>& members) {
  std::vector<const Node*> ordered = members;
  if (ordered.empty()) return ordered;
  const Graph& graph = *ordered.front()->graph();
  auto key = [&](const Node* node) { return node->graph() == &graph ? graph.OrderKey(node) : 0; };
  std::stable_sort(ordered.begin(), ordered.end(), [&](const Node* a, const Node* b) { return key(a) < key(b); });
  return ordered;
}

std::vector<const Node*> AsConst(const std::vector<Node*>& members) { return {members.begin(), members.end()}; }

// A function body copied and typed for one call. Constant arguments become initializers of
// the copy, so shape inference reads them (a Reshape's target shape) and the launch-free rule
// sees what the original graph saw.
using TypedBody = Decided<std::unique_ptr<Graph>>;

TypedBody TypeBodyForCall(const Model& model, const Node& call, const ShapeLookup& shapes) {
  const Function* function = model.FindFunction(call.domain(), call.op_type());
  if (function == nullptr || function->body == nullptr) {
    return WhyNot("calls no model-local function " + call.domain() + "::" + call.op_type());
  }
  std::unique_ptr<Graph> body = InstantiateFunctionBody(*function, call);
  std::vector<Value*> parameters = body->inputs();
  for (size_t i = 0; i < parameters.size() && i < call.inputs().size(); ++i) {
    const Value* argument = call.input(i);
    if (argument == nullptr) continue;
    Value* parameter = parameters[i];
    const ValueType& given = argument->type();
    if (!given.is_tensor() || given.dtype != DataType::kUndefined || given.shape) parameter->type() = given;
    // The argument's shape at these sizes: symbols left in the body would not cancel against
    // the sized Reshape targets below.
    if (const Shape* shape = shapes.SizedShapeOf(*argument)) parameter->type().shape = *shape;
    TensorPtr constant = ConstantValueOf(*argument, InitializerRuleOf(model));
    // Shape arithmetic at these sizes (a Reshape target the exporter computes) is as good as a
    // constant to the body: its Reshapes then know their output dims.
    if (constant == nullptr && argument->dtype() == DataType::kInt64) {
      if (const KnownIntegers* known = shapes.IntegersOf(*argument)) {
        std::vector<int64_t> dims;
        if (!known->scalar) dims.push_back(static_cast<int64_t>(known->values.size()));
        constant = std::make_shared<Tensor>(Tensor::FromValues(DataType::kInt64, dims, known->values));
      }
    }
    if (constant != nullptr) {
      Value* folded = body->CreateValue(body->UniqueName(parameter->name() + "_constant"));
      folded->type() = parameter->type();
      body->SetInitializer(folded, constant);
      body->ReplaceAllUses(parameter, folded);
    }
  }
  InferShapes(*body, model);
  // The call's results are typed by the model's own inference; they refine the copy's.
  for (size_t i = 0; i < body->outputs().size() && i < call.outputs().size(); ++i) {
    const Value* result = call.output(i);
    if (result != nullptr && result->shape() && !body->outputs()[i]->shape()) body->outputs()[i]->type() = result->type();
  }
  return body;
}

}  // namespace

// ---------------------------------------------------------------- public helpers

Result<SymbolSizes> ParseDimSettings(const std::vector<std::string>& settings) {
  SymbolSizes sizes;
  for (const std::string& setting : settings) {
    size_t equals = setting.find('=');
    int64_t size = 0;
    bool parsed = false;
    if (equals != std::string::npos && equals > 0) {
      const char* begin = setting.data() + equals + 1;
      const char* end = setting.data() + setting.size();
      auto [stop, error] = std::from_chars(begin, end, size);
      parsed = error == std::errc() && stop == end && begin != end && size >= 1;
    }
    if (!parsed) return UsageError("--dim '" + setting + "' is not SYMBOL=N with N >= 1");
    sizes[setting.substr(0, equals)] = size;
  }
  return sizes;
}

namespace {

void CollectSymbols(const Graph& graph, std::set<std::string>& symbols) {
  for (const Value* value : graph.AllValues()) {
    if (!value->shape()) continue;
    for (const Dim& dim : *value->shape()) {
      if (dim.is_symbolic()) symbols.insert(dim.symbol);
    }
  }
  for (const auto& node : graph.nodes()) {
    for (const Graph* subgraph : node->Subgraphs()) CollectSymbols(*subgraph, symbols);
  }
}

}  // namespace

std::set<std::string> SymbolsOf(const Model& model) {
  std::set<std::string> symbols;
  CollectSymbols(*model.graph, symbols);
  return symbols;
}

int64_t SizeOfSymbol(const SymbolSizes& sizes, std::string_view symbol) {
  if (auto it = sizes.find(symbol); it != sizes.end()) return it->second;
  if (symbol.find('*') == std::string_view::npos) return 1;
  int64_t product = 1;
  for (size_t begin = 0; begin <= symbol.size();) {
    size_t end = symbol.find('*', begin);
    if (end == std::string_view::npos) end = symbol.size();
    std::string_view factor = symbol.substr(begin, end - begin);
    while (!factor.empty() && factor.front() == ' ') factor.remove_prefix(1);
    while (!factor.empty() && factor.back() == ' ') factor.remove_suffix(1);
    int64_t value = 0;
    const auto [rest, error] = std::from_chars(factor.data(), factor.data() + factor.size(), value);
    if (error == std::errc() && rest == factor.data() + factor.size()) {
      product *= value;
    } else if (auto it = sizes.find(factor); it != sizes.end()) {
      product *= it->second;
    } else {
      return 1;  // a factor the settings do not size: the whole dim is unknown
    }
    begin = end + 1;
  }
  return product;
}

Status CheckDimSymbols(const Model& model, const SymbolSizes& dims) {
  std::set<std::string> symbols = SymbolsOf(model);
  for (const auto& [symbol, size] : dims) {
    if (symbols.count(symbol)) continue;
    std::string known;
    for (const std::string& name : symbols) known += (known.empty() ? "" : ", ") + name;
    return UsageError("--dim " + symbol + ": the model has no symbolic dim '" + symbol + "' (its symbols: " +
                      (known.empty() ? "none" : known) + ")");
  }
  return Status::Ok();
}

std::string_view NameOf(Bound bound) { return bound == Bound::kCompute ? "compute" : "memory"; }

void Accumulate(KernelCost& total, const KernelCost& part) {
  if (!part.known && total.known) {
    total.known = false;
    total.unknown_reason = part.unknown_reason;
  }
  total.launches += part.launches;
  total.flops += part.flops;
  total.bytes_read += part.bytes_read;
  total.bytes_written += part.bytes_written;
  total.registers = std::max(total.registers, part.registers);
  total.seconds += part.seconds;
}

// ---------------------------------------------------------------- CostModel

CostModel::CostModel(const Model& model, TargetProfile profile, SymbolSizes symbols)
    : model_(model), profile_(std::move(profile)), symbols_(std::move(symbols)) {
  FUSIONOPT_CHECK(profile_.peak_flops > 0 && profile_.bandwidth > 0 && profile_.register_budget_per_thread > 0,
                  "target profile '" + profile_.name + "' has positive figures");
}

CostModel::~CostModel() = default;
CostModel::CostModel(CostModel&&) noexcept = default;

cost::ShapeLookup CostModel::Shapes() const {
  return ShapeLookup(symbols_, model_.graph.get(), [this] { return &Concrete(); });
}

const cost::ConcreteValues& CostModel::Concrete() const {
  if (concrete_ != nullptr) return *concrete_;
  concrete_ = std::make_unique<cost::ConcreteValues>();
  // Every symbol at its size, intermediates included: a Shape of an intermediate that still
  // said `sequence` would feed `sequence - sequence` to a Slice, which symbolic data cannot do.
  std::unique_ptr<Graph> copy = CopyGraph(*model_.graph);
  for (const Value* value : copy->AllValues()) {
    Value* sized = copy->FindValue(value->name());
    if (sized == nullptr || !sized->shape()) continue;
    for (Dim& dim : *sized->type().shape) {
      if (!dim.is_symbolic()) continue;
      dim = Dim::Known(SizeOfSymbol(symbols_, dim.symbol));
    }
  }
  ShapeInferenceReport report = InferShapes(*copy, model_);
  for (const Value* value : copy->AllValues()) {
    if (value->shape()) concrete_->shapes.emplace(value->name(), *value->shape());
  }
  concrete_->integers = std::move(report.known_integers);
  return *concrete_;
}

void CostModel::ForgetConcreteShapes() {
  concrete_.reset();
  // Shape inference retypes values in place, which graph revisions do not track.
  launch_free_.clear();
}

double CostModel::RooflineSeconds(double flops, double bytes) const {
  return std::max(flops / profile_.peak_flops, bytes / profile_.bandwidth);
}

Bound CostModel::BoundOf(const KernelCost& cost) const {
  return cost.flops / profile_.peak_flops > cost.bytes() / profile_.bandwidth ? Bound::kCompute : Bound::kMemory;
}

void CostModel::FinishKernel(KernelCost& cost) const {
  if (!cost.known) return;
  cost.seconds = RooflineSeconds(cost.flops, cost.bytes()) * cost.register_penalty +
                 static_cast<double>(cost.launches) * profile_.launch_overhead_s;
}

KernelCost CostModel::NodeCost(const Node& node) const { return CostWithin(node, LaunchFreeIn(*node.graph()), 0); }

const LaunchFreeNodes& CostModel::LaunchFreeIn(const Graph& graph) const {
  const InitializerRule initializers = InitializerRuleOf(model_);
  LaunchFreeCache& cached = launch_free_[&graph];
  if (cached.revision != graph.revision() || cached.initializers != initializers) {
    cached.nodes = FindLaunchFreeNodes(graph, initializers);
    ++launch_free_scans_;
    cached.revision = graph.revision();
    cached.initializers = initializers;
  }
  return cached.nodes;
}

bool CostModel::ReplacingKeepsLaunchFree(const Graph& graph, const std::vector<Node*>& members) const {
  auto it = launch_free_.find(&graph);
  if (it == launch_free_.end() || it->second.revision != graph.revision()) return false;
  return std::none_of(members.begin(), members.end(), [&](const Node* member) { return it->second.nodes.contains(member); });
}

void CostModel::AdoptRevision(const Graph& graph, uint64_t revision_before) const {
  auto it = launch_free_.find(&graph);
  if (it != launch_free_.end() && it->second.revision == revision_before) it->second.revision = graph.revision();
}

void CostModel::AdoptRewrite(const Graph& graph, uint64_t revision_before, const std::vector<Node*>& added,
                             const std::vector<const Node*>& removed) const {
  auto it = launch_free_.find(&graph);
  if (it == launch_free_.end() || it->second.revision != revision_before) return;
  LaunchFreeCache& cached = it->second;
  for (const Node* node : removed) {
    cached.nodes.load_time.erase(node);
    cached.nodes.host.erase(node);
  }
  const std::unordered_set<const Node*> added_set(added.begin(), added.end());
  for (const Node* node : MembersInGraphOrder(AsConst(added))) {
    if (!ClassifyLaunchFree(graph, *node, cached.initializers, cached.nodes)) continue;
    for (const Value* output : node->outputs()) {
      if (output == nullptr) continue;
      const bool read_outside = output->is_graph_output() || std::any_of(output->uses().begin(), output->uses().end(),
                                                                          [&](const Use& use) { return !added_set.count(use.node); });
      if (read_outside) {
        launch_free_.erase(it);
        return;
      }
    }
  }
  cached.revision = graph.revision();
}

KernelCost CostModel::CostWithin(const Node& node, const LaunchFreeNodes& free, int depth) const {
  if (!LaunchesKernel(node) || free.contains(&node)) return LaunchFree();
  if (ClassifyOp(node) == OpClass::kFused) return FusedCallCost(node, /*as_separate_kernels=*/false, depth);
  KernelCost cost;
  ShapeLookup shapes = Shapes();
  Amount flops = cost::StandardFlops(node, shapes);
  if (!flops.known) return Unknown(flops.why);
  cost.flops = flops.value;
  std::unordered_set<const Value*> seen;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const Value* input = node.input(i);
    if (input == nullptr || !seen.insert(input).second) continue;
    Amount bytes = cost::InputBytes(node, i, shapes);
    if (!bytes.known) return Unknown(bytes.why);
    cost.bytes_read += bytes.value;
  }
  for (const Value* output : node.outputs()) {
    if (output == nullptr || !seen.insert(output).second) continue;
    Amount bytes = shapes.Bytes(output);
    if (!bytes.known) return Unknown(bytes.why);
    cost.bytes_written += bytes.value;
  }
  FinishKernel(cost);
  return cost;
}

KernelCost CostModel::FusedCallCost(const Node& call, bool as_separate_kernels, int depth) const {
  if (depth >= kMaxCallDepth) return Unknown("fused calls nested deeper than " + std::to_string(kMaxCallDepth));
  TypedBody body = TypeBodyForCall(model_, call, Shapes());
  if (!body) return Unknown(body.why_not().reason());
  std::vector<const Node*> nodes;
  for (const auto& node : (*body)->nodes()) nodes.push_back(node.get());
  if (as_separate_kernels) {
    KernelCost total = LaunchFree();
    LaunchFreeNodes free = FindLaunchFreeNodes(**body, InitializerRule::kAllConstant);
    for (const Node* node : nodes) Accumulate(total, CostWithin(*node, free, depth + 1));
    return total;
  }
  if (nodes.empty()) return LaunchFree();
  return GroupCostAt(nodes, depth + 1);
}

KernelCost CostModel::UnfusedCallCost(const Node& call) const {
  if (ClassifyOp(call) != OpClass::kFused) return Unknown(DescribeNode(call) + " calls no fused function");
  return FusedCallCost(call, /*as_separate_kernels=*/true, 0);
}

KernelCost CostModel::GroupCost(const std::vector<const Node*>& members) const { return GroupCostAt(members, 0); }
KernelCost CostModel::GroupCost(const std::vector<Node*>& members) const { return GroupCostAt(AsConst(members), 0); }

KernelCost CostModel::GroupCostAt(const std::vector<const Node*>& members, int depth) const {
  if (members.empty()) return LaunchFree();
  std::unordered_set<const Node*> member_set(members.begin(), members.end());
  ShapeLookup shapes = Shapes();
  KernelCost cost;
  // FLOPs: each member's, over the group's one index space when every member is elementwise.
  // (Constant nodes a body holds for its scalars are no members of the index space.)
  bool elementwise = std::all_of(members.begin(), members.end(), [](const Node* node) {
    OpClass op_class = ClassifyOp(*node);
    return op_class == OpClass::kElementwise || op_class == OpClass::kShape;
  });
  double index_space = 0;
  if (elementwise) {
    for (const Node* member : members) {
      if (ClassifyOp(*member) != OpClass::kElementwise) continue;
      Amount elements = shapes.Elements(member->output(0));
      if (!elements.known) return Unknown(elements.why);
      index_space = std::max(index_space, elements.value);
    }
  }
  for (const Node* member : members) {
    if (ClassifyOp(*member) == OpClass::kFused) {
      KernelCost inner = FusedCallCost(*member, /*as_separate_kernels=*/false, depth);
      if (!inner.known) return inner;
      cost.flops += inner.flops;
      continue;
    }
    Amount flops = cost::StandardFlops(*member, shapes);
    if (!flops.known) return Unknown(flops.why);
    if (elementwise && ClassifyOp(*member) == OpClass::kElementwise) {
      double own = shapes.Elements(member->output(0)).value;
      if (own > 0) flops.value *= index_space / own;
    }
    cost.flops += flops.value;
  }
  // Bytes: every value entering the group once (the largest read of it), every value leaving.
  std::unordered_map<const Value*, double> entering;
  for (const Node* member : members) {
    for (size_t i = 0; i < member->inputs().size(); ++i) {
      const Value* input = member->input(i);
      if (input == nullptr || member_set.count(input->producer()) || InlinableConstant(*input) != nullptr) continue;
      Amount bytes = cost::InputBytes(*member, i, shapes);
      if (!bytes.known) return Unknown(bytes.why);
      double& read = entering[input];
      read = std::max(read, bytes.value);
    }
  }
  for (const auto& [value, bytes] : entering) cost.bytes_read += bytes;
  for (const Node* member : members) {
    for (const Value* output : member->outputs()) {
      if (output == nullptr || !ReadOutside(*output, member_set)) continue;
      Amount bytes = shapes.Bytes(output);
      if (!bytes.known) return Unknown(bytes.why);
      cost.bytes_written += bytes.value;
    }
  }
  cost.registers = EstimateRegisters(members);
  if (cost.registers > profile_.register_budget_per_thread) {
    cost.register_penalty = static_cast<double>(cost.registers) / static_cast<double>(profile_.register_budget_per_thread);
  }
  FinishKernel(cost);
  return cost;
}

KernelCost CostModel::SeparateCost(const std::vector<const Node*>& members) const {
  KernelCost total = LaunchFree();
  if (members.empty()) return total;
  const LaunchFreeNodes& free = LaunchFreeIn(*members.front()->graph());
  for (const Node* member : members) Accumulate(total, CostWithin(*member, free, 0));
  return total;
}

KernelCost CostModel::SeparateCost(const std::vector<Node*>& members) const { return SeparateCost(AsConst(members)); }

int64_t CostModel::EstimateRegisters(const std::vector<const Node*>& members) const {
  if (members.empty()) return 0;
  std::unordered_set<const Node*> member_set(members.begin(), members.end());
  // Counted from the members' operands, not from each value's uses: a shared input (x of k
  // projections in a wide graph) has a use per reader, and scanning them per group would make
  // judging every group quadratic.
  std::unordered_map<const Value*, int64_t> reads_by_members;
  for (const Node* member : member_set) {
    for (const Value* input : member->inputs()) {
      if (input != nullptr) ++reads_by_members[input];
    }
  }
  auto reads_inside = [&](const Value& value) {
    auto it = reads_by_members.find(&value);
    return it == reads_by_members.end() ? int64_t{0} : it->second;
  };
  std::unordered_map<const Value*, int64_t> live;  // value -> reads left inside the group
  int64_t live_registers = 0, peak = 0;
  for (const Node* member : MembersInGraphOrder(members)) {
    for (const Value* input : member->inputs()) {
      if (input == nullptr || IsImmediate(*input) || live.count(input)) continue;
      if (member_set.count(input->producer())) continue;  // produced inside: live already, or immediate
      live[input] = reads_inside(*input);
      live_registers += RegistersOf(*input);
    }
    int64_t step = live_registers;
    for (const Value* output : member->outputs()) step += output != nullptr ? RegistersOf(*output) : 0;
    OpClass op_class = ClassifyOp(*member);
    if (op_class == OpClass::kReduction || op_class == OpClass::kWindow) step += kReductionScratchRegisters;
    peak = std::max(peak, step);
    for (const Value* input : member->inputs()) {
      auto it = input != nullptr ? live.find(input) : live.end();
      if (it == live.end() || --it->second > 0) continue;
      live_registers -= RegistersOf(*input);
      live.erase(it);
    }
    for (const Value* output : member->outputs()) {
      if (output == nullptr || IsImmediate(*output)) continue;
      int64_t reads = reads_inside(*output);
      if (reads == 0) continue;  // stored at once
      live[output] = reads;
      live_registers += RegistersOf(*output);
    }
  }
  return kBaseRegisters + peak;
}

// ---------------------------------------------------------------- whole model

void CostModel::CostGraph(const Graph& graph, const std::string& graph_name, ModelCost& result) const {
  LaunchFreeNodes free = FindLaunchFreeNodes(graph, InitializerRuleOf(model_));
  for (const auto& owned : graph.nodes()) {
    const Node& node = *owned;
    if (!LaunchesKernel(node) || free.contains(&node)) {
      ++result.launch_free_nodes;
    } else {
      CostedKernel kernel;
      kernel.node = &node;
      kernel.graph = graph_name;
      kernel.cost = CostWithin(node, free, 0);
      kernel.fused_call = ClassifyOp(node) == OpClass::kFused;
      kernel.unfused = kernel.fused_call ? UnfusedCallCost(node) : kernel.cost;
      if (kernel.cost.known) Accumulate(result.total, kernel.cost);
      else ++result.unknown_kernels;
      if (kernel.unfused.known) Accumulate(result.original_total, kernel.unfused);
      else ++result.original_unknown_kernels;
      if (kernel.fused_call) ++result.fused_calls;
      result.kernels.push_back(std::move(kernel));
    }
    for (const Graph* subgraph : node.Subgraphs()) CostGraph(*subgraph, subgraph->name(), result);
  }
}

ModelCost CostModel::CostOfModel() const {
  ModelCost result;
  result.total = LaunchFree();
  result.original_total = LaunchFree();
  CostGraph(*model_.graph, "", result);
  return result;
}

}  // namespace fusionopt::passes
