// The fused attention kernel against the same body run op by op, on seeded data, for every form
// fuse-attention outlines: BERT (padding mask, rows fully padded included), the combined
// projection with GPT-2's causal mask, ViT (no mask), [B,H,S,D] operands (K transposed inside
// or given as [B,H,D,S]) — with sequence lengths around and beyond the tiles (128 queries; key
// blocks sized by the host's L2, and forced short) and long ones that the tiling must cover —
// and the run-time shapes it hands back to the op-by-op body.
#include <catch2/catch.hpp>

#include <limits>

#include "attention_test_models.h"
#include "cpu_fused_test_helpers.h"
#include "scoped_env.h"

using namespace fusionopt;
using namespace fusionopt::attention_test;
using cpu::NamedTensor;
using cpu::RtTensor;
using fused_test::Random;

namespace {

constexpr float kFinfoMin = -3.4028235e+38f;

// `text` after fuse-attention: one FusedAttention node.
std::unique_ptr<Model> Outlined(const std::string& text) {
  pass_test::Rewritten rewritten = pass_test::Rewrite(text, "fuse-attention");
  REQUIRE(rewritten.Counter("attention") == 1);
  return std::move(rewritten.model);
}

struct Runs {
  fused_test::Outcome fused, op_by_op;
  int64_t saved_launches() const { return op_by_op.stats.kernels_launched - fused.stats.kernels_launched; }
};

// The outlined model run with the fused kernel and op by op: within 1e-5 relative, and `atol`
// absolute for values near 0 — a context element is a weighted sum of value rows, so its
// rounding error follows the size of those rows, not its own.
//
// The fused kernel runs twice: with the key blocks this host's cache sizes give (often every
// key in one block), and with 48-key blocks, which take the running-softmax rescaling, the
// skipped tiles and the partial last block on any host.
Runs Compare(const Model& model, const std::vector<NamedTensor>& feeds, double atol = 1e-6) {
  Runs runs;
  runs.fused = fused_test::Run(model, feeds, true);
  runs.op_by_op = fused_test::Run(model, feeds, false);
  pass_test::RequireClose(runs.fused.outputs, runs.op_by_op.outputs, 1e-5, atol);
  test_support::ScopedEnv short_blocks("FUSIONOPT_CPU_ATTENTION_KEY_BLOCK", "48");
  const fused_test::Outcome blocked = fused_test::Run(model, feeds, true);
  pass_test::RequireClose(blocked.outputs, runs.op_by_op.outputs, 1e-5, atol);
  return runs;
}

// BERT's extended mask: 0 for the first `valid[b]` keys of batch b, finfo.min after them.
RtTensor PaddingMask(int64_t sequence, const std::vector<int64_t>& valid) {
  const int64_t batch = static_cast<int64_t>(valid.size());
  RtTensor mask = RtTensor::Allocate(DataType::kFloat, {batch, 1, 1, sequence});
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < sequence; ++j) mask.data<float>()[b * sequence + j] = j < valid[b] ? 0.0f : kFinfoMin;
  }
  return mask;
}

}  // namespace

TEST_CASE("fused attention: BERT's form at sequence lengths around the tiles", "[attention][cpu]") {
  for (int64_t sequence : {1, 7, 64, 65, 130, 200}) {
    INFO("sequence " << sequence);
    auto model = Outlined(WithHeads(Bert(), 2, 16));
    const std::vector<NamedTensor> feeds = {{"q", Random(DataType::kFloat, {2, sequence, 32}, 1)},
                                            {"k", Random(DataType::kFloat, {2, sequence, 32}, 2)},
                                            {"v", Random(DataType::kFloat, {2, sequence, 32}, 3)},
                                            {"mask", PaddingMask(sequence, {sequence, (sequence + 1) / 2})}};
    Runs runs = Compare(*model, feeds);
    CHECK(runs.fused.stats.kernels_launched == 1);
    CHECK(runs.op_by_op.stats.kernels_launched > 9);
  }
}

TEST_CASE("fused attention: a long BERT sequence, 12 heads of 64, and a fully padded row", "[attention][cpu]") {
  auto model = Outlined(WithHeads(Bert(), 12, 64));
  const int64_t sequence = 1000;
  const std::vector<NamedTensor> feeds = {{"q", Random(DataType::kFloat, {2, sequence, 768}, 4)},
                                          {"k", Random(DataType::kFloat, {2, sequence, 768}, 5)},
                                          {"v", Random(DataType::kFloat, {2, sequence, 768}, 6)},
                                          {"mask", PaddingMask(sequence, {937, 0})}};
  // Sums over 937 keys in float32, in the tiles' order against oneDNN's: on AVX-512 machines the
  // two differ by up to 2.7e-6 on outputs of up to 2 (a wrong mask or scale moves them by 1e-2).
  Runs runs = Compare(*model, feeds, 1e-5);
  CHECK(runs.fused.stats.kernels_launched == 1);
  // A row with every key masked by a finite fill is uniform, as op by op.
  const RtTensor& context = runs.fused.outputs[0].tensor;
  REQUIRE(context.dims() == std::vector<int64_t>{2, sequence, 768});
  CHECK(std::isfinite(context.data<float>()[sequence * 768]));
}

