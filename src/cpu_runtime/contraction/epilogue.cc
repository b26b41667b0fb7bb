#include "cpu_runtime/contraction/epilogue.h"

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "cpu_runtime/contraction/common.h"
#include "cpu_runtime/engine/host_cpu.h"
#include "cpu_runtime/onednn/common.h"
#include "ir/constant_value.h"
#include "patterns/composite/composite.h"

namespace fusionopt::cpu {
namespace {

using dnnl::algorithm;

PostOp Eltwise(algorithm kind, float alpha = 0.0f, float beta = 0.0f) {
  return PostOp{PostOp::Kind::kEltwise, kind, alpha, beta};
}

// Clip(x, lo, hi) with constant bounds (attributes before opset 11).
std::optional<std::vector<PostOp>> ClipPostOps(const Node& clip, int64_t opset) {
  float lo = -FLT_MAX, hi = FLT_MAX;
  if (opset < 11) {
    lo = clip.GetFloat("min", lo);
    hi = clip.GetFloat("max", hi);
  } else {
    for (size_t i = 1; i < clip.inputs().size(); ++i) {
      if (clip.input(i) == nullptr) continue;
      // A body has no graph inputs: the outliner inlined the scalars as Constant nodes.
      std::optional<double> bound = ConstantScalar(clip.input(i), InitializerRule::kAllConstant);
      if (!bound) return std::nullopt;
      (i == 1 ? lo : hi) = static_cast<float>(*bound);
    }
  }
  if (!(lo <= hi)) return std::nullopt;  // ONNX then gives hi everywhere; oneDNN's clip does not
  return std::vector<PostOp>{Eltwise(algorithm::eltwise_clip, lo, hi)};
}

}  // namespace

std::optional<std::vector<PostOp>> ActivationPostOps(const Node& node, int64_t opset) {
  const std::string& op = node.op_type();
  if (op == "Relu") return std::vector<PostOp>{Eltwise(algorithm::eltwise_relu)};
  if (op == "LeakyRelu") return std::vector<PostOp>{Eltwise(algorithm::eltwise_relu, node.GetFloat("alpha", 0.01f))};
  if (op == "Elu") return std::vector<PostOp>{Eltwise(algorithm::eltwise_elu, node.GetFloat("alpha", 1.0f))};
  if (op == "Sigmoid") return std::vector<PostOp>{Eltwise(algorithm::eltwise_logistic)};
  if (op == "Tanh") return std::vector<PostOp>{Eltwise(algorithm::eltwise_tanh)};
  if (op == "HardSwish") return std::vector<PostOp>{Eltwise(algorithm::eltwise_hardswish)};
  if (op == "HardSigmoid") {
    return std::vector<PostOp>{
        Eltwise(algorithm::eltwise_linear, node.GetFloat("alpha", 0.2f), node.GetFloat("beta", 0.5f)),
        Eltwise(algorithm::eltwise_clip, 0.0f, 1.0f)};
  }
  if (op == "Gelu") {
    const std::string approximate = node.GetString("approximate", "none");
    if (approximate == "none") return std::vector<PostOp>{Eltwise(algorithm::eltwise_gelu_erf)};
    if (approximate == "tanh") return std::vector<PostOp>{Eltwise(algorithm::eltwise_gelu_tanh)};
    return std::nullopt;
  }
  if (op == "Clip") return ClipPostOps(node, opset);
  return std::nullopt;
}

namespace {

// Walks the epilogue from the product to the body's output, one post-op step at a time.
class ChainMatcher {
 public:
  ChainMatcher(const FusedBodyInfo& info, int64_t opset) : info_(info), opset_(opset) {}

  std::optional<PostOpChain> Match(const Value& product, const std::vector<const Node*>& head) {
    const Graph& body = info_.body;
    if (info_.call.outputs().size() != 1 || body.outputs().size() != 1) return std::nullopt;
    consumed_.insert(head.begin(), head.end());
    const Value* value = &product;
    while (value != body.outputs()[0]) {
      value = value->uses().size() == 1 ? Step(*value, *value->uses().front().node) : Composite(*value);
      if (value == nullptr) return std::nullopt;
    }
    for (const auto& node : body.nodes()) {
      if (!consumed_.count(node.get()) && ConstantNodeValue(*node) == nullptr) return std::nullopt;
    }
    return std::move(chain_);
  }

 private:
  void Append(const std::vector<PostOp>& post_ops) {
    chain_.post_ops.insert(chain_.post_ops.end(), post_ops.begin(), post_ops.end());
  }

