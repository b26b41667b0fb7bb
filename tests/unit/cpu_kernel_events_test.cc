// RunStats::kernel_events, the per-launch timeline behind `fusionopt bench --trace`: one event
// per kernel counted in kernels_launched, in launch order, for plain nodes, fused calls and
// bodies run op by op; nothing recorded when no list is given.
#include "cpu_fused_test_helpers.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::fused_test;

namespace {

constexpr const char* kChain = R"(
ir_version 8
opset "" 17
graph main (float[2,3,4] %x, float[4] %s) -> (float[2,3,4] %y)
{
  %t = Mul(%x, %s) @mul
  %u = Add(%t, %s) @add
  %y = Relu(%u) @relu
}
)";

std::vector<NamedTensor> Feeds() { return {{"x", Random(DataType::kFloat, {2, 3, 4}, 1)}, {"s", Random(DataType::kFloat, {4}, 2)}}; }

// Body nodes belong to the session's instantiated bodies: it must outlive the events.
struct Traced {
  std::unique_ptr<Session> session;
  RunStats stats;
  std::vector<KernelEvent> events;
};

// Returned through a pointer: the stats point at the events, which must not move.
std::unique_ptr<Traced> RunTraced(const Model& model, bool fused_kernels) {
  auto session = Session::Create(model, {.threads = 1, .fused_kernels = fused_kernels});
  REQUIRE(session.ok());
  auto owned = std::make_unique<Traced>();
  Traced& traced = *owned;
  traced.session = std::move(*session);
  traced.stats.kernel_events = &traced.events;
  REQUIRE(traced.session->Run(Feeds(), &traced.stats).ok());
  REQUIRE(traced.stats.kernel_events == &traced.events);  // the caller's list survives the run
  return owned;
}

std::vector<std::string> Names(const std::vector<KernelEvent>& events) {
  std::vector<std::string> names;
  for (const KernelEvent& event : events) names.push_back(event.node->name());
  return names;
}

void RequireOrdered(const std::vector<KernelEvent>& events) {
  for (size_t i = 0; i < events.size(); ++i) {
    REQUIRE(events[i].duration_us >= 0);
    if (i > 0) REQUIRE(events[i - 1].start <= events[i].start);
  }
}

}  // namespace

TEST_CASE("kernel events: one per launch of a plain graph, in order", "[cpu][kernel_events]") {
  auto model = Parse(kChain);
  auto owned = RunTraced(*model, true);
  Traced& traced = *owned;
  REQUIRE(traced.stats.kernels_launched == 3);
  REQUIRE(Names(traced.events) == std::vector<std::string>{"mul", "add", "relu"});
  RequireOrdered(traced.events);
}

TEST_CASE("kernel events: a fused call is one event of the call node", "[cpu][kernel_events]") {
  auto model = Outlined(kChain, {"mul", "add", "relu"});
  auto owned = RunTraced(*model, true);
  Traced& traced = *owned;
  REQUIRE(traced.stats.kernels_launched == 1);
  REQUIRE(traced.events.size() == 1);
  REQUIRE(traced.events[0].node->domain() == "ai.fusionopt");
  REQUIRE(traced.events[0].node->graph() == model->graph.get());
}

TEST_CASE("kernel events: a body run op by op lists its body nodes", "[cpu][kernel_events]") {
  auto model = Outlined(kChain, {"mul", "add", "relu"});
  auto owned = RunTraced(*model, false);
  Traced& traced = *owned;
  REQUIRE(traced.stats.kernels_launched == 3);
  REQUIRE(traced.events.size() == 3);
  for (const KernelEvent& event : traced.events) {
    REQUIRE(event.node->domain().empty());
    REQUIRE(event.node->graph() != model->graph.get());  // a node of the instantiated body
  }
  REQUIRE(std::vector<std::string>{traced.events[0].node->op_type(), traced.events[1].node->op_type(),
                                   traced.events[2].node->op_type()} ==
          std::vector<std::string>{"Mul", "Add", "Relu"});
  RequireOrdered(traced.events);
}

TEST_CASE("kernel events: nothing recorded without a list", "[cpu][kernel_events]") {
  auto model = Parse(kChain);
  auto session = Session::Create(*model, {.threads = 1, .fused_kernels = true});
  REQUIRE(session.ok());
  std::vector<KernelEvent> events;
  RunStats traced;
  traced.kernel_events = &events;
  REQUIRE((*session)->Run(Feeds(), &traced).ok());
  REQUIRE(events.size() == 3);
  RunStats untraced;
  REQUIRE((*session)->Run(Feeds(), &untraced).ok());
  REQUIRE(untraced.kernel_events == nullptr);
  REQUIRE(untraced.kernels_launched == 3);
  REQUIRE(events.size() == 3);  // the earlier list is untouched
}
