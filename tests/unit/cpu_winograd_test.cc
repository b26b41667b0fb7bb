// Winograd F(4x4, 3x3) convolutions (contraction/winograd.h): the same numbers as the direct
// convolution in double within float32's reach, for every input and output layout, odd
// output sizes, pads, batches and epilogues; where it applies and where it pays; and the
// runtime running it where the rule picks it.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "cpu_runtime/contraction/conv_reference.h"
#include "cpu_runtime/contraction/epilogue.h"
#include "cpu_runtime/contraction/winograd.h"
#include "cpu_runtime/engine/host_cpu.h"
#include "cpu_runtime/engine/session.h"
#include "cpu_runtime/onednn/common.h"
#include "cpu_test_support.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

namespace {

ConvShape Shape3x3(int64_t batch, int64_t channels, int64_t outputs, int64_t height, int64_t width,
                   std::vector<int64_t> pad_begin, std::vector<int64_t> pad_end, int64_t group = 1,
                   int64_t stride = 1) {
  ConvShape shape;
  shape.batch = batch;
  shape.in_channels = channels;
  shape.out_channels = outputs;
  shape.group = group;
  Window& window = shape.window;
  window.input = {height, width};
  window.kernel = {3, 3};
  window.stride = {stride, stride};
  window.dilation = {1, 1};
  window.pad_begin = std::move(pad_begin);
  window.pad_end = std::move(pad_end);
  for (size_t axis = 0; axis < 2; ++axis) {
    window.output.push_back((window.input[axis] + window.pad_begin[axis] + window.pad_end[axis] - 3) / stride + 1);
  }
  shape.output_dims = {batch, outputs, window.output[0], window.output[1]};
  return shape;
}

std::vector<float> Normal(size_t count, float scale, unsigned seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(count);
  for (float& value : values) value = normal(engine);
  return values;
}

RtTensor FloatTensor(const std::vector<int64_t>& dims, const std::vector<float>& values) {
  RtTensor tensor = RtTensor::Allocate(DataType::kFloat, dims);
  std::copy(values.begin(), values.end(), tensor.data<float>());
  return tensor;
}

// The direct convolution in double, then `epilogue` on each value (with the residual's).
std::vector<double> Expected(const ConvShape& shape, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& bias, const std::vector<float>* residual,
                             double (*epilogue)(double value, double residual)) {
  std::vector<double> x64(x.begin(), x.end()), w64(w.begin(), w.end()), b64(bias.begin(), bias.end());
  int64_t count = 1;
  for (int64_t dim : shape.output_dims) count *= dim;
  std::vector<double> y(static_cast<size_t>(count));
  ReferenceConv(x64.data(), w64.data(), b64.data(), y.data(), shape);
  for (size_t i = 0; i < y.size(); ++i) y[i] = epilogue(y[i], residual ? (*residual)[i] : 0.0);
  return y;
}

double Identity(double value, double) { return value; }

// Runs F(4x4, 3x3) on `x` given row-major, reading it as `in_layout` and writing `out_layout`,
// and returns the result row-major.
RtTensor RunWinograd(const ConvShape& shape, const std::vector<float>& x, const std::vector<float>& w,
                     const std::vector<float>& bias, const std::vector<PostOp>& post_ops, const RtTensor* residual,
                     Layout in_layout, Layout out_layout) {
  Allocator allocator;
  std::vector<AddendLayout> addends;
  if (residual != nullptr) addends.push_back(AddendLayout{true, {}});
  std::optional<ew::Program> epilogue = PostOpsAsProgram(post_ops, addends);
  REQUIRE(epilogue.has_value());
  const winograd::Conv3x3 conv(shape, w.data(), bias.data(), std::move(*epilogue));
  const std::vector<int64_t> x_dims = {shape.batch, shape.in_channels, shape.window.input[0], shape.window.input[1]};
  const RtTensor x_in = onednn::WithLayout(FloatTensor(x_dims, x), in_layout, allocator);
  REQUIRE(x_in.layout() == in_layout);
  RtTensor residual_in;
  if (residual != nullptr) residual_in = onednn::WithLayout(*residual, out_layout, allocator);
  RtTensor y = RtTensor::Allocate(DataType::kFloat, shape.output_dims);
  conv.Run(x_in, y, out_layout, residual ? &residual_in : nullptr, allocator);
  y.set_layout(out_layout);
  return onednn::RowMajor(y, allocator);
}

// Largest |got - expected| relative to the largest |expected|.
double RelativeError(const RtTensor& got, const std::vector<double>& expected) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got.data<float>()[i]) - expected[i]));
    scale = std::max(scale, std::abs(expected[i]));
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("Winograd F(4x4,3x3) equals the direct convolution in every layout", "[cpu][winograd]") {
  struct Case {
    ConvShape shape;
    const char* what;
  };
  const std::vector<Case> cases = {
      {Shape3x3(1, 16, 24, 10, 10, {1, 1}, {1, 1}), "same padding, outputs not a multiple of 4"},
      {Shape3x3(2, 8, 16, 9, 7, {0, 0}, {0, 0}), "no padding, two images, a 7x5 output"},
      {Shape3x3(1, 24, 8, 6, 13, {0, 1}, {1, 0}), "uneven pads"},
      {Shape3x3(1, 8, 8, 1, 1, {1, 1}, {1, 1}), "one pixel"},
  };
  for (const Case& test : cases) {
    const ConvShape& shape = test.shape;
    INFO(test.what);
    REQUIRE(winograd::Applies(shape));
    const auto x = Normal(static_cast<size_t>(shape.batch * shape.in_channels * shape.window.InputSize()), 1.0f, 1);
    const auto w = Normal(static_cast<size_t>(shape.out_channels * shape.in_channels * 9), 0.3f, 2);
    const auto bias = Normal(static_cast<size_t>(shape.out_channels), 0.5f, 3);
    const std::vector<double> expected = Expected(shape, x, w, bias, nullptr, Identity);
    for (Layout in : {Layout::kRowMajor, Layout::kBlocked8, Layout::kChannelsLast, Layout::kBlocked16}) {
      for (Layout out : {Layout::kRowMajor, Layout::kBlocked8, Layout::kChannelsLast}) {
        if ((in == Layout::kBlocked16 && shape.in_channels % 16 != 0)) continue;
        INFO("layouts " << static_cast<int>(in) << " -> " << static_cast<int>(out));
        const RtTensor y = RunWinograd(shape, x, w, bias, {}, nullptr, in, out);
        CHECK(RelativeError(y, expected) < 1e-5);
      }
    }
  }
}