  // `node`, the only reader of `value`: the value it gives, or null when it is no post-op.
  const Value* Step(const Value& value, const Node& node) {
    if (!IsDefaultDomain(node) || node.outputs().size() != 1 || node.output(0) == nullptr) return nullptr;
    // A two-input Sum is an Add (light ResNet-50 writes its residuals that way).
    const std::string op = node.op_type() == "Sum" && node.inputs().size() == 2 ? "Add" : node.op_type();
    if (op == "Add" || op == "Mul") {
      if (node.inputs().size() != 2) return nullptr;
      const Value* other = node.input(0) == &value ? node.input(1) : node.input(0);
      if (other == &value) return nullptr;
      if (std::optional<double> scalar = ConstantScalar(other, InitializerRule::kAllConstant)) {
        const auto constant = static_cast<float>(*scalar);
        Append({op == "Add" ? Eltwise(algorithm::eltwise_linear, 1.0f, constant)
                            : Eltwise(algorithm::eltwise_linear, constant, 0.0f)});
      } else {
        const auto& formals = info_.body.inputs();
        auto it = std::find(formals.begin(), formals.end(), other);
        if (op != "Add" || it == formals.end()) return nullptr;
        chain_.post_ops.push_back(PostOp{PostOp::Kind::kAdd});
        chain_.addends.push_back(static_cast<size_t>(it - formals.begin()));
      }
    } else {
      if (node.input(0) != &value) return nullptr;
      std::optional<std::vector<PostOp>> post_ops = ActivationPostOps(node, opset_);
      if (!post_ops) return nullptr;
      Append(*post_ops);
    }
    consumed_.insert(&node);
    return node.output(0);
  }

  // `value` read several times: a decomposed GELU or SiLU of it, whose nodes read all of it.
  const Value* Composite(const Value& value) {
    for (const auto& node : info_.body.nodes()) {
      if (consumed_.count(node.get())) continue;
      CompositeSearch search = MatchCompositeAt(*node, opset_);
      if (!search.match || search.match->x != &value) continue;
      const CompositeMatch& match = *search.match;
      std::unordered_set<const Node*> members(match.nodes.begin(), match.nodes.end());
      for (const Use& use : value.uses()) {
        if (!members.count(use.node)) return nullptr;
      }
      if (match.kind == CompositeKind::kSilu) {
        Append({Eltwise(algorithm::eltwise_swish, static_cast<float>(match.alpha))});
      } else if (match.kind == CompositeKind::kGelu) {
        const bool erf = match.gelu_form == GeluForm::kErf;
        Append({Eltwise(erf ? algorithm::eltwise_gelu_erf : algorithm::eltwise_gelu_tanh)});
      } else {
        return nullptr;
      }
      consumed_.insert(members.begin(), members.end());
      return match.output;
    }
    return nullptr;
  }

