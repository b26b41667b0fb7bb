// Resize (opsets 10-19) and Upsample (7-9) on the CPU: the samplings of ir/resize_sampling.h
// applied.
//
// Nearest is a gather by per-axis index tables, byte-wise, so it works for every dtype; an
// output row whose source row equals the previous one's (upsampling the outer axes) is a
// memcpy of that row. Linear and cubic run one separable pass per resized axis in float
// (double for double and wide integers), shrinking axes first so later passes see less data.
#include <cmath>
#include <limits>
#include <numeric>

#include "cpu_runtime/data_movement/common.h"
#include "cpu_runtime/data_movement/kernels.h"
#include "ir/resize_sampling.h"

namespace fusionopt::cpu::data_movement {
namespace {

constexpr int64_t kExtrapolate = -1;  // nearest table entry: write the extrapolation value

template <typename T>
void NearestRows(uint8_t* dst_bytes, const uint8_t* src_bytes, const std::vector<int64_t>& in_dims,
                 const std::vector<int64_t>& out_dims, const std::vector<std::vector<int64_t>>& tables, T fill) {
  const size_t last = out_dims.size() - 1;
  const int64_t width = out_dims[last];
  const std::vector<int64_t>& columns = tables[last];
  bool copy_columns = width == in_dims[last];
  for (int64_t x = 0; copy_columns && x < width; ++x) copy_columns = columns[x] == x;
  const bool padded_columns = std::find(columns.begin(), columns.end(), kExtrapolate) != columns.end();
  const std::vector<int64_t> in_strides = ContiguousStrides(in_dims);
  T* dst = reinterpret_cast<T*>(dst_bytes);
  const T* src = reinterpret_cast<const T*>(src_bytes);
  const int64_t rows = Product(out_dims, 0, last);
  ParallelChunks(rows, rows * width, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(last);
    int64_t rest = begin;
    for (size_t k = last; k-- > 0;) {
      index[k] = rest % out_dims[k];
      rest /= out_dims[k];
    }
    int64_t previous = kExtrapolate;
    for (int64_t row = begin; row < end; ++row) {
      T* out = dst + row * width;
      int64_t offset = 0;
      for (size_t k = 0; k < last && offset != kExtrapolate; ++k) {
        int64_t source = tables[k][index[k]];
        offset = source == kExtrapolate ? kExtrapolate : offset + source * in_strides[k];
      }
      if (offset == kExtrapolate) {
        std::fill(out, out + width, fill);
      } else if (row > begin && offset == previous) {
        std::memcpy(out, out - width, static_cast<size_t>(width) * sizeof(T));
      } else if (copy_columns) {
        std::memcpy(out, src + offset, static_cast<size_t>(width) * sizeof(T));
      } else if (padded_columns) {
        for (int64_t x = 0; x < width; ++x) out[x] = columns[x] == kExtrapolate ? fill : src[offset + columns[x]];
      } else {
        const T* in = src + offset;
        for (int64_t x = 0; x < width; ++x) out[x] = in[columns[x]];
      }
      previous = offset;
      for (size_t k = last; k-- > 0;) {
        if (++index[k] < out_dims[k]) break;
        index[k] = 0;
      }
    }
  });
}

// Weights and taps of one axis in the compute type.
template <typename C>
struct Taps {
  const AxisSampling& sampling;
  std::vector<C> weights;
  C extrapolation;
  explicit Taps(const AxisSampling& s, C value)
      : sampling(s), weights(s.weight.begin(), s.weight.end()), extrapolation(value) {}
};

// Resampling of the innermost axis: each output element gathers kTaps inputs of its row
// (kTaps 0: the count is only known at run time).
template <typename C, int kTaps>
void ResampleInnermost(const C* in, C* out, int64_t rows, const Taps<C>& taps) {
  const AxisSampling& sampling = taps.sampling;
  const int64_t in_length = sampling.in_size, out_length = sampling.out_size;
  const int count = kTaps > 0 ? kTaps : sampling.taps;
  ParallelChunks(rows, rows * out_length * count, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const C* source = in + row * in_length;
      C* dst = out + row * out_length;
      for (int64_t x = 0; x < out_length; ++x) {
        const int64_t* index = sampling.index.data() + x * count;
        const C* weight = taps.weights.data() + x * count;
        C sum = weight[0] * source[index[0]];
        for (int t = 1; t < count; ++t) sum += weight[t] * source[index[t]];
        dst[x] = sampling.extrapolated[x] ? taps.extrapolation : sum;
      }
    }
  });
}