TEST_CASE("Winograd applies its epilogue: activations and a summed residual, in order", "[cpu][winograd]") {
  const ConvShape shape = Shape3x3(1, 16, 16, 11, 11, {1, 1}, {1, 1});
  const auto x = Normal(static_cast<size_t>(16 * 121), 1.0f, 4);
  const auto w = Normal(static_cast<size_t>(16 * 16 * 9), 0.3f, 5);
  const auto bias = Normal(16, 0.5f, 6);
  const auto residual_values = Normal(static_cast<size_t>(16 * 121), 1.0f, 7);
  const RtTensor residual = FloatTensor(shape.output_dims, residual_values);
  using dnnl::algorithm;
  auto eltwise = [](algorithm kind, float alpha = 0, float beta = 0) {
    return PostOp{PostOp::Kind::kEltwise, kind, alpha, beta};
  };
  const PostOp add{PostOp::Kind::kAdd};

  SECTION("SiLU (swish)") {
    const auto expected = Expected(shape, x, w, bias, nullptr, [](double v, double) { return v / (1 + std::exp(-v)); });
    const RtTensor y = RunWinograd(shape, x, w, bias, {eltwise(algorithm::eltwise_swish, 1.0f)}, nullptr,
                                   Layout::kBlocked8, Layout::kBlocked8);
    CHECK(RelativeError(y, expected) < 1e-5);
  }
  SECTION("residual, then Relu (ResNet's block end)") {
    const auto expected =
        Expected(shape, x, w, bias, &residual_values, [](double v, double r) { return std::max(0.0, v + r); });
    for (Layout layout : {Layout::kRowMajor, Layout::kBlocked8, Layout::kChannelsLast}) {
      const RtTensor y = RunWinograd(shape, x, w, bias, {add, eltwise(algorithm::eltwise_relu)}, &residual,
                                     Layout::kBlocked8, layout);
      CHECK(RelativeError(y, expected) < 1e-5);
    }
  }
  SECTION("Clip, then a linear step, then the residual: order kept") {
    const auto expected = Expected(shape, x, w, bias, &residual_values,
                                   [](double v, double r) { return 2.0 * std::clamp(v, 0.0, 6.0) - 1.0 + r; });
    const RtTensor y = RunWinograd(
        shape, x, w, bias,
        {eltwise(algorithm::eltwise_clip, 0.0f, 6.0f), eltwise(algorithm::eltwise_linear, 2.0f, -1.0f), add}, &residual,
        Layout::kChannelsLast, Layout::kBlocked8);
    CHECK(RelativeError(y, expected) < 1e-5);
  }
  SECTION("epilogues without an elementwise form are refused") {
    std::vector<AddendLayout> binary = {AddendLayout{false, {}}};
    CHECK_FALSE(PostOpsAsProgram({add}, binary).has_value());
    CHECK_FALSE(PostOpsAsProgram({eltwise(algorithm::eltwise_soft_relu)}, {}).has_value());
  }
}

