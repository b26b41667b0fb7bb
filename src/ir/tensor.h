// Tensor: an immutable constant (initializer, Constant node value, tensor attribute).
//
// The bytes are raw little-endian ONNX layout and are never copied on load: they point into
// the loaded protobuf (kept alive by `keepalive_`), into a memory-mapped external-data file,
// or into a vector the tensor owns. Strings are the exception and are stored decoded.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/mapped_file.h"

namespace fusionopt {

// Where a tensor's bytes live in an external-data file, so a saver can copy them file to
// file without touching the pages.
struct ExternalSource {
  std::shared_ptr<MappedFile> file;
  uint64_t offset = 0;
};

class Tensor {
 public:
  Tensor() = default;

  // Borrows `nbytes` at `data`; `keepalive` owns whatever holds them.
  static Tensor Borrowed(DataType dtype, std::vector<int64_t> dims, const uint8_t* data,
                         uint64_t nbytes, std::shared_ptr<const void> keepalive);
  static Tensor Owned(DataType dtype, std::vector<int64_t> dims, std::vector<uint8_t> bytes);
  static Tensor Mapped(DataType dtype, std::vector<int64_t> dims,
                       std::shared_ptr<MappedFile> file, uint64_t offset, uint64_t nbytes);
  static Tensor Strings(std::vector<int64_t> dims, std::vector<std::string> values);

  template <typename T>
  static Tensor FromValues(DataType dtype, std::vector<int64_t> dims,
                           const std::vector<T>& values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(T));
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return Owned(dtype, std::move(dims), std::move(bytes));
  }

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t NumElements() const;
  uint64_t nbytes() const { return nbytes_; }
  std::span<const uint8_t> bytes() const { return {data_, static_cast<size_t>(nbytes_)}; }
  const std::vector<std::string>& strings() const { return strings_; }

  // Typed view; T must match the storage width of dtype (checked).
  template <typename T>
  std::span<const T> values() const {
    return {reinterpret_cast<const T*>(data_), static_cast<size_t>(nbytes_ / sizeof(T))};
  }

  // Values of an integer tensor widened to int64 (shape, axes, pads arguments).
  std::optional<std::vector<int64_t>> AsInt64s() const;
  // Values of a floating-point tensor converted to double (the text form, small constants).
  std::optional<std::vector<double>> AsDoubles() const;

  const std::optional<ExternalSource>& external_source() const { return source_; }
  bool IsMapped() const { return source_.has_value(); }
  // Drops the pages of a mapped tensor from the process's resident set; the next read faults
  // them back in from the page cache with the same bytes (the mapping is read-only). A pass
  // that reads a weight once (hashing, folding, concatenating) calls this afterwards so that
  // a multi-gigabyte model is never resident all at once. No-op for tensors not mapped.
  void ReleaseMappedPages() const;

  // Serialized TensorProto fields the IR does not model (name excluded); restored on save.
  const std::string& residual() const { return residual_; }
  void set_residual(std::string residual) { residual_ = std::move(residual); }

  // The file stored the values in typed protobuf fields (float_data, int64_data, ...)
  // rather than raw bytes; the saver keeps that form so a round trip is byte-exact.
  bool typed_storage() const { return typed_storage_; }
  void set_typed_storage(bool typed) { typed_storage_ = typed; }

  // Same dtype, dims and bytes (strings compared element-wise).
  bool ContentEquals(const Tensor& other) const;

 private:
  DataType dtype_ = DataType::kUndefined;
  std::vector<int64_t> dims_;
  const uint8_t* data_ = nullptr;
  uint64_t nbytes_ = 0;
  std::shared_ptr<const void> keepalive_;
  std::vector<std::string> strings_;
  std::optional<ExternalSource> source_;
  std::string residual_;
  bool typed_storage_ = false;
};

using TensorPtr = std::shared_ptr<const Tensor>;

}  // namespace fusionopt
