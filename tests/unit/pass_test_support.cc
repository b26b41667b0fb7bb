#include "pass_test_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "cpu_runtime/engine/compare.h"
#include "cpu_runtime/engine/inputs.h"
#include "ir/function_body.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"
#include "text_format/text_format.h"
#include "passes/pipeline.h"
#include "passes/util/outline.h"
#include "passes/registry.h"

namespace fusionopt::pass_test {
namespace {

// A pass that runs the outliner on the nodes named in its option (test-only).
class OutlineNamed : public passes::Pass {
 public:
  OutlineNamed(std::vector<std::string> names, std::string kind) : names_(std::move(names)), kind_(std::move(kind)) {}
  std::string_view name() const override { return "outline-named"; }
  std::string_view summary() const override { return "test"; }
  std::string_view rewrite() const override { return "the named nodes  ->  one FusedTest call"; }
  Result<bool> Run(Model& model, passes::PassContext& context) override {
    std::vector<Node*> nodes;
    for (const auto& name : names_) nodes.push_back(FindNode(*model.graph, name));
    why_not = passes::WhyNotOutlinable(nodes);
    if (why_not) return false;
    fused = passes::OutlineGroup(*model.graph, passes::FusionGroup{nodes, kind_, "FusedTest"}, context);
    return true;
  }
  WhyNot why_not;
  Node* fused = nullptr;

