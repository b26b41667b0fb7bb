// Control flow: If, Loop, Scan. Bodies are typed from the node's inputs and inferred; the
// node's outputs take what every path agrees on (dims that differ become unknown).
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

Graph* GraphAttribute(const Node& node, std::string_view name) {
  const Attribute* attribute = node.FindAttribute(name);
  return attribute != nullptr && attribute->kind == AttributeKind::kGraph ? attribute->g.get()
                                                                          : nullptr;
}

// Dims two possible results share; nullopt when a rank is unknown or they differ.
std::optional<Shape> CommonShape(const std::optional<Shape>& a, const std::optional<Shape>& b) {
  if (!a || !b || a->size() != b->size()) return std::nullopt;
  Shape common;
  for (size_t axis = 0; axis < a->size(); ++axis) {
    common.push_back((*a)[axis] == (*b)[axis] ? (*a)[axis] : Dim::Unknown());
  }
  return common;
}

DataType CommonDtype(DataType a, DataType b) {
  if (a == DataType::kUndefined) return b;
  if (b == DataType::kUndefined || a == b) return a;
  return DataType::kUndefined;
}

std::optional<Shape> ShapeOf(const Value* value) {
  return value != nullptr && value->type().is_tensor() ? value->shape() : std::nullopt;
}

void IfRule(InferenceContext& context) {
  Graph* then_branch = GraphAttribute(context.node(), "then_branch");
  Graph* else_branch = GraphAttribute(context.node(), "else_branch");
  if (then_branch != nullptr) context.InferSubgraph(*then_branch);
  if (else_branch != nullptr) context.InferSubgraph(*else_branch);
  if (then_branch == nullptr || else_branch == nullptr) return;
  for (size_t i = 0; i < context.num_outputs(); ++i) {
    if (i >= then_branch->outputs().size() || i >= else_branch->outputs().size()) break;
    const Value* then_out = then_branch->outputs()[i];
    const Value* else_out = else_branch->outputs()[i];
    if (!then_out->type().is_tensor() || !else_out->type().is_tensor()) continue;
    DataType dtype = CommonDtype(then_out->dtype(), else_out->dtype());
    if (dtype == DataType::kUndefined && then_out->dtype() != DataType::kUndefined) {
      context.Warn("branches disagree on the type of output " + std::to_string(i));
      continue;
    }
    context.SetOutputType(i, dtype, CommonShape(then_out->shape(), else_out->shape()));
  }
}

std::optional<Shape> RankOnly(const std::optional<Shape>& shape) {
  return shape ? std::optional<Shape>(UnknownDims(shape->size())) : std::nullopt;
}

// Body: (iteration, condition, carried...) -> (condition, carried..., scanned...).
// Carried values may change shape between iterations, so the body sees only their rank.
void LoopRule(InferenceContext& context) {
  Graph* body = GraphAttribute(context.node(), "body");
  if (body == nullptr) return;
  const std::vector<Value*>& body_inputs = body->inputs();
  size_t carried = context.num_inputs() >= 2 ? context.num_inputs() - 2 : 0;
  if (body_inputs.size() != carried + 2) {
    context.Warn("body has " + std::to_string(body_inputs.size()) + " inputs for " +
                 std::to_string(carried) + " loop-carried values");
    context.InferSubgraph(*body);
    return;
  }
  context.MergeInto(*body_inputs[0], DataType::kInt64, Shape{});
  context.MergeInto(*body_inputs[1], DataType::kBool, Shape{});
  for (size_t i = 0; i < carried; ++i) {
    const Shape* shape = context.InputShape(i + 2);
    context.MergeInto(*body_inputs[i + 2], context.InputDtype(i + 2),
                      RankOnly(shape ? std::optional<Shape>(*shape) : std::nullopt));
  }
  context.InferSubgraph(*body);
  const std::vector<Value*>& body_outputs = body->outputs();
  for (size_t i = 0; i < context.num_outputs() && i + 1 < body_outputs.size(); ++i) {
    const Value* body_out = body_outputs[i + 1];
    if (i < carried) {
      const Shape* initial = context.InputShape(i + 2);
      context.SetOutputType(
          i, CommonDtype(context.InputDtype(i + 2), body_out->dtype()),
          CommonShape(initial ? std::optional<Shape>(*initial) : std::nullopt, ShapeOf(body_out)));
    } else if (std::optional<Shape> slice = ShapeOf(body_out)) {
      slice->insert(slice->begin(), Dim::Unknown());  // one slice per iteration
      context.SetOutputType(i, body_out->dtype(), slice);
    } else {
      context.SetOutputDtype(i, body_out->dtype());
    }
  }
}