  const FusedBodyInfo& info_;
  int64_t opset_;
  std::unordered_set<const Node*> consumed_;
  PostOpChain chain_;
};

}  // namespace

std::optional<PostOpChain> MatchPostOpChain(const FusedBodyInfo& info, const Node& contraction, int64_t opset) {
  return ChainMatcher(info, opset).Match(*contraction.output(0), {&contraction});
}

std::optional<PostOpChain> MatchPostOpChain(const FusedBodyInfo& info, const Value& product,
                                            const std::vector<const Node*>& head, int64_t opset) {
  return ChainMatcher(info, opset).Match(product, head);
}

namespace {

// One oneDNN eltwise step as engine instructions on `x`; nullopt for an algorithm without them.
std::optional<int> EmitEltwise(ew::ProgramBuilder& builder, const PostOp& step, int x) {
  auto emit = [&](ew::Op op, std::vector<int> operands, float alpha = 0.0f) -> std::optional<int> {
    Result<int> reg = builder.Emit(op, operands, alpha);
    FUSIONOPT_CHECK(reg.ok(), "epilogue steps take float registers");
    return reg.value();
  };
  auto fill = [&](float value) {
    Result<int> reg = builder.Fill(value, DataType::kFloat);
    FUSIONOPT_CHECK(reg.ok(), "a float constant");
    return reg.value();
  };
  switch (step.algorithm) {
    case algorithm::eltwise_relu:
      return step.alpha == 0.0f ? emit(ew::Op::kRelu, {x}) : emit(ew::Op::kLeakyRelu, {x}, step.alpha);
    case algorithm::eltwise_elu: return emit(ew::Op::kElu, {x}, step.alpha);
    case algorithm::eltwise_logistic: return emit(ew::Op::kSigmoid, {x});
    case algorithm::eltwise_tanh: return emit(ew::Op::kTanh, {x});
    case algorithm::eltwise_hardswish: return emit(ew::Op::kHardSwish, {x});
    case algorithm::eltwise_gelu_erf: return emit(ew::Op::kGeluErf, {x});
    case algorithm::eltwise_gelu_tanh: return emit(ew::Op::kGeluTanh, {x});
    case algorithm::eltwise_swish: return emit(ew::Op::kSwish, {x}, step.alpha);  // x·sigmoid(alpha·x)
    case algorithm::eltwise_linear: {  // alpha·x + beta
      const int scaled = *emit(ew::Op::kMul, {x, fill(step.alpha)});
      return emit(ew::Op::kAdd, {scaled, fill(step.beta)});
    }
    case algorithm::eltwise_round: return emit(ew::Op::kRound, {x});
    case algorithm::eltwise_clip:
    case algorithm::eltwise_clip_v2: {
      const int lo = fill(step.alpha), hi = fill(step.beta);
      return emit(ew::Op::kClip, {x, lo, hi});
    }
    default: return std::nullopt;
  }
}

// A kScalar step (binary op with a constant) as an engine instruction on `x`.
std::optional<int> EmitScalar(ew::ProgramBuilder& builder, const PostOp& step, int x) {
  Result<int> constant = builder.Fill(step.alpha, DataType::kFloat);
  FUSIONOPT_CHECK(constant.ok(), "a float constant");
  ew::Op op;
  switch (step.algorithm) {
    case algorithm::binary_mul: op = ew::Op::kMul; break;
    case algorithm::binary_add: op = ew::Op::kAdd; break;
    case algorithm::binary_max: op = ew::Op::kMax; break;
    case algorithm::binary_min: op = ew::Op::kMin; break;
    default: return std::nullopt;
  }
  Result<int> result = builder.Emit(op, {x, constant.value()});
  FUSIONOPT_CHECK(result.ok(), "float registers");
  return result.value();
}

}  // namespace

std::optional<HostEpilogueStep> HostEpilogueStep::TakeFrom(std::vector<PostOp>& post_ops) {
  if (post_ops.empty() || post_ops.back().kind != PostOp::Kind::kEltwise) return std::nullopt;
  const algorithm last = post_ops.back().algorithm;
  if (last != algorithm::eltwise_gelu_tanh && !(last == algorithm::eltwise_swish && SwishInEngine())) {
    return std::nullopt;
  }
  ew::ProgramBuilder builder({DataType::kFloat});
  std::optional<int> result = EmitEltwise(builder, post_ops.back(), builder.input(0));
  FUSIONOPT_CHECK(result.has_value(), "the engine has both steps");
  builder.AddOutput(*result);
  post_ops.pop_back();
  return HostEpilogueStep(builder.Finish(last == algorithm::eltwise_swish ? "Swish" : "GeluTanh"));
}

Status HostEpilogueStep::Apply(RtTensor& output) const {
  FUSIONOPT_CHECK(output.dtype() == DataType::kFloat, "the product is staged in float32");
  // Each tile is read before it is written, so the pass may run in place; the steps taken
  // are elementwise, so a convolution layout is read as it lies.
  return ew::Evaluate(program_, {&output}, {&output});
}

bool SwishInEngine() {
  static const bool in_engine = [] {
    const char* requested = std::getenv("FUSIONOPT_CPU_SWISH");
    if (requested != nullptr && std::strcmp(requested, "engine") == 0) return true;
    if (requested != nullptr && std::strcmp(requested, "post-op") == 0) return false;
    return ThisHost().onednn_avx512;
  }();
  return in_engine;
}

std::optional<ew::Program> PostOpsAsProgram(const std::vector<PostOp>& post_ops,
                                            const std::vector<AddendLayout>& addends) {
  const bool residual = std::any_of(addends.begin(), addends.end(), [](const AddendLayout& a) { return a.summed; });
  ew::ProgramBuilder builder(residual ? std::vector<DataType>{DataType::kFloat, DataType::kFloat}
                                      : std::vector<DataType>{DataType::kFloat});
  int value = builder.input(0);
  size_t addend = 0;
  for (const PostOp& step : post_ops) {
    if (step.kind == PostOp::Kind::kScalar) {
      std::optional<int> next = EmitScalar(builder, step, value);
      if (!next) return std::nullopt;
      value = *next;
      continue;
    }
    if (step.kind == PostOp::Kind::kAdd) {
      if (!addends.at(addend++).summed) return std::nullopt;
      Result<int> sum = builder.Emit(ew::Op::kAdd, {value, builder.input(1)});
      FUSIONOPT_CHECK(sum.ok(), "float registers add");
      value = sum.value();
      continue;
    }
    std::optional<int> next = EmitEltwise(builder, step, value);
    if (!next) return std::nullopt;
    value = *next;
  }
  builder.AddOutput(value);
  return builder.Finish("epilogue");
}

size_t ContractionInputs(const std::string& op_type) { return op_type == "MatMul" ? 2 : 3; }

Result<std::unique_ptr<Kernel>> CreateContractionWithPostOps(const KernelInfo& info, std::vector<PostOp> post_ops) {
  if (!LowerRepeatedEltwise(post_ops)) {
    return info.Error("an activation repeats with other parameters, which oneDNN's post-ops compute wrongly");
  }
  const std::string& op = info.node.op_type();
  if (op == "MatMul") return CreateMatMulWithPostOps(info, std::move(post_ops));
  if (op == "Gemm") return CreateGemmWithPostOps(info, std::move(post_ops));
  if (op == "Conv") return CreateConvWithPostOps(info, std::move(post_ops));
  return info.Error("has no kernel with post-ops");
}

std::optional<AddendLayout> LayoutAddend(const std::vector<int64_t>& addend_dims,
                                         const std::vector<int64_t>& output_dims,
                                         const std::vector<int64_t>& dst_dims, size_t channel_axis, bool sum_full) {
  if (addend_dims.size() > output_dims.size() || channel_axis >= output_dims.size()) return std::nullopt;
  std::vector<int64_t> padded(output_dims.size() - addend_dims.size(), 1);
  padded.insert(padded.end(), addend_dims.begin(), addend_dims.end());
  bool scalar = true, per_channel = true;
  for (size_t axis = 0; axis < padded.size(); ++axis) {
    if (padded[axis] != 1 && padded[axis] != output_dims[axis]) return std::nullopt;
    if (padded[axis] != 1) {
      scalar = false;
      per_channel = per_channel && axis == channel_axis;
    }
  }
  AddendLayout layout;
  std::vector<int64_t> dims(dst_dims.size(), 1);
  if (scalar || per_channel) {
    // The channel's position counted from the back holds in a dst that folds leading axes.
    const size_t position =
        dst_dims == output_dims ? channel_axis : dst_dims.size() - (output_dims.size() - channel_axis);
    dims[position] = padded[channel_axis];
  } else if (padded == output_dims) {
    layout.summed = sum_full;
    dims = dst_dims;
  } else {
    return std::nullopt;
  }
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t axis = dims.size(); axis-- > 1;) strides[axis - 1] = strides[axis] * dims[axis];
  layout.desc = dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32, strides);
  return layout;
}

