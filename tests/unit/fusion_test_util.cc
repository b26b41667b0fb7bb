#include "fusion_test_util.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <unordered_map>

#include "cpu_runtime/inputs.h"
#include "ir/op_class.h"
#include "ir/shape_inference.h"
#include "ir/text_format.h"
#include "passes/pipeline.h"

namespace fusionopt::fusion_test {
namespace {

Attribute CopyAttribute(const Attribute& attribute) {
  REQUIRE(attribute.g == nullptr);
  REQUIRE(attribute.graphs.empty());
  Attribute copy;
  copy.name = attribute.name;
  copy.kind = attribute.kind;
  copy.i = attribute.i;
  copy.f = attribute.f;
  copy.s = attribute.s;
  copy.t = attribute.t;
  copy.ints = attribute.ints;
  copy.floats = attribute.floats;
  copy.strings = attribute.strings;
  copy.tensors = attribute.tensors;
  copy.ref_attr_name = attribute.ref_attr_name;
  return copy;
}

void InlineCall(Graph& graph, Node& call, const Function& function) {
  const Graph& body = *function.body;
  REQUIRE(body.inputs().size() == call.inputs().size());
  REQUIRE(body.outputs().size() == call.outputs().size());
  std::unordered_map<const Value*, Value*> mapped;
  for (size_t i = 0; i < body.inputs().size(); ++i) mapped[body.inputs()[i]] = call.input(i);
  std::unordered_map<const Value*, size_t> result_index;
  for (size_t i = 0; i < body.outputs().size(); ++i) {
    REQUIRE(body.outputs()[i]->producer() != nullptr);  // every result is computed in the body
    REQUIRE(result_index.emplace(body.outputs()[i], i).second);
  }
  int index = 0;
  for (const auto& source : body.nodes()) {
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
    for (const Attribute& attribute : source->attributes()) copy->SetAttribute(CopyAttribute(attribute));
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

std::vector<int64_t> ConcreteDims(const Value& input, const std::map<std::string, int64_t>& symbols) {
  std::vector<int64_t> dims;
  REQUIRE(input.shape().has_value());
  for (const Dim& dim : *input.shape()) {
    if (dim.is_known()) {
      dims.push_back(dim.value);
    } else {
      auto it = symbols.find(dim.symbol);
      dims.push_back(it != symbols.end() ? it->second : 3);
    }
  }
  return dims;
}

}  // namespace

std::unique_ptr<Model> ParseInferred(const std::string& text) {
  auto model = ParseModel(text);
  INFO(model.status().message());
  REQUIRE(model.ok());
  InferShapes(**model);
  return std::move(model).value();
}

std::string Print(const Model& model) {
  PrintOptions options;
  options.max_literal_elements = -1;
  return PrintModel(model, options);
}

std::string Canonical(const std::string& text) { return Print(*ParseInferred(text)); }

PassRun RunPass(Model& model, const std::string& pass, const Options& options) {
  passes::PipelineOptions pipeline;
  pipeline.level = 2;
  pipeline.only = {pass};
  pipeline.check_each_pass = true;
  for (const auto& [name, value] : options) pipeline.pass_options.Set(pass, name, value);
  auto report = passes::RunPipeline(model, pipeline);
  INFO(report.status().message());
  REQUIRE(report.ok());
  REQUIRE(report->passes.size() == 1);
  return PassRun{report->passes.front(), report->fusions};
}

int64_t RejectionCount(const passes::PassStatistics& statistics, const std::string& reason) {
  auto it = statistics.rejections.find(reason);
  return it == statistics.rejections.end() ? 0 : it->second.count;
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

std::vector<cpu::NamedTensor> RunOnCpu(const Model& model, const std::map<std::string, int64_t>& symbols,
                                       uint64_t seed) {
  auto session = cpu::Session::Create(model);
  INFO(session.status().message());
  REQUIRE(session.ok());
  std::vector<cpu::NamedTensor> feeds;
  for (const Value* input : (*session)->inputs()) {
    auto tensor = cpu::RandomTensor(input->dtype(), ConcreteDims(*input, symbols), seed + feeds.size());
    REQUIRE(tensor.ok());
    feeds.push_back({input->name(), *tensor});
  }
  auto outputs = (*session)->Run(feeds);
  INFO(outputs.status().message());
  REQUIRE(outputs.ok());
  return std::move(outputs).value();
}

void ExpectSameNumbers(const Model& original, const Model& optimized, const std::map<std::string, int64_t>& symbols,
                       cpu::Tolerance tolerance) {
  std::unique_ptr<Model> inlined = InlineFusedNodes(optimized);
  for (const auto& node : inlined->graph->nodes()) REQUIRE(node->domain() != kFusionDomain);
  std::vector<cpu::NamedTensor> expected = RunOnCpu(original, symbols);
  std::vector<cpu::NamedTensor> actual = RunOnCpu(*inlined, symbols);
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

std::vector<std::string> OpTypes(const Graph& graph) {
  std::vector<std::string> ops;
  for (const auto& node : graph.nodes()) {
    ops.push_back(node->domain().empty() ? node->op_type() : node->domain() + "::" + node->op_type());
  }
  return ops;
}

}  // namespace fusionopt::fusion_test
