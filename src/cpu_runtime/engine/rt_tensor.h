// RtTensor: a tensor at run time — dtype, concrete dims, and a pointer into shared storage.
//
// Storage is reference counted; views (Reshape, Squeeze, ...) share it with a new shape and
// cost nothing. Intermediate storage comes from the Allocator's pool and goes back to it when
// the last tensor (or view) referring to it dies, which is what makes liveness-based buffer
// reuse automatic. Constants wrap the IR's Tensor bytes without copying.
//
// A float32 (N, C, spatial...) tensor may lie in a convolution layout instead of row-major —
// channels last (nhwc) or channels in blocks of 8 or 16 (nChw8c, nChw16c), whichever oneDNN's
// convolutions run on for this CPU — so convolutions in a row pass activations on without a
// reorder each side (ORT keeps NCHWc the same way). Only kernels that say they read such
// layouts (Kernel::ReadsConvLayouts) ever see one: the executor lets a kernel write it only
// where every reader is one of them (graph_executor.cc). The dims stay the logical
// (N, C, spatial...) ones, and the byte size the row-major one (blocks are never padded).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/float16.h"
#include "ir/tensor.h"

namespace fusionopt::cpu {

enum class Layout : uint8_t { kRowMajor, kChannelsLast, kBlocked8, kBlocked16 };

class RtTensor {
 public:
  RtTensor() = default;
  RtTensor(DataType dtype, std::vector<int64_t> dims, std::shared_ptr<uint8_t> storage)
      : dtype_(dtype), dims_(std::move(dims)), storage_(std::move(storage)) {}

  // Zero-copy view of a constant; keeps the constant alive.
  static RtTensor WrapConstant(const TensorPtr& constant);
  // A tensor that owns fresh heap memory (tests, inputs read from files).
  static RtTensor Allocate(DataType dtype, std::vector<int64_t> dims);

  bool defined() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t dim(size_t axis) const { return dims_[axis]; }
  size_t rank() const { return dims_.size(); }
  int64_t NumElements() const;
  uint64_t nbytes() const { return ByteSizeOf(dtype_, static_cast<uint64_t>(NumElements())); }

  Layout layout() const { return layout_; }
  bool row_major() const { return layout_ == Layout::kRowMajor; }
  void set_layout(Layout layout) { layout_ = layout; }

  uint8_t* raw() const { return storage_.get(); }
  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(storage_.get());
  }
  const std::shared_ptr<uint8_t>& storage() const { return storage_; }

  // Same storage, new dims (element count must match; checked).
  RtTensor Reshaped(std::vector<int64_t> dims) const;

  // Values of an integer tensor widened to int64 (shape, axes, pads inputs).
  std::vector<int64_t> ToInt64s() const;
  // Element `i` converted to double (any numeric dtype; tests and summaries).
  double ValueAsDouble(int64_t i) const;

 private:
  DataType dtype_ = DataType::kUndefined;
  std::vector<int64_t> dims_;
  std::shared_ptr<uint8_t> storage_;
  Layout layout_ = Layout::kRowMajor;
};

std::string DimsToString(const std::vector<int64_t>& dims);  // "[1,3,224,224]"

}  // namespace fusionopt::cpu
