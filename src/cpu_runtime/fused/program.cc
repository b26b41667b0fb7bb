#include "cpu_runtime/fused/program.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "cpu_runtime/contraction/common.h"  // kParallelWork
#include "cpu_runtime/elementwise/byte_table.h"
#include "cpu_runtime/onednn/common.h"
#include "cpu_runtime/onednn/conv_layout_views.h"
#include "ir/constant_value.h"

namespace fusionopt::cpu {
namespace {

std::atomic<int64_t> table_runs{0};

}  // namespace

int64_t FusedProgram::TableRunsSoFar() { return table_runs.load(std::memory_order_relaxed); }

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
  const Tables* tables = TablesFor(*program, operands);
  if (tables != nullptr || !program->tables.empty()) table_runs.fetch_add(1, std::memory_order_relaxed);
  if (tables != nullptr) {
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
    if (!IsEightBitInteger(operands[k]->dtype())) return nullptr;
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
  // Each output over every value its input can hold.
  std::vector<DataType> byte_dtypes;
  for (size_t k = 0; k < used; ++k) byte_dtypes.push_back(operands[k]->dtype());
  Tables tables{{}, std::move(source)};
  std::vector<RtTensor*> targets;
  tables.values.reserve(outputs_.size());
  for (int output : program.outputs) {
    tables.values.push_back(RtTensor::Allocate(program.register_dtypes[static_cast<size_t>(output)], {256}));
    targets.push_back(&tables.values.back());
  }
  if (!EvaluateOverBytes(program, byte_dtypes, targets).ok()) return nullptr;
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
    case 1: {  // bytes to bytes: 64 at a time where the host has VBMI (elementwise/byte_table.h)
      constexpr int64_t kBlock = 16384;
      const int64_t blocks = (count + kBlock - 1) / kBlock;
#pragma omp parallel for if (count > kParallelWork)
      for (int64_t block = 0; block < blocks; ++block) {
        const int64_t begin = block * kBlock;
        ew::LookUpBytes(table.data<uint8_t>(), index + begin, y.data<uint8_t>() + begin, std::min(kBlock, count - begin));
      }
      break;
    }
    case 2: gather(uint16_t{}); break;
    case 4: gather(uint32_t{}); break;
    default: gather(uint64_t{}); break;
  }
  return y;
}

}  // namespace fusionopt::cpu
