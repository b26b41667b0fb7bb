// A contraction (MatMul, Gemm, Conv) with its elementwise epilogue — bias, activation,
// residual add, in any order — as one kernel: oneDNN applies the epilogue as post-ops while
// it writes the product (contraction/epilogue.h). An epilogue post-ops cannot express (an
// addend broadcast along other axes, several outputs, ops oneDNN has no post-op for), and a
// run whose shapes oneDNN will not take with post-ops, is computed as the contraction
// followed by one elementwise program over its output: two kernels, and counted so.
#include <mutex>
#include <set>

#include "cpu_runtime/contraction/epilogue.h"
#include "cpu_runtime/fused/body.h"
#include "cpu_runtime/fused/program.h"
#include "cpu_runtime/onednn/conv_layout_views.h"
#include "ir/constant_value.h"

namespace fusionopt::cpu {
namespace {

bool IsContraction(const Node& node) {
  const std::string& op = node.op_type();
  return IsDefaultDomain(node) && (op == "MatMul" || op == "Gemm" || op == "Conv");
}

// Where each contraction operand comes from: a body input, or a constant the body holds.
struct OperandSource {
  int input = -1;
  RtTensor constant;
};

// The plain contraction of the two-kernel path. With post-ops it is created on first use: a
// float16 weight would otherwise be held as float32 twice.
class PlainContraction {
 public:
  PlainContraction(const KernelFactory& factory, KernelInfo info) : factory_(factory), info_(std::move(info)) {}
  Status Create() {
    auto kernel = factory_(info_);
    if (!kernel.ok()) return kernel.status();
    kernel_ = std::move(kernel).value();
    return Status::Ok();
  }
  Result<Kernel*> Get() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kernel_ == nullptr) FUSIONOPT_RETURN_IF_ERROR(Create());
    return kernel_.get();
  }

 private:
  const KernelFactory& factory_;
  KernelInfo info_;
  std::mutex mutex_;
  std::unique_ptr<Kernel> kernel_;
};

class FusedContractionKernel final : public FusedBodyKernel {
 public:
  FusedContractionKernel(std::string contraction_op, std::vector<OperandSource> operands,
                         std::unique_ptr<PlainContraction> contraction, std::unique_ptr<FusedProgram> epilogue,
                         std::unique_ptr<Kernel> with_post_ops, std::vector<size_t> addends)
      : contraction_op_(std::move(contraction_op)),
        operands_(std::move(operands)),
        contraction_(std::move(contraction)),
        epilogue_(std::move(epilogue)),
        with_post_ops_(std::move(with_post_ops)),
        addends_(std::move(addends)) {}

  // A Conv's kernels read convolution layouts; the two-kernel path reorders to row-major first.
  bool ReadsConvLayouts() const override { return contraction_op_ == "Conv"; }

