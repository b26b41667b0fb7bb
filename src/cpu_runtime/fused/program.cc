#include "cpu_runtime/fused/program.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "cpu_runtime/contraction/common.h"  // kParallelWork
#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/onednn/conv_layout_views.h"
#include "ir/constant_value.h"

namespace fusionopt::cpu {
namespace {

// Ops a tail of which is no slower computed than looked up: with only these after the 8-bit
// step, a tail of fewer than kWorthyTailSteps steps is computed (a lookup is a gather per
// element; these are a few vector instructions each).
bool IsCheapStep(const Node& node) {
  static const std::unordered_set<std::string> kCheap = {"QuantizeLinear", "DequantizeLinear", "Cast", "Identity",
                                                         "Relu", "Add", "Sub", "Mul", "Max", "Min", "Clip", "Neg",
                                                         "Abs"};
  return kCheap.count(node.op_type()) > 0;
}
constexpr size_t kWorthyTailSteps = 3;

bool IsEightBit(DataType dtype) { return dtype == DataType::kUint8 || dtype == DataType::kInt8; }

// A tensor of `dtype` holding each of the 256 byte patterns once, in order.
RtTensor ByteRamp(DataType dtype) {
  RtTensor ramp = RtTensor::Allocate(dtype, {256});
  for (int value = 0; value < 256; ++value) ramp.data<uint8_t>()[value] = static_cast<uint8_t>(value);
  return ramp;
}

}  // namespace

std::unique_ptr<FusedProgram> FusedProgram::Plan(const std::vector<const Node*>& nodes,
                                                 const std::vector<const Value*>& inputs,
                                                 const std::vector<const Value*>& outputs,
                                                 const PrepareContext& context) {
  std::unique_ptr<FusedProgram> plan(new FusedProgram());
  std::unordered_set<const Value*> computed;
  std::vector<bool> used(inputs.size(), false);
  std::vector<std::pair<const Value*, TensorPtr>> constants;  // in body order
  std::unordered_set<const Value*> constants_read;
  // A value the part reads: computed by an earlier node, or one of `inputs`.
  auto read = [&](const Value* value) {
    if (value->producer() != nullptr && ConstantNodeValue(*value->producer()) != nullptr) constants_read.insert(value);
    if (computed.count(value)) return true;
    auto it = std::find(inputs.begin(), inputs.end(), value);
    if (it == inputs.end()) return false;
    used[static_cast<size_t>(it - inputs.begin())] = true;
    return true;
  };
  std::string label;
  for (const Node* node : nodes) {
    if (node->outputs().size() != 1 || node->output(0) == nullptr || !IsDefaultDomain(*node)) return nullptr;
    if (TensorPtr value = ConstantNodeValue(*node)) {
      if (value->NumElements() != 1 || value->dtype() == DataType::kString) return nullptr;
      constants.emplace_back(node->output(0), value);
      computed.insert(node->output(0));
      continue;
    }
    const int64_t opset = context.OpsetFor(node->domain());
    if (KernelRegistry::BuiltIn().Find(node->domain(), node->op_type(), opset) == nullptr) return nullptr;
    auto expr = ElementwiseExpr(KernelInfo{*node, opset, {}});
    if (!expr.ok() || !*expr) return nullptr;  // not elementwise, bad attributes, or CastLike
    // ElementwiseExpr has refused omitted required inputs and wrong operand counts.
    for (const Value* input : node->inputs()) {
      if (input != nullptr && !read(input)) return nullptr;
    }
    plan->steps_.push_back(Step{node, std::move(expr).value()});
    computed.insert(node->output(0));
    label += (label.empty() ? "" : ",") + node->op_type();
  }
  for (const Value* output : outputs) {
    if (output == nullptr || !read(output)) return nullptr;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (used[i]) {
      plan->used_inputs_.push_back(i);
      plan->operands_.push_back(inputs[i]);
    }
  }
  // Only the constants read: each operand's dims join the broadcast.
  for (const auto& [value, tensor] : constants) {
    if (!constants_read.count(value)) continue;
    plan->operands_.push_back(value);
    plan->constants_.push_back(RtTensor::WrapConstant(tensor));
  }
  plan->outputs_ = outputs;
  plan->label_ = "fused(" + label + ")";

  // Which operands each output depends on: an output reading only some of them may have
  // smaller dims than the program's iteration space.
  std::unordered_map<const Value*, std::vector<bool>> depends;
  for (size_t k = 0; k < plan->operands_.size(); ++k) {
    depends[plan->operands_[k]].assign(plan->operands_.size(), false);
    depends[plan->operands_[k]][k] = true;
  }
  for (const Step& step : plan->steps_) {
    std::vector<bool> reads(plan->operands_.size(), false);
    for (const Value* input : step.node->inputs()) {
      if (input == nullptr) continue;
      const std::vector<bool>& from = depends.at(input);
      for (size_t k = 0; k < reads.size(); ++k) reads[k] = reads[k] || from[k];
    }
    depends[step.node->output(0)] = std::move(reads);
  }
  for (const Value* output : outputs) plan->reads_.push_back(depends.at(output));
  return plan;
}

const ew::Program* FusedProgram::ProgramFor(const std::vector<DataType>& dtypes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, program] : programs_) {
    if (key == dtypes) return program ? &*program : nullptr;
  }
  Result<ew::Program> built = Build(dtypes);
  programs_.emplace_back(dtypes, built.ok() ? std::optional<ew::Program>(std::move(built).value()) : std::nullopt);
  return programs_.back().second ? &*programs_.back().second : nullptr;
}

