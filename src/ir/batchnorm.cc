#include "ir/batchnorm.h"

#include <cmath>

#include "ir/status.h"

namespace fusionopt {
namespace {

constexpr int64_t kFirstOpset = 7;
constexpr int64_t kLastKnownOpset = 28;  // BatchNormalization-15 is the newest version

}  // namespace

ChannelAffine BatchNormChannelAffine(const std::vector<double>& gamma, const std::vector<double>& beta,
                                     const std::vector<double>& mean, const std::vector<double>& variance,
                                     double epsilon) {
  FUSIONOPT_CHECK(beta.size() == gamma.size() && mean.size() == gamma.size() && variance.size() == gamma.size(),
                  "BatchNormalization statistics of different sizes");
  ChannelAffine affine;
  for (size_t c = 0; c < gamma.size(); ++c) {
    const double scale = gamma[c] / std::sqrt(variance[c] + epsilon);
    affine.scale.push_back(scale);
    affine.shift.push_back(beta[c] - mean[c] * scale);
  }
  return affine;
}

WhyNot WhyNotInferenceBatchNorm(const Node& batchnorm, int64_t opset) {
  if (opset < kFirstOpset || opset > kLastKnownOpset) return "BatchNormalization opset outside 7-28";
  if (batchnorm.GetInt("training_mode", 0) != 0) return "training mode";
  if (opset < 9 && batchnorm.GetInt("spatial", 1) != 1) return "spatial=0 (per-activation statistics)";
  if (batchnorm.output(0) == nullptr) return "no normalized output";
  for (size_t i = 1; i < batchnorm.outputs().size(); ++i) {
    const Value* statistics = batchnorm.output(i);
    if (statistics != nullptr && (!statistics->uses().empty() || statistics->is_graph_output())) {
      return "statistics outputs are read";
    }
  }
  return {};
}

Decided<ChannelAffine> BatchNormAffine(const Node& batchnorm, int64_t channels, InitializerRule rule) {
  std::vector<std::vector<double>> statistics;  // γ, β, μ, σ²
  for (size_t input = 1; input <= 4; ++input) {
    const Value* value = batchnorm.input(input);
    TensorPtr tensor = value != nullptr ? ConstantValueOf(*value, rule) : nullptr;
    if (tensor == nullptr || !IsFloatingPointForFolding(tensor->dtype())) return WhyNot("non-constant statistics");
    if (tensor->dims() != std::vector<int64_t>{channels}) return WhyNot("statistics are not [C]");
    statistics.push_back(*tensor->AsDoubles());
    tensor->ReleaseMappedPages();  // read once; the map is what the callers keep
  }
  const double epsilon = batchnorm.GetFloat("epsilon", 1e-5F);
  for (double variance : statistics[3]) {
    if (!(variance + epsilon > 0)) return WhyNot("variance + epsilon is not positive");
  }
  return BatchNormChannelAffine(statistics[0], statistics[1], statistics[2], statistics[3], epsilon);
}

Decided<BatchNormAsAffine> WriteBatchNormAsAffine(Graph& graph, Node& batchnorm, int64_t opset, InitializerRule rule) {
  if (WhyNot why = WhyNotInferenceBatchNorm(batchnorm, opset)) return why;
  Value* x = batchnorm.input(0);
  if (x == nullptr || !x->shape() || x->shape()->size() < 2) return WhyNot("input rank unknown or below 2");
  const Dim& channels = (*x->shape())[1];
  if (!channels.is_known() || channels.value <= 0) return WhyNot("channel count unknown");
  const DataType dtype = x->dtype();
  if (!IsFloatingPointForFolding(dtype)) return WhyNot("not a floating-point input");
  Decided<ChannelAffine> affine = BatchNormAffine(batchnorm, channels.value, rule);
  if (!affine) return affine.why_not();
  const ChannelAffine& map = *affine;
  // [C, 1, ...]: broadcast over the dims after the channel axis, right-aligned against x.
  std::vector<int64_t> dims(x->shape()->size() - 1, 1);
  dims[0] = channels.value;
  // Named after the BatchNormalization (its output, when it has no name), so a report reader can
  // tell where the two nodes came from.
  const std::string stem = batchnorm.name().empty() ? batchnorm.output(0)->name() : batchnorm.name();
  Value* scale = AddInitializer(graph, stem + "_scale", MakeFloatingTensor(dtype, dims, map.scale));
  Value* shift = AddInitializer(graph, stem + "_shift", MakeFloatingTensor(dtype, dims, map.shift));
  Value* scaled = graph.CreateValue(graph.UniqueName(batchnorm.output(0)->name() + "_scaled"));
  scaled->type() = batchnorm.output(0)->type();  // typed now: a body's generators run no shape inference
  BatchNormAsAffine written;
  written.mul = graph.CreateNode("Mul", "", {x, scale}, {scaled}, graph.UniqueNodeName(stem + "_scale"));
  written.add = graph.CreateNode("Add", "", {scaled, shift}, {nullptr}, graph.UniqueNodeName(stem + "_shift"));
  graph.MoveBefore(written.mul, &batchnorm);
  graph.MoveBefore(written.add, &batchnorm);
  return written;
}

}  // namespace fusionopt
