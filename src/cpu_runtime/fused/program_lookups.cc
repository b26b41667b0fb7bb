// FusedProgram's build: the steps as one engine program, where values that depend on one 8-bit
// register alone are read from that register's 256-entry table (program.h).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "cpu_runtime/fused/program.h"

namespace fusionopt::cpu {
namespace {

// Ops of which a short stretch is no slower computed than looked up: with only these between
// the root and a value, fewer than kWorthyTailSteps steps are computed (a lookup is a gather per
// element; these are a few vector instructions each).
bool IsCheapStep(const Node& node) {
  static const std::unordered_set<std::string> kCheap = {"QuantizeLinear", "DequantizeLinear", "Cast", "Identity",
                                                         "Relu", "Add", "Sub", "Mul", "Max", "Min", "Clip", "Neg",
                                                         "Abs"};
  return kCheap.count(node.op_type()) > 0;
}
constexpr size_t kWorthyTailSteps = 3;

}  // namespace

Status FusedProgram::EvaluateOverBytes(const ew::Program& program, const std::vector<DataType>& byte_dtypes,
                                       const std::vector<RtTensor*>& targets) const {
  std::vector<RtTensor> ramps, scalars;
  ramps.reserve(byte_dtypes.size());
  scalars.reserve(constants_.size());
  std::vector<const RtTensor*> operands;
  for (DataType dtype : byte_dtypes) {
    ramps.push_back(RtTensor::Allocate(dtype, {256}));
    for (int value = 0; value < 256; ++value) ramps.back().data<uint8_t>()[value] = static_cast<uint8_t>(value);
    operands.push_back(&ramps.back());
  }
  for (const RtTensor& constant : constants_) {
    scalars.push_back(constant.Reshaped({}));
    operands.push_back(&scalars.back());
  }
  return ew::Evaluate(program, operands, targets);
}

Status FusedProgram::EmitSteps(ew::ProgramBuilder& builder, std::unordered_map<const Value*, int>& registers,
                               const std::vector<bool>& emit, const std::function<Status()>& ready) const {
  if (ready) FUSIONOPT_RETURN_IF_ERROR(ready());
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (!emit[s]) continue;
    std::vector<int> operands;
    for (const Value* input : steps_[s].node->inputs()) operands.push_back(input ? registers.at(input) : -1);
    FUSIONOPT_ASSIGN_OR_RETURN(int result, steps_[s].expr(builder, operands));
    registers[steps_[s].node->output(0)] = result;
    if (ready) FUSIONOPT_RETURN_IF_ERROR(ready());
  }
  return Status::Ok();
}

FusedProgram::Region FusedProgram::RegionOf(const Value* root) const {
  std::unordered_set<const Value*> bound(operands_.begin() + static_cast<std::ptrdiff_t>(used_inputs_.size()),
                                         operands_.end());
  std::unordered_set<const Value*> depends = {root};
  bound.insert(root);
  Region region{std::vector<bool>(steps_.size(), false), std::vector<bool>(steps_.size(), false)};
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Value* output = steps_[s].node->output(0);
    if (output == root) continue;
    const auto& inputs = steps_[s].node->inputs();
    region.bound[s] = std::all_of(inputs.begin(), inputs.end(),
                                  [&](const Value* input) { return input == nullptr || bound.count(input) > 0; });
    if (!region.bound[s]) continue;
    bound.insert(output);
    region.depends[s] = std::any_of(inputs.begin(), inputs.end(), [&](const Value* input) { return depends.count(input); });
    if (region.depends[s]) depends.insert(output);
  }
  return region;
}

std::vector<FusedProgram::TableRead> FusedProgram::TableReads(
    const std::function<DataType(const Value*)>& dtype_of) const {
  std::unordered_map<const Value*, size_t> step_of;
  std::unordered_map<const Value*, std::vector<size_t>> readers;
  for (size_t s = 0; s < steps_.size(); ++s) {
    step_of[steps_[s].node->output(0)] = s;
    for (const Value* input : steps_[s].node->inputs()) readers[input].push_back(s);
  }
  std::vector<const Value*> roots;
  for (size_t k = 0; k < used_inputs_.size(); ++k) roots.push_back(operands_[k]);
  for (const Step& step : steps_) roots.push_back(step.node->output(0));
  std::vector<TableRead> reads;
  std::vector<bool> taken(steps_.size(), false);  // inside a region a read was found in
  for (const Value* root : roots) {
    if (!IsEightBitInteger(dtype_of(root)) || (step_of.count(root) && taken[step_of.at(root)])) continue;
    const Region region = RegionOf(root);
    for (size_t s = 0; s < steps_.size(); ++s) {
      if (!region.depends[s]) continue;
      const Value* value = steps_[s].node->output(0);
      const std::vector<size_t>& by = readers[value];
      const bool stored = std::find(outputs_.begin(), outputs_.end(), value) != outputs_.end();
      if (!stored && std::all_of(by.begin(), by.end(), [&](size_t r) { return region.depends[r]; })) continue;
      // The work the table takes: the region's steps this value depends on.
      std::vector<bool> needed(steps_.size(), false);
      needed[s] = true;
      size_t steps = 0;
      bool costly = false;
      for (size_t t = s + 1; t-- > 0;) {
        if (!needed[t]) continue;
        ++steps;
        costly = costly || !IsCheapStep(*steps_[t].node);
        for (const Value* input : steps_[t].node->inputs()) {
          auto at = step_of.find(input);
          if (at != step_of.end() && region.depends[at->second]) needed[at->second] = true;
        }
      }
      if (!costly && steps < kWorthyTailSteps) continue;
      reads.push_back({root, value});
      for (size_t t = 0; t < steps_.size(); ++t) taken[t] = taken[t] || needed[t];
    }
  }
  return reads;
}

