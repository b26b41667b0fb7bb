#include "cuda_runtime/codegen/lower_batchnorm.h"

#include <cmath>
#include <vector>

#include "ir/constant_value.h"
#include "ir/float16.h"
#include "ir/function_body.h"

namespace fusionopt::cuda {
namespace {

// The constant's values as doubles; empty when it is not a float tensor of `count` elements.
std::vector<double> Values(const Value* value, int64_t count) {
  if (value == nullptr) return {};
  TensorPtr tensor = ConstantValueOf(*value, /*initializers_overridable=*/false);
  if (tensor == nullptr || tensor->NumElements() != count) return {};
  std::vector<double> values;
  const uint8_t* bytes = tensor->bytes().data();
  for (int64_t i = 0; i < count; ++i) {
    switch (tensor->dtype()) {
      case DataType::kFloat: values.push_back(reinterpret_cast<const float*>(bytes)[i]); break;
      case DataType::kDouble: values.push_back(reinterpret_cast<const double*>(bytes)[i]); break;
      case DataType::kFloat16: values.push_back(HalfToFloat(reinterpret_cast<const uint16_t*>(bytes)[i])); break;
      case DataType::kBFloat16: values.push_back(BFloat16ToFloat(reinterpret_cast<const uint16_t*>(bytes)[i])); break;
      default: return {};
    }
  }
  return values;
}

TensorPtr Store(DataType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  std::vector<uint8_t> bytes(ByteSizeOf(dtype, values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DataType::kFloat: reinterpret_cast<float*>(bytes.data())[i] = static_cast<float>(values[i]); break;
      case DataType::kDouble: reinterpret_cast<double*>(bytes.data())[i] = values[i]; break;
      case DataType::kFloat16:
        reinterpret_cast<uint16_t*>(bytes.data())[i] = FloatToHalf(static_cast<float>(values[i]));
        break;
      default:  // kBFloat16: the only other dtype Values accepts for x
        reinterpret_cast<uint16_t*>(bytes.data())[i] = FloatToBFloat16(static_cast<float>(values[i]));
    }
  }
  return std::make_shared<const Tensor>(Tensor::Owned(dtype, std::move(dims), std::move(bytes)));
}

bool Rewrite(Graph& graph, Node& bn) {
  if (bn.GetInt("training_mode", 0) != 0 || bn.inputs().size() != 5) return false;
  for (size_t i = 1; i < bn.outputs().size(); ++i) {
    if (bn.output(i) != nullptr && !bn.output(i)->uses().empty()) return false;
  }
  Value* x = bn.input(0);
  Value* y = bn.output(0);
  if (x == nullptr || y == nullptr || !x->shape() || x->shape()->size() < 2 || !(*x->shape())[1].is_known()) return false;
  DataType dtype = x->dtype();
  if (dtype != DataType::kFloat && dtype != DataType::kDouble && dtype != DataType::kFloat16 &&
      dtype != DataType::kBFloat16) {
    return false;
  }
  const int64_t channels = (*x->shape())[1].value;
  std::vector<double> scale = Values(bn.input(1), channels), bias = Values(bn.input(2), channels),
                      mean = Values(bn.input(3), channels), var = Values(bn.input(4), channels);
  if (scale.empty() || bias.empty() || mean.empty() || var.empty()) return false;
  const double epsilon = bn.GetFloat("epsilon", 1e-5f);
  std::vector<double> a(channels), b(channels);
  for (int64_t c = 0; c < channels; ++c) {
    a[c] = scale[c] / std::sqrt(var[c] + epsilon);
    b[c] = bias[c] - mean[c] * a[c];
  }
  std::vector<int64_t> dims(x->shape()->size() - 1, 1);
  dims[0] = channels;
  Shape shape;
  for (int64_t dim : dims) shape.push_back(Dim::Known(dim));
  auto constant = [&](const std::string& base, const std::vector<double>& values) {
    Value* value = graph.CreateValue(graph.UniqueName(bn.name() + base));
    value->type().dtype = dtype;
    value->type().shape = shape;
    graph.SetInitializer(value, Store(dtype, dims, values));
    return value;
  };
  Value* multiplier = constant("_multiplier", a);
  Value* addend = constant("_addend", b);
  Value* scaled = graph.CreateValue(graph.UniqueName(bn.name() + "_scaled"));
  scaled->type() = y->type();
  graph.CreateNode("Mul", "", {x, multiplier}, {scaled}, bn.name() + "_mul");
  Node* add = graph.CreateNode("Add", "", {scaled, addend}, {nullptr}, bn.name() + "_add");
  graph.TransferProducer(y, add, 0);
  graph.RemoveNode(&bn);
  return true;
}

}  // namespace

std::unique_ptr<Graph> LowerBatchNormalization(const Graph& body) {
  bool any = false;
  for (const auto& node : body.nodes()) any = any || (node->op_type() == "BatchNormalization" && node->domain().empty());
  if (!any) return nullptr;
  std::unique_ptr<Graph> copy = CopyGraph(body);
  std::vector<Node*> batchnorms;
  for (const auto& node : copy->nodes()) {
    if (node->op_type() == "BatchNormalization" && node->domain().empty()) batchnorms.push_back(node.get());
  }
  bool rewritten = false;
  for (Node* bn : batchnorms) rewritten = Rewrite(*copy, *bn) || rewritten;
  if (!rewritten) return nullptr;
  if (!copy->SortTopologically().ok()) return nullptr;
  return copy;
}

}  // namespace fusionopt::cuda
