// Pad (constant, reflect, edge, wrap; negative pads crop).
//
// Every mode is a per-axis map from output coordinate to source coordinate (or "pad value"
// for constant mode). Rows are produced whole: a row whose outer coordinates fall in the
// padding is filled, any other row is the mapped left border, one memcpy of the untouched
// middle, and the mapped right border.
#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"

namespace fusionopt::cpu::data_movement {
namespace {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

constexpr int64_t kPadValue = -1;  // map entry of constant padding

// Source coordinate of each output coordinate along one axis.
std::vector<int64_t> AxisMap(int64_t dim, int64_t before, int64_t out_dim, PadMode mode) {
  std::vector<int64_t> map(static_cast<size_t>(out_dim));
  for (int64_t o = 0; o < out_dim; ++o) {
    int64_t i = o - before;
    if (i >= 0 && i < dim) {
      map[o] = i;
      continue;
    }
    switch (mode) {
      case PadMode::kConstant: map[o] = kPadValue; break;
      case PadMode::kEdge: map[o] = std::clamp<int64_t>(i, 0, dim - 1); break;
      case PadMode::kWrap: map[o] = ((i % dim) + dim) % dim; break;
      case PadMode::kReflect: {
        int64_t period = 2 * (dim - 1);
        int64_t m = period == 0 ? 0 : ((i % period) + period) % period;
        map[o] = m < dim ? m : period - m;
        break;
      }
    }
  }
  return map;
}

struct PadPlan {
  std::vector<int64_t> in_dims, out_dims, before;
  std::vector<std::vector<int64_t>> maps;  // per axis
  std::vector<uint8_t> value;              // one element: the constant pad value
};

template <typename T>
void PadRows(uint8_t* dst_bytes, const uint8_t* src_bytes, const PadPlan& plan) {
  const size_t rank = plan.out_dims.size();
  const size_t last = rank - 1;
  const int64_t width = plan.out_dims[last];
  const std::vector<int64_t>& last_map = plan.maps[last];
  const int64_t middle_begin = std::clamp<int64_t>(plan.before[last], 0, width);
  const int64_t middle_end = std::clamp<int64_t>(plan.before[last] + plan.in_dims[last], middle_begin, width);
  const std::vector<int64_t> in_strides = ContiguousStrides(plan.in_dims);
  T value;
  std::memcpy(&value, plan.value.data(), sizeof(T));
  T* dst = reinterpret_cast<T*>(dst_bytes);
  const T* src = reinterpret_cast<const T*>(src_bytes);
  const int64_t rows = Product(plan.out_dims, 0, last);
  ParallelChunks(rows, rows * width, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(last);
    int64_t rest = begin;
    for (size_t k = last; k-- > 0;) {
      index[k] = rest % plan.out_dims[k];
      rest /= plan.out_dims[k];
    }
    for (int64_t row = begin; row < end; ++row) {
      T* out = dst + row * width;
      int64_t offset = 0;
      bool padded = false;
      for (size_t k = 0; k < last; ++k) {
        int64_t source = plan.maps[k][index[k]];
        padded |= source == kPadValue;
        offset += source * in_strides[k];
      }
      if (padded) {
        std::fill(out, out + width, value);
      } else {
        const T* in = src + offset;
        auto border = [&](int64_t from, int64_t to) {
          for (int64_t o = from; o < to; ++o) out[o] = last_map[o] == kPadValue ? value : in[last_map[o]];
        };
        border(0, middle_begin);
        std::memcpy(out + middle_begin, in + (middle_begin - plan.before[last]),
                    static_cast<size_t>(middle_end - middle_begin) * sizeof(T));
        border(middle_end, width);
      }
      for (size_t k = last; k-- > 0;) {
        if (++index[k] < plan.out_dims[k]) break;
        index[k] = 0;
      }
    }
  });
}

class PadKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    std::string mode = info.node.GetString("mode", "constant");
    if (mode == "constant") {
      mode_ = PadMode::kConstant;
    } else if (mode == "reflect") {
      mode_ = PadMode::kReflect;
    } else if (mode == "edge") {
      mode_ = PadMode::kEdge;
    } else if (mode == "wrap" && info.opset >= 19) {
      mode_ = PadMode::kWrap;
    } else {
      return info.Error("unknown mode '" + mode + "' at opset " + std::to_string(info.opset));
    }
    from_inputs_ = info.opset >= 11;
    if (!from_inputs_) {
      pads_ = info.node.GetInts("pads");
      if (!pads_) return info.Error("the pads attribute is required");
      value_ = info.node.GetFloat("value", 0.0f);
    } else if (info.node.input(1) == nullptr) {
      return info.Error("the pads input is required");
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_ASSIGN_OR_RETURN(PadPlan plan, Plan(context, data));
    RtTensor& out = context.Output(0, data.dtype(), plan.out_dims);
    if (out.NumElements() == 0) return Status::Ok();
    if (data.rank() == 0) {
      std::memcpy(out.raw(), data.raw(), element_size);
      return Status::Ok();
    }
    DispatchByElementSize(element_size, [&](auto tag) { PadRows<decltype(tag)>(out.raw(), data.raw(), plan); });
    return Status::Ok();
  }

