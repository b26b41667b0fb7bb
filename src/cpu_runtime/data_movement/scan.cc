// Ops that scan along an axis: CumSum, NonZero, TopK. Half-precision values are computed
// (summed, compared) in float; outputs of TopK copy the original elements bit for bit.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"

namespace fusionopt::cpu::data_movement {
namespace {

// A tensor seen as [outer, axis, inner] around one axis.
struct AxisView {
  int64_t outer = 1;
  int64_t length = 1;
  int64_t inner = 1;
};

AxisView ViewAround(const std::vector<int64_t>& dims, size_t axis) {
  return {Product(dims, 0, axis), dims[axis], Product(dims, axis + 1)};
}

struct Identity {
  template <typename T>
  T operator()(T value) const {
    return value;
  }
};
struct HalfToFloatFn {
  float operator()(uint16_t value) const { return HalfToFloat(value); }
};
struct BFloat16ToFloatFn {
  float operator()(uint16_t value) const { return BFloat16ToFloat(value); }
};
struct FloatToHalfFn {
  uint16_t operator()(float value) const { return FloatToHalf(value); }
};
struct FloatToBFloat16Fn {
  uint16_t operator()(float value) const { return FloatToBFloat16(value); }
};

// Calls f(Storage{}, Compute{}, to_compute, from_compute) for the dtypes these ops compute on.
template <typename F>
Status DispatchNumeric(DataType dtype, std::string_view op, F&& f) {
  switch (dtype) {
    case DataType::kFloat: f(float{}, float{}, Identity{}, Identity{}); break;
    case DataType::kDouble: f(double{}, double{}, Identity{}, Identity{}); break;
    case DataType::kFloat16: f(uint16_t{}, float{}, HalfToFloatFn{}, FloatToHalfFn{}); break;
    case DataType::kBFloat16: f(uint16_t{}, float{}, BFloat16ToFloatFn{}, FloatToBFloat16Fn{}); break;
    case DataType::kInt8: f(int8_t{}, int8_t{}, Identity{}, Identity{}); break;
    case DataType::kInt16: f(int16_t{}, int16_t{}, Identity{}, Identity{}); break;
    case DataType::kInt32: f(int32_t{}, int32_t{}, Identity{}, Identity{}); break;
    case DataType::kInt64: f(int64_t{}, int64_t{}, Identity{}, Identity{}); break;
    case DataType::kUint8: f(uint8_t{}, uint8_t{}, Identity{}, Identity{}); break;
    case DataType::kUint16: f(uint16_t{}, uint16_t{}, Identity{}, Identity{}); break;
    case DataType::kUint32: f(uint32_t{}, uint32_t{}, Identity{}, Identity{}); break;
    case DataType::kUint64: f(uint64_t{}, uint64_t{}, Identity{}, Identity{}); break;
    default: return Unsupported(std::string(op) + " on " + std::string(NameOf(dtype)) + " is not supported");
  }
  return Status::Ok();
}

class CumSumKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    exclusive_ = info.node.GetInt("exclusive", 0) != 0;
    reverse_ = info.node.GetInt("reverse", 0) != 0;
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> axis_values, ReadInts(*context.input(1), "axis"));
    if (axis_values.size() != 1) return InvalidModel("axis must be a scalar");
    FUSIONOPT_ASSIGN_OR_RETURN(size_t axis, CheckedAxis(axis_values[0], data.rank()));
    RtTensor& out = context.Output(0, data.dtype(), data.dims());
    AxisView view = ViewAround(data.dims(), axis);
    return DispatchNumeric(data.dtype(), "CumSum", [&](auto storage, auto compute, auto to, auto from) {
      Scan<decltype(storage), decltype(compute)>(data.data<decltype(storage)>(), out.data<decltype(storage)>(), view,
                                                 to, from);
    });
  }

 private:
  // Columns of the inner dims are scanned side by side (contiguous loads); long inner dims
  // are cut into blocks so a single outer slice still spreads over threads.
  template <typename S, typename C, typename To, typename From>
  void Scan(const S* in, S* out, const AxisView& view, To to, From from) const {
    const int64_t block = std::min<int64_t>(view.inner, 4096);
    const int64_t blocks = (view.inner + block - 1) / block;
    ParallelChunks(view.outer * blocks, view.outer * view.length * view.inner, [&](int64_t begin, int64_t end) {
      std::vector<C> running(static_cast<size_t>(block));
      for (int64_t task = begin; task < end; ++task) {
        const int64_t o = task / blocks;
        const int64_t first = (task % blocks) * block;
        const int64_t width = std::min(block, view.inner - first);
        std::fill(running.begin(), running.end(), C{});
        for (int64_t step = 0; step < view.length; ++step) {
          int64_t j = reverse_ ? view.length - 1 - step : step;
          int64_t offset = (o * view.length + j) * view.inner + first;
          for (int64_t i = 0; i < width; ++i) {
            C value = to(in[offset + i]);
            if (exclusive_) {
              out[offset + i] = from(running[i]);
              running[i] = static_cast<C>(running[i] + value);
            } else {
              running[i] = static_cast<C>(running[i] + value);
              out[offset + i] = from(running[i]);
            }
          }
        }
      }
    });
  }

  bool exclusive_ = false;
  bool reverse_ = false;
};