Result<RtTensor> FusedProgram::TableOf(const TableRead& read, const std::vector<DataType>& dtypes, DataType root_dtype,
                                       DataType value_dtype) const {
  const size_t used = used_inputs_.size();
  std::vector<DataType> region_dtypes = {root_dtype};
  region_dtypes.insert(region_dtypes.end(), dtypes.begin() + static_cast<std::ptrdiff_t>(used), dtypes.end());
  ew::ProgramBuilder builder(region_dtypes);
  std::unordered_map<const Value*, int> registers = {{read.root, 0}};
  for (size_t k = used; k < operands_.size(); ++k) registers[operands_[k]] = static_cast<int>(k - used + 1);
  FUSIONOPT_RETURN_IF_ERROR(EmitSteps(builder, registers, RegionOf(read.root).bound));
  FUSIONOPT_ASSIGN_OR_RETURN(int result, builder.Convert(registers.at(read.value), ew::LaneStorage(value_dtype)));
  builder.AddOutput(result);
  const ew::Program region = builder.Finish(label_ + " table");
  RtTensor table = RtTensor::Allocate(ew::LaneStorage(value_dtype), {256});
  FUSIONOPT_RETURN_IF_ERROR(EvaluateOverBytes(region, {root_dtype}, {&table}));
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
  auto dtype_of = [&](const Value* value) { return plain.dtype(registers.at(value)); };
  const std::vector<TableRead> reads = TableReads(dtype_of);
  auto finish_plain = [&]() {
    for (const Value* output : outputs_) plain.AddOutput(registers.at(output));
    return plain.Finish(label_);
  };
  if (reads.empty()) return finish_plain();

  std::vector<RtTensor> tables;
  for (const TableRead& read : reads) {
    Result<RtTensor> table = TableOf(read, dtypes, dtype_of(read.root), dtype_of(read.value));
    if (!table.ok()) return finish_plain();
    tables.push_back(std::move(table).value());
  }
  // Only the steps that what is stored needs, a looked-up value's walk ending at its root.
  std::unordered_map<const Value*, size_t> step_of, read_of;
  for (size_t s = 0; s < steps_.size(); ++s) step_of[steps_[s].node->output(0)] = s;
  for (size_t i = 0; i < reads.size(); ++i) read_of[reads[i].value] = i;
  std::vector<bool> emit(steps_.size(), false);
  std::vector<const Value*> pending(outputs_.begin(), outputs_.end());
  while (!pending.empty()) {
    const Value* value = pending.back();
    pending.pop_back();
    if (auto read = read_of.find(value); read != read_of.end()) {
      pending.push_back(reads[read->second].root);
      continue;
    }
    auto it = step_of.find(value);
    if (it == step_of.end() || emit[it->second]) continue;
    emit[it->second] = true;
    for (const Value* input : steps_[it->second].node->inputs()) {
      if (input != nullptr) pending.push_back(input);
    }
  }
  std::unordered_map<const Value*, int> kept;
  ew::ProgramBuilder builder = start(kept);
  std::vector<bool> looked_up(reads.size(), false);
  // Each lookup right after its root: what reads the value comes later in step order.
  auto lookups = [&]() -> Status {
    for (size_t i = 0; i < reads.size(); ++i) {
      if (looked_up[i] || !kept.count(reads[i].root)) continue;
      FUSIONOPT_ASSIGN_OR_RETURN(kept[reads[i].value],
                                 builder.Lookup(kept.at(reads[i].root), dtype_of(reads[i].value), tables[i]));
      looked_up[i] = true;
    }
    return Status::Ok();
  };
  if (!EmitSteps(builder, kept, emit, lookups).ok()) return finish_plain();
  for (const Value* output : outputs_) builder.AddOutput(kept.at(output));
  return builder.Finish(label_);
}

}  // namespace fusionopt::cpu