Status FusedProgram::EmitSteps(ew::ProgramBuilder& builder, std::unordered_map<const Value*, int>& registers,
                               const std::vector<bool>& emit) const {
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (!emit[s]) continue;
    std::vector<int> operands;
    for (const Value* input : steps_[s].node->inputs()) operands.push_back(input ? registers.at(input) : -1);
    FUSIONOPT_ASSIGN_OR_RETURN(int result, steps_[s].expr(builder, operands));
    registers[steps_[s].node->output(0)] = result;
  }
  return Status::Ok();
}

std::vector<bool> FusedProgram::BoundTo(size_t cut) const {
  std::unordered_set<const Value*> bound(operands_.begin() + static_cast<std::ptrdiff_t>(used_inputs_.size()),
                                         operands_.end());
  bound.insert(steps_[cut].node->output(0));
  std::vector<bool> result(steps_.size(), false);
  for (size_t s = cut + 1; s < steps_.size(); ++s) {
    const auto& inputs = steps_[s].node->inputs();
    result[s] = std::all_of(inputs.begin(), inputs.end(),
                            [&](const Value* input) { return input == nullptr || bound.count(input) > 0; });
    if (result[s]) bound.insert(steps_[s].node->output(0));
  }
  return result;
}

std::vector<std::optional<size_t>> FusedProgram::TableCuts(
    const std::function<DataType(const Value*)>& dtype_of) const {
  std::vector<std::optional<size_t>> cuts(outputs_.size());
  for (size_t cut = 0; cut < steps_.size(); ++cut) {
    if (!IsEightBit(dtype_of(steps_[cut].node->output(0)))) continue;
    const std::vector<bool> bound = BoundTo(cut);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (cuts[i]) continue;
      auto at = std::find_if(steps_.begin() + static_cast<std::ptrdiff_t>(cut) + 1, steps_.end(),
                             [&](const Step& step) { return step.node->output(0) == outputs_[i]; });
      if (at == steps_.end() || !bound[static_cast<size_t>(at - steps_.begin())]) continue;
      size_t tail = 0;
      bool costly = false;
      for (size_t s = cut + 1; s <= static_cast<size_t>(at - steps_.begin()); ++s) {
        if (!bound[s]) continue;
        ++tail;
        costly = costly || !IsCheapStep(*steps_[s].node);
      }
      if (costly || tail >= kWorthyTailSteps) cuts[i] = cut;
    }
  }
  return cuts;
}

Result<RtTensor> FusedProgram::TailTable(size_t cut, const Value* output, const std::vector<DataType>& dtypes,
                                         DataType cut_dtype, DataType output_dtype) const {
  const size_t used = used_inputs_.size();
  std::vector<DataType> tail_dtypes = {cut_dtype};
  tail_dtypes.insert(tail_dtypes.end(), dtypes.begin() + static_cast<std::ptrdiff_t>(used), dtypes.end());
  ew::ProgramBuilder builder(tail_dtypes);
  std::unordered_map<const Value*, int> registers = {{steps_[cut].node->output(0), 0}};
  for (size_t k = used; k < operands_.size(); ++k) registers[operands_[k]] = static_cast<int>(k - used + 1);
  FUSIONOPT_RETURN_IF_ERROR(EmitSteps(builder, registers, BoundTo(cut)));
  FUSIONOPT_ASSIGN_OR_RETURN(int result, builder.Convert(registers.at(output), ew::LaneStorage(output_dtype)));
  builder.AddOutput(result);
  const ew::Program tail = builder.Finish(label_ + " tail");
  RtTensor ramp = ByteRamp(cut_dtype);
  std::vector<RtTensor> scalars;
  scalars.reserve(constants_.size());
  std::vector<const RtTensor*> operands = {&ramp};
  for (const RtTensor& constant : constants_) {
    scalars.push_back(constant.Reshaped({}));
    operands.push_back(&scalars.back());
  }
  RtTensor table = RtTensor::Allocate(ew::LaneStorage(output_dtype), {256});
  FUSIONOPT_RETURN_IF_ERROR(ew::Evaluate(tail, operands, {&table}));
  return table;
}