// Whether element `i` is non-zero; floats compare by value so -0.0 counts as zero.
bool IsNonZero(const RtTensor& data, int64_t i, size_t element_size) {
  switch (data.dtype()) {
    case DataType::kFloat: return data.data<float>()[i] != 0.0f;
    case DataType::kDouble: return data.data<double>()[i] != 0.0;
    case DataType::kFloat16:
    case DataType::kBFloat16: return (data.data<uint16_t>()[i] & 0x7fff) != 0;
    default: {
      const uint8_t* bytes = data.raw() + i * static_cast<int64_t>(element_size);
      return std::any_of(bytes, bytes + element_size, [](uint8_t b) { return b != 0; });
    }
  }
}

class NonZeroKernel : public Kernel {
 public:
  Status Init(const KernelInfo&) { return Status::Ok(); }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(data.dtype()));
    std::vector<int64_t> hits;
    const int64_t count = data.NumElements();
    for (int64_t i = 0; i < count; ++i) {
      if (IsNonZero(data, i, element_size)) hits.push_back(i);
    }
    // A scalar is reported as the single coordinate 0 of a 1-D tensor.
    std::vector<int64_t> dims = data.rank() == 0 ? std::vector<int64_t>{1} : data.dims();
    const int64_t rank = static_cast<int64_t>(dims.size());
    const int64_t found = static_cast<int64_t>(hits.size());
    int64_t* out = context.Output(0, DataType::kInt64, {rank, found}).data<int64_t>();
    for (int64_t n = 0; n < found; ++n) {
      int64_t rest = hits[n];
      for (int64_t k = rank; k-- > 0;) {
        out[k * found + n] = rest % dims[k];
        rest /= dims[k];
      }
    }
    return Status::Ok();
  }
};

class TopKKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    axis_ = info.node.GetInt("axis", -1);
    if (info.opset >= 11) {
      largest_ = info.node.GetInt("largest", 1) != 0;
    }
    if (info.opset < 10) {
      const Attribute* k = info.node.FindAttribute("k");
      if (k == nullptr || k->kind != AttributeKind::kInt) return info.Error("the k attribute is required");
      k_attribute_ = k->i;
    } else if (info.node.input(1) == nullptr) {
      return info.Error("the K input is required");
    }
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override {
    const RtTensor& data = *context.input(0);
    FUSIONOPT_ASSIGN_OR_RETURN(size_t axis, CheckedAxis(axis_, data.rank()));
    int64_t k = k_attribute_.value_or(0);
    if (!k_attribute_) {
      FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadInts(*context.input(1), "K"));
      if (values.size() != 1) return InvalidModel("K must have one element");
      k = values[0];
    }
    if (k < 0 || k > data.dim(axis)) {
      return InvalidModel("k " + std::to_string(k) + " is outside [0, " + std::to_string(data.dim(axis)) + "]");
    }
    std::vector<int64_t> dims = data.dims();
    dims[axis] = k;
    RtTensor& values = context.Output(0, data.dtype(), dims);
    RtTensor& indices = context.Output(1, DataType::kInt64, dims);
    AxisView view = ViewAround(data.dims(), axis);
    return DispatchNumeric(data.dtype(), "TopK", [&](auto storage, auto compute, auto to, auto) {
      using S = decltype(storage);
      Select<S, decltype(compute)>(data.data<S>(), values.data<S>(), indices.data<int64_t>(), view, k, to);
    });
  }

 private:
  // Each [outer, inner] slice: the k best (value, index) pairs, always in order (which
  // `sorted` = 0 permits); equal values keep the lower index first. NaN ranks above every
  // number, as in numpy's sort.
  template <typename S, typename C, typename To>
  void Select(const S* in, S* values, int64_t* indices, const AxisView& view, int64_t k, To to) const {
    const bool largest = largest_;
    auto better = [largest](const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& b) {
      if constexpr (std::is_floating_point_v<C>) {
        bool a_nan = std::isnan(a.first), b_nan = std::isnan(b.first);
        if (a_nan || b_nan) return a_nan && b_nan ? a.second < b.second : (largest ? a_nan : b_nan);
      }
      if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
      return a.second < b.second;
    };
    const int64_t slices = view.outer * view.inner;
    ParallelChunks(slices, slices * view.length, [&](int64_t begin, int64_t end) {
      std::vector<std::pair<C, int64_t>> candidates(static_cast<size_t>(view.length));
      for (int64_t slice = begin; slice < end; ++slice) {
        const int64_t o = slice / view.inner, i = slice % view.inner;
        const S* column = in + o * view.length * view.inner + i;
        for (int64_t j = 0; j < view.length; ++j) candidates[j] = {to(column[j * view.inner]), j};
        std::partial_sort(candidates.begin(), candidates.begin() + k, candidates.end(), better);
        for (int64_t j = 0; j < k; ++j) {
          int64_t at = (o * k + j) * view.inner + i;
          values[at] = column[candidates[j].second * view.inner];
          indices[at] = candidates[j].second;
        }
      }
    });
  }

  int64_t axis_ = -1;
  std::optional<int64_t> k_attribute_;  // before opset 10 k is an attribute
  bool largest_ = true;
};

}  // namespace

void RegisterScanKernels(KernelRegistry& registry) {
  registry.Register("", "CumSum", 11, kAnyOpset, MakeWithInputs<CumSumKernel>(2));
  registry.Register("", "NonZero", 9, kAnyOpset, MakeWithInputs<NonZeroKernel>(1));
  registry.Register("", "TopK", 1, kAnyOpset, MakeWithInputs<TopKKernel>(1));
}

}  // namespace fusionopt::cpu::data_movement