TEST_CASE("Winograd applies to 3x3 stride-1 convolutions and is chosen where it pays", "[cpu][winograd]") {
  CHECK(winograd::Applies(Shape3x3(1, 64, 64, 56, 56, {1, 1}, {1, 1})));
  CHECK_FALSE(winograd::Applies(Shape3x3(1, 64, 64, 56, 56, {1, 1}, {1, 1}, /*group=*/2)));
  CHECK_FALSE(winograd::Applies(Shape3x3(1, 64, 64, 56, 56, {1, 1}, {1, 1}, 1, /*stride=*/2)));
  CHECK_FALSE(winograd::Applies(Shape3x3(1, 12, 64, 56, 56, {1, 1}, {1, 1})));  // channels not in 8s
  ConvShape five = Shape3x3(1, 64, 64, 56, 56, {2, 2}, {2, 2});
  five.window.kernel = {5, 5};
  CHECK_FALSE(winograd::Applies(five));

  // The rules measured on the corpus (docs/benchmarks.md): enough tiles and wide enough channels,
  // against each kind of direct kernel.
  using winograd::DirectKernels;
  auto avx2 = [](const ConvShape& shape) { return winograd::Pays(shape, DirectKernels::kAvx2); };
  CHECK(avx2(Shape3x3(1, 64, 64, 56, 56, {1, 1}, {1, 1})));     // ResNet stage 1
  CHECK(avx2(Shape3x3(1, 256, 256, 14, 14, {1, 1}, {1, 1})));   // ResNet stage 3: 16 tiles
  CHECK(avx2(Shape3x3(1, 128, 32, 28, 28, {1, 1}, {1, 1})));    // DenseNet at 28x28
  CHECK_FALSE(avx2(Shape3x3(1, 128, 32, 14, 14, {1, 1}, {1, 1})));  // DenseNet at 14x14
  CHECK_FALSE(avx2(Shape3x3(1, 512, 512, 7, 7, {1, 1}, {1, 1})));   // 4 tiles
  CHECK(avx2(Shape3x3(2, 512, 512, 7, 7, {1, 1}, {1, 1})));         // 8 tiles
  CHECK_FALSE(avx2(Shape3x3(2, 128, 32, 14, 14, {1, 1}, {1, 1})));  // narrow on 32 tiles
  CHECK_FALSE(avx2(Shape3x3(1, 16, 16, 160, 160, {1, 1}, {1, 1})));  // too narrow
  auto avx512 = [](const ConvShape& shape) { return winograd::Pays(shape, DirectKernels::kAvx512); };
  CHECK(avx512(Shape3x3(1, 64, 64, 56, 56, {1, 1}, {1, 1})));        // ResNet stage 1
  CHECK(avx512(Shape3x3(1, 64, 64, 20, 20, {1, 1}, {1, 1})));        // YOLOv8n: 25 tiles
  CHECK_FALSE(avx512(Shape3x3(2, 512, 512, 7, 7, {1, 1}, {1, 1})));  // 8 tiles: AVX2's rule takes it
  CHECK_FALSE(avx512(Shape3x3(2, 128, 32, 56, 56, {1, 1}, {1, 1})));  // DenseNet: too narrow here
  CHECK_FALSE(avx512(Shape3x3(2, 32, 32, 80, 80, {1, 1}, {1, 1})));   // YOLOv8n's 32 -> 32
  CHECK(winograd::DirectKernelsOnThisHost() ==
        (ThisHost().onednn_avx512 ? DirectKernels::kAvx512 : DirectKernels::kAvx2));
  // Auto follows this host's rule: DenseNet's 56x56 shape is where the two rules disagree.
  const ConvShape disputed = Shape3x3(2, 128, 32, 56, 56, {1, 1}, {1, 1});
  REQUIRE(avx2(disputed) != avx512(disputed));
  CHECK(winograd::Chosen(disputed, winograd::Mode::kAuto) ==
        (winograd::DirectKernelsOnThisHost() == DirectKernels::kAvx512 ? avx512(disputed) : avx2(disputed)));
  CHECK(winograd::Chosen(Shape3x3(1, 16, 16, 160, 160, {1, 1}, {1, 1}), winograd::Mode::kAlways));
  CHECK_FALSE(winograd::Chosen(Shape3x3(1, 64, 64, 56, 56, {1, 1}, {1, 1}), winograd::Mode::kOff));
}

