#include "patterns/quantized/dynamic_contraction.h"

#include "patterns/matcher_support.h"

namespace fusionopt::quantized {
namespace {

using composite::OtherOperand;
using composite::SoleReader;


// Read by `reader` alone, once, and no graph output.
// An absent optional output counts as read by `reader` alone.
bool OnlyReadBy(const Value* value, const Node* reader) { return value == nullptr || SoleReader(value) == reader; }

// One value per output column or channel, or one for all: the shapes in which %ws broadcasts
// onto the product without mixing channels. A Conv's product has the weights' rank, channels
// on axis 1: [C, 1, .., 1] (or [1, C, 1, .., 1]) with one trailing 1 per spatial axis.
bool PerOutputChannel(const Tensor& values, int64_t channels, size_t conv_rank) {
  if (values.NumElements() == 1) return true;
  const std::vector<int64_t>& dims = values.dims();
  if (dims.empty() || values.NumElements() != channels) return false;
  if (conv_rank == 0) return dims.back() == channels;  // [N], [1, .., N]
  const size_t spatial = conv_rank - 2;
  if (dims.size() < spatial + 1 || dims.size() > conv_rank) return false;
  return dims[dims.size() - spatial - 1] == channels;  // the rest are 1: the element count says so
}

class Matcher {
 public:
  explicit Matcher(const ConstantOf& constant_of) : constant_of_(constant_of) {}

  Decided<DynamicContraction> Match(const Node& contraction) {
    const std::string& op = contraction.op_type();
    if (!IsDefaultDomain(contraction) || (op != "MatMulInteger" && op != "ConvInteger")) return "not an integer contraction";
    if (contraction.inputs().size() < 2 || contraction.outputs().size() != 1) return "unexpected operands";
    unit_.contraction = &contraction;
    if (WhyNot why = MatchWeights(contraction)) return why;
    if (WhyNot why = MatchRescale(*contraction.output(0))) return why;
    unit_.x_quantized = contraction.input(0);
    unit_.x_zero = contraction.inputs().size() > 2 ? contraction.input(2) : nullptr;
    if (unit_.x_quantized == nullptr) return "no input";
    unit_.quantize = OwnQuantize();
    return unit_;
  }

 private:
  WhyNot MatchWeights(const Node& contraction) {
    unit_.weights = constant_of_(contraction.input(1));
    if (unit_.weights == nullptr) return "the weights are not a constant";
    if (!IsEightBitInteger(unit_.weights->dtype())) return "the weights are not 8-bit integers";
    const size_t rank = unit_.weights->dims().size();
    if (contraction.op_type() == "MatMulInteger" ? rank != 2 : rank < 3) return "the weights have an unexpected rank";
    if (contraction.inputs().size() > 3 && contraction.input(3) != nullptr) {
      unit_.weight_zero = constant_of_(contraction.input(3));
      if (unit_.weight_zero == nullptr) return "the weights' zero point is not a constant";
      const std::vector<int64_t>& dims = unit_.weight_zero->dims();
      if (unit_.weight_zero->NumElements() != 1 && !(dims.size() == 1 && dims[0] == Channels())) {
        return "the weights' zero point is not one value per output channel";
      }
    }
    return {};
  }

  int64_t Channels() const {
    const std::vector<int64_t>& dims = unit_.weights->dims();
    return unit_.contraction->op_type() == "MatMulInteger" ? dims[1] : dims[0];
  }

  // Cast(acc) to float, times Mul(%xs, %ws).
  WhyNot MatchRescale(const Value& accumulator) {
    unit_.cast = SoleReader(&accumulator);
    if (unit_.cast == nullptr || !IsDefaultOp(unit_.cast, "Cast")) return "the accumulator is not only cast";
    if (unit_.cast->GetInt("to", 0) != static_cast<int64_t>(DataType::kFloat)) return "the accumulator is cast to other than float";
    const Value* product = unit_.cast->output(0);
    unit_.rescale = SoleReader(product);
    if (unit_.rescale == nullptr || !IsDefaultOp(unit_.rescale, "Mul")) return "the float accumulator is not only scaled";
    const Value* scale = OtherOperand(*unit_.rescale, product);
    unit_.scales = scale != nullptr ? scale->producer() : nullptr;
    if (unit_.scales == nullptr || !IsDefaultOp(unit_.scales, "Mul") || !OnlyReadBy(scale, unit_.rescale)) {
      return "the accumulator's scale is not a product of the input's and the weights' scales";
    }
    if (unit_.scales->inputs().size() != 2) return "the accumulator's scale is not a product of two values";
    for (const Value* operand : unit_.scales->inputs()) {
      if (TensorPtr constant = constant_of_(operand); constant != nullptr && unit_.weight_scale == nullptr) {
        unit_.weight_scale = constant;
      } else {
        unit_.x_scale = operand;
      }
    }
    if (unit_.weight_scale == nullptr || unit_.x_scale == nullptr) {
      return "the accumulator's scale is not the input's scale times a constant";
    }
    if (const std::optional<Shape>& shape = unit_.x_scale->shape(); shape && !shape->empty() &&
        !(shape->size() == 1 && (*shape)[0] == Dim::Known(1))) {
      return "the input's scale is not a scalar";
    }
    if (unit_.weight_scale->dtype() != DataType::kFloat) return "the weights' scale is not float";
    const size_t conv_rank = unit_.contraction->op_type() == "ConvInteger" ? unit_.weights->dims().size() : 0;
    if (!PerOutputChannel(*unit_.weight_scale, Channels(), conv_rank)) {
      return "the weights' scale is not one value per output channel";
    }
    return {};
  }

  // The DynamicQuantizeLinear behind %xq when the unit alone reads all it computes.
  const Node* OwnQuantize() const {
    const Node* producer = unit_.x_quantized->producer();
    if (producer == nullptr || !IsDefaultOp(producer, "DynamicQuantizeLinear") || producer->outputs().size() != 3) {
      return nullptr;
    }
    if (producer->output(0) != unit_.x_quantized || producer->output(1) != unit_.x_scale ||
        (unit_.x_zero != nullptr && producer->output(2) != unit_.x_zero)) {
      return nullptr;
    }
    const bool alone = OnlyReadBy(producer->output(0), unit_.contraction) && OnlyReadBy(producer->output(1), unit_.scales) &&
                       (unit_.x_zero != nullptr ? OnlyReadBy(producer->output(2), unit_.contraction)
                                                : producer->output(2) == nullptr || producer->output(2)->uses().empty());
    return alone ? producer : nullptr;
  }

  const ConstantOf& constant_of_;
  DynamicContraction unit_;
};

}  // namespace

std::vector<const Node*> DynamicContraction::Nodes() const {
  std::vector<const Node*> nodes;
  if (quantize != nullptr) nodes.push_back(quantize);
  nodes.insert(nodes.end(), {scales, contraction, cast, rescale});
  return nodes;
}

Decided<DynamicContraction> MatchDynamicContraction(const Node& contraction, const ConstantOf& constant_of) {
  return Matcher(constant_of).Match(contraction);
}

}  // namespace fusionopt::quantized