 private:
  std::vector<std::string> names_;
  std::string kind_;
};

int64_t CounterOf(const passes::PassStatistics& statistics, const std::string& name) {
  auto it = statistics.counters.find(name);
  return it == statistics.counters.end() ? 0 : it->second;
}

// Puts `call`'s body in its place: body nodes read the call's inputs and write its outputs;
// their other values get fresh names after the call.
void InlineCall(Graph& graph, Node& call, const Function& function) {
  std::unique_ptr<Graph> body = InstantiateFunctionBody(function, call);
  REQUIRE(body->inputs().size() == call.inputs().size());
  REQUIRE(body->outputs().size() == call.outputs().size());
  std::unordered_map<const Value*, Value*> mapped;
  for (size_t i = 0; i < body->inputs().size(); ++i) mapped[body->inputs()[i]] = call.input(i);
  std::unordered_map<const Value*, size_t> result_index;
  for (size_t i = 0; i < body->outputs().size(); ++i) {
    REQUIRE(body->outputs()[i]->producer() != nullptr);  // every result is computed in the body
    REQUIRE(result_index.emplace(body->outputs()[i], i).second);
  }
  int index = 0;
  for (const auto& source : body->nodes()) {
    std::vector<Value*> inputs;
    for (const Value* input : source->inputs()) inputs.push_back(input != nullptr ? mapped.at(input) : nullptr);
    std::vector<Value*> outputs;
    for (const Value* output : source->outputs()) {
      if (output == nullptr || result_index.count(output)) {
        outputs.push_back(nullptr);
        continue;
      }
      Value* fresh = graph.CreateValue(graph.UniqueName(call.name() + "/" + output->name()));
      mapped[output] = fresh;
      outputs.push_back(fresh);
    }
    Node* copy = graph.CreateNode(source->op_type(), source->domain(), inputs, outputs,
                                  call.name() + "/" + std::to_string(index++));
    // A subgraph would read the instantiated body's values, which go with it.
    for (Attribute& attribute : source->mutable_attributes()) {
      REQUIRE(attribute.g == nullptr);
      REQUIRE(attribute.graphs.empty());
      copy->SetAttribute(std::move(attribute));
    }
    for (size_t slot = 0; slot < source->outputs().size(); ++slot) {
      auto result = result_index.find(source->output(slot));
      if (result == result_index.end()) continue;
      Value* kept = call.output(result->second);
      graph.TransferProducer(kept, copy, static_cast<int>(slot));
      mapped[source->output(slot)] = kept;
    }
  }
  graph.RemoveNode(&call);
}

void InlineIn(Graph& graph, const Model& source) {
  std::vector<Node*> calls;
  for (const auto& node : graph.nodes()) {
    for (Graph* subgraph : node->Subgraphs()) InlineIn(*subgraph, source);
    if (node->domain() == kFusionDomain) calls.push_back(node.get());
  }
  for (Node* call : calls) {
    const Function* function = source.FindFunction(call->domain(), call->op_type());
    INFO("fused node " << call->name() << " calls " << call->op_type());
    REQUIRE(function != nullptr);
    InlineCall(graph, *call, *function);
  }
  if (!calls.empty()) {
    Status sorted = graph.SortTopologically();
    INFO(sorted.message());
    REQUIRE(sorted.ok());
  }
}

std::vector<int64_t> FeedDims(const Value& input, OpenDims& open) {
  std::vector<int64_t> dims;
  REQUIRE(input.shape().has_value());
  for (const Dim& dim : *input.shape()) {
    if (dim.is_known()) {
      dims.push_back(dim.value);
    } else if (!dim.is_symbolic()) {
      dims.push_back(open.unnamed);
    } else if (auto listed = open.symbols.find(dim.symbol); listed != open.symbols.end()) {
      dims.push_back(listed->second);
    } else if (open.distinct_symbols) {
      int64_t size = 3 + static_cast<int64_t>(open.symbols.size());
      open.symbols.emplace(dim.symbol, size);
      dims.push_back(size);
    } else {
      dims.push_back(open.other_symbols);
    }
  }
  return dims;
}

std::unique_ptr<cpu::Session> CreateSession(const Model& model, const cpu::SessionOptions& options = {}) {
  auto session = cpu::Session::Create(model, options);
  INFO(session.status().message());
  REQUIRE(session.ok());
  return std::move(session).value();
}

std::vector<cpu::NamedTensor> RunSession(cpu::Session& session, const std::vector<cpu::NamedTensor>& feeds,
                                         cpu::RunStats* stats) {
  auto outputs = session.Run(feeds, stats);
  INFO(outputs.status().message());
  REQUIRE(outputs.ok());
  return std::move(outputs).value();
}

}  // namespace

std::unique_ptr<Model> ParseInferred(const std::string& text) {
  std::unique_ptr<Model> model = Parse(text);
  InferShapes(*model);
  return model;
}

std::unique_ptr<Model> ParseOptimized(const std::string& text, int level) {
  std::unique_ptr<Model> model = ParseInferred(text);
  passes::PipelineOptions options;
  options.level = level;
  REQUIRE(passes::RunPipeline(*model, options).ok());
  return model;
}

Node* FindNode(const Graph& graph, const std::string& name) {
  for (const auto& node : graph.nodes()) {
    if (node->name() == name) return node.get();
  }
  FAIL("no node " << name);
  return nullptr;
}

passes::TargetProfile H100() {
  auto profile = passes::FindTargetProfile("h100");
  REQUIRE(profile.ok());
  return *profile;
}

std::string Print(const Model& model) {
  PrintOptions options;
  options.max_literal_elements = -1;
  return PrintModel(model, options);
}

std::string Canonical(const std::string& text) { return Print(*ParseInferred(text)); }

int64_t PassRun::Counter(const std::string& name) const { return CounterOf(statistics, name); }

int64_t PassRun::Rejections(const std::string& reason) const { return RejectionCount(statistics, reason); }

int64_t RejectionCount(const passes::PassStatistics& statistics, const std::string& reason) {
  auto it = statistics.rejections.find(reason);
  return it == statistics.rejections.end() ? 0 : it->second.count;
}

PassRun RunPass(Model& model, const std::string& pass, const Options& options) {
  const passes::PassInfo* info = passes::FindPass(pass);
  INFO("pass " << pass);
  REQUIRE(info != nullptr);
  passes::PipelineOptions pipeline;
  pipeline.level = info->level;
  pipeline.only = {pass};
  pipeline.check_each_pass = true;
  for (const auto& [name, value] : options) pipeline.pass_options.Set(pass, name, value);
  auto report = passes::RunPipeline(model, pipeline);
  INFO(report.status().message());
  REQUIRE(report.ok());
  REQUIRE(report->passes.size() == 1);
  return PassRun{report->passes.front(), report->fusions};
}

const char* const kOutlineChain = R"(
ir_version 7
opset "" 17
graph main (float[2,3] %x, float[3] %s) -> (float[2,3] %y, float[2,3] %u)
  init float[] %b = [0.5]
{
  %t = Mul(%x, %s) @mul
  %u = Add(%t, %b) @add
  %y = Relu(%u) @relu
}
)";

Outlined OutlineNodes(Model& model, std::vector<std::string> names, std::string kind) {
  OutlineNamed pass(std::move(names), std::move(kind));
  Outlined outlined;
  static_cast<PassRun&>(outlined) = RunPassObject(model, pass);
  outlined.changed = outlined.statistics.changed;
  outlined.why_not = pass.why_not;
  outlined.fused = pass.fused;
  return outlined;
}

PassRun RunPassObject(Model& model, passes::Pass& pass) {
  PassRun run;
  passes::PassOptions options;
  passes::PassContext context(model, pass, options, run.statistics, run.fusions);
  auto changed = pass.Run(model, context);
  INFO(changed.status().message());
  REQUIRE(changed.ok());
  run.statistics.changed = *changed;
  return run;
}