  Result<int> Compute(KernelContext& context) override {
    KernelContext inner;
    inner.allocator = context.allocator;
    inner.conv_layout_output = context.conv_layout_output && context.outputs.size() == 1;
    for (const OperandSource& operand : operands_) {
      inner.inputs.push_back(operand.input >= 0 ? context.input(static_cast<size_t>(operand.input))
                             : operand.constant.defined() ? &operand.constant
                                                          : nullptr);
    }
    inner.outputs.resize(1);
    if (with_post_ops_ != nullptr && TryPostOps(context, inner)) return 1;
    const layouts::Prepared row_major =
        layouts::PrepareOperands(context.inputs, *context.allocator, /*views_allowed=*/false);
    for (size_t i = 0; i < operands_.size(); ++i) {
      if (operands_[i].input >= 0) inner.inputs[i] = context.input(static_cast<size_t>(operands_[i].input));
    }
    inner.conv_layout_output = false;

    FUSIONOPT_ASSIGN_OR_RETURN(Kernel * contraction, contraction_->Get());
    FUSIONOPT_RETURN_IF_ERROR(contraction->Compute(inner));
    const RtTensor product = std::move(inner.outputs[0]);
    std::vector<const RtTensor*> inputs;
    for (size_t index : epilogue_->used_inputs()) {
      inputs.push_back(index == 0 ? &product : context.input(index - 1));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(bool done, epilogue_->Run(inputs, *context.allocator, context.outputs));
    return done ? 2 : 0;
  }

 private:
  // One launch when oneDNN takes the epilogue as post-ops for this run's shapes; shapes it
  // refused once are not tried again.
  bool TryPostOps(KernelContext& context, KernelContext& inner) {
    std::vector<int64_t> key;
    for (const RtTensor* input : inner.inputs) {
      if (input != nullptr) key.insert(key.end(), input->dims().begin(), input->dims().end());
      key.push_back(-1);
    }
    for (size_t addend : addends_) {
      const RtTensor* input = context.input(addend);
      key.insert(key.end(), input->dims().begin(), input->dims().end());
      key.push_back(-1);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (refused_.count(key)) return false;
    }
    KernelContext fused = inner;
    fused.inputs.resize(ContractionInputs(contraction_op_), nullptr);
    for (size_t addend : addends_) fused.inputs.push_back(context.input(addend));
    if (with_post_ops_->Compute(fused).ok()) {
      context.outputs[0] = std::move(fused.outputs[0]);
      return true;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    refused_.insert(std::move(key));
    return false;
  }

  std::string contraction_op_;
  std::vector<OperandSource> operands_;
  std::unique_ptr<PlainContraction> contraction_;
  std::unique_ptr<FusedProgram> epilogue_;  // reads the product, then the body's inputs
  std::unique_ptr<Kernel> with_post_ops_;   // null when the epilogue is no post-op chain
  std::vector<size_t> addends_;             // body inputs the post-ops add, in post-op order
  std::mutex mutex_;
  std::set<std::vector<int64_t>> refused_;
};

}  // namespace

std::unique_ptr<FusedBodyKernel> CreateFusedContraction(const FusedBodyInfo& info) {
  const Graph& body = info.body;
  const Node* contraction = nullptr;
  std::vector<const Node*> rest;
  for (const auto& node : body.nodes()) {
    if (IsContraction(*node)) {
      if (contraction != nullptr) return nullptr;
      contraction = node.get();
    } else {
      rest.push_back(node.get());
    }
  }
  if (contraction == nullptr || contraction->output(0) == nullptr) return nullptr;

  std::vector<OperandSource> operands;
  std::vector<TensorPtr> constant_inputs;
  const auto& formals = body.inputs();
  for (const Value* input : contraction->inputs()) {
    OperandSource source;
    TensorPtr constant;
    if (input != nullptr) {
      auto it = std::find(formals.begin(), formals.end(), input);
      if (it != formals.end()) {
        source.input = static_cast<int>(it - formals.begin());
        constant = info.constant_inputs[static_cast<size_t>(source.input)];
      } else if (input->producer() != nullptr && (constant = ConstantNodeValue(*input->producer()))) {
        source.constant = RtTensor::WrapConstant(constant);
      } else {
        return nullptr;  // computed inside the body: a prologue, not an epilogue
      }
    }
    operands.push_back(std::move(source));
    constant_inputs.push_back(std::move(constant));
  }

  std::vector<const Value*> program_inputs = {contraction->output(0)};
  program_inputs.insert(program_inputs.end(), formals.begin(), formals.end());
  const size_t wanted = info.call.outputs().size();
  std::vector<const Value*> outputs(body.outputs().begin(), body.outputs().begin() + wanted);
  std::unique_ptr<FusedProgram> epilogue = FusedProgram::Plan(rest, program_inputs, outputs, info.context);
  if (epilogue == nullptr || epilogue->used_inputs().empty() || epilogue->used_inputs().front() != 0) return nullptr;

  const int64_t opset = info.context.OpsetFor(contraction->domain());
  const KernelFactory* factory = KernelRegistry::BuiltIn().Find(contraction->domain(), contraction->op_type(), opset);
  if (factory == nullptr) return nullptr;
  KernelInfo kernel_info{*contraction, opset, constant_inputs};
  auto plain = std::make_unique<PlainContraction>(*factory, kernel_info);
  std::unique_ptr<Kernel> with_post_ops;
  std::vector<size_t> addends;
  if (std::optional<PostOpChain> chain = MatchPostOpChain(info, *contraction, opset)) {
    auto kernel = CreateContractionWithPostOps(kernel_info, chain->post_ops);
    if (kernel.ok()) {
      with_post_ops = std::move(kernel).value();
      addends = std::move(chain->addends);
    }
  }
  // Without post-ops the plain kernel is the one that runs: created now, so a bad attribute
  // sends the call to the op-by-op run, which reports it.
  if (with_post_ops == nullptr && !plain->Create().ok()) return nullptr;
  return std::make_unique<FusedContractionKernel>(contraction->op_type(), std::move(operands), std::move(plain),
                                                  std::move(epilogue), std::move(with_post_ops), std::move(addends));
}

}  // namespace fusionopt::cpu
