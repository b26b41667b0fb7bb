// A body of elementwise ops (and the scalar constants they read) as one program of the
// elementwise engine: one tiled pass over memory writes every output, intermediates stay in
// the tile's registers, and broadcasting is folded into the indexing (elementwise.h).
#include "cpu_runtime/fused/body.h"
#include "cpu_runtime/fused/program.h"

namespace fusionopt::cpu {
namespace {

class FusedElementwiseKernel final : public FusedBodyKernel {
 public:
  explicit FusedElementwiseKernel(std::unique_ptr<FusedProgram> program) : program_(std::move(program)) {}

  Result<int> Compute(KernelContext& context) override {
    std::vector<const RtTensor*> inputs;
    for (size_t index : program_->used_inputs()) inputs.push_back(context.input(index));
    FUSIONOPT_ASSIGN_OR_RETURN(bool done,
                               program_->Run(inputs, *context.allocator, context.outputs, context.conv_layout_output));
    return done ? 1 : 0;
  }

  // Operands in convolution layouts are read in place where they can be (conv_layout_views.h).
  bool ReadsConvLayouts() const override { return true; }

 private:
  std::unique_ptr<FusedProgram> program_;
};

}  // namespace

std::unique_ptr<FusedBodyKernel> CreateFusedElementwise(const FusedBodyInfo& info) {
  std::vector<const Node*> nodes;
  for (const auto& node : info.body.nodes()) nodes.push_back(node.get());
  std::vector<const Value*> inputs(info.body.inputs().begin(), info.body.inputs().end());
  const size_t wanted = info.call.outputs().size();
  std::vector<const Value*> outputs(info.body.outputs().begin(), info.body.outputs().begin() + wanted);
  std::unique_ptr<FusedProgram> program = FusedProgram::Plan(nodes, inputs, outputs, info.context);
  if (program == nullptr || program->used_inputs().empty()) return nullptr;
  // With the argument types declared, a body the engine cannot compute is known now.
  std::vector<DataType> dtypes;
  for (size_t index : program->used_inputs()) dtypes.push_back(inputs[index]->dtype());
  bool typed = std::none_of(dtypes.begin(), dtypes.end(), [](DataType d) { return d == DataType::kUndefined; });
  if (typed && !program->Accepts(dtypes)) return nullptr;
  return std::make_unique<FusedElementwiseKernel>(std::move(program));
}

}  // namespace fusionopt::cpu
