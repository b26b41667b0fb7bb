// Scan: the body runs once per element of the scan inputs' sequence axis, carrying state.
//
// Opset 9+: Scan(state..., scan_input...) with num_scan_inputs = M. The body takes
// (state..., one slice of each scan input) and gives (state..., scan_output_element...).
// scan_input_axes / scan_input_directions pick each input's sequence axis and direction;
// scan_output_axes / scan_output_directions where each stacked output puts the new axis and
// whether later iterations go after (0) or before (1) earlier ones.
//
// Opset 8: Scan(sequence_lens?, state..., scan_input...): every input has a leading batch
// axis, the sequence axis is 1, `directions` gives each scan input's direction, and every
// batch element is a scan of its own, the results stacked back along the batch axis.
#include <string>

#include "cpu_runtime/control_flow/common.h"
#include "cpu_runtime/data_movement/common.h"

namespace fusionopt::cpu::control_flow {
namespace {

class ScanKernel final : public ControlFlowKernel {
 public:
  ScanKernel(const Node& node, int64_t opset) : ControlFlowKernel(node), batched_(opset < 9) {}

  Status Init(const PrepareContext& context) {
    FUSIONOPT_RETURN_IF_ERROR(RequireTensorValues());
    const int64_t num_scan_inputs = node_.GetInt("num_scan_inputs", 0);
    if (num_scan_inputs < 1) return Error("attribute num_scan_inputs must be at least 1");
    num_scan_inputs_ = static_cast<size_t>(num_scan_inputs);
    first_input_ = batched_ ? 1 : 0;
    if (node_.inputs().size() < first_input_ + num_scan_inputs_) {
      return Error("has " + std::to_string(node_.inputs().size()) + " inputs, fewer than its " +
                   std::to_string(num_scan_inputs_) + " scan inputs" + (batched_ ? " and sequence_lens" : ""));
    }
    if (batched_) {
      FUSIONOPT_RETURN_IF_ERROR(RequireDeclaredDtype(node_.input(0), DataType::kInt64, "sequence_lens"));
    }
    num_states_ = node_.inputs().size() - first_input_ - num_scan_inputs_;
    FUSIONOPT_ASSIGN_OR_RETURN(body_, PrepareBody("body", context));
    FUSIONOPT_RETURN_IF_ERROR(CheckBodySignature());
    return ReadAxesAndDirections();
  }

  Status Run(KernelContext& context, RunStats& stats) override {
    std::vector<RtTensor> inputs;
    for (size_t i = first_input_; i < node_.inputs().size(); ++i) {
      if (!context.has_input(i)) return InvalidModel("input " + std::to_string(i) + " is not given");
      inputs.push_back(*context.input(i));
    }
    std::vector<RtTensor> results;
    if (batched_) {
      const RtTensor* sequence_lens = context.has_input(0) ? context.input(0) : nullptr;
      FUSIONOPT_ASSIGN_OR_RETURN(results, RunBatched(inputs, sequence_lens, context, stats));
    } else {
      FUSIONOPT_ASSIGN_OR_RETURN(results, RunSequence(std::move(inputs), context, stats));
    }
    for (size_t i = 0; i < results.size(); ++i) context.outputs[i] = std::move(results[i]);
    return Status::Ok();
  }

 private:
  Status CheckBodySignature() {
    const Graph& graph = body_.graph();
    if (graph.inputs().size() != num_states_ + num_scan_inputs_) {
      return Error("the body takes " + std::to_string(graph.inputs().size()) + " inputs; with " +
                   std::to_string(num_states_) + " state values and " + std::to_string(num_scan_inputs_) +
                   " scan inputs it must take " + std::to_string(num_states_ + num_scan_inputs_));
    }
    if (graph.outputs().size() < num_states_) {
      return Error("the body gives " + std::to_string(graph.outputs().size()) + " outputs, fewer than its " +
                   std::to_string(num_states_) + " state values");
    }
    num_scan_outputs_ = graph.outputs().size() - num_states_;
    if (node_.outputs().size() != graph.outputs().size()) {
      return Error("has " + std::to_string(node_.outputs().size()) + " outputs; its body gives " +
                   std::to_string(graph.outputs().size()));
    }
    return Status::Ok();
  }

