#include "cpu_runtime/control_flow/common.h"

#include <algorithm>

#include "cpu_runtime/data_movement/common.h"

namespace fusionopt::cpu::control_flow {

using data_movement::Product;

Status ControlFlowKernel::Error(const std::string& message) const {
  return InvalidModel(DescribeNode(node_) + ": " + message);
}

Status ControlFlowKernel::RequireTensorValues() const {
  auto check = [&](const Value* value) {
    if (value == nullptr || value->type().is_tensor()) return Status::Ok();
    return Unsupported(DescribeNode(node_) + ": '" + value->name() +
                       "' is a sequence, map or optional value; the CPU runtime computes tensors only");
  };
  std::vector<const Value*> boundary(node_.inputs().begin(), node_.inputs().end());
  boundary.insert(boundary.end(), node_.outputs().begin(), node_.outputs().end());
  for (const Graph* body : node_.Subgraphs()) {
    boundary.insert(boundary.end(), body->inputs().begin(), body->inputs().end());
    boundary.insert(boundary.end(), body->outputs().begin(), body->outputs().end());
  }
  for (const Value* value : boundary) FUSIONOPT_RETURN_IF_ERROR(check(value));
  return Status::Ok();
}

Status ControlFlowKernel::RequireDeclaredDtype(const Value* value, DataType expected, std::string_view role) const {
  if (value == nullptr || value->dtype() == DataType::kUndefined || value->dtype() == expected) return Status::Ok();
  return Error(std::string(role) + " '" + value->name() + "' is " + std::string(NameOf(value->dtype())) +
               ", it must be " + std::string(NameOf(expected)));
}

Result<ControlFlowKernel::Body> ControlFlowKernel::PrepareBody(std::string_view attribute,
                                                               const PrepareContext& context) {
  const Attribute* found = node_.FindAttribute(attribute);
  if (found == nullptr || found->kind != AttributeKind::kGraph || !found->g) {
    return Error("attribute '" + std::string(attribute) + "' must be a graph");
  }
  Body body;
  auto executor = GraphExecutor::Prepare(*found->g, context);
  if (!executor.ok()) return executor.status().WithContext(DescribeNode(node_) + ", " + std::string(attribute));
  body.executor = std::move(executor).value();
  for (const Value* value : body.executor->captured()) {
    auto known = std::find(implicit_inputs_.begin(), implicit_inputs_.end(), value);
    body.implicit_index.push_back(static_cast<size_t>(known - implicit_inputs_.begin()));
    if (known == implicit_inputs_.end()) implicit_inputs_.push_back(value);
  }
  return body;
}

Result<std::vector<RtTensor>> ControlFlowKernel::RunBody(Body& body, std::vector<RtTensor> inputs,
                                                         KernelContext& context, RunStats& stats) const {
  const size_t first_implicit = node_.inputs().size();
  std::vector<const RtTensor*> captured;
  for (size_t index : body.implicit_index) captured.push_back(context.inputs[first_implicit + index]);
  return body.executor->Execute(std::move(inputs), captured, *context.allocator, stats);
}

std::string TypeOf(const RtTensor& tensor) {
  return std::string(NameOf(tensor.dtype())) + DimsToString(tensor.dims());
}

Result<bool> ReadCondition(const RtTensor& tensor, std::string_view role) {
  if (tensor.dtype() != DataType::kBool || tensor.NumElements() != 1) {
    return InvalidModel(std::string(role) + " must be a bool tensor of one element, got " + TypeOf(tensor));
  }
  return tensor.data<uint8_t>()[0] != 0;
}

Result<int64_t> ReadTripCount(const RtTensor& tensor) {
  if (tensor.dtype() != DataType::kInt64 || tensor.NumElements() != 1) {
    return InvalidModel("the trip count M must be an int64 tensor of one element, got " + TypeOf(tensor));
  }
  return tensor.data<int64_t>()[0];
}

RtTensor Int64Scalar(Allocator& allocator, int64_t value) {
  RtTensor scalar = allocator.Allocate(DataType::kInt64, {});
  *scalar.data<int64_t>() = value;
  return scalar;
}

RtTensor BoolScalar(Allocator& allocator, bool value) {
  RtTensor scalar = allocator.Allocate(DataType::kBool, {});
  *scalar.data<uint8_t>() = value ? 1 : 0;
  return scalar;
}

Result<RtTensor> SliceAlongAxis(const RtTensor& input, size_t axis, int64_t index, Allocator& allocator) {
  FUSIONOPT_ASSIGN_OR_RETURN(size_t element_bytes, data_movement::ElementBytes(input.dtype()));
  const int64_t outer = Product(input.dims(), 0, axis);
  const int64_t length = input.dim(axis);
  const int64_t inner = Product(input.dims(), axis + 1);
  std::vector<int64_t> dims = input.dims();
  dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(axis));
  const uint8_t* first = input.raw() + static_cast<size_t>(index * inner) * element_bytes;
  if (outer == 1) {
    // Aliasing constructor: points into the input's block and keeps that block alive.
    std::shared_ptr<uint8_t> view(input.storage(), const_cast<uint8_t*>(first));
    return RtTensor(input.dtype(), std::move(dims), std::move(view));
  }
  RtTensor slice = allocator.Allocate(input.dtype(), std::move(dims));
  data_movement::CopyStrided(slice.raw(), first, element_bytes, {{outer, inner}, {inner, 1}, {length * inner, 1}});
  return slice;
}

