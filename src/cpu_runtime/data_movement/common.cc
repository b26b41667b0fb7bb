#include <algorithm>
#include <set>

#include "cpu_runtime/data_movement/common.h"

namespace fusionopt::cpu::data_movement {

void SimplifyLayout(StridedLayout& layout) {
  StridedLayout out;
  for (size_t k = 0; k < layout.dims.size(); ++k) {
    if (layout.dims[k] == 1) continue;
    if (!out.dims.empty() && out.dst_strides.back() == layout.dst_strides[k] * layout.dims[k] &&
        out.src_strides.back() == layout.src_strides[k] * layout.dims[k]) {
      out.dims.back() *= layout.dims[k];
      out.dst_strides.back() = layout.dst_strides[k];
      out.src_strides.back() = layout.src_strides[k];
      continue;
    }
    out.dims.push_back(layout.dims[k]);
    out.dst_strides.push_back(layout.dst_strides[k]);
    out.src_strides.push_back(layout.src_strides[k]);
  }
  layout = std::move(out);
}

namespace {

// The contiguous-destination cases get their own loops so that they vectorise.
template <typename T>
void CopyRow(T* dst, const T* src, int64_t count, int64_t dst_stride, int64_t src_stride) {
  if (dst_stride == 1 && src_stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(T));
  } else if (dst_stride == 1 && src_stride == 0) {
    std::fill(dst, dst + count, *src);
  } else if (dst_stride == 1) {
    for (int64_t i = 0; i < count; ++i) dst[i] = src[i * src_stride];
  } else {
    for (int64_t i = 0; i < count; ++i) dst[i * dst_stride] = src[i * src_stride];
  }
}

template <typename T>
void CopyRows(uint8_t* dst, const uint8_t* src, const StridedLayout& layout) {
  const size_t outer_rank = layout.dims.size() - 1;
  const int64_t inner = layout.dims.back();
  const int64_t dst_inner = layout.dst_strides.back();
  const int64_t src_inner = layout.src_strides.back();
  const int64_t rows = Product(layout.dims, 0, outer_rank);
  // Few long rows are cut into pieces so that they still spread over the threads.
  const int64_t piece = rows >= 64 ? inner : std::max<int64_t>(inner / 16, 4096);
  const int64_t pieces = (inner + piece - 1) / piece;
  ParallelChunks(rows * pieces, rows * inner, [&](int64_t begin, int64_t end) {
    // Each chunk decomposes its first row once, then steps an odometer: no division per row.
    std::vector<int64_t> index(outer_rank);
    int64_t dst_offset = 0;
    int64_t src_offset = 0;
    int64_t rest = begin / pieces;
    int64_t part = begin % pieces;
    for (size_t k = outer_rank; k-- > 0;) {
      index[k] = rest % layout.dims[k];
      rest /= layout.dims[k];
      dst_offset += index[k] * layout.dst_strides[k];
      src_offset += index[k] * layout.src_strides[k];
    }
    for (int64_t task = begin; task < end; ++task) {
      const int64_t first = part * piece;
      CopyRow(reinterpret_cast<T*>(dst) + dst_offset + first * dst_inner,
              reinterpret_cast<const T*>(src) + src_offset + first * src_inner, std::min(piece, inner - first),
              dst_inner, src_inner);
      if (++part < pieces) continue;
      part = 0;
      for (size_t k = outer_rank; k-- > 0;) {
        dst_offset += layout.dst_strides[k];
        src_offset += layout.src_strides[k];
        if (++index[k] < layout.dims[k]) break;
        dst_offset -= layout.dims[k] * layout.dst_strides[k];
        src_offset -= layout.dims[k] * layout.src_strides[k];
        index[k] = 0;
      }
    }
  });
}

}  // namespace

Result<size_t> ElementBytes(DataType dtype) {
  int bits = BitsOf(dtype);
  if (dtype == DataType::kString || bits == 0 || bits % 8 != 0) {
    return Unsupported("dtype " + std::string(NameOf(dtype)) + " is not supported by the CPU data-movement kernels");
  }
  return static_cast<size_t>(bits / 8);
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) strides[k - 1] = strides[k] * dims[k];
  return strides;
}

int64_t Product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t product = 1;
  for (size_t k = begin; k < std::min(end, dims.size()); ++k) product *= dims[k];
  return product;
}

int ThreadsFor(int64_t work) {
  if (work < kParallelElements || omp_in_parallel()) return 1;
  return omp_get_max_threads();
}

void CopyStrided(uint8_t* dst, const uint8_t* src, size_t element_size, StridedLayout layout) {
  FUSIONOPT_CHECK(layout.dst_strides.size() == layout.dims.size() && layout.src_strides.size() == layout.dims.size(),
                  "one stride per dim");
  for (int64_t dim : layout.dims) {
    if (dim == 0) return;
  }
  SimplifyLayout(layout);
  if (layout.dims.empty()) {
    std::memcpy(dst, src, element_size);
    return;
  }
  if (layout.dims.size() == 1 && layout.dst_strides[0] == 1 && layout.src_strides[0] == 1) {
    ParallelMemcpy(dst, src, static_cast<size_t>(layout.dims[0]) * element_size);
    return;
  }
  DispatchByElementSize(element_size, [&](auto tag) { CopyRows<decltype(tag)>(dst, src, layout); });
}