namespace {

dnnl::memory::desc ScalarOperandDesc(size_t rank) {
  return onednn::RowMajorDesc(std::vector<int64_t>(std::max<size_t>(rank, 1), 1));
}

bool SameStep(const PostOp& a, const PostOp& b) { return a.alpha == b.alpha && a.beta == b.beta; }

}  // namespace

bool LowerRepeatedEltwise(std::vector<PostOp>& post_ops) {
  std::vector<PostOp> lowered;
  std::vector<const PostOp*> first_of;  // the first eltwise step of each algorithm so far
  for (const PostOp& step : post_ops) {
    if (step.kind != PostOp::Kind::kEltwise) {
      lowered.push_back(step);
      continue;
    }
    auto first = std::find_if(first_of.begin(), first_of.end(), [&](const PostOp* seen) { return seen->algorithm == step.algorithm; });
    if (first == first_of.end() || SameStep(**first, step)) {
      if (first == first_of.end()) first_of.push_back(&step);
      lowered.push_back(step);
      continue;
    }
    auto scalar = [&](algorithm binary, float value) { lowered.push_back({PostOp::Kind::kScalar, binary, value}); };
    if (step.algorithm == algorithm::eltwise_linear) {
      if (step.alpha != 1.0f) scalar(algorithm::binary_mul, step.alpha);
      if (step.beta != 0.0f) scalar(algorithm::binary_add, step.beta);
    } else if (step.algorithm == algorithm::eltwise_clip || step.algorithm == algorithm::eltwise_clip_v2) {
      scalar(algorithm::binary_max, step.alpha);
      scalar(algorithm::binary_min, step.beta);
    } else if (step.algorithm == algorithm::eltwise_relu && step.alpha == 0.0f) {
      scalar(algorithm::binary_max, 0.0f);
    } else {
      return false;
    }
  }
  post_ops = std::move(lowered);
  return true;
}

