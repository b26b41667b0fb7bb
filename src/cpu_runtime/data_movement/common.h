// Shared machinery of the data-movement kernels (data_movement/*.cc).
//
// Most of these ops move elements without looking at them, so they work on any dtype by
// element size: a typed copy of an N-byte stand-in type is as fast as copying the real
// type. Shape-like arguments (shape, axes, pads, repeats) are integer tensors read here.
// Big copies go parallel with OpenMP; small ones stay on the calling thread, where a
// fork/join would cost more than the copy.
#pragma once

#include <omp.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu::data_movement {

// Below this many elements of work a kernel runs on one thread.
constexpr int64_t kParallelElements = int64_t{1} << 16;

// An opaque element of N bytes: lets one template copy every dtype of that width.
template <size_t N>
struct Bytes {
  uint8_t bytes[N];
};

// Calls `f(T{})` with T an unsigned integer (or Bytes<16>) of `element_size` bytes.
template <typename F>
void DispatchByElementSize(size_t element_size, F&& f) {
  switch (element_size) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint64_t{}); return;
    case 16: f(Bytes<16>{}); return;
    default: FUSIONOPT_CHECK(false, "element size " + std::to_string(element_size) + " has no copy type");
  }
}

// Bytes of one element, or an Unsupported status for dtypes that are not whole bytes
// (strings, the packed 4-bit types): those cannot be moved by element.
Result<size_t> ElementBytes(DataType dtype);

// Row-major strides (in elements) of a tensor with `dims`.
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& dims);
int64_t Product(const std::vector<int64_t>& dims, size_t begin = 0, size_t end = SIZE_MAX);

// Threads worth using for `work` elements: 1 below kParallelElements.
int ThreadsFor(int64_t work);

// Runs body(begin, end) over [0, count) split into one contiguous chunk per thread.
template <typename Body>
void ParallelChunks(int64_t count, int64_t work, Body&& body) {
  int threads = static_cast<int>(std::min<int64_t>(ThreadsFor(work), count));
  if (threads <= 1) {
    if (count > 0) body(int64_t{0}, count);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int chunk = 0; chunk < threads; ++chunk) {
    int64_t begin = count * chunk / threads;
    int64_t end = count * (chunk + 1) / threads;
    if (begin < end) body(begin, end);
  }
}

// Element (i_0..i_n) of a copy lives at src + sum(i_k * src_strides[k]) and goes to
// dst + sum(i_k * dst_strides[k]); strides are in elements and may be 0 (broadcast) or
// negative (reversed slices).
struct StridedLayout {
  std::vector<int64_t> dims;
  std::vector<int64_t> dst_strides;
  std::vector<int64_t> src_strides;
};

// Drops unit dims and merges neighbours contiguous in both source and destination, so a
// copy runs on as few, as long rows as its layout allows.
void SimplifyLayout(StridedLayout& layout);

// Copies by the layout: unit-stride inner runs become memcpy, a zero-stride source becomes
// a fill, rows are split across threads when the copy is large.
void CopyStrided(uint8_t* dst, const uint8_t* src, size_t element_size, StridedLayout layout);

// memcpy split across threads when it is large.
void ParallelMemcpy(uint8_t* dst, const uint8_t* src, size_t bytes);

// Writes `count` copies of the element at `value` (element_size bytes) to dst.
void FillElements(uint8_t* dst, int64_t count, const uint8_t* value, size_t element_size);

// One element of `dtype` holding `value` (pad values, the ones of EyeLike, masks); an
// Unsupported status for dtypes without a numeric encoding.
Result<std::vector<uint8_t>> EncodeScalar(DataType dtype, double value);

// The values of an integer tensor (shape, axes, pads, repeats, indices).
Result<std::vector<int64_t>> ReadInts(const RtTensor& tensor, std::string_view what);

// Values of constant input `index` when it is a known integer tensor.
std::optional<std::vector<int64_t>> ConstantInputInts(const KernelInfo& info, size_t index);

// Axes normalised against `rank`; an error naming `what` when one is out of range or repeated.
Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank, std::string_view what);

// `axis` normalised against `rank`, or an error.
Result<size_t> CheckedAxis(int64_t axis, size_t rank);

// Index values in [0, dim) (negative ones count from the end); an error for any outside.
Result<std::vector<int64_t>> NormalizedIndices(const RtTensor& indices, int64_t dim);

// GatherElements/ScatterElements addressing: for each element of `indices` (same rank as
// the data), the data offset of its coordinates with the one on `axis` replaced by its value.
Result<std::vector<int64_t>> ElementOffsetsAlongAxis(const RtTensor& indices, const std::vector<int64_t>& data_dims,
                                                     size_t axis);

// Make<K>() behind a check that the node's first `required` inputs are present (kAllInputs:
// every input it lists), so kernels may dereference them without checking.
constexpr size_t kAllInputs = SIZE_MAX;
template <typename K>
KernelFactory MakeWithInputs(size_t required) {
  return [required](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    size_t listed = info.node.inputs().size();
    if (required != kAllInputs && listed < required) {
      return info.Error("needs " + std::to_string(required) + " inputs, has " + std::to_string(listed));
    }
    for (size_t i = 0; i < std::min(required, listed); ++i) {
      if (info.node.input(i) == nullptr) return info.Error("input " + std::to_string(i) + " is required");
    }
    return Make<K>()(info);
  };
}

// The node's output slots that are present (ONNX allows omitting optional outputs).
std::vector<bool> PresentOutputs(const Node& node);

}  // namespace fusionopt::cpu::data_movement
