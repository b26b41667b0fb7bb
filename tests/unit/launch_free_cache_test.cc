// The cost model's launch-free nodes, kept across rewrites instead of rescanned per fusion
// (CostModel::LaunchFreeIn, AdoptRevision, AdoptRewrite): after a pass the kept result must
// equal a fresh FindLaunchFreeNodes — and it must have been kept, or the comparison proves
// nothing — while a rewrite that changes another node's status must drop it.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "ir/constant_value.h"
#include "ir/graph.h"
#include "ir/op_class.h"
#include "pass_test_support.h"
#include "passes/cost_model/cost_model.h"
#include "passes/fusion/horizontal/fuse_horizontal_contractions.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

// Node names, sorted, so a check prints readably.
std::set<std::string> Names(const std::unordered_set<const Node*>& nodes) {
  std::set<std::string> names;
  for (const Node* node : nodes) names.insert(node->name());
  return names;
}

// `kept` may hold nodes that are gone when the cache went stale: compared by pointer, never
// dereferenced; the fresh side names what is missing.
void RequireSameNodes(const std::unordered_set<const Node*>& kept, const std::unordered_set<const Node*>& fresh) {
  for (const Node* node : fresh) {
    INFO("node " << node->name());
    CHECK(kept.count(node));
  }
  CHECK(kept.size() == fresh.size());
}

void RequireSameAsFresh(const CostModel& costs, const Model& model) {
  const LaunchFreeNodes& kept = costs.LaunchFreeIn(*model.graph);
  const LaunchFreeNodes fresh = FindLaunchFreeNodes(*model.graph, InitializerRuleOf(model));
  RequireSameNodes(kept.load_time, fresh.load_time);
  RequireSameNodes(kept.host, fresh.host);
}

struct PassRun {
  PassStatistics statistics;
  std::vector<FusionRecord> fusions;
};

PassRun RunHorizontalContractions(Model& model, const CostModel& costs) {
  FuseHorizontalContractions pass;
  PassOptions options;
  PassRun run;
  PassContext context(model, pass, options, run.statistics, run.fusions);
  context.UseCostModel(costs, /*gate_fusions=*/false);
  auto changed = pass.Run(model, context);
  REQUIRE(changed.ok());
  REQUIRE(*changed);
  return run;
}

// Four projections of %x whose weights are ConstantOfShape splats (load-time nodes the merge
// leaves unread, so they are removed), a host Shape of one result and a load-time Cast.
constexpr const char* kProjections = R"(ir_version 8
opset "" 17
graph main (float[2,4] %x) -> (float %a, float %b, float %c, float %d, int64 %shape, float %scale)
  init int64[2] %dims = [4, 3]
  init float[] %half = [0.5]
{
  %wa = ConstantOfShape(%dims) {value: tensor float[1] [0.5]} @wa
  %wb = ConstantOfShape(%dims) {value: tensor float[1] [0.25]} @wb
  %wc = ConstantOfShape(%dims) {value: tensor float[1] [2.0]} @wc
  %wd = ConstantOfShape(%dims) {value: tensor float[1] [-1.0]} @wd
  %a = MatMul(%x, %wa) @ma
  %b = MatMul(%x, %wb) @mb
  %c = MatMul(%x, %wc) @mc
  %d = MatMul(%x, %wd) @md
  %shape = Shape(%a) @shape
  %scale = Cast(%half) {to: 1} @cast
}
)";

}  // namespace

TEST_CASE("launch-free nodes: merged contractions keep them current without a rescan", "[cost]") {
  auto model = ParseInferred(kProjections);
  CostModel costs(*model, pass_test::H100());
  costs.LaunchFreeIn(*model->graph);
  REQUIRE(costs.launch_free_scans() == 1);

  PassRun run = RunHorizontalContractions(*model, costs);
  REQUIRE(run.fusions.size() == 1);
  REQUIRE(run.fusions[0].replaced.size() == 4);

  // Kept through the rewrite, the removal of the four splats and the sort: no second scan.
  CHECK(costs.launch_free_scans() == 1);
  RequireSameAsFresh(costs, *model);
  const LaunchFreeNodes& kept = costs.LaunchFreeIn(*model->graph);
  CHECK(Names(kept.host) == std::set<std::string>{"shape"});
  CHECK(Names(kept.load_time).count("cast"));
  CHECK(costs.launch_free_scans() == 1);
}

TEST_CASE("launch-free nodes: a rewrite that may change another node's status drops them", "[cost]") {
  // %x is itself constant here, so the merged MatMul runs ahead and the Shape reading the
  // Split moves from host to load-time: no incremental update is trusted with that.
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
graph main () -> (float %a, float %b, int64 %shape)
  init int64[2] %dims = [4, 3]
  init int64[2] %xdims = [2, 4]
{
  %x = ConstantOfShape(%xdims) {value: tensor float[1] [1.0]} @x
  %wa = ConstantOfShape(%dims) {value: tensor float[1] [0.5]} @wa
  %wb = ConstantOfShape(%dims) {value: tensor float[1] [0.25]} @wb
  %a = MatMul(%x, %wa) @ma
  %b = MatMul(%x, %wb) @mb
  %shape = Shape(%a) @shape
}
)");
  CostModel costs(*model, pass_test::H100());
  REQUIRE(costs.LaunchFreeIn(*model->graph).load_time.count(FindNode(*model->graph, "ma")));

  RunHorizontalContractions(*model, costs);

  // The members were launch-free, so nothing was adopted: the next look rescans.
  RequireSameAsFresh(costs, *model);
  CHECK(costs.launch_free_scans() == 2);
}
