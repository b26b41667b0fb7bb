// The elementwise part of a fused body as one program of the elementwise engine: a whole
// elementwise body, or a contraction's epilogue (fused/body.h).
//
// The program's inputs are the values the nodes read from outside the part (in the order the
// caller gives), then the scalar constants the body holds (read by broadcasting, so their
// exact values and their dims — a [1] raises the rank — count as in the op-by-op run).
// Programs depend on the input dtypes, so they are built per dtype set on first use and kept.
// A program of one 8-bit input runs as a table lookup (TablesFor); an output that depends on its
// inputs only through one 8-bit step inside the program (a QuantizeLinear, with work after it)
// reads that step's table instead of computing the tail (TableCuts): GELU after a quantized
// bias add is one rounding and one lookup per element, where it was an erf and four roundings.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "cpu_runtime/elementwise/expr.h"
#include "cpu_runtime/engine/graph_executor.h"

namespace fusionopt::cpu {

class FusedProgram {
 public:
  // `nodes` in body order; `inputs` the values they may read from outside; `outputs` the
  // values to store. Null when a node is not an elementwise op the engine computes, a
  // Constant is not a scalar, or a node reads a value that is neither computed by `nodes`
  // nor one of `inputs`.
  static std::unique_ptr<FusedProgram> Plan(const std::vector<const Node*>& nodes,
                                            const std::vector<const Value*>& inputs,
                                            const std::vector<const Value*>& outputs, const PrepareContext& context);

  // Which of Plan's `inputs` the program reads, in program order (the rest are never read).
  const std::vector<size_t>& used_inputs() const { return used_inputs_; }

  // Builds the program for these dtypes of the used inputs; false when the ops reject them.
  bool Accepts(const std::vector<DataType>& dtypes);
  // The program Run evaluates for these dtypes of the used inputs, built on first use; null
  // when the ops reject them (tests read its instructions).
  const ew::Program* Compiled(const std::vector<DataType>& dtypes);

  // Evaluates the program over the used inputs into freshly allocated outputs, in one pass.
  // Returns false, with nothing written, when the ops reject these dtypes or an output's
  // own broadcast shape is smaller than the others' (it reads only some of the inputs).
  // Inputs in convolution layouts are read as they lie where they can be (conv_layout_views.h);
  // the outputs stay in that layout only with `conv_layout_output`.
  Result<bool> Run(const std::vector<const RtTensor*>& inputs, Allocator& allocator, std::vector<RtTensor>& outputs,
                   bool conv_layout_output = false);

 private:
  FusedProgram() = default;
  const ew::Program* ProgramFor(const std::vector<DataType>& dtypes);
  Result<ew::Program> Build(const std::vector<DataType>& dtypes) const;
  // Emits the steps `emit` flags, in order, reading and extending `registers`.
  Status EmitSteps(ew::ProgramBuilder& builder, std::unordered_map<const Value*, int>& registers,
                   const std::vector<bool>& emit) const;
  // Per step: whether its result depends on nothing but step `cut`'s result and the constants.
  std::vector<bool> BoundTo(size_t cut) const;
  // Per output, the earliest step with an 8-bit result that the output depends on alone, where
  // the tail after it holds enough work to be worth a lookup; nullopt where none.
  std::vector<std::optional<size_t>> TableCuts(const std::function<DataType(const Value*)>& dtype_of) const;
  // The 256 values of `output` over every value of step `cut`'s result, as ew::LaneStorage of
  // `output_dtype`: the tail run once over a ramp, so each entry is what the program computes.
  Result<RtTensor> TailTable(size_t cut, const Value* output, const std::vector<DataType>& dtypes,
                             DataType cut_dtype, DataType output_dtype) const;
  // Per output, the table of its 256 results over every value of the one 8-bit input it reads,
  // when each output reads one input, every input is 8-bit and the constants are scalars that
  // raise no dims (a quantized model's DQ → activation → Q, or several merged side by side by
  // fuse-horizontal-elementwise, is then one lookup per element, as onnxruntime's QLinear
  // activations are); null otherwise. Built on first use and kept.
  struct Tables {
    std::vector<RtTensor> values;  // per output: 256 entries of its dtype
    std::vector<size_t> source;    // per output: the used input it looks up
  };
  const Tables* TablesFor(const ew::Program& program, const std::vector<const RtTensor*>& operands);
  static RtTensor LookUp(const RtTensor& table, const RtTensor& x, Allocator& allocator, bool keep_layout);
  // Dims shared by every output, or nullopt when they differ.
  Result<std::optional<std::vector<int64_t>>> OutputDims(const std::vector<const RtTensor*>& operands) const;

  struct Step {
    const Node* node;
    ExprBuilder expr;
  };
  std::vector<Step> steps_;                      // the ops, in order
  std::vector<const Value*> operands_;           // program inputs: used inputs, then constants
  std::vector<size_t> used_inputs_;
  std::vector<RtTensor> constants_;              // the constants' values, after the used inputs
  std::vector<const Value*> outputs_;
  std::vector<std::vector<bool>> reads_;         // per output, per operand: whether it depends on it
  std::string label_;

  std::mutex mutex_;
  // Deques: a run holds a program (and its tables) by address while another dtype set or
  // program adds its own, which must not move them.
  std::deque<std::pair<std::vector<DataType>, std::optional<ew::Program>>> programs_;
  std::deque<std::pair<const ew::Program*, Tables>> tables_;  // per program: TablesFor
};

}  // namespace fusionopt::cpu
