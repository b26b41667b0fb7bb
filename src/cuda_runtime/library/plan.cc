// Recognising a contraction body and splitting it into the library's part and the generated
// remainder (contraction_plan.h): the shared recognition, the remainder sub-body, and the
// plan's one-line description. The family planners are contraction_plan_matmul.cc and
// contraction_plan_conv.cc.
#include "cuda_runtime/library/plan.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "cuda_runtime/codegen/typed_body.h"
#include "ir/constant_value.h"
#include "ir/float16.h"

namespace fusionopt::cuda {
namespace contraction_internal {

std::vector<int64_t> DimsOf(const Value& value) { return KnownDims(value).value_or(std::vector<int64_t>{}); }

std::optional<OperandRef> ResolveValue(const Graph& body, const Value* value) {
  if (value == nullptr) return std::nullopt;
  OperandRef ref;
  ref.dims = DimsOf(*value);
  if (value->is_initializer()) {
    ref.constant = value->initializer();
    return ref;
  }
  if (value->producer() != nullptr) {
    ref.constant = ConstantNodeValue(*value->producer());
    if (ref.constant == nullptr) return std::nullopt;
    return ref;
  }
  const auto& inputs = body.inputs();
  auto it = std::find(inputs.begin(), inputs.end(), value);
  if (it == inputs.end()) return std::nullopt;
  ref.input = static_cast<int>(it - inputs.begin());
  return ref;
}

Result<OperandRef> ResolveOperand(const Graph& body, const Node& contraction, size_t index) {
  const Value* value = contraction.input(index);
  if (value == nullptr) return OperandRef{};
  std::optional<OperandRef> ref = ResolveValue(body, value);
  if (!ref) {
    return Unsupported(contraction.op_type() + " operand '" + value->name() +
                       "' is computed inside the body (a prologue, which this family does not fuse)");
  }
  return *ref;
}

Node* SoleReader(const Graph& body, const Value& value) {
  if (value.uses().size() != 1) return nullptr;
  const auto& outputs = body.outputs();
  if (std::find(outputs.begin(), outputs.end(), &value) != outputs.end()) return nullptr;
  return value.uses().front().node;
}

std::optional<double> ResolvedScalar(const Graph& body, const Value* value) {
  std::optional<OperandRef> ref = ResolveValue(body, value);
  if (!ref || ref->constant == nullptr || ref->constant->NumElements() != 1) return std::nullopt;
  std::optional<std::vector<double>> values = ref->constant->AsDoubles();
  if (!values) return std::nullopt;
  return values->front();
}

}  // namespace contraction_internal

using namespace contraction_internal;

namespace {

// Ops that look like a contraction but that this family does not run; named so the reason is
// precise rather than "no contraction".
bool IsOtherContraction(const Node& node) {
  static const std::set<std::string> kOthers = {"ConvTranspose", "ConvInteger",   "MatMulInteger",
                                                "QLinearConv",   "QLinearMatMul", "Einsum"};
  return kOthers.count(node.op_type()) > 0;
}

Result<const Node*> FindContraction(const Graph& body) {
  const Node* found = nullptr;
  for (const auto& node : body.nodes()) {
    if (IsOtherContraction(*node)) return Unsupported(node->op_type() + " is not run by the contraction family");
    if (!IsLibraryContraction(*node)) continue;
    if (found != nullptr) {
      return Unsupported("two contractions in one body (" + DescribeNode(*found) + " and " + DescribeNode(*node) +
                         "); the contraction family runs one");
    }
    found = node.get();
  }
  if (found == nullptr) return Unsupported("no MatMul, Gemm or Conv in the body");
  if (found->output(0) == nullptr) return Unsupported(DescribeNode(*found) + " has no output");
  return found;
}

// A one-element tensor of `dtype` holding `value`.
TensorPtr ScalarTensor(DataType dtype, float value) {
  if (dtype == DataType::kFloat16)
    return std::make_shared<const Tensor>(Tensor::FromValues<uint16_t>(dtype, {}, {FloatToHalf(value)}));
  if (dtype == DataType::kBFloat16) {
    return std::make_shared<const Tensor>(Tensor::FromValues<uint16_t>(dtype, {}, {FloatToBFloat16(value)}));
  }
  return std::make_shared<const Tensor>(Tensor::FromValues<float>(DataType::kFloat, {}, {value}));
}

// Builds the remainder sub-body from the body nodes the library does not compute.
class RemainderBuilder {
 public:
  RemainderBuilder(const Graph& body, ContractionPlan& plan) : body_(body), plan_(plan) {
    graph_ = std::make_unique<Graph>();
    graph_->set_name(body.name() + "_epilogue");
  }