dnnl::post_ops BuildPostOps(const std::vector<PostOp>& post_ops, const std::vector<AddendLayout>& addends,
                            size_t rank, dnnl::post_ops start) {
  dnnl::post_ops built = std::move(start);
  size_t addend = 0;
  for (const PostOp& post_op : post_ops) {
    if (post_op.kind == PostOp::Kind::kEltwise) {
      built.append_eltwise(1.0f, post_op.algorithm, post_op.alpha, post_op.beta);
      continue;
    }
    if (post_op.kind == PostOp::Kind::kScalar) {
      built.append_binary(post_op.algorithm, ScalarOperandDesc(rank));
      continue;
    }
    const AddendLayout& layout = addends.at(addend++);
    if (layout.summed) {
      if (layout.sum_zero != 0 || layout.sum_type != dnnl::memory::data_type::undef) {
        built.append_sum(layout.sum_scale, layout.sum_zero, layout.sum_type);
      } else {
        built.append_sum(layout.sum_scale);
      }
    } else {
      built.append_binary(algorithm::binary_add, layout.desc);
    }
  }
  return built;
}

Result<PostOpAddends> GatherAddends(const KernelContext& context, size_t first, const std::vector<PostOp>& post_ops,
                                    const std::vector<int64_t>& output_dims, const std::vector<int64_t>& dst_dims,
                                    size_t channel_axis, bool sum_full) {
  PostOpAddends addends;
  size_t input = first;
  for (const PostOp& post_op : post_ops) {
    if (post_op.kind != PostOp::Kind::kAdd) continue;
    if (!context.has_input(input)) return InvalidModel("an epilogue addend is not computed");
    const RtTensor& addend = *context.input(input++);
    std::optional<AddendLayout> layout = LayoutAddend(addend.dims(), output_dims, dst_dims, channel_axis, sum_full);
    if (!layout) {
      return Unsupported("an addend " + DimsToString(addend.dims()) + " of an output " + DimsToString(output_dims) +
                         " is no post-op");
    }
    if (layout->summed && addends.summed >= 0) return Unsupported("two residuals are no post-ops");
    if (layout->summed) addends.summed = static_cast<int>(addends.values.size());
    // A summed residual may stay in a convolution layout: the kernel brings it to its output's layout.
    RtTensor value = ToFloat32(addend, *context.allocator);
    addends.values.push_back(layout->summed ? value : onednn::RowMajor(value, *context.allocator));
    addends.layouts.push_back(std::move(*layout));
    addends.key.insert(addends.key.end(), addend.dims().begin(), addend.dims().end());
    addends.key.push_back(-1);
  }
  return addends;
}

void BindAddends(const std::vector<PostOp>& post_ops, const PostOpAddends& addends, size_t rank,
                 std::unordered_map<int, dnnl::memory>& arguments, size_t first_index) {
  size_t addend = 0;
  for (size_t index = 0; index < post_ops.size(); ++index) {
    if (post_ops[index].kind == PostOp::Kind::kScalar) {
      // A memory of its own (oneDNN allocates it): the value lives as long as the arguments.
      dnnl::memory operand(ScalarOperandDesc(rank), onednn::Engine());
      *static_cast<float*>(operand.get_data_handle()) = post_ops[index].alpha;
      arguments[PostOpAddendArgument(first_index + index)] = operand;
      continue;
    }
    if (post_ops[index].kind != PostOp::Kind::kAdd) continue;
    const AddendLayout& layout = addends.layouts[addend];
    const RtTensor& value = addends.values[addend++];
    if (!layout.summed) arguments[PostOpAddendArgument(first_index + index)] = onednn::Wrap(layout.desc, value.raw());
  }
}

void RejectSlowImplementation(const char* implementation, bool sums_residual) {
  if (implementation != nullptr && std::strncmp(implementation, "ref", 3) == 0) {
    throw dnnl::error(dnnl_unimplemented, "oneDNN offers only its reference implementation here");
  }
  // oneDNN 2.6's GEMM-based convolution (grouped convs on AVX2) applies a sum post-op about
  // 10x slower than the convolution itself (DNNL_VERBOSE on light ShuffleNet: 0.67 ms per
  // call against 0.07 ms without it); the convolution followed by one elementwise program
  // is far faster there.
  if (sums_residual && implementation != nullptr && std::strstr(implementation, "gemm") != nullptr) {
    throw dnnl::error(dnnl_unimplemented, "oneDNN's GEMM convolution applies a sum post-op slowly");
  }
}

}  // namespace fusionopt::cpu
