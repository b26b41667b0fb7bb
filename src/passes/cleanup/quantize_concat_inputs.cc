// quantize-concat-inputs (O1): its rewrite, conditions and limits are in quantize_concat_inputs.h.
#include "passes/cleanup/quantize_concat_inputs.h"

#include <algorithm>

#include "patterns/quantized/contraction.h"

namespace fusionopt::passes {
namespace {

using quantized::Quantization;

class Pusher {
 public:
  Pusher(Graph& graph, PassContext& context)
      : graph_(graph), context_(context), constant_of_(quantized::GraphConstantsOf(context.model())) {}

  bool Run() {
    std::vector<Node*> concats;
    for (const auto& node : graph_.nodes()) {
      if (IsDefaultDomain(*node) && node->op_type() == "Concat") concats.push_back(node.get());
    }
    bool changed = false;
    for (Node* concat : concats) {
      Node* quantize = QuantizeAfter(*concat);
      if (quantize == nullptr) continue;
      Rewrite(*concat, *quantize);
      changed = true;
    }
    return changed;
  }

 private:
  // The QuantizeLinear that alone reads `concat`'s result, when the rewrite applies.
  Node* QuantizeAfter(Node& concat) {
    Value* joined = concat.output(0);
    if (joined == nullptr || joined->is_graph_output() || joined->uses().size() != 1) return nullptr;
    Node* quantize = joined->uses().front().node;
    if (!quantized::IsQuantizeLinear(*quantize) || quantize->input(0) != joined) return nullptr;
    Decided<Quantization> parameters = quantized::ConstantQuantization(*quantize, 0, constant_of_);
    if (!parameters || !parameters->per_tensor()) {
      context_.Rejected(concat, WhyNot("the QuantizeLinear after it is not per tensor with constant parameters"));
      return nullptr;
    }
    const auto& inputs = concat.inputs();
    const bool joins_quantized = std::any_of(inputs.begin(), inputs.end(), [](const Value* input) {
      return input != nullptr && input->producer() != nullptr && quantized::IsDequantizeLinear(*input->producer());
    });
    if (!joins_quantized) {
      context_.Rejected(concat, WhyNot("no input is dequantized"));
      return nullptr;
    }
    parameters_ = *parameters;
    return quantize;
  }

  // The 8-bit value `input` is when its DequantizeLinear has the QuantizeLinear's parameters.
  Value* SameGrid(const Value& input) {
    const std::optional<Quantization> read = quantized::PerTensorDequantization(input, constant_of_);
    if (!read || !quantized::SameQuantization(parameters_, *read)) return nullptr;
    return input.producer()->input(0);
  }

  void Rewrite(Node& concat, Node& quantize) {
    Value* quantized_output = quantize.output(0);
    int64_t requantized = 0, reused = 0;
    for (size_t i = 0; i < concat.inputs().size(); ++i) {
      Value* input = concat.input(i);
      if (input == nullptr) continue;
      if (Value* grid = SameGrid(*input)) {
        Node* dequantize = input->producer();
        concat.ReplaceInput(static_cast<int>(i), grid);
        if (input->uses().empty() && !input->is_graph_output()) graph_.RemoveNode(dequantize);
        ++reused;
        continue;
      }
      Value* piece = graph_.CreateValue(graph_.UniqueName(input->name() + "_quantized"));
      piece->type().dtype = quantized_output->dtype();
      piece->type().shape = input->shape();
      std::vector<Value*> operands(quantize.inputs().begin(), quantize.inputs().end());
      operands[0] = input;
      Node* copy = graph_.CreateNode("QuantizeLinear", quantize.domain(), operands, {piece},
                                     graph_.UniqueNodeName(quantize.name() + "_input"));
      for (const Attribute& attribute : quantize.attributes()) copy->SetAttribute(attribute.CopyWithoutGraphs());
      graph_.MoveBefore(copy, &concat);
      concat.ReplaceInput(static_cast<int>(i), piece);
      ++requantized;
    }
    // The Concat writes the quantized result under its name; the float one goes with the Q.
    Value* joined = concat.output(0);
    graph_.DetachProducer(joined);
    graph_.TransferProducer(quantized_output, &concat, 0);
    graph_.RemoveNode(&quantize);
    graph_.EraseValue(joined);
    context_.Count("concats", 1);
    context_.Count("inputs_requantized", requantized);
    context_.Count("dequantizations_dropped", reused);
  }

  Graph& graph_;
  PassContext& context_;
  quantized::ConstantOf constant_of_;
  Quantization parameters_;
};

}  // namespace

Result<bool> QuantizeConcatInputs::RunOnGraph(Graph& graph, PassContext& context) {
  return Pusher(graph, context).Run();
}

}  // namespace fusionopt::passes
