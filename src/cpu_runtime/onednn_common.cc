#include "cpu_runtime/onednn_common.h"

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

dnnl::memory::desc ColumnMajorDesc(int64_t rows, int64_t columns) {
  return dnnl::memory::desc({rows, columns}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, std::max<int64_t>(rows, 1)});
}

dnnl::memory::desc AnyLayoutDesc(const std::vector<int64_t>& dims) {
  return dnnl::memory::desc(ToDims(dims), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

dnnl::memory::desc ChannelBlockedDesc(const std::vector<int64_t>& dims) {
  using tag = dnnl::memory::format_tag;
  const auto isa = static_cast<int>(dnnl::get_effective_cpu_isa());
  const bool wide = (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  static const tag kNarrow[] = {tag::nCw8c, tag::nChw8c, tag::nCdhw8c};
  static const tag kWide[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c};
  FUSIONOPT_CHECK(dims.size() >= 3 && dims.size() <= 5, "channel-blocked layouts have 1 to 3 spatial axes");
  const size_t index = dims.size() - 3;
  return dnnl::memory::desc(ToDims(dims), dnnl::memory::data_type::f32, wide ? kWide[index] : kNarrow[index]);
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

}  // namespace fusionopt::cpu::onednn