// One 1-D resampling along `axis` of a tensor with `dims`: out[o, x, i] is the weighted sum
// of in[o, tap, i] over the taps of x. Inner rows are contiguous, so the sums vectorise.
template <typename C>
void ResamplePass(const C* in, C* out, const std::vector<int64_t>& dims, size_t axis, const AxisSampling& sampling,
                  C extrapolation) {
  const Taps<C> taps(sampling, extrapolation);
  const int64_t outer = Product(dims, 0, axis);
  const int64_t inner = Product(dims, axis + 1);
  if (inner == 1) {
    switch (sampling.taps) {
      case 2: return ResampleInnermost<C, 2>(in, out, outer, taps);
      case 4: return ResampleInnermost<C, 4>(in, out, outer, taps);
      default: return ResampleInnermost<C, 0>(in, out, outer, taps);
    }
  }
  const int64_t in_length = dims[axis];
  const int64_t out_length = sampling.out_size;
  const int count = sampling.taps;
  const int64_t tasks = outer * out_length;
  ParallelChunks(tasks, tasks * inner * count, [&](int64_t begin, int64_t end) {
    int64_t o = begin / out_length;
    int64_t x = begin % out_length;
    for (int64_t task = begin; task < end; ++task) {
      C* dst = out + task * inner;
      const C* base = in + o * in_length * inner;
      const int64_t* index = sampling.index.data() + x * count;
      const C* weight = taps.weights.data() + x * count;
      if (sampling.extrapolated[x]) {
        std::fill(dst, dst + inner, extrapolation);
      } else {
        const C* row = base + index[0] * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] = weight[0] * row[i];
        for (int t = 1; t < count; ++t) {
          row = base + index[t] * inner;
          const C w = weight[t];
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * row[i];
        }
      }
      if (++x == out_length) {
        x = 0;
        ++o;
      }
    }
  });
}

template <typename F>
Status VisitComputable(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat: f(float{}); break;
    case DataType::kDouble: f(double{}); break;
    case DataType::kInt8: f(int8_t{}); break;
    case DataType::kUint8: f(uint8_t{}); break;
    case DataType::kInt16: f(int16_t{}); break;
    case DataType::kUint16: f(uint16_t{}); break;
    case DataType::kInt32: f(int32_t{}); break;
    case DataType::kUint32: f(uint32_t{}); break;
    case DataType::kInt64: f(int64_t{}); break;
    case DataType::kUint64: f(uint64_t{}); break;
    default: return Unsupported("linear and cubic Resize on " + std::string(NameOf(dtype)) + " are not supported");
  }
  return Status::Ok();
}

template <typename C>
constexpr DataType kComputeType = std::is_same_v<C, float> ? DataType::kFloat : DataType::kDouble;

template <typename C>
Status ToCompute(const RtTensor& tensor, std::vector<C>& values) {
  const int64_t count = tensor.NumElements();
  values.resize(static_cast<size_t>(count));
  if (tensor.dtype() == DataType::kFloat16 || tensor.dtype() == DataType::kBFloat16) {
    const uint16_t* in = tensor.data<uint16_t>();
    bool half = tensor.dtype() == DataType::kFloat16;
    for (int64_t i = 0; i < count; ++i) {
      values[i] = static_cast<C>(half ? HalfToFloat(in[i]) : BFloat16ToFloat(in[i]));
    }
    return Status::Ok();
  }
  return VisitComputable(tensor.dtype(), [&](auto tag) {
    const auto* in = tensor.data<decltype(tag)>();
    for (int64_t i = 0; i < count; ++i) values[i] = static_cast<C>(in[i]);
  });
}

// Integers round half to even and saturate, like the reference's saturate_cast.
template <typename T, typename C>
T FromComputeValue(C value) {
  if constexpr (std::is_integral_v<T>) {
    C rounded = std::nearbyint(value);
    rounded = std::clamp<C>(rounded, static_cast<C>(std::numeric_limits<T>::lowest()),
                            static_cast<C>(std::numeric_limits<T>::max()));
    return static_cast<T>(rounded);
  } else {
    return static_cast<T>(value);
  }
}

template <typename C>
Status FromCompute(const C* values, RtTensor& out) {
  const int64_t count = out.NumElements();
  if (out.dtype() == DataType::kFloat16 || out.dtype() == DataType::kBFloat16) {
    uint16_t* dst = out.data<uint16_t>();
    bool half = out.dtype() == DataType::kFloat16;
    for (int64_t i = 0; i < count; ++i) {
      float value = static_cast<float>(values[i]);
      dst[i] = half ? FloatToHalf(value) : FloatToBFloat16(value);
    }
    return Status::Ok();
  }
  return VisitComputable(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.data<T>();
    for (int64_t i = 0; i < count; ++i) dst[i] = FromComputeValue<T, C>(values[i]);
  });
}

