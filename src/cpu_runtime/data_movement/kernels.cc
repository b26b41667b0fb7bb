// Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout at inference) and host-side
// shape arithmetic (Shape, Size): none of them launches a kernel. Views hand out the input's
// storage under new dims; Shape and Size write a few int64s on the host.
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"
#include "cpu_runtime/engine/kernels.h"
#include "ir/legacy_opsets.h"
#include "ir/reshape_target.h"

namespace fusionopt::cpu {
namespace data_movement {
namespace {

class ViewKernel : public Kernel {
 public:
  bool LaunchesKernel() const override { return false; }
};

class ReshapeKernel : public ViewKernel {
 public:
  Status Init(const KernelInfo& info) {
    allow_zero_ = info.opset >= 14 && info.node.GetInt("allowzero", 0) != 0;
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*context.input(1), "the shape"));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ResolveReshape(data.dims(), shape, allow_zero_));
    context.outputs[0] = data.Reshaped(std::move(dims));
    return Status::Ok();
  }

 private:
  bool allow_zero_ = false;
};

class FlattenKernel : public ViewKernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", 1);
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    int64_t rank = static_cast<int64_t>(data.rank());
    if (axis_ < -rank || axis_ > rank) {
      return InvalidModel("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(rank));
    }
    size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + rank : axis_);
    context.outputs[0] = data.Reshaped({Product(data.dims(), 0, axis), Product(data.dims(), axis)});
    return Status::Ok();
  }

 private:
  int64_t axis_ = 1;
};

// Squeeze and Unsqueeze read axes from an attribute before opset 13 and from input 1 after.
class AxesViewKernel : public ViewKernel {
 public:
  Status InitAxes(const KernelInfo& info, bool required) {
    axes_from_input_ = info.opset >= 13;
    if (!axes_from_input_) {
      axes_ = info.node.GetInts("axes");
    } else if (info.node.input(1) != nullptr) {
      axes_ = ConstantInputInts(info, 1);
      runtime_axes_ = !axes_.has_value();
    }
    if (required && !axes_ && !runtime_axes_) return info.Error("axes are required");
    return Status::Ok();
  }

 protected:
  Result<std::optional<std::vector<int64_t>>> Axes(const KernelContext& context) const {
    if (!runtime_axes_) return axes_;
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadInts(*context.input(1), "axes"));
    return std::optional<std::vector<int64_t>>(std::move(axes));
  }

 private:
  bool axes_from_input_ = false;
  bool runtime_axes_ = false;
  std::optional<std::vector<int64_t>> axes_;
};

class SqueezeKernel : public AxesViewKernel {
 public:
  Status Init(const KernelInfo& info) { return InitAxes(info, /*required=*/false); }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, Axes(context));
    std::vector<bool> drop(data.rank(), false);
    if (!axes) {
      for (size_t k = 0; k < data.rank(); ++k) drop[k] = data.dim(k) == 1;
    } else {
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> normalized,
                                 NormalizeAxes(*axes, static_cast<int64_t>(data.rank()), "axis"));
      for (int64_t axis : normalized) {
        if (data.dim(axis) != 1) {
          return InvalidModel("cannot squeeze axis " + std::to_string(axis) + " of size " +
                              std::to_string(data.dim(axis)));
        }
        drop[axis] = true;
      }
    }
    std::vector<int64_t> dims;
    for (size_t k = 0; k < data.rank(); ++k) {
      if (!drop[k]) dims.push_back(data.dim(k));
    }
    context.outputs[0] = data.Reshaped(std::move(dims));
    return Status::Ok();
  }
};

class UnsqueezeKernel : public AxesViewKernel {
 public:
  Status Init(const KernelInfo& info) { return InitAxes(info, /*required=*/true); }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, Axes(context));
    FUSIONOPT_CHECK(axes.has_value(), "Init requires Unsqueeze axes");
    int64_t rank = static_cast<int64_t>(data.rank() + axes->size());
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> normalized, NormalizeAxes(*axes, rank, "axis"));
    std::vector<bool> inserted(static_cast<size_t>(rank), false);
    for (int64_t axis : normalized) inserted[axis] = true;
    std::vector<int64_t> dims;
    size_t next = 0;
    for (int64_t k = 0; k < rank; ++k) dims.push_back(inserted[k] ? 1 : data.dim(next++));
    context.outputs[0] = data.Reshaped(std::move(dims));
    return Status::Ok();
  }
};

class IdentityKernel : public ViewKernel {
 public:
  Status Init(const KernelInfo&) { return Status::Ok(); }
  Status Compute(KernelContext& context) override {
    context.outputs[0] = *context.input(0);
    return Status::Ok();
  }
};