TEST_CASE("a Conv the rule picks for Winograd runs it in a session with the direct numbers", "[cpu][winograd]") {
  // Conv + Relu, then a second Conv reading the first's layout; both 64 channels on 24x24
  // (36 tiles), which the rule picks.
  REQUIRE(winograd::Chosen(Shape3x3(1, 64, 64, 24, 24, {1, 1}, {1, 1}), winograd::Mode::kAuto));
  const auto w = Normal(64 * 64 * 9, 0.05f, 8);
  const auto x_values = Normal(64 * 576, 1.0f, 9);
  std::string weights = "[";
  for (size_t i = 0; i < w.size(); ++i) weights += (i ? ", " : "") + std::to_string(w[i]);
  weights += "]";
  const std::string text = "ir_version 8\nopset \"\" 17\ngraph g (float[1,64,24,24] %x) -> (float[1,64,24,24] %y)\n"
                           "  init float[64,64,3,3] %w = " + weights + "\n"
                           "{\n  %c = Conv(%x, %w) {pads: [1, 1, 1, 1]}\n  %r = Relu(%c)\n"
                           "  %y = Conv(%r, %w) {pads: [1, 1, 1, 1]}\n}";
  const int64_t runs_before = winograd::RunsSoFar();
  const RtTensor y = Run(text, {{"x", FloatTensor({1, 64, 24, 24}, x_values)}})[0].tensor;
  if (winograd::ModeFromEnvironment() != winograd::Mode::kOff) CHECK(winograd::RunsSoFar() - runs_before == 2);

  const ConvShape shape = Shape3x3(1, 64, 64, 24, 24, {1, 1}, {1, 1});
  const std::vector<float> zeros(64, 0.0f);
  const auto first = Expected(shape, x_values, w, zeros, nullptr, [](double v, double) { return std::max(0.0, v); });
  const auto expected = Expected(shape, std::vector<float>(first.begin(), first.end()), w, zeros, nullptr, Identity);
  CHECK(RelativeError(y, expected) < 2e-5);  // the direct kernel: 7.7e-6
}
