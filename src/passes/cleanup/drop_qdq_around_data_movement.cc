// drop-qdq-around-data-movement (O1): its rewrite, conditions and limits are in drop_qdq_around_data_movement.h.
#include "passes/cleanup/drop_qdq_around_data_movement.h"

#include <algorithm>

#include "patterns/quantized/contraction.h"

namespace fusionopt::passes {
namespace {

using quantized::Quantization;

// The inputs of `node` that carry values (the rest are shapes, indices, axes, sizes).
std::vector<size_t> DataInputs(const Node& node) {
  const std::string& op = node.op_type();
  if (op == "Concat") {
    std::vector<size_t> all(node.inputs().size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  return {0};
}

bool MovesData(const Node& node, int64_t opset) {
  static const std::vector<std::string> kOps = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity",
                                                "Slice", "Gather", "GatherElements", "Split", "Concat", "Expand",
                                                "Tile", "DepthToSpace", "SpaceToDepth"};
  if (!IsDefaultDomain(node)) return false;
  const std::string& op = node.op_type();
  if (op == "MaxPool") return opset >= 12 && (node.outputs().size() < 2 || node.output(1) == nullptr);
  // tf_crop_and_resize fills outside the crop with a float extrapolation_value, which is no
  // move of the quantized values.
  if (op == "Resize") {
    return opset >= 11 && node.GetString("mode", "nearest") == "nearest" &&
           node.GetString("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize";
  }
  return std::find(kOps.begin(), kOps.end(), op) != kOps.end();
}


struct Candidate {
  Node* op = nullptr;
  std::vector<Node*> dequantizes;  // per data input
  std::vector<Node*> quantizes;    // per output
};

class Dropper {
 public:
  Dropper(Graph& graph, PassContext& context)
      : graph_(graph),
        context_(context),
        opset_(context.model().OpsetFor("").value_or(0)),
        constant_of_(quantized::GraphConstantsOf(context.model())) {}

  bool Run() {
    std::vector<Node*> nodes;
    for (const auto& node : graph_.nodes()) {
      if (MovesData(*node, opset_)) nodes.push_back(node.get());
    }
    bool changed = false;
    for (Node* node : nodes) {
      std::optional<Candidate> candidate = Match(*node);
      if (!candidate) continue;
      Rewrite(*candidate);
      changed = true;
    }
    return changed;
  }

 private:
  std::optional<Candidate> Match(Node& op) {
    Candidate candidate{&op, {}, {}};
    std::optional<Quantization> parameters;
    for (size_t input : DataInputs(op)) {
      const Value* value = op.input(input);
      const std::optional<Quantization> read =
          value != nullptr ? quantized::PerTensorDequantization(*value, constant_of_) : std::nullopt;
      if (!read || !IsEightBitInteger(read->type)) return std::nullopt;
      if (parameters && !quantized::SameQuantization(*parameters, *read)) return std::nullopt;
      parameters = *read;
      candidate.dequantizes.push_back(value->producer());
    }
    for (Value* output : op.outputs()) {
      if (output == nullptr) continue;
      if (output->is_graph_output() || output->uses().size() != 1) return std::nullopt;
      Node* quantize = output->uses().front().node;
      if (!quantized::IsQuantizeLinear(*quantize) || quantize->input(0) != output) return std::nullopt;
      Decided<Quantization> read = quantized::ConstantQuantization(*quantize, 0, constant_of_);
      if (!read || !quantized::SameQuantization(*parameters, *read)) return std::nullopt;
      candidate.quantizes.push_back(quantize);
    }
    if (candidate.quantizes.empty()) return std::nullopt;
    return candidate;
  }

  void Rewrite(const Candidate& candidate) {
    Node& op = *candidate.op;
    const std::vector<size_t> data = DataInputs(op);
    for (size_t k = 0; k < data.size(); ++k) {
      Node* dequantize = candidate.dequantizes[k];
      op.ReplaceInput(static_cast<int>(data[k]), dequantize->input(0));
      if (dequantize->output(0)->uses().empty() && !dequantize->output(0)->is_graph_output()) graph_.RemoveNode(dequantize);
    }
    size_t next = 0;
    for (size_t i = 0; i < op.outputs().size(); ++i) {
      Value* float_output = op.output(i);
      if (float_output == nullptr) continue;
      Node* quantize = candidate.quantizes[next++];
      Value* quantized = quantize->output(0);
      // The op writes the quantized value under its name; the float one goes with the Q.
      graph_.DetachProducer(float_output);
      graph_.TransferProducer(quantized, &op, static_cast<int>(i));
      graph_.RemoveNode(quantize);
      graph_.EraseValue(float_output);
    }
    context_.Count("dropped_pairs", static_cast<int64_t>(candidate.dequantizes.size() + candidate.quantizes.size()));
  }

  Graph& graph_;
  PassContext& context_;
  int64_t opset_;
  quantized::ConstantOf constant_of_;
};

}  // namespace

Result<bool> DropQdqAroundDataMovement::RunOnGraph(Graph& graph, PassContext& context) {
  return Dropper(graph, context).Run();
}

}  // namespace fusionopt::passes