void ParallelMemcpy(uint8_t* dst, const uint8_t* src, size_t bytes) {
  constexpr int64_t kChunk = 4096;  // keep chunk edges on page-sized boundaries
  int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
  ParallelChunks(chunks, static_cast<int64_t>(bytes / 4), [&](int64_t begin, int64_t end) {
    size_t from = static_cast<size_t>(begin * kChunk);
    size_t to = std::min(bytes, static_cast<size_t>(end * kChunk));
    std::memcpy(dst + from, src + from, to - from);
  });
}

void FillElements(uint8_t* dst, int64_t count, const uint8_t* value, size_t element_size) {
  DispatchByElementSize(element_size, [&](auto tag) {
    using T = decltype(tag);
    T element;
    std::memcpy(&element, value, sizeof(T));
    T* out = reinterpret_cast<T*>(dst);
    ParallelChunks(count, count, [&](int64_t begin, int64_t end) { std::fill(out + begin, out + end, element); });
  });
}

Result<std::vector<uint8_t>> EncodeScalar(DataType dtype, double value) {
  auto bytes_of = [](auto typed) {
    std::vector<uint8_t> bytes(sizeof(typed));
    std::memcpy(bytes.data(), &typed, sizeof(typed));
    return bytes;
  };
  switch (dtype) {
    case DataType::kFloat: return bytes_of(static_cast<float>(value));
    case DataType::kDouble: return bytes_of(value);
    case DataType::kFloat16: return bytes_of(FloatToHalf(static_cast<float>(value)));
    case DataType::kBFloat16: return bytes_of(FloatToBFloat16(static_cast<float>(value)));
    case DataType::kInt8: return bytes_of(static_cast<int8_t>(static_cast<int64_t>(value)));
    case DataType::kInt16: return bytes_of(static_cast<int16_t>(static_cast<int64_t>(value)));
    case DataType::kInt32: return bytes_of(static_cast<int32_t>(static_cast<int64_t>(value)));
    case DataType::kInt64: return bytes_of(static_cast<int64_t>(value));
    case DataType::kUint8: return bytes_of(static_cast<uint8_t>(static_cast<int64_t>(value)));
    case DataType::kUint16: return bytes_of(static_cast<uint16_t>(static_cast<int64_t>(value)));
    case DataType::kUint32: return bytes_of(static_cast<uint32_t>(static_cast<int64_t>(value)));
    case DataType::kUint64:
      return bytes_of(value < 0 ? static_cast<uint64_t>(static_cast<int64_t>(value)) : static_cast<uint64_t>(value));
    case DataType::kBool: return bytes_of(static_cast<uint8_t>(value != 0.0));
    default: return Unsupported("no numeric value of dtype " + std::string(NameOf(dtype)) + " can be written");
  }
}

Result<std::vector<int64_t>> ReadInts(const RtTensor& tensor, std::string_view what) {
  if (!IsInteger(tensor.dtype()) || BitsOf(tensor.dtype()) < 8) {
    return InvalidModel(std::string(what) + " must be an integer tensor, not " + std::string(NameOf(tensor.dtype())));
  }
  return tensor.ToInt64s();
}

std::optional<std::vector<int64_t>> ConstantInputInts(const KernelInfo& info, size_t index) {
  const TensorPtr& constant = info.constant_input(index);
  if (!constant) return std::nullopt;
  return constant->AsInt64s();
}

Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank, std::string_view what) {
  std::vector<int64_t> normalized;
  std::set<int64_t> seen;
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) {
      return InvalidModel(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                          std::to_string(rank));
    }
    int64_t positive = axis < 0 ? axis + rank : axis;
    if (!seen.insert(positive).second) {
      return InvalidModel(std::string(what) + " names axis " + std::to_string(positive) + " twice");
    }
    normalized.push_back(positive);
  }
  return normalized;
}

Result<size_t> CheckedAxis(int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return InvalidModel("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

Result<std::vector<int64_t>> NormalizedIndices(const RtTensor& indices, int64_t dim) {
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadInts(indices, "indices"));
  for (int64_t& index : values) {
    if (index < -dim || index >= dim) {
      return InvalidModel("index " + std::to_string(index) + " is out of range for a dim of size " +
                          std::to_string(dim));
    }
    if (index < 0) index += dim;
  }
  return values;
}

Result<std::vector<int64_t>> ElementOffsetsAlongAxis(const RtTensor& indices, const std::vector<int64_t>& data_dims,
                                                     size_t axis) {
  if (indices.rank() != data_dims.size()) return InvalidModel("indices and data have different ranks");
  for (size_t k = 0; k < data_dims.size(); ++k) {
    if (k != axis && indices.dim(k) > data_dims[k]) {
      return InvalidModel("indices " + DimsToString(indices.dims()) + " exceed data " + DimsToString(data_dims));
    }
  }
  FUSIONOPT_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, NormalizedIndices(indices, data_dims[axis]));
  // Walk the indices' coordinates with an odometer; `base` is the data offset of the
  // current coordinates with the axis coordinate left out.
  std::vector<int64_t> strides = ContiguousStrides(data_dims);
  std::vector<int64_t> index(indices.rank(), 0);
  int64_t base = 0;
  for (int64_t& offset : offsets) {
    offset = base + offset * strides[axis];
    for (size_t k = indices.rank(); k-- > 0;) {
      if (k != axis) base += strides[k];
      if (++index[k] < indices.dim(k)) break;
      if (k != axis) base -= indices.dim(k) * strides[k];
      index[k] = 0;
    }
  }
  return offsets;
}

std::vector<bool> PresentOutputs(const Node& node) {
  std::vector<bool> present;
  for (const Value* output : node.outputs()) present.push_back(output != nullptr);
  return present;
}

}  // namespace fusionopt::cpu::data_movement