Result<ew::Program> FusedProgram::Build(const std::vector<DataType>& dtypes) const {
  auto start = [&](std::unordered_map<const Value*, int>& registers) {
    for (size_t k = 0; k < operands_.size(); ++k) registers[operands_[k]] = static_cast<int>(k);
    return ew::ProgramBuilder(dtypes);
  };
  std::unordered_map<const Value*, int> registers;
  ew::ProgramBuilder plain = start(registers);
  FUSIONOPT_RETURN_IF_ERROR(EmitSteps(plain, registers, std::vector<bool>(steps_.size(), true)));
  const std::vector<std::optional<size_t>> cuts =
      TableCuts([&](const Value* value) { return plain.dtype(registers.at(value)); });
  auto finish_plain = [&]() {
    for (const Value* output : outputs_) plain.AddOutput(registers.at(output));
    return plain.Finish(label_);
  };
  if (std::none_of(cuts.begin(), cuts.end(), [](const auto& cut) { return cut.has_value(); })) return finish_plain();

  // Only the steps that the computed outputs and the cuts need.
  std::unordered_map<const Value*, size_t> step_of;
  for (size_t s = 0; s < steps_.size(); ++s) step_of[steps_[s].node->output(0)] = s;
  std::vector<bool> emit(steps_.size(), false);
  std::vector<const Value*> pending;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    pending.push_back(cuts[i] ? steps_[*cuts[i]].node->output(0) : outputs_[i]);
  }
  while (!pending.empty()) {
    const Value* value = pending.back();
    pending.pop_back();
    auto it = step_of.find(value);
    if (it == step_of.end() || emit[it->second]) continue;
    emit[it->second] = true;
    for (const Value* input : steps_[it->second].node->inputs()) {
      if (input != nullptr) pending.push_back(input);
    }
  }
  std::unordered_map<const Value*, int> kept;
  ew::ProgramBuilder builder = start(kept);
  if (!EmitSteps(builder, kept, emit).ok()) return finish_plain();
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (!cuts[i]) {
      builder.AddOutput(kept.at(outputs_[i]));
      continue;
    }
    const Value* cut = steps_[*cuts[i]].node->output(0);
    const DataType output_dtype = plain.dtype(registers.at(outputs_[i]));
    Result<RtTensor> table = TailTable(*cuts[i], outputs_[i], dtypes, plain.dtype(registers.at(cut)), output_dtype);
    if (!table.ok()) return finish_plain();
    FUSIONOPT_ASSIGN_OR_RETURN(int looked_up, builder.Lookup(kept.at(cut), output_dtype, *table));
    builder.AddOutput(looked_up);
  }
  return builder.Finish(label_);
}

const ew::Program* FusedProgram::Compiled(const std::vector<DataType>& dtypes) {
  std::vector<DataType> all = dtypes;
  for (const RtTensor& constant : constants_) all.push_back(constant.dtype());
  return ProgramFor(all);
}

bool FusedProgram::Accepts(const std::vector<DataType>& dtypes) { return Compiled(dtypes) != nullptr; }

Result<std::optional<std::vector<int64_t>>> FusedProgram::OutputDims(
    const std::vector<const RtTensor*>& operands) const {
  auto full = ew::BroadcastDims(operands);
  if (!full.ok()) return std::optional<std::vector<int64_t>>();  // the op-by-op run names the node
  for (const std::vector<bool>& reads : reads_) {
    if (std::all_of(reads.begin(), reads.end(), [](bool read) { return read; })) continue;
    std::vector<const RtTensor*> subset;
    for (size_t k = 0; k < operands.size(); ++k) {
      if (reads[k]) subset.push_back(operands[k]);
    }
    auto own = ew::BroadcastDims(subset);
    if (!own.ok() || *own != *full) return std::optional<std::vector<int64_t>>();
  }
  return std::optional<std::vector<int64_t>>(std::move(full).value());
}