  // The library's result enters as the remainder's first input; with a deferred Gemm C the
  // remainder first computes Gemm's Y = product + beta·C.
  Status Seed(const Value& result, const CorePlan& core) {
    if (core.deferred_c == nullptr) {
      Value* input = graph_->CreateValue(result.name());
      input->type() = result.type();
      graph_->AddInput(input);
      mapping_[&result] = input;
      return Status::Ok();
    }
    Value* product = graph_->CreateValue(body_.UniqueName(result.name() + "_product"));
    product->type() = result.type();
    graph_->AddInput(product);
    FUSIONOPT_ASSIGN_OR_RETURN(Value * c, Map(core.deferred_c));
    if (core.deferred_beta != 1.0f) {
      Value* beta = graph_->CreateValue(graph_->UniqueName("gemm_beta"));
      beta->type().dtype = result.dtype();
      beta->type().shape = Shape{};
      graph_->SetInitializer(beta, ScalarTensor(result.dtype(), core.deferred_beta));
      Value* scaled = graph_->CreateValue(graph_->UniqueName("gemm_beta_c"));
      scaled->type() = core.deferred_c->type();
      graph_->CreateNode("Mul", "", {c, beta}, {scaled});
      c = scaled;
    }
    Value* sum = graph_->CreateValue(result.name());
    sum->type() = result.type();
    graph_->CreateNode("Add", "", {product, c}, {sum});
    mapping_[&result] = sum;
    produced_.insert(sum);
    return Status::Ok();
  }

  Status Copy(const Node& node) {
    std::vector<Value*> inputs, outputs;
    for (const Value* input : node.inputs()) {
      if (input == nullptr) {
        inputs.push_back(nullptr);
        continue;
      }
      FUSIONOPT_ASSIGN_OR_RETURN(Value * mapped, Map(input));
      inputs.push_back(mapped);
    }
    for (const Value* output : node.outputs()) {
      if (output == nullptr) {
        outputs.push_back(nullptr);
        continue;
      }
      Value* copy = graph_->CreateValue(output->name());
      copy->type() = output->type();
      mapping_[output] = copy;
      produced_.insert(copy);
      outputs.push_back(copy);
    }
    Node* copy = graph_->CreateNode(node.op_type(), node.domain(), inputs, outputs, node.name());
    for (const Attribute& attribute : node.attributes()) {
      if (attribute.kind == AttributeKind::kGraph || attribute.kind == AttributeKind::kGraphs) {
        return Unsupported(DescribeNode(node) + " in a contraction epilogue has a subgraph");
      }
      copy->mutable_attributes().push_back(attribute.CopyWithoutGraphs());
    }
    return Status::Ok();
  }

  // Which body output each remainder output is; the library's result may be a body output too.
  Status Finish(const Value* library_result) {
    std::set<const Value*> seen;
    for (size_t i = 0; i < body_.outputs().size(); ++i) {
      const Value* output = body_.outputs()[i];
      if (!seen.insert(output).second) return Unsupported("body output '" + output->name() + "' is listed twice");
      auto it = mapping_.find(output);
      if (it != mapping_.end() && produced_.count(it->second)) {
        graph_->AddOutput(it->second);
        plan_.remainder_outputs.push_back(static_cast<int>(i));
      } else if (output == library_result) {
        plan_.library_result_output = static_cast<int>(i);
      } else {
        return Unsupported("body output '" + output->name() +
                           "' is computed by neither the contraction nor its epilogue");
      }
    }
    if (graph_->num_nodes() > 0 && graph_->outputs().empty()) {
      return Unsupported("the epilogue computes no body output");
    }
    return Status::Ok();
  }

  std::unique_ptr<Graph> Release() { return std::move(graph_); }

 private:
  Result<Value*> Map(const Value* outer) {
    auto it = mapping_.find(outer);
    if (it != mapping_.end()) return it->second;
    std::optional<OperandRef> ref = ResolveValue(body_, outer);
    if (!ref) return Unsupported("the epilogue reads '" + outer->name() + "', which the library does not write");
    Value* value = graph_->CreateValue(outer->name());
    value->type() = outer->type();
    if (ref->constant != nullptr) {
      graph_->SetInitializer(value, ref->constant);
    } else {
      graph_->AddInput(value);
      plan_.remainder_inputs.push_back(ref->input);
    }
    mapping_[outer] = value;
    return value;
  }

  const Graph& body_;
  ContractionPlan& plan_;
  std::unique_ptr<Graph> graph_;
  std::map<const Value*, Value*> mapping_;
  std::set<const Value*> produced_;
};

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "," : "") + std::to_string(dims[i]);
  return text + "]";
}

Status BuildRemainder(const Graph& body, const Node& contraction, const CorePlan& core, ContractionPlan& plan) {
  std::set<const Node*> library_nodes(core.absorbed.begin(), core.absorbed.end());
  library_nodes.insert(&contraction);
  std::vector<const Node*> rest;
  for (const auto& node : body.nodes()) {
    if (library_nodes.count(node.get()) || ConstantNodeValue(*node) != nullptr) continue;
    rest.push_back(node.get());
  }
  RemainderBuilder builder(body, plan);
  const bool has_remainder = !rest.empty() || core.deferred_c != nullptr;
  if (has_remainder) FUSIONOPT_RETURN_IF_ERROR(builder.Seed(*core.result, core));
  for (const Node* node : rest) FUSIONOPT_RETURN_IF_ERROR(builder.Copy(*node));
  FUSIONOPT_RETURN_IF_ERROR(builder.Finish(core.deferred_c != nullptr ? nullptr : core.result));
  if (has_remainder) {
    plan.remainder = builder.Release();
    FUSIONOPT_RETURN_IF_ERROR(CheckFullyTyped(*plan.remainder));
  }
  return Status::Ok();
}

}  // namespace