// The axis of entry `index` in a scan axes attribute (default 0), normalized for `rank`.
std::optional<int64_t> ScanAxis(const InferenceContext& context, std::string_view attribute,
                                size_t index, size_t rank) {
  std::optional<std::vector<int64_t>> axes = context.node().GetInts(attribute);
  int64_t axis = 0;
  if (axes) {
    if (index >= axes->size()) return std::nullopt;
    axis = (*axes)[index];
  }
  return NormalizeAxis(axis, static_cast<int64_t>(rank));
}

// Types the body inputs: states as given, scanned inputs without their scan axis. Returns
// the sequence length (the first scanned input's scan dim).
Dim TypeScanBodyInputs(InferenceContext& context, const std::vector<Value*>& body_inputs,
                       size_t states) {
  Dim sequence_length = Dim::Unknown();
  for (size_t i = 0; i < context.num_inputs(); ++i) {
    const Shape* shape = context.InputShape(i);
    std::optional<Shape> body_shape = shape ? std::optional<Shape>(*shape) : std::nullopt;
    if (i >= states && body_shape) {
      std::optional<int64_t> axis =
          ScanAxis(context, "scan_input_axes", i - states, body_shape->size());
      if (!axis) {
        context.Warn("scan input axis missing or out of range for input " + std::to_string(i));
        body_shape.reset();
      } else {
        if (i == states) sequence_length = (*body_shape)[static_cast<size_t>(*axis)];
        body_shape->erase(body_shape->begin() + *axis);
      }
    }
    context.MergeInto(*body_inputs[i], context.InputDtype(i), body_shape);
  }
  return sequence_length;
}

// Scan (opset 9+): inputs are N states then M scanned tensors; the body sees one slice of
// each scanned tensor, and its K per-iteration outputs are stacked along scan_output_axes.
void ScanRule(InferenceContext& context) {
  Graph* body = GraphAttribute(context.node(), "body");
  if (body == nullptr) return;
  auto scanned = static_cast<size_t>(context.node().GetInt("num_scan_inputs", 0));
  if (context.opset() < 9 || scanned > context.num_inputs() ||
      body->inputs().size() != context.num_inputs()) {
    context.InferSubgraph(*body);  // opset 8's batched form is not modelled
    return;
  }
  size_t states = context.num_inputs() - scanned;
  Dim sequence_length = TypeScanBodyInputs(context, body->inputs(), states);
  context.InferSubgraph(*body);
  const std::vector<Value*>& body_outputs = body->outputs();
  for (size_t i = 0; i < context.num_outputs() && i < body_outputs.size(); ++i) {
    const Value* body_out = body_outputs[i];
    std::optional<Shape> shape = ShapeOf(body_out);
    if (i >= states && shape) {
      std::optional<int64_t> axis =
          ScanAxis(context, "scan_output_axes", i - states, shape->size() + 1);
      if (axis) {
        shape->insert(shape->begin() + *axis, sequence_length);
      } else {
        context.Warn("scan output axis missing or out of range for output " + std::to_string(i));
        shape.reset();
      }
    }
    context.SetOutputType(i, body_out->dtype(), shape);
  }
}

}  // namespace

void RegisterControlFlowRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"If"}, IfRule);
  registry.AddTypeRule("", {"Loop"}, LoopRule);
  registry.AddTypeRule("", {"Scan"}, ScanRule);
}

}  // namespace fusionopt::shape_inference
