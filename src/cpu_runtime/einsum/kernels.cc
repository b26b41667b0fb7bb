// Einsum (opset 12+): any equation over any number of operands.
//
// Operands are folded left to right, two at a time (einsum/contract.h): each step keeps only
// the labels the output or a later operand still needs, so every label is summed as soon as
// possible and no step spans more of the label space than two operands do. One operand is
// a single projection (diagonals, sums, a permutation). float16 and bfloat16 are computed in
// float32; float32 contractions run on oneDNN's matmul, the other types on direct loops.
#include <algorithm>

#include "cpu_runtime/einsum/einsum.h"
#include "cpu_runtime/einsum/contract.h"
#include "cpu_runtime/contraction/common.h"

namespace fusionopt::cpu {
namespace {

using einsum::Operand;

bool IsEinsumType(DataType dtype) { return einsum::IsComputeType(dtype) || IsHalfPrecision(dtype); }

// The labels of operands [first, end) and of the output, each once: what is still needed.
std::vector<int> LabelsNeeded(const einsum::Labeling& labeling, size_t first) {
  std::vector<int> needed = labeling.output;
  for (size_t operand = first; operand < labeling.operands.size(); ++operand) {
    for (int label : labeling.operands[operand]) {
      if (std::find(needed.begin(), needed.end(), label) == needed.end()) needed.push_back(label);
    }
  }
  return needed;
}

// What a step over `a` and `b` keeps: the needed labels they hold, in the order of `needed`
// (output labels first, so the last step's result is already in output order).
std::vector<int> KeptLabels(const Operand& a, const Operand& b, const std::vector<int>& needed,
                            const einsum::Workspace& workspace) {
  std::vector<int> held = einsum::PresentLabels(a, workspace);
  for (int label : einsum::PresentLabels(b, workspace)) held.push_back(label);
  std::vector<int> kept;
  for (int label : needed) {
    if (std::find(held.begin(), held.end(), label) != held.end()) kept.push_back(label);
  }
  return kept;
}

class EinsumKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    if (info.node.FindAttribute("equation") == nullptr) return info.Error("needs the 'equation' attribute");
    const std::string text = info.node.GetString("equation", "");
    Result<einsum::Equation> equation = einsum::ParseEquation(text);
    if (!equation.ok()) return info.Error("equation '" + text + "': " + equation.status().message());
    equation_ = std::move(equation).value();
    const size_t inputs = info.node.inputs().size();
    if (equation_.inputs.size() != inputs) {
      return info.Error("equation '" + text + "' has " + std::to_string(equation_.inputs.size()) +
                        " operand terms but the node has " + std::to_string(inputs) + " inputs");
    }
    return CheckDeclaredInputs(info);
  }

  Status Compute(KernelContext& context) override {
    FUSIONOPT_ASSIGN_OR_RETURN(DataType dtype, CheckedInputType(context));
    std::vector<std::vector<int64_t>> dims;
    for (const RtTensor* input : context.inputs) dims.push_back(input->dims());
    Result<einsum::Labeling> labeling = einsum::Bind(equation_, dims);
    if (!labeling.ok()) return InvalidModel("equation '" + equation_.text + "': " + labeling.status().message());
    einsum::Workspace workspace{labeling->sizes, context.allocator};
    std::vector<Operand> operands;
    for (size_t i = 0; i < context.num_inputs(); ++i) {
      operands.push_back({ToComputeType(*context.input(i), *context.allocator), labeling->operands[i]});
    }
    FUSIONOPT_ASSIGN_OR_RETURN(Operand folded, Fold(operands, *labeling, workspace));
    const Operand result = einsum::Project(folded, labeling->output, workspace);
    if (result.tensor.dtype() == dtype) {
      context.outputs[0] = result.tensor;
    } else {
      ConvertFromFloat32(result.tensor, context.Output(0, dtype, result.tensor.dims()));
    }
    return Status::Ok();
  }

 private:
  // Declared dtypes and shapes, where the model gives them, checked before anything runs.
  Status CheckDeclaredInputs(const KernelInfo& info) const {
    std::vector<std::vector<int64_t>> dims;
    DataType common = DataType::kUndefined;
    for (size_t i = 0; i < info.node.inputs().size(); ++i) {
      const Value* input = info.node.input(i);
      if (input == nullptr) return info.Error("input " + std::to_string(i) + " is missing");
      const DataType dtype = input->dtype();
      if (dtype != DataType::kUndefined && !IsEinsumType(dtype)) {
        return info.Error("does not support dtype " + std::string(NameOf(dtype)));
      }
      if (dtype != DataType::kUndefined && common != DataType::kUndefined && dtype != common) {
        return info.Error("inputs have different dtypes: " + std::string(NameOf(common)) + " and " +
                          std::string(NameOf(dtype)));
      }
      if (dtype != DataType::kUndefined) common = dtype;
      if (!input->shape()) continue;
      std::vector<int64_t>& sizes = dims.emplace_back();
      for (const Dim& dim : *input->shape()) sizes.push_back(dim.is_known() ? dim.value : -1);
    }
    if (dims.size() < info.node.inputs().size()) return Status::Ok();  // some rank is unknown
    Result<einsum::Labeling> labeling = einsum::Bind(equation_, dims);
    if (!labeling.ok()) return info.Error("equation '" + equation_.text + "': " + labeling.status().message());
    return Status::Ok();
  }

  Result<DataType> CheckedInputType(const KernelContext& context) const {
    FUSIONOPT_CHECK(context.num_inputs() == equation_.inputs.size(), "Init matched the inputs to the terms");
    const DataType dtype = context.input(0)->dtype();
    if (!IsEinsumType(dtype)) return Unsupported("Einsum does not support dtype " + std::string(NameOf(dtype)));
    for (const RtTensor* input : context.inputs) {
      if (input->dtype() != dtype) {
        return InvalidModel("Einsum inputs have different dtypes: " + DescribeTensor(*context.input(0)) + " and " +
                            DescribeTensor(*input));
      }
    }
    return dtype;
  }

  static RtTensor ToComputeType(const RtTensor& tensor, Allocator& allocator) {
    return IsHalfPrecision(tensor.dtype()) ? ToFloat32(tensor, allocator) : tensor;
  }

  Result<Operand> Fold(const std::vector<Operand>& operands, const einsum::Labeling& labeling,
                       const einsum::Workspace& workspace) {
    Operand folded = operands[0];
    for (size_t next = 1; next < operands.size(); ++next) {
      const std::vector<int> keep =
          KeptLabels(folded, operands[next], LabelsNeeded(labeling, next + 1), workspace);
      if (folded.tensor.dtype() == DataType::kFloat) {
        FUSIONOPT_ASSIGN_OR_RETURN(folded, matmul_plans_.Contract(folded, operands[next], keep, workspace));
      } else {
        folded = einsum::ContractDirectly(folded, operands[next], keep, workspace);
      }
    }
    return folded;
  }

  einsum::Equation equation_;
  einsum::MatMulPlans matmul_plans_;
};

}  // namespace

void RegisterEinsumKernels(KernelRegistry& registry) {
  registry.Register("", "Einsum", 12, kAnyOpset, Make<EinsumKernel>());
}

}  // namespace fusionopt::cpu