TEST_CASE("fused attention: the combined projection with GPT-2's causal mask", "[attention][cpu]") {
  for (int64_t sequence : {1, 8, 77, 150}) {
    INFO("sequence " << sequence);
    auto model = Outlined(WithHeads(Combined(true, "float[B,S,8] %context", "", 160), 4, 8));
    Runs runs = Compare(*model, {{"qkv", Random(DataType::kFloat, {2, sequence, 96}, 7)}});
    // The mask's Slices stay outside: the fused kernel ran if it saved launches.
    CHECK(runs.saved_launches() > 9);
  }
}

TEST_CASE("fused attention: ViT's unmasked form at 197 tokens, one batch", "[attention][cpu]") {
  auto model = Outlined(WithHeads(Vit(), 3, 32));
  const std::vector<NamedTensor> feeds = {{"q", Random(DataType::kFloat, {1, 197, 96}, 8)},
                                          {"k", Random(DataType::kFloat, {1, 197, 96}, 9)},
                                          {"v", Random(DataType::kFloat, {1, 197, 96}, 10)}};
  Runs runs = Compare(*model, feeds);
  CHECK(runs.fused.stats.kernels_launched == 1);
  CHECK(runs.op_by_op.stats.kernels_launched > 8);
}

TEST_CASE("fused attention: [B,H,S,D] operands, K transposed inside or given as [B,H,D,S]", "[attention][cpu]") {
  auto inside = Outlined(HeadsFirst("[B,1,S,S]", "B,3,S,16"));
  const int64_t sequence = 150;
  std::vector<NamedTensor> feeds = {{"qh", Random(DataType::kFloat, {2, 3, sequence, 16}, 11)},
                                    {"kh", Random(DataType::kFloat, {2, 3, sequence, 16}, 12)},
                                    {"vh", Random(DataType::kFloat, {2, 3, sequence, 16}, 13)},
                                    {"mask", Random(DataType::kFloat, {2, 1, sequence, sequence}, 14, -3.0f, 0.0f)}};
  Runs runs = Compare(*inside, feeds);
  CHECK(runs.fused.stats.kernels_launched == 1);

  auto given = Outlined(kHeader + R"(graph main (float[B,3,S,16] %qh, float[B,3,16,S] %kt, float[B,3,S,8] %vh) -> (float[B,3,S,8] %context)
  init float[] %scale = [0.25]
{
  %product = MatMul(%qh, %kt) @scores
  %scores = Mul(%product, %scale) @scale
  %probs = Softmax(%scores) {axis: -1} @softmax
  %context = MatMul(%probs, %vh) @context
}
)");
  feeds = {{"qh", Random(DataType::kFloat, {2, 3, sequence, 16}, 15)},
           {"kt", Random(DataType::kFloat, {2, 3, 16, sequence}, 16)},
           {"vh", Random(DataType::kFloat, {2, 3, sequence, 8}, 17)}};  // V's head size differs from K's
  runs = Compare(*given, feeds);
  CHECK(runs.fused.stats.kernels_launched == 1);
  CHECK(runs.op_by_op.stats.kernels_launched == 4);
}

TEST_CASE("fused attention: a long causal sequence skips the tiles above the diagonal, same numbers", "[attention][cpu]") {
  // A boolean mask fed as an input: lower-triangular over 1000 keys, with one row allowed no
  // key at all (its fill everywhere: a uniform row, the fused kernel may not skip it).
  auto model = Outlined(kHeader + R"(graph main (float[1,2,S,32] %qh, float[1,2,S,32] %kh, float[1,2,S,32] %vh, bool[1,1,S,S] %allowed) -> (float[1,2,S,32] %context)
  init float[] %root = [5.656854]
  init float[] %fill = [-3.4028235e+38]
{
  %kt = Transpose(%kh) {perm: [0, 1, 3, 2]} @key_transpose
  %product = MatMul(%qh, %kt) @scores
  %scores = Div(%product, %root) @div
  %masked = Where(%allowed, %scores, %fill) @mask
  %probs = Softmax(%masked) {axis: -1} @softmax
  %context = MatMul(%probs, %vh) @context
}
)");
  const int64_t sequence = 1000;
  RtTensor allowed = RtTensor::Allocate(DataType::kBool, {1, 1, sequence, sequence});
  for (int64_t i = 0; i < sequence; ++i) {
    for (int64_t j = 0; j < sequence; ++j) allowed.data<uint8_t>()[i * sequence + j] = j <= i && i != 500;
  }
  Runs runs = Compare(*model, {{"qh", Random(DataType::kFloat, {1, 2, sequence, 32}, 18)},
                               {"kh", Random(DataType::kFloat, {1, 2, sequence, 32}, 19)},
                               {"vh", Random(DataType::kFloat, {1, 2, sequence, 32}, 20)},
                               {"allowed", allowed}});
  CHECK(runs.fused.stats.kernels_launched == 1);
}