std::string_view NameOf(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::kNone: return "none";
    case MatmulEpilogue::kBias: return "bias";
    case MatmulEpilogue::kRelu: return "relu";
    case MatmulEpilogue::kReluBias: return "relu_bias";
    case MatmulEpilogue::kGeluTanh: return "gelu";
    case MatmulEpilogue::kGeluTanhBias: return "gelu_bias";
  }
  return "?";
}

LtProblem ColumnMajorProblem(const MatmulPlan& plan) {
  LtProblem problem;
  problem.m = static_cast<uint64_t>(plan.n);
  problem.n = static_cast<uint64_t>(plan.m);
  problem.k = static_cast<uint64_t>(plan.k);
  problem.batch = plan.batch;
  // ONNX B stored [k, n] row-major is column-major [n, k] (ld n): Bᵀ as is. Stored [n, k]
  // (transB) it is column-major [k, n] (ld k), and Bᵀ is its transpose.
  problem.first.transposed = plan.trans_b;
  problem.first.rows = static_cast<uint64_t>(plan.trans_b ? plan.k : plan.n);
  problem.first.cols = static_cast<uint64_t>(plan.trans_b ? plan.n : plan.k);
  problem.first.ld = static_cast<int64_t>(problem.first.rows);
  problem.first.batch_stride = plan.stride_b;
  // ONNX A stored [m, k] is column-major [k, m] (ld k): Aᵀ as is; stored [k, m] (transA), its
  // transpose.
  problem.second.transposed = plan.trans_a;
  problem.second.rows = static_cast<uint64_t>(plan.trans_a ? plan.m : plan.k);
  problem.second.cols = static_cast<uint64_t>(plan.trans_a ? plan.k : plan.m);
  problem.second.ld = static_cast<int64_t>(problem.second.rows);
  problem.second.batch_stride = plan.stride_a;
  problem.output.rows = static_cast<uint64_t>(plan.n);
  problem.output.cols = static_cast<uint64_t>(plan.m);
  problem.output.ld = plan.n;
  problem.output.batch_stride = plan.stride_y;
  return problem;
}

std::string ContractionPlan::Describe() const {
  std::ostringstream text;
  if (const auto* matmul = std::get_if<MatmulPlan>(&core)) {
    text << "cuBLASLt " << op_type << " " << NameOf(matmul->dtype) << " m=" << matmul->m << " n=" << matmul->n
         << " k=" << matmul->k << " batch=" << matmul->batch << (matmul->trans_a ? " transA" : "")
         << (matmul->trans_b ? " transB" : "") << " epilogue=" << NameOf(matmul->epilogue);
    if (matmul->c.present()) text << " +beta*C";
  } else {
    const ConvPlan& conv = std::get<ConvPlan>(core);
    text << "cuDNN Conv " << NameOf(conv.dtype) << " x=" << DimsText({conv.x_dims.begin(), conv.x_dims.end()})
         << " w=" << DimsText({conv.w_dims.begin(), conv.w_dims.end()}) << " groups=" << conv.groups
         << (conv.fused() ? " bias-activation" : "") << (conv.residual.present() ? " +residual" : "")
         << (conv.relu ? " relu" : "");
  }
  if (remainder != nullptr) text << "; generated epilogue of " << remainder->num_nodes() << " ops";
  return text.str();
}

Result<ContractionPlan> PlanContraction(const Graph& typed_body) {
  FUSIONOPT_RETURN_IF_ERROR(CheckFullyTyped(typed_body));
  FUSIONOPT_ASSIGN_OR_RETURN(const Node* contraction, FindContraction(typed_body));
  CorePlan core;
  if (contraction->op_type() == "Conv") {
    FUSIONOPT_ASSIGN_OR_RETURN(core, PlanConvCore(typed_body, *contraction));
  } else {
    FUSIONOPT_ASSIGN_OR_RETURN(core, PlanMatmulCore(typed_body, *contraction));
  }
  ContractionPlan plan;
  plan.op_type = contraction->op_type();
  plan.library_result = core.result->name();
  plan.library_result_dims = DimsOf(*core.result);
  for (const Node* node : core.absorbed) {
    if (ConstantNodeValue(*node) == nullptr) plan.absorbed_ops.push_back(node->op_type());
  }
  FUSIONOPT_RETURN_IF_ERROR(BuildRemainder(typed_body, *contraction, core, plan));
  // With a deferred Gemm C the library writes the bare product, the remainder's first input.
  if (core.deferred_c != nullptr) plan.library_result = plan.remainder->inputs().front()->name();
  plan.core = std::move(core.core);
  return plan;
}

bool IsLibraryContraction(const Node& node) {
  const std::string& op = node.op_type();
  return IsDefaultDomain(node) && (op == "MatMul" || op == "Gemm" || op == "Conv");
}

}  // namespace fusionopt::cuda
