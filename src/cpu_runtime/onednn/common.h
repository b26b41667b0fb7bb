// oneDNN plumbing shared by the contraction, pooling and normalization kernels.
//
// One CPU engine and one stream serve the whole process; they are created on first use.
// Debian's oneDNN threads through OpenMP, so the session's omp_set_num_threads governs it.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cpu_runtime/engine/allocator.h"
#include "cpu_runtime/engine/rt_tensor.h"
#include "ir/status.h"

namespace fusionopt::cpu::onednn {

const dnnl::engine& Engine();
dnnl::stream& Stream();

dnnl::memory::dims ToDims(const std::vector<int64_t>& dims);

// Dense row-major layout (the runtime's only layout) of `dims`.
dnnl::memory::desc RowMajorDesc(const std::vector<int64_t>& dims,
                                dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// A (rows, columns) matrix stored column by column: a transposed operand read in place.
dnnl::memory::desc ColumnMajorDesc(int64_t rows, int64_t columns,
                                   dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// oneDNN's element type for float32, float16 and bfloat16 (checked: nothing else reaches it).
dnnl::memory::data_type OneDnnType(DataType dtype);
// Same dims with a layout oneDNN picks for speed (blocked formats).
dnnl::memory::desc AnyLayoutDesc(const std::vector<int64_t>& dims);
// (N, C, spatial...) with channels blocked by the vector width (nChw8c, nChw16c, ...): what
// primitives without a layout choice (pooling) run fast on; on row-major data oneDNN's
// pooling falls back to a scalar loop an order of magnitude slower. Rank 3 to 5.
dnnl::memory::desc ChannelBlockedDesc(const std::vector<int64_t>& dims);
// `dims` (N, C, spatial...) of `type` laid out as `layout` (rt_tensor.h).
dnnl::memory::desc DescIn(const std::vector<int64_t>& dims, Layout layout,
                          dnnl::memory::data_type type = dnnl::memory::data_type::f32);
// Which Layout `desc` is (row-major first, where a shape makes several coincide), for the
// float32 and 8-bit (N, C, spatial...) descs of rank 3 to 5; kRowMajor for anything else, which
// the caller then reorders to row-major. Blocks must hold whole channels (no padding).
Layout LayoutOfDesc(const dnnl::memory::desc& desc);
// Whether tensors of `dtype` may lie in a convolution layout: float32 (float convolutions) and
// uint8/int8 (integer convolutions of a quantized model hand their activations on too).
bool TakesConvLayouts(DataType dtype);
// How `tensor`'s elements lie: 8-bit ones as they are, any other as float32 (what float kernels
// stage float16 and bfloat16 operands to).
dnnl::memory::desc LayoutOf(const RtTensor& tensor);
// `tensor` itself when it already lies as `layout`, else a reordered copy.
RtTensor WithLayout(const RtTensor& tensor, Layout layout, Allocator& allocator);
inline RtTensor RowMajor(const RtTensor& tensor, Allocator& allocator) {
  return WithLayout(tensor, Layout::kRowMajor, allocator);
}

// A memory object over bytes the runtime owns; oneDNN never frees them.
dnnl::memory Wrap(const dnnl::memory::desc& desc, const void* data);

// Runs `body`, turning a oneDNN exception (unsupported shape, out of memory) into a Status.
template <typename Body>
Status Guarded(const std::string& what, Body&& body) {
  try {
    return body();
  } catch (const dnnl::error& error) {
    return Unsupported(what + ": oneDNN rejected it (" + error.what() + ")");
  }
}

// Primitives a kernel built, keyed by the shapes they were built for (the same kernel runs
// many times, usually on one shape). Bounded, so ever-changing shapes cannot grow memory
// without limit.
template <typename Plan>
class PlanCache {
 public:
  Plan* Find(const std::vector<int64_t>& key) {
    auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : &it->second;
  }
  Plan& Insert(std::vector<int64_t> key, Plan plan) {
    if (plans_.size() >= kCapacity) plans_.clear();
    return plans_.insert_or_assign(std::move(key), std::move(plan)).first->second;
  }

 private:
  static constexpr size_t kCapacity = 16;
  std::map<std::vector<int64_t>, Plan> plans_;
};

// Moves a tensor between the runtime's row-major layout and the layout a primitive chose.
// The reorders are built once per cached primitive; the copy in the chosen layout lives in
// scratch memory the caller supplies per run (pooled, so nodes share it instead of each
// cached primitive holding its own buffer).
class LayoutBridge {
 public:
  LayoutBridge() = default;
  LayoutBridge(const dnnl::memory::desc& user, const dnnl::memory::desc& chosen);

  bool reorders() const { return user_ != chosen_; }
  size_t scratch_bytes() const { return reorders() ? chosen_.get_size() : 0; }

  // What the primitive reads: `data` itself, or its copy in the chosen layout in `scratch`.
  dnnl::memory Input(const void* data, void* scratch);
  // What the primitive writes (`data` itself, or `scratch`); WriteBack(data, scratch) after it ran.
  dnnl::memory Output(void* data, void* scratch);
  void WriteBack(void* data, void* scratch);

 private:
  dnnl::memory::desc user_;
  dnnl::memory::desc chosen_;
  std::optional<dnnl::reorder> to_chosen_;
  std::optional<dnnl::reorder> to_user_;
};

// Copies `data` (laid out as `user`) into a fresh oneDNN-owned buffer laid out as `chosen`;
// constant weights go through this once and are kept, so they need not outlive the model.
dnnl::memory ReorderedCopy(const dnnl::memory::desc& user, const void* data,
                           const dnnl::memory::desc& chosen);

// A constant operand (`source`, laid out as `user`; kept alive here, since it is reordered on
// first use) in each layout a primitive chose for it, once per layout: the plans of one kernel
// for different shapes that choose the same layout share one copy.
class PackedConstant {
 public:
  PackedConstant() = default;
  PackedConstant(const dnnl::memory::desc& user, RtTensor source) : user_(user), source_(std::move(source)) {}

  bool defined() const { return source_.defined(); }
  dnnl::memory In(const dnnl::memory::desc& chosen);

 private:
  dnnl::memory::desc user_;
  RtTensor source_;
  std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> copies_;
};

}  // namespace fusionopt::cpu::onednn