// Dropout at inference is the identity; its mask says every element was kept. Training
// mode drops at random, which an oracle cannot reproduce, except with ratio 0 (keeps all).
class DropoutKernel : public ViewKernel {
 public:
  Status Init(const KernelInfo& info) {
    FUSIONOPT_RETURN_IF_ERROR(CheckLegacyNode(info.node, info.opset));  // is_test=0 before opset 7
    mask_dtype_ = info.opset >= 10 ? DataType::kBool : DataType::kUndefined;
    want_mask_ = info.node.output(1) != nullptr;
    if (info.opset < 12 || info.node.input(2) == nullptr) return Status::Ok();
    const TensorPtr& training = info.constant_input(2);
    const TensorPtr& ratio = info.constant_input(1);
    bool ratio_known = info.node.input(1) == nullptr || ratio != nullptr;
    if (!training || !ratio_known) {
      check_at_run_time_ = true;
      return Status::Ok();
    }
    bool training_on = training->NumElements() > 0 && training->bytes()[0] != 0;
    double ratio_value = ratio ? RtTensor::WrapConstant(ratio).ValueAsDouble(0) : kDefaultRatio;
    Status status = CheckMode(training_on, ratio_value);
    return status.ok() ? status : Status(status.code(), info.Describe() + ": " + status.message());
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    if (check_at_run_time_) {
      bool training_on =
          context.has_input(2) && context.input(2)->NumElements() > 0 && context.input(2)->raw()[0] != 0;
      double ratio = context.has_input(1) ? context.input(1)->ValueAsDouble(0) : kDefaultRatio;
      FUSIONOPT_RETURN_IF_ERROR(CheckMode(training_on, ratio));
    }
    context.outputs[0] = data;
    if (want_mask_) {
      DataType dtype = mask_dtype_ == DataType::kUndefined ? data.dtype() : mask_dtype_;
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<uint8_t> one, EncodeScalar(dtype, 1.0));
      RtTensor& mask = context.Output(1, dtype, data.dims());
      FillElements(mask.raw(), mask.NumElements(), one.data(), one.size());
    }
    return Status::Ok();
  }

 private:
  static constexpr double kDefaultRatio = 0.5;
  static Status CheckMode(bool training, double ratio) {
    if (!training || ratio == 0.0) return Status::Ok();
    return Unsupported("Dropout in training mode (ratio " + std::to_string(ratio) + ") is random and not supported");
  }

  DataType mask_dtype_ = DataType::kUndefined;  // undefined: the input's dtype (opsets 7-9)
  bool want_mask_ = false;
  bool check_at_run_time_ = false;
};

class ShapeKernel : public ViewKernel {
 public:
  Status Init(const KernelInfo& info) {
    if (info.opset >= 15) {
      start_ = info.node.GetInt("start", 0);
      end_ = info.node.GetInt("end", INT64_MAX);
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const std::vector<int64_t>& dims = context.input(0)->dims();
    int64_t rank = static_cast<int64_t>(dims.size());
    auto clamp = [rank](int64_t index) { return std::clamp(index < 0 ? index + rank : index, int64_t{0}, rank); };
    int64_t start = clamp(start_);
    int64_t end = std::max(start, clamp(end_));
    RtTensor& out = context.Output(0, DataType::kInt64, {end - start});
    std::copy(dims.begin() + start, dims.begin() + end, out.data<int64_t>());
    return Status::Ok();
  }

 private:
  int64_t start_ = 0;
  int64_t end_ = INT64_MAX;
};

class SizeKernel : public ViewKernel {
 public:
  Status Init(const KernelInfo&) { return Status::Ok(); }
  Status Compute(KernelContext& context) override {
    context.Output(0, DataType::kInt64, {}).data<int64_t>()[0] = context.input(0)->NumElements();
    return Status::Ok();
  }
};

}  // namespace

void RegisterViewKernels(KernelRegistry& registry) {
  registry.Register("", "Reshape", 5, kAnyOpset, MakeWithInputs<ReshapeKernel>(2));
  registry.Register("", "Flatten", 1, kAnyOpset, MakeWithInputs<FlattenKernel>(1));
  registry.Register("", "Squeeze", 1, kAnyOpset, MakeWithInputs<SqueezeKernel>(1));
  registry.Register("", "Unsqueeze", 1, kAnyOpset, MakeWithInputs<UnsqueezeKernel>(1));
  registry.Register("", "Identity", 1, kAnyOpset, MakeWithInputs<IdentityKernel>(1));
  registry.Register("", "Dropout", 1, kAnyOpset, MakeWithInputs<DropoutKernel>(1));
  registry.Register("", "Shape", 1, kAnyOpset, MakeWithInputs<ShapeKernel>(1));
  registry.Register("", "Size", 1, kAnyOpset, MakeWithInputs<SizeKernel>(1));
}

}  // namespace data_movement

void RegisterDataMovementKernels(KernelRegistry& registry) {
  data_movement::RegisterViewKernels(registry);
  data_movement::RegisterTransposeKernels(registry);
  data_movement::RegisterConcatSplitKernels(registry);
  data_movement::RegisterSliceKernels(registry);
  data_movement::RegisterPadKernels(registry);
  data_movement::RegisterGatherKernels(registry);
  data_movement::RegisterScatterKernels(registry);
  data_movement::RegisterGeneratorKernels(registry);
  data_movement::RegisterScanKernels(registry);
  data_movement::RegisterResizeKernels(registry);
}

}  // namespace fusionopt::cpu