namespace {

Result<RtTensor> EmptyStack(const Value& body_output, int64_t axis, Allocator& allocator) {
  const ValueType& type = body_output.type();
  bool complete = type.dtype != DataType::kUndefined && type.shape.has_value() &&
                  std::all_of(type.shape->begin(), type.shape->end(), [](const Dim& dim) { return dim.is_known(); });
  if (!complete) {
    std::string declared =
        std::string(NameOf(type.dtype)) + (type.shape ? ShapeToString(*type.shape) : " of unknown rank");
    return Unsupported("no iterations ran, and the empty scan output needs the dtype and every dim of body output '" +
                       body_output.name() + "', which declares " + declared);
  }
  std::vector<int64_t> dims = *KnownDims(*type.shape);  // complete: checked above
  auto position = NormalizeAxis(axis, static_cast<int64_t>(dims.size()) + 1);
  if (!position) return InvalidModel("scan output axis " + std::to_string(axis) + " is out of range");
  dims.insert(dims.begin() + *position, 0);
  return allocator.Allocate(type.dtype, std::move(dims));
}

}  // namespace

Result<RtTensor> StackIterations(const std::vector<RtTensor>& iterations, const Value& body_output, int64_t axis,
                                 bool reverse, Allocator& allocator) {
  if (iterations.empty()) return EmptyStack(body_output, axis, allocator);
  const RtTensor& first = iterations.front();
  for (const RtTensor& iteration : iterations) {
    if (iteration.dtype() != first.dtype() || iteration.dims() != first.dims()) {
      return InvalidModel("scan output '" + body_output.name() + "' is " + TypeOf(first) + " in one iteration and " +
                          TypeOf(iteration) + " in another; a scan output keeps its type");
    }
  }
  auto position = NormalizeAxis(axis, static_cast<int64_t>(first.rank()) + 1);
  if (!position) {
    return InvalidModel("scan output axis " + std::to_string(axis) + " is out of range for scan output '" +
                        body_output.name() + "' of rank " + std::to_string(first.rank() + 1));
  }
  FUSIONOPT_ASSIGN_OR_RETURN(size_t element_bytes, data_movement::ElementBytes(first.dtype()));
  const auto count = static_cast<int64_t>(iterations.size());
  const int64_t outer = Product(first.dims(), 0, static_cast<size_t>(*position));
  const int64_t inner = Product(first.dims(), static_cast<size_t>(*position));
  std::vector<int64_t> dims = first.dims();
  dims.insert(dims.begin() + *position, count);
  RtTensor stacked = allocator.Allocate(first.dtype(), std::move(dims));
  for (int64_t i = 0; i < count; ++i) {
    int64_t slot = reverse ? count - 1 - i : i;
    uint8_t* destination = stacked.raw() + static_cast<size_t>(slot * inner) * element_bytes;
    data_movement::CopyStrided(destination, iterations[i].raw(), element_bytes,
                               {{outer, inner}, {count * inner, 1}, {inner, 1}});
  }
  return stacked;
}

}  // namespace fusionopt::cpu::control_flow
