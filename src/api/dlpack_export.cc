// fusionopt_value_to_dlpack: a value lent out as a DLManagedTensor (DLPack 0.6's legacy form,
// which every consumer reads: numpy, torch, CuPy, JAX). The managed tensor owns a copy of the
// value (a second reference to the same storage), so the caller's value and the DLPack tensor
// are released independently, in either order.
#include <dlpack/dlpack.h>

#include <memory>
#include <vector>

#include "api/c_handles.h"
#include "ir/dtype.h"
#include "ir/status.h"

namespace {

struct LentTensor {
  DLManagedTensor managed{};
  fusionopt_value value;
  std::vector<int64_t> shape;
};

// ONNX element type -> DLPack's (code, bits); false for a type DLPack cannot name.
bool DlpackType(fusionopt::DataType dtype, DLDataType& type) {
  using fusionopt::DataType;
  type.lanes = 1;
  type.bits = static_cast<uint8_t>(fusionopt::BitsOf(dtype));
  switch (dtype) {
    case DataType::kFloat:
    case DataType::kDouble:
    case DataType::kFloat16: type.code = kDLFloat; return true;
    case DataType::kBFloat16: type.code = kDLBfloat; return true;
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64: type.code = kDLInt; return true;
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64: type.code = kDLUInt; return true;
    case DataType::kBool:
      // kDLBool, which DLPack 0.8 added (Debian 12's header is 0.6); consumers since then read it.
      type.code = 6;
      type.bits = 8;
      return true;
    default: return false;
  }
}

void Release(DLManagedTensor* managed) { delete static_cast<LentTensor*>(managed->manager_ctx); }

}  // namespace

namespace fusionopt::api {

Status LendAsDlpack(const fusionopt_value& value, void** dl_managed_tensor) {
  *dl_managed_tensor = nullptr;
  DLDataType type{};
  if (!DlpackType(value.tensor.dtype(), type)) {
    return UsageError("output '" + value.name + "' is " + std::string(NameOf(value.tensor.dtype())) +
                      ", which DLPack cannot describe");
  }
  auto lent = std::make_unique<LentTensor>();
  lent->value = value;
  lent->shape = value.tensor.dims();
  DLTensor& tensor = lent->managed.dl_tensor;
  tensor.data = value.tensor.raw();
  const bool on_device = value.memory == FUSIONOPT_MEMORY_CUDA;
  tensor.device = DLDevice{on_device ? kDLCUDA : kDLCPU, on_device ? value.device : 0};
  tensor.ndim = static_cast<int32_t>(lent->shape.size());
  tensor.dtype = type;
  tensor.shape = lent->shape.data();
  tensor.strides = nullptr;  // dense and row-major
  tensor.byte_offset = 0;
  lent->managed.manager_ctx = lent.get();
  lent->managed.deleter = Release;
  *dl_managed_tensor = &lent.release()->managed;
  return Status::Ok();
}

}  // namespace fusionopt::api
