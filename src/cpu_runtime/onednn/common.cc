#include "cpu_runtime/onednn/common.h"

namespace fusionopt::cpu::onednn {

const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& Stream() {
  static dnnl::stream stream(Engine());
  return stream;
}

dnnl::memory::dims ToDims(const std::vector<int64_t>& dims) {
  return dnnl::memory::dims(dims.begin(), dims.end());
}

dnnl::memory::desc RowMajorDesc(const std::vector<int64_t>& dims, dnnl::memory::data_type type) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t axis = dims.size(); axis-- > 1;) strides[axis - 1] = strides[axis] * std::max<int64_t>(dims[axis], 1);
  return dnnl::memory::desc(ToDims(dims), type, strides);
}

dnnl::memory::desc ColumnMajorDesc(int64_t rows, int64_t columns, dnnl::memory::data_type type) {
  return dnnl::memory::desc({rows, columns}, type, dnnl::memory::dims{1, std::max<int64_t>(rows, 1)});
}

dnnl::memory::data_type OneDnnType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat: return dnnl::memory::data_type::f32;
    case DataType::kFloat16: return dnnl::memory::data_type::f16;
    case DataType::kBFloat16: return dnnl::memory::data_type::bf16;
    default: FUSIONOPT_CHECK(false, "a float32, float16 or bfloat16 operand"); return dnnl::memory::data_type::undef;
  }
}

dnnl::memory::desc AnyLayoutDesc(const std::vector<int64_t>& dims) {
  return dnnl::memory::desc(ToDims(dims), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

dnnl::memory::desc ChannelBlockedDesc(const std::vector<int64_t>& dims) {
  const auto isa = static_cast<int>(dnnl::get_effective_cpu_isa());
  const bool wide = (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return DescIn(dims, wide ? Layout::kBlocked16 : Layout::kBlocked8);
}

dnnl::memory::desc DescIn(const std::vector<int64_t>& dims, Layout layout, dnnl::memory::data_type type) {
  using tag = dnnl::memory::format_tag;
  if (layout == Layout::kRowMajor) return RowMajorDesc(dims, type);
  FUSIONOPT_CHECK(dims.size() >= 3 && dims.size() <= 5, "convolution layouts have 1 to 3 spatial axes");
  static const tag kLast[] = {tag::nwc, tag::nhwc, tag::ndhwc};
  static const tag kNarrow[] = {tag::nCw8c, tag::nChw8c, tag::nCdhw8c};
  static const tag kWide[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c};
  const size_t index = dims.size() - 3;
  const tag format = layout == Layout::kChannelsLast ? kLast[index]
                     : layout == Layout::kBlocked8   ? kNarrow[index]
                                                     : kWide[index];
  return dnnl::memory::desc(ToDims(dims), type, format);
}

Layout LayoutOfDesc(const dnnl::memory::desc& desc) {
  using type = dnnl::memory::data_type;
  const dnnl::memory::dims dims = desc.dims();
  const type element = desc.data_type();
  if (dims.size() < 3 || dims.size() > 5 || (element != type::f32 && element != type::u8 && element != type::s8)) {
    return Layout::kRowMajor;
  }
  const std::vector<int64_t> logical(dims.begin(), dims.end());
  if (desc == RowMajorDesc(logical, element)) return Layout::kRowMajor;
  if (desc == DescIn(logical, Layout::kChannelsLast, element)) return Layout::kChannelsLast;
  if (dims[1] % 16 == 0 && desc == DescIn(logical, Layout::kBlocked16, element)) return Layout::kBlocked16;
  if (dims[1] % 8 == 0 && desc == DescIn(logical, Layout::kBlocked8, element)) return Layout::kBlocked8;
  return Layout::kRowMajor;
}

bool TakesConvLayouts(DataType dtype) {
  return dtype == DataType::kFloat || IsEightBitInteger(dtype);
}

namespace {

// 8-bit tensors as they are; any other as the float32 values kernels stage it to (float16 and
// bfloat16 operands of float kernels are converted, row-major, before oneDNN reads them).
dnnl::memory::data_type LayoutElementType(DataType dtype) {
  return dtype == DataType::kUint8  ? dnnl::memory::data_type::u8
         : dtype == DataType::kInt8 ? dnnl::memory::data_type::s8
                                    : dnnl::memory::data_type::f32;
}

}  // namespace

dnnl::memory::desc LayoutOf(const RtTensor& tensor) {
  FUSIONOPT_CHECK(tensor.row_major() || TakesConvLayouts(tensor.dtype()),
                  "only float32 and 8-bit tensors take convolution layouts");
  return DescIn(tensor.dims(), tensor.layout(), LayoutElementType(tensor.dtype()));
}

RtTensor WithLayout(const RtTensor& tensor, Layout layout, Allocator& allocator) {
  if (tensor.layout() == layout) return tensor;
  FUSIONOPT_CHECK(TakesConvLayouts(tensor.dtype()), "only float32 and 8-bit tensors take convolution layouts");
  RtTensor copy = allocator.Allocate(tensor.dtype(), tensor.dims());
  copy.set_layout(layout);
  if (tensor.NumElements() == 0) return copy;
  dnnl::memory source = Wrap(LayoutOf(tensor), tensor.raw());
  dnnl::memory target = Wrap(LayoutOf(copy), copy.raw());
  dnnl::reorder(source, target).execute(Stream(), source, target);
  Stream().wait();
  return copy;
}

dnnl::memory Wrap(const dnnl::memory::desc& desc, const void* data) {
  return dnnl::memory(desc, Engine(), const_cast<void*>(data));
}

LayoutBridge::LayoutBridge(const dnnl::memory::desc& user, const dnnl::memory::desc& chosen)
    : user_(user), chosen_(chosen) {}

dnnl::memory LayoutBridge::Input(const void* data, void* scratch) {
  dnnl::memory user = Wrap(user_, data);
  if (!reorders()) return user;
  dnnl::memory copy = Wrap(chosen_, scratch);
  if (!to_chosen_) to_chosen_.emplace(user, copy);
  to_chosen_->execute(Stream(), user, copy);
  return copy;
}

dnnl::memory LayoutBridge::Output(void* data, void* scratch) {
  return reorders() ? Wrap(chosen_, scratch) : Wrap(user_, data);
}

void LayoutBridge::WriteBack(void* data, void* scratch) {
  if (!reorders()) return;
  dnnl::memory produced = Wrap(chosen_, scratch);
  dnnl::memory user = Wrap(user_, data);
  if (!to_user_) to_user_.emplace(produced, user);
  to_user_->execute(Stream(), produced, user);
}

dnnl::memory ReorderedCopy(const dnnl::memory::desc& user, const void* data,
                           const dnnl::memory::desc& chosen) {
  dnnl::memory source = Wrap(user, data);
  dnnl::memory packed(chosen, Engine());
  dnnl::reorder(source, packed).execute(Stream(), source, packed);
  Stream().wait();
  return packed;
}

dnnl::memory PackedConstant::In(const dnnl::memory::desc& chosen) {
  FUSIONOPT_CHECK(defined(), "a packed constant has its data");
  if (chosen == user_) return Wrap(user_, source_.raw());
  for (const auto& [layout, copy] : copies_) {
    if (layout == chosen) return copy;
  }
  copies_.emplace_back(chosen, ReorderedCopy(user_, source_.raw(), chosen));
  return copies_.back().second;
}

}  // namespace fusionopt::cpu::onednn