Result<bool> FusedProgram::Run(const std::vector<const RtTensor*>& inputs, Allocator& allocator,
                               std::vector<RtTensor>& outputs, bool conv_layout_output) {
  FUSIONOPT_CHECK(inputs.size() == used_inputs_.size(), "one tensor per used input");
  std::vector<const RtTensor*> operands = inputs;
  for (const RtTensor& constant : constants_) operands.push_back(&constant);
  std::vector<DataType> dtypes;
  for (const RtTensor* operand : operands) dtypes.push_back(operand->dtype());
  const ew::Program* program = ProgramFor(dtypes);
  if (program == nullptr) return false;
  if (const Tables* tables = TablesFor(*program, operands)) {
    outputs.resize(std::max(outputs.size(), outputs_.size()));
    for (size_t i = 0; i < outputs_.size(); ++i) {
      outputs[i] = LookUp(tables->values[i], *inputs[tables->source[i]], allocator,
                          conv_layout_output && outputs_.size() == 1);
    }
    return true;
  }
  // Views where every result may lie in the layout too (or be reordered out of it); outputs a
  // reorder cannot take (bool, wider integers) are computed row-major.
  const bool layout_outputs = std::all_of(program->outputs.begin(), program->outputs.end(), [&](int output) {
    return onednn::TakesConvLayouts(program->register_dtypes[static_cast<size_t>(output)]);
  });
  const layouts::Prepared prepared = layouts::PrepareOperands(operands, allocator, layout_outputs);
  FUSIONOPT_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> dims, OutputDims(operands));
  if (!dims) return false;
  if (outputs.size() < outputs_.size()) outputs.resize(outputs_.size());
  std::vector<RtTensor*> targets;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const DataType dtype = program->register_dtypes[static_cast<size_t>(program->outputs[i])];
    outputs[i] = allocator.Allocate(dtype, *dims);
    targets.push_back(&outputs[i]);
  }
  FUSIONOPT_RETURN_IF_ERROR(ew::Evaluate(*program, operands, targets));
  const bool keep_layout = conv_layout_output && outputs_.size() == 1;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    outputs[i] = layouts::FinishResult(std::move(outputs[i]), prepared.layout, keep_layout, allocator);
  }
  return true;
}

const FusedProgram::Tables* FusedProgram::TablesFor(const ew::Program& program,
                                                   const std::vector<const RtTensor*>& operands) {
  const size_t used = used_inputs_.size();
  std::vector<size_t> source;
  for (const std::vector<bool>& reads : reads_) {
    if (std::count(reads.begin(), reads.begin() + static_cast<std::ptrdiff_t>(used), true) != 1) return nullptr;
    source.push_back(static_cast<size_t>(std::find(reads.begin(), reads.end(), true) - reads.begin()));
  }
  for (size_t k = 0; k < used; ++k) {
    if (!IsEightBit(operands[k]->dtype())) return nullptr;
  }
  // Every constant broadcasts into the inputs' dims without raising them (scalars of rank <=).
  for (size_t k = used; k < operands.size(); ++k) {
    for (size_t input : source) {
      if (operands[k]->NumElements() != 1 || operands[k]->rank() > operands[input]->rank()) return nullptr;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [built_for, tables] : tables_) {
    if (built_for == &program) return &tables;
  }
  // Each output over every value its input can hold: the program run once with every input the
  // 256 values of its type, so each table holds exactly what the pass over the tensor computes.
  std::vector<RtTensor> ramps, scalars;
  std::vector<const RtTensor*> table_operands;
  ramps.reserve(used);
  scalars.reserve(operands.size());
  for (size_t k = 0; k < used; ++k) {
    ramps.push_back(ByteRamp(operands[k]->dtype()));
    table_operands.push_back(&ramps.back());
  }
  for (size_t k = used; k < operands.size(); ++k) {
    scalars.push_back(operands[k]->Reshaped({}));
    table_operands.push_back(&scalars.back());
  }
  Tables tables{{}, std::move(source)};
  std::vector<RtTensor*> targets;
  tables.values.reserve(outputs_.size());
  for (int output : program.outputs) {
    tables.values.push_back(RtTensor::Allocate(program.register_dtypes[static_cast<size_t>(output)], {256}));
    targets.push_back(&tables.values.back());
  }
  if (!ew::Evaluate(program, table_operands, targets).ok()) return nullptr;
  tables_.emplace_back(&program, std::move(tables));
  return &tables_.back().second;
}

RtTensor FusedProgram::LookUp(const RtTensor& table, const RtTensor& laid_x, Allocator& allocator, bool keep_layout) {
  // Elementwise: the result lies as x does, where it may; else both row-major.
  const bool in_layout = !laid_x.row_major() && keep_layout && onednn::TakesConvLayouts(table.dtype());
  const RtTensor x = in_layout ? laid_x : onednn::RowMajor(laid_x, allocator);
  RtTensor y = allocator.Allocate(table.dtype(), x.dims());
  y.set_layout(x.layout());
  const int64_t count = x.NumElements();
  const uint8_t* index = x.data<uint8_t>();
  auto gather = [&](auto element) {
    using T = decltype(element);
    const T* values = table.data<T>();
    T* out = y.data<T>();
#pragma omp parallel for if (count > kParallelWork)
    for (int64_t i = 0; i < count; ++i) out[i] = values[index[i]];
  };
  switch (ByteSizeOf(table.dtype(), 1)) {
    case 1: gather(uint8_t{}); break;
    case 2: gather(uint16_t{}); break;
    case 4: gather(uint32_t{}); break;
    default: gather(uint64_t{}); break;
  }
  return y;
}

}  // namespace fusionopt::cpu
