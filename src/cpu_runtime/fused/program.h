// The elementwise part of a fused body as one program of the elementwise engine: a whole
// elementwise body, or a contraction's epilogue (fused/body.h).
//
// The program's inputs are the values the nodes read from outside the part (in the order the
// caller gives), then the scalar constants the body holds (read by broadcasting, so their
// exact values and their dims — a [1] raises the rank — count as in the op-by-op run).
// Programs depend on the input dtypes, so they are built per dtype set on first use and kept.
// A program of one 8-bit input runs as a table lookup (TablesFor); inside a longer program, a
// value that depends on one 8-bit register alone — an input, or a step's result such as a
// QuantizeLinear's — with work between them is read from that register's table (TableReads):
// GELU after a quantized bias add is one rounding and one lookup per element, where it was an
// erf and four roundings, and SwiGLU's SiLU of the quantized gate one lookup before the product.
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
  // Runs this process has made of programs that read 256-entry tables — a whole program as
  // tables (TablesFor) or one with lookups inside (TableReads); `fusionopt run -v` reports them.
  static int64_t TableRunsSoFar();
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
  // The program for `dtypes` (the operands'), with TableReads as lookups (program_lookups.cc).
  Result<ew::Program> Build(const std::vector<DataType>& dtypes) const;
  // Emits the steps `emit` flags, in order, reading and extending `registers`; after each (and
  // before the first) `ready` may emit what the registers now allow.
  Status EmitSteps(ew::ProgramBuilder& builder, std::unordered_map<const Value*, int>& registers,
                   const std::vector<bool>& emit, const std::function<Status()>& ready = nullptr) const;
  // A value read from the table of one 8-bit register instead of computed: `root` is a used
  // input or a step's result, and `value` depends on nothing else but the constants.
  struct TableRead {
    const Value* root;
    const Value* value;
  };
  // Per step: `bound` when the root and the constants alone compute it, `depends` when it is
  // bound and reads the root (directly or not).
  struct Region {
    std::vector<bool> bound, depends;
  };
  Region RegionOf(const Value* root) const;
  // The values worth a lookup: per 8-bit root (used inputs, then steps in order, each outside
  // the regions taken before), the region's values read outside it or stored, where the work
  // they take from the root holds a costly op or kWorthyTailSteps steps.
  std::vector<TableRead> TableReads(const std::function<DataType(const Value*)>& dtype_of) const;
  // `read.value` over the 256 values of its root, as ew::LaneStorage of `value_dtype`: the
  // region run once over a ramp, so each entry is what the program computes.
  Result<RtTensor> TableOf(const TableRead& read, const std::vector<DataType>& dtypes, DataType root_dtype,
                           DataType value_dtype) const;
  // `program` (its inputs: one 8-bit register per `byte_dtypes`, then the constants) run once over
  // the 256 values of each 8-bit input, the constants as scalars: each target gets the 256
  // results, so a table holds exactly what the pass over a tensor computes.
  Status EvaluateOverBytes(const ew::Program& program, const std::vector<DataType>& byte_dtypes,
                           const std::vector<RtTensor*>& targets) const;
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