Rewritten Rewrite(const std::string& text, const std::string& pass, const Options& options) {
  Rewritten rewritten{ParseInferred(text), ParseInferred(text), {}};
  rewritten.run = RunPass(*rewritten.model, pass, options);
  return rewritten;
}

std::string Spread(int count, int seed, double low, double high) {
  std::string text = "[";
  for (int i = 0; i < count; ++i) {
    int step = (i * 37 + seed * 11 + 5) % 64;
    double value = low + (high - low) * step / 63.0;
    value = static_cast<double>(static_cast<int64_t>(value * 64)) / 64.0;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6f", value);
    text += (i > 0 ? ", " : "") + std::string(buffer);
  }
  return text + "]";
}

std::vector<std::string> OpTypes(const Graph& graph) {
  std::vector<std::string> ops;
  for (const auto& node : graph.nodes()) {
    ops.push_back(node->domain().empty() ? node->op_type() : node->domain() + "::" + node->op_type());
  }
  return ops;
}

std::unique_ptr<Model> InlineFusedNodes(const Model& model) {
  std::unique_ptr<Model> copy = ParseInferred(Print(model));
  InlineIn(*copy->graph, model);
  auto& opsets = copy->opsets;
  opsets.erase(std::remove_if(opsets.begin(), opsets.end(),
                              [](const OpsetImport& opset) { return opset.domain == kFusionDomain; }),
               opsets.end());
  auto& functions = copy->functions;
  functions.erase(std::remove_if(functions.begin(), functions.end(),
                                 [](const auto& function) { return function->domain == kFusionDomain; }),
                  functions.end());
  InferShapes(*copy);
  return copy;
}

std::string PrintBody(const Model& model, const Node& node) {
  const Function* function = model.FindFunction(node.domain(), node.op_type());
  REQUIRE(function != nullptr);
  return PrintGraph(*function->body);
}

std::vector<cpu::NamedTensor> RunOnCpu(const Model& model, const OpenDims& dims, uint64_t seed) {
  std::unique_ptr<cpu::Session> session = CreateSession(model);
  OpenDims open = dims;
  std::vector<cpu::NamedTensor> feeds;
  for (const Value* input : session->inputs()) {
    auto tensor = cpu::RandomTensor(input->dtype(), FeedDims(*input, open), seed + feeds.size());
    REQUIRE(tensor.ok());
    feeds.push_back({input->name(), std::move(tensor).value()});
  }
  return RunSession(*session, feeds, nullptr);
}

std::vector<cpu::NamedTensor> RunWithFeeds(const Model& model, const std::vector<cpu::NamedTensor>& feeds,
                                           const cpu::SessionOptions& options, cpu::RunStats* stats) {
  return RunSession(*CreateSession(model, options), feeds, stats);
}

void ExpectClose(const std::vector<cpu::NamedTensor>& actual, const std::vector<cpu::NamedTensor>& expected,
                 cpu::Tolerance tolerance) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("output " << expected[i].name);
    REQUIRE(actual[i].name == expected[i].name);
    cpu::Comparison comparison = cpu::Compare(actual[i].tensor, expected[i].tensor, tolerance);
    INFO("max abs error " << comparison.max_abs_error << ", max rel error " << comparison.max_rel_error);
    CHECK(comparison.same_shape);
    CHECK(comparison.same_dtype);
    CHECK(comparison.passed);
  }
}

void RequireClose(const std::vector<cpu::NamedTensor>& actual, const std::vector<cpu::NamedTensor>& expected,
                  double rtol, double atol) {
  REQUIRE(actual.size() == expected.size());
  for (size_t k = 0; k < actual.size(); ++k) {
    const cpu::RtTensor& a = actual[k].tensor;
    const cpu::RtTensor& e = expected[k].tensor;
    INFO("output " << expected[k].name);
    REQUIRE(actual[k].name == expected[k].name);
    REQUIRE(a.dtype() == e.dtype());
    REQUIRE(a.dims() == e.dims());
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      const double x = a.ValueAsDouble(i), y = e.ValueAsDouble(i);
      if (std::isnan(y)) {
        REQUIRE(std::isnan(x));
        continue;
      }
      INFO("element " << i << ": " << x << " vs " << y);
      REQUIRE((x == y || std::abs(x - y) <= atol + rtol * std::abs(y)));
    }
  }
}

void ExpectSameOutputs(const Model& reference, const Model& candidate, const OpenDims& dims, cpu::Tolerance tolerance,
                       uint64_t seed) {
  std::vector<cpu::NamedTensor> expected = RunOnCpu(reference, dims, seed);
  std::vector<cpu::NamedTensor> actual = RunOnCpu(candidate, dims, seed);
  ExpectClose(actual, expected, tolerance);
}

}  // namespace fusionopt::pass_test
