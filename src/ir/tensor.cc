#include "ir/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include "ir/float16.h"
#include "ir/status.h"

namespace fusionopt {

Tensor Tensor::Borrowed(DataType dtype, std::vector<int64_t> dims, const uint8_t* data,
                        uint64_t nbytes, std::shared_ptr<const void> keepalive) {
  Tensor tensor;
  tensor.dtype_ = dtype;
  tensor.dims_ = std::move(dims);
  tensor.data_ = data;
  tensor.nbytes_ = nbytes;
  tensor.keepalive_ = std::move(keepalive);
  return tensor;
}

Tensor Tensor::Owned(DataType dtype, std::vector<int64_t> dims, std::vector<uint8_t> bytes) {
  auto storage = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  const uint8_t* data = storage->data();
  uint64_t size = storage->size();
  return Borrowed(dtype, std::move(dims), data, size, std::move(storage));
}

Tensor Tensor::Mapped(DataType dtype, std::vector<int64_t> dims,
                      std::shared_ptr<MappedFile> file, uint64_t offset, uint64_t nbytes) {
  FUSIONOPT_CHECK(offset + nbytes <= file->size(), "mapped tensor range checked by the loader");
  Tensor tensor = Borrowed(dtype, std::move(dims), file->data() + offset, nbytes, file);
  tensor.source_ = ExternalSource{std::move(file), offset};
  return tensor;
}

void Tensor::ReleaseMappedPages() const {
  if (!source_ || nbytes_ == 0) return;
  // Whole pages only: a page shared with a neighbouring tensor is dropped too, which is
  // harmless because a read-only file mapping refills it from the file.
  static const auto kPageSize = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data_) & ~(kPageSize - 1);
  const auto end = reinterpret_cast<uintptr_t>(data_) + nbytes_;
  // Advice only: if the kernel refuses, the pages stay resident and nothing else changes.
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Tensor Tensor::Strings(std::vector<int64_t> dims, std::vector<std::string> values) {
  Tensor tensor;
  tensor.dtype_ = DataType::kString;
  tensor.dims_ = std::move(dims);
  tensor.strings_ = std::move(values);
  return tensor;
}

int64_t Tensor::NumElements() const {
  int64_t count = 1;
  for (int64_t dim : dims_) count *= dim;
  return count;
}

std::optional<std::vector<int64_t>> Tensor::AsInt64s() const {
  std::vector<int64_t> out;
  auto count = static_cast<size_t>(NumElements());
  out.reserve(count);
  auto widen = [&](auto typed) {
    for (auto value : typed) out.push_back(static_cast<int64_t>(value));
  };
  switch (dtype_) {
    case DataType::kInt64: widen(values<int64_t>()); break;
    case DataType::kInt32: widen(values<int32_t>()); break;
    case DataType::kInt16: widen(values<int16_t>()); break;
    case DataType::kInt8: widen(values<int8_t>()); break;
    case DataType::kUint8: case DataType::kBool: widen(values<uint8_t>()); break;
    case DataType::kUint16: widen(values<uint16_t>()); break;
    case DataType::kUint32: widen(values<uint32_t>()); break;
    case DataType::kUint64: widen(values<uint64_t>()); break;
    default: return std::nullopt;
  }
  if (out.size() != count) return std::nullopt;
  return out;
}


std::optional<std::vector<double>> Tensor::AsDoubles() const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(NumElements()));
  switch (dtype_) {
    case DataType::kFloat: for (float v : values<float>()) out.push_back(v); break;
    case DataType::kDouble: for (double v : values<double>()) out.push_back(v); break;
    case DataType::kFloat16: for (uint16_t v : values<uint16_t>()) out.push_back(HalfToFloat(v)); break;
    case DataType::kBFloat16:
      for (uint16_t v : values<uint16_t>()) out.push_back(BFloat16ToFloat(v));
      break;
    default: return std::nullopt;
  }
  return out;
}

bool Tensor::ContentEquals(const Tensor& other) const {
  if (dtype_ != other.dtype_ || dims_ != other.dims_) return false;
  if (dtype_ == DataType::kString) return strings_ == other.strings_;
  return nbytes_ == other.nbytes_ &&
         (nbytes_ == 0 || std::memcmp(data_, other.data_, nbytes_) == 0);
}

}  // namespace fusionopt