 private:
  Result<std::vector<int64_t>> FullPads(const KernelContext& context, int64_t rank) const {
    if (!from_inputs_) return *pads_;
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ReadInts(*context.input(1), "pads"));
    if (!context.has_input(3)) return pads;
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadInts(*context.input(3), "axes"));
    FUSIONOPT_ASSIGN_OR_RETURN(axes, NormalizeAxes(axes, rank, "axis"));
    if (pads.size() != 2 * axes.size()) {
      return InvalidModel("pads " + DimsToString(pads) + " need two entries per axis of " + DimsToString(axes));
    }
    std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      full[axes[i]] = pads[i];
      full[axes[i] + rank] = pads[i + axes.size()];
    }
    return full;
  }

  Result<std::vector<uint8_t>> PadValue(const KernelContext& context, DataType dtype, size_t element_size) const {
    if (!from_inputs_) return EncodeScalar(dtype, value_);
    if (!context.has_input(2) || context.input(2)->NumElements() == 0) return std::vector<uint8_t>(element_size, 0);
    const RtTensor& value = *context.input(2);
    if (value.dtype() != dtype) return InvalidModel("constant_value has dtype " + std::string(NameOf(value.dtype())));
    return std::vector<uint8_t>(value.raw(), value.raw() + element_size);
  }

  Result<PadPlan> Plan(const KernelContext& context, const RtTensor& data) const {
    const int64_t rank = static_cast<int64_t>(data.rank());
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> pads, FullPads(context, rank));
    if (static_cast<int64_t>(pads.size()) != 2 * rank) {
      return InvalidModel("pads " + DimsToString(pads) + " need 2 entries per axis of rank " + std::to_string(rank));
    }
    PadPlan plan;
    plan.in_dims = data.dims();
    for (int64_t k = 0; k < rank; ++k) {
      int64_t dim = data.dim(k);
      int64_t out_dim = dim + pads[k] + pads[k + rank];
      if (out_dim < 0) {
        return InvalidModel("pads " + DimsToString(pads) + " crop axis " + std::to_string(k) + " below 0");
      }
      if (mode_ != PadMode::kConstant && dim == 0 && out_dim > 0) {
        return InvalidModel("axis " + std::to_string(k) + " is empty and cannot be padded from its contents");
      }
      plan.out_dims.push_back(out_dim);
      plan.before.push_back(pads[k]);
      plan.maps.push_back(AxisMap(dim, pads[k], out_dim, mode_));
    }
    FUSIONOPT_ASSIGN_OR_RETURN(plan.value, PadValue(context, data.dtype(), element_size));
    return plan;
  }

  PadMode mode_ = PadMode::kConstant;
  bool from_inputs_ = true;
  std::optional<std::vector<int64_t>> pads_;
  float value_ = 0.0f;
};

}  // namespace

void RegisterPadKernels(KernelRegistry& registry) {
  registry.Register("", "Pad", 2, kAnyOpset, MakeWithInputs<PadKernel>(1));
}

}  // namespace fusionopt::cpu::data_movement