TEST_CASE("fused attention: shapes the kernel does not implement run the body op by op", "[attention][cpu]") {
  // A mask batch of 3 against one batch of Q/K/V widens the scores at run time. The pass could
  // not tell (symbolic dims); the kernel checks. K and V with one head against Q's two do not
  // widen anything: the one head serves both query heads (multi-query), fused.
  auto widening = Outlined(HeadsFirst("[M,1,1,S]", "1,2,S,4"));
  std::vector<NamedTensor> feeds = {{"qh", Random(DataType::kFloat, {1, 2, 9, 4}, 21)},
                                    {"kh", Random(DataType::kFloat, {1, 2, 9, 4}, 22)},
                                    {"vh", Random(DataType::kFloat, {1, 2, 9, 4}, 23)},
                                    {"mask", Random(DataType::kFloat, {3, 1, 1, 9}, 24)}};
  Runs runs = Compare(*widening, feeds);
  CHECK(runs.saved_launches() == 0);
  fused_test::RequireIdentical(runs.fused.outputs, runs.op_by_op.outputs);
  REQUIRE(runs.fused.outputs[0].tensor.dims() == std::vector<int64_t>{3, 2, 9, 4});

  auto grouped = Outlined(HeadsFirst("[1,1,1,S]", "1,G,S,4"));
  feeds = {{"qh", Random(DataType::kFloat, {1, 2, 9, 4}, 25)},
           {"kh", Random(DataType::kFloat, {1, 1, 9, 4}, 26)},
           {"vh", Random(DataType::kFloat, {1, 1, 9, 4}, 27)},
           {"mask", Random(DataType::kFloat, {1, 1, 1, 9}, 28)}};
  runs = Compare(*grouped, feeds);
  CHECK(runs.saved_launches() > 0);
  pass_test::RequireClose(runs.fused.outputs, runs.op_by_op.outputs, 1e-5, 1e-6);
}

TEST_CASE("fused attention: bfloat16 operands, computed in float32", "[attention][cpu]") {
  const std::string float32 = HeadsFirst("[B,1,S,S]", "B,3,S,16");
  std::string bfloat16 = float32;
  for (size_t at = bfloat16.find("float"); at != std::string::npos; at = bfloat16.find("float", at + 8)) {
    bfloat16.replace(at, 5, "bfloat16");
  }
  auto model = Outlined(bfloat16);
  const int64_t sequence = 70;  // a second tile of 64 queries
  const std::vector<NamedTensor> feeds = {
      {"qh", Random(DataType::kBFloat16, {2, 3, sequence, 16}, 21)},
      {"kh", Random(DataType::kBFloat16, {2, 3, sequence, 16}, 22)},
      {"vh", Random(DataType::kBFloat16, {2, 3, sequence, 16}, 23)},
      {"mask", Random(DataType::kBFloat16, {2, 1, sequence, sequence}, 24, -3.0f, 0.0f)}};
  const fused_test::Outcome fused = fused_test::Run(*model, feeds, true);
  const fused_test::Outcome op_by_op = fused_test::Run(*model, feeds, false);
  CHECK(fused.outputs[0].tensor.dtype() == DataType::kBFloat16);
  CHECK(fused.stats.kernels_launched == 1);
  CHECK(op_by_op.stats.kernels_launched > 1);

  // The exact answer: the float32 body on the same (bfloat16-valued) inputs. The fused kernel
  // keeps scores and probabilities in float32 and rounds only its output (half an ulp: 2^-9
  // relative); op by op, every intermediate is rounded to bfloat16, so it is further off.
  std::vector<NamedTensor> widened;
  for (const NamedTensor& feed : feeds) {
    RtTensor wide = RtTensor::Allocate(DataType::kFloat, feed.tensor.dims());
    for (int64_t i = 0; i < wide.NumElements(); ++i) wide.data<float>()[i] = static_cast<float>(feed.tensor.ValueAsDouble(i));
    widened.push_back({feed.name, wide});
  }
  const fused_test::Outcome exact = fused_test::Run(*pass_test::Parse(float32), widened, false);
  double fused_error = 0, op_by_op_error = 0;
  const RtTensor& want = exact.outputs[0].tensor;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    INFO("element " << i);
    const double got = fused.outputs[0].tensor.ValueAsDouble(i);
    REQUIRE(std::abs(got - want.ValueAsDouble(i)) <= 4e-3 * std::abs(want.ValueAsDouble(i)) + 1e-5);
    fused_error = std::max(fused_error, std::abs(got - want.ValueAsDouble(i)));
    op_by_op_error = std::max(op_by_op_error, std::abs(op_by_op.outputs[0].tensor.ValueAsDouble(i) - want.ValueAsDouble(i)));
  }
  CHECK(fused_error < op_by_op_error);
}