// Applies the non-identity samplings, shrinking axes first. A float (double) tensor is read
// and written in place of the compute buffers: no conversion copies.
template <typename C>
Status Interpolate(const RtTensor& input, RtTensor& out, const std::vector<AxisSampling>& samplings,
                   double extrapolation) {
  const std::vector<size_t> order = InterpolationOrder(samplings);
  if (order.empty()) {
    ParallelMemcpy(out.raw(), input.raw(), input.nbytes());
    return Status::Ok();
  }
  std::vector<C> buffers[2];
  const C* source = input.data<C>();
  if (input.dtype() != kComputeType<C>) {
    FUSIONOPT_RETURN_IF_ERROR(ToCompute(input, buffers[1]));
    source = buffers[1].data();
  }
  const bool direct_output = out.dtype() == kComputeType<C>;
  std::vector<int64_t> dims = input.dims();
  for (size_t pass = 0; pass < order.size(); ++pass) {
    size_t axis = order[pass];
    std::vector<int64_t> next_dims = dims;
    next_dims[axis] = samplings[axis].out_size;
    C* target = out.data<C>();
    if (pass + 1 < order.size() || !direct_output) {
      std::vector<C>& buffer = buffers[pass % 2];
      buffer.resize(static_cast<size_t>(Product(next_dims)));
      target = buffer.data();
    }
    ResamplePass<C>(source, target, dims, axis, samplings[axis], static_cast<C>(extrapolation));
    source = target;
    dims = std::move(next_dims);
  }
  return direct_output ? Status::Ok() : FromCompute<C>(source, out);
}

class ResizeKernel : public Kernel {
 public:
  Status Init(const KernelInfo& info) {
    Result<ResizeAttributes> attributes = ReadResizeAttributes(info.node, info.opset);
    if (!attributes.ok()) return info.Error(attributes.status().message());
    attributes_ = std::move(attributes).value();
    return Status::Ok();
  }
  Status Compute(KernelContext& context) override;

 private:
  Result<ResizeGeometry> ResolveGeometry(const KernelContext& context, const RtTensor& input) const;

  ResizeAttributes attributes_;
};

Result<ResizeGeometry> ResizeKernel::ResolveGeometry(const KernelContext& context, const RtTensor& input) const {
  std::vector<double> roi, scales;
  if (attributes_.options.coordinates == CoordinateMode::kTfCropAndResize && attributes_.roi_input &&
      context.has_input(*attributes_.roi_input)) {
    const RtTensor& tensor = *context.input(*attributes_.roi_input);
    for (int64_t i = 0; i < tensor.NumElements(); ++i) roi.push_back(tensor.ValueAsDouble(i));
  }
  if (attributes_.scales_attribute) {
    scales.assign(attributes_.scales_attribute->begin(), attributes_.scales_attribute->end());
  } else if (context.has_input(attributes_.scales_input)) {
    const RtTensor& tensor = *context.input(attributes_.scales_input);
    for (int64_t i = 0; i < tensor.NumElements(); ++i) scales.push_back(tensor.ValueAsDouble(i));
  }
  std::optional<std::vector<int64_t>> sizes;
  if (attributes_.sizes_input && context.has_input(*attributes_.sizes_input)) {
    FUSIONOPT_ASSIGN_OR_RETURN(sizes, ReadInts(*context.input(*attributes_.sizes_input), "sizes"));
  }
  return ResolveResizeGeometry(attributes_, input.dims(), scales, sizes, roi);
}

Status ResizeKernel::Compute(KernelContext& context) {
  const RtTensor& input = *context.input(0);
  if (input.rank() == 0) return InvalidModel("cannot resize a scalar");
  FUSIONOPT_ASSIGN_OR_RETURN(size_t element_size, ElementBytes(input.dtype()));
  FUSIONOPT_ASSIGN_OR_RETURN(ResizeGeometry geometry, ResolveGeometry(context, input));
  RtTensor& out = context.Output(0, input.dtype(), geometry.out_dims);
  if (out.NumElements() == 0) return Status::Ok();
  const ResizeOptions& options = attributes_.options;
  const std::vector<AxisSampling> samplings = PlanResize(options, input.dims(), geometry);
  if (options.mode != ResizeMode::kNearest) {
    bool wide = input.dtype() == DataType::kDouble || (BitsOf(input.dtype()) >= 32 && IsInteger(input.dtype()));
    return wide ? Interpolate<double>(input, out, samplings, options.extrapolation_value)
                : Interpolate<float>(input, out, samplings, options.extrapolation_value);
  }
  std::vector<std::vector<int64_t>> tables;
  for (const AxisSampling& sampling : samplings) {
    tables.push_back(sampling.index);
    for (int64_t x = 0; x < sampling.out_size; ++x) {
      if (sampling.extrapolated[x]) tables.back()[x] = kExtrapolate;
    }
  }
  std::vector<uint8_t> fill(element_size, 0);
  if (options.coordinates == CoordinateMode::kTfCropAndResize) {
    FUSIONOPT_ASSIGN_OR_RETURN(fill, EncodeScalar(input.dtype(), options.extrapolation_value));
  }
  DispatchByElementSize(element_size, [&](auto tag) {
    using T = decltype(tag);
    T value;
    std::memcpy(&value, fill.data(), sizeof(T));
    NearestRows<T>(out.raw(), input.raw(), input.dims(), geometry.out_dims, tables, value);
  });
  return Status::Ok();
}

}  // namespace

void RegisterResizeKernels(KernelRegistry& registry) {
  registry.Register("", "Resize", 10, kAnyOpset, MakeWithInputs<ResizeKernel>(1));
  registry.Register("", "Upsample", 7, 9, MakeWithInputs<ResizeKernel>(1));
}

}  // namespace fusionopt::cpu::data_movement