  Status ReadAxesAndDirections() {
    if (batched_) {
      // Each batch element is scanned on its own, where the sequence axis is axis 0.
      input_axes_.assign(num_scan_inputs_, 0);
      output_axes_.assign(num_scan_outputs_, 0);
      output_reverse_.assign(num_scan_outputs_, 0);
      FUSIONOPT_ASSIGN_OR_RETURN(input_reverse_, PerItemAttribute("directions", num_scan_inputs_, true));
      return Status::Ok();
    }
    FUSIONOPT_ASSIGN_OR_RETURN(input_axes_, PerItemAttribute("scan_input_axes", num_scan_inputs_, false));
    FUSIONOPT_ASSIGN_OR_RETURN(input_reverse_, PerItemAttribute("scan_input_directions", num_scan_inputs_, true));
    FUSIONOPT_ASSIGN_OR_RETURN(output_axes_, PerItemAttribute("scan_output_axes", num_scan_outputs_, false));
    FUSIONOPT_ASSIGN_OR_RETURN(output_reverse_, PerItemAttribute("scan_output_directions", num_scan_outputs_, true));
    return Status::Ok();
  }

  // An ints attribute with one value per scan input or output; zeros when absent.
  Result<std::vector<int64_t>> PerItemAttribute(const std::string& name, size_t count, bool is_direction) const {
    std::optional<std::vector<int64_t>> values = node_.GetInts(name);
    if (!values) return std::vector<int64_t>(count, 0);
    if (values->size() != count) {
      return Error("attribute " + name + " has " + std::to_string(values->size()) + " values, it needs " +
                   std::to_string(count));
    }
    for (int64_t value : *values) {
      if (is_direction && value != 0 && value != 1) {
        return Error("attribute " + name + " holds " + std::to_string(value) + "; a direction is 0 or 1");
      }
    }
    return *values;
  }

  // One scan over a whole sequence: `inputs` are the states, then the scan inputs.
  Result<std::vector<RtTensor>> RunSequence(std::vector<RtTensor> inputs, KernelContext& context, RunStats& stats) {
    std::vector<RtTensor> states(std::make_move_iterator(inputs.begin()),
                                 std::make_move_iterator(inputs.begin() + static_cast<std::ptrdiff_t>(num_states_)));
    std::vector<RtTensor> sequences(std::make_move_iterator(inputs.begin() + static_cast<std::ptrdiff_t>(num_states_)),
                                    std::make_move_iterator(inputs.end()));
    std::vector<size_t> axes;
    int64_t length = -1;
    for (size_t j = 0; j < sequences.size(); ++j) {
      const auto rank = static_cast<int64_t>(sequences[j].rank());
      std::optional<int64_t> axis = rank > 0 ? NormalizeAxis(input_axes_[j], rank) : std::nullopt;
      if (!axis) {
        return InvalidModel("scan input axis " + std::to_string(input_axes_[j]) + " is out of range for scan input " +
                            std::to_string(j) + ", " + TypeOf(sequences[j]));
      }
      axes.push_back(static_cast<size_t>(*axis));
      int64_t dim = sequences[j].dim(axes.back());
      if (length >= 0 && dim != length) {
        return InvalidModel("the scan inputs disagree on the sequence length: " + std::to_string(length) + " and " +
                            std::to_string(dim) + " (scan input " + std::to_string(j) + ")");
      }
      length = dim;
    }
    Allocator& allocator = *context.allocator;
    std::vector<std::vector<RtTensor>> scans(num_scan_outputs_);
    for (int64_t step = 0; step < length; ++step) {
      std::vector<RtTensor> body_inputs = std::move(states);
      for (size_t j = 0; j < sequences.size(); ++j) {
        int64_t index = input_reverse_[j] ? length - 1 - step : step;
        FUSIONOPT_ASSIGN_OR_RETURN(RtTensor slice, SliceAlongAxis(sequences[j], axes[j], index, allocator));
        body_inputs.push_back(std::move(slice));
      }
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<RtTensor> outputs, RunBody(body_, std::move(body_inputs), context, stats));
      auto first_scan = outputs.begin() + static_cast<std::ptrdiff_t>(num_states_);
      states.assign(std::make_move_iterator(outputs.begin()), std::make_move_iterator(first_scan));
      for (size_t k = 0; k < num_scan_outputs_; ++k) scans[k].push_back(std::move(first_scan[k]));
    }
    std::vector<RtTensor> results = std::move(states);
    for (size_t k = 0; k < num_scan_outputs_; ++k) {
      const Value& body_output = *body_.graph().outputs()[num_states_ + k];
      FUSIONOPT_ASSIGN_OR_RETURN(RtTensor stacked, StackIterations(scans[k], body_output, output_axes_[k],
                                                                   output_reverse_[k] != 0, allocator));
      results.push_back(std::move(stacked));
    }
    return results;
  }

  // Opset 8: a scan per batch element (axis 0 of every input), results stacked along axis 0.
  Result<std::vector<RtTensor>> RunBatched(const std::vector<RtTensor>& inputs, const RtTensor* sequence_lens,
                                           KernelContext& context, RunStats& stats) {
    int64_t batch = -1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t needed_rank = i < num_states_ ? 1 : 2;  // scan inputs also have the sequence axis
      if (inputs[i].rank() < needed_rank) {
        return InvalidModel("input " + std::to_string(first_input_ + i) + " is " + TypeOf(inputs[i]) +
                            "; opset-8 Scan inputs lead with a batch axis" +
                            (i < num_states_ ? "" : " and a sequence axis"));
      }
      if (batch >= 0 && inputs[i].dim(0) != batch) {
        return InvalidModel("the inputs disagree on the batch size: " + std::to_string(batch) + " and " +
                            std::to_string(inputs[i].dim(0)));
      }
      batch = inputs[i].dim(0);
    }
    if (batch == 0) return Unsupported("opset-8 Scan over an empty batch is not supported by the CPU runtime");
    if (sequence_lens != nullptr) {
      FUSIONOPT_RETURN_IF_ERROR(CheckFullLengths(*sequence_lens, inputs[num_states_].dim(1)));
    }
    Allocator& allocator = *context.allocator;
    std::vector<std::vector<RtTensor>> per_output(num_states_ + num_scan_outputs_);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<RtTensor> element;
      for (const RtTensor& input : inputs) {
        FUSIONOPT_ASSIGN_OR_RETURN(RtTensor slice, SliceAlongAxis(input, 0, b, allocator));
        element.push_back(std::move(slice));
      }
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<RtTensor> results, RunSequence(std::move(element), context, stats));
      for (size_t i = 0; i < results.size(); ++i) per_output[i].push_back(std::move(results[i]));
    }
    std::vector<RtTensor> outputs;
    for (size_t i = 0; i < per_output.size(); ++i) {
      FUSIONOPT_ASSIGN_OR_RETURN(RtTensor stacked,
                                 StackIterations(per_output[i], *body_.graph().outputs()[i], 0, false, allocator));
      outputs.push_back(std::move(stacked));
    }
    return outputs;
  }

  // Shorter sequences would leave the tail of each scan output undefined by the spec.
  static Status CheckFullLengths(const RtTensor& sequence_lens, int64_t length) {
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, data_movement::ReadInts(sequence_lens, "sequence_lens"));
    for (int64_t value : lengths) {
      if (value != length) {
        return Unsupported("sequence_lens holds " + std::to_string(value) + " but the sequence length is " +
                           std::to_string(length) + "; the CPU runtime scans full sequences only");
      }
    }
    return Status::Ok();
  }

  const bool batched_;
  size_t first_input_ = 0;
  size_t num_states_ = 0;
  size_t num_scan_inputs_ = 0;
  size_t num_scan_outputs_ = 0;
  std::vector<int64_t> input_axes_;
  std::vector<int64_t> input_reverse_;
  std::vector<int64_t> output_axes_;
  std::vector<int64_t> output_reverse_;
  Body body_;
};

}  // namespace

Result<std::unique_ptr<SubgraphKernel>> CreateScanKernel(const Node& node, int64_t opset,
                                                         const PrepareContext& context) {
  auto kernel = std::make_unique<ScanKernel>(node, opset);
  FUSIONOPT_RETURN_IF_ERROR(kernel->Init(context));
  return std::unique_ptr<SubgraphKernel>(std::move(kernel));
}

}  // namespace fusionopt::cpu::control_flow
