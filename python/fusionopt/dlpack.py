"""Tensors in and out of fusionopt through DLPack (https://dmlc.github.io/dlpack/latest/).

`InferenceSession.run` and `run_dlpack` take any array that speaks DLPack (`__dlpack__` and
`__dlpack_device__`: torch tensors, CuPy and JAX arrays, numpy arrays) beside numpy arrays: host
arrays are read in place, and on a CUDA session arrays on its GPU are read on the device, with
no trip through the host. `run_dlpack` returns `Tensor`s that stay where the session left them
(host memory, or the CUDA session's GPU) and lend their memory to any DLPack consumer without
a copy: `torch.from_dlpack(t)`, `cupy.from_dlpack(t)`, `numpy.from_dlpack(t)`.
"""
import ctypes

import numpy as np

from ._library import ValueViewStruct, check, lib
from .errors import InvalidArgumentError

# DLPack's device types and type codes (dlpack.h).
CPU, CUDA = 1, 2
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6
# (type code, bits) -> ONNX TensorProto.DataType
_ONNX_BY_DLPACK = {(_FLOAT, 32): 1, (_UINT, 8): 2, (_INT, 8): 3, (_UINT, 16): 4, (_INT, 16): 5, (_INT, 32): 6,
                   (_INT, 64): 7, (_BOOL, 8): 9, (_FLOAT, 16): 10, (_FLOAT, 64): 11, (_UINT, 32): 12,
                   (_UINT, 64): 13, (_BFLOAT, 16): 16}
_NUMPY_BY_ONNX = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
                  9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _ManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ManagedTensor))
_ManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]

_NAME = b"dltensor"  # the capsule's name: lives as long as the module, as the capsule API needs


def _capsule_function(name, restype, first):
    return ctypes.PYFUNCTYPE(restype, first, ctypes.c_char_p)((name, ctypes.pythonapi))


# The capsule functions twice over: on a capsule object, and on its address (in a destructor).
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
_is_capsule = _capsule_function("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object)
_pointer_in = _capsule_function("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object)
_is_capsule_at = _capsule_function("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p)
_pointer_in_capsule_at = _capsule_function("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _release_unconsumed(capsule):
    """A capsule nobody consumed (its name is still "dltensor") releases its tensor; a consumer
    renames it and calls the deleter itself when it is done."""
    if _is_capsule_at(capsule, _NAME):
        managed = ctypes.cast(_pointer_in_capsule_at(capsule, _NAME), ctypes.POINTER(_ManagedTensor))
        managed.contents.deleter(managed)


class Tensor:
    """An output of `InferenceSession.run_dlpack`: where the session left it (host memory, or the
    CUDA session's GPU), lent to DLPack consumers without a copy. `shape`, `dtype` (numpy's) and
    `device` ("cpu" or "cuda:N") describe it; `numpy()` gives a host tensor as a numpy array.
    A Tensor may also be fed to a session's run."""

    def __init__(self, handle, device_id=0):
        self._handle = handle
        view = ValueViewStruct()
        lib.fusionopt_value_view_of(handle, view)
        self.name = view.name.decode()
        self.shape = tuple(view.dims[:view.rank])
        self._onnx_type = view.dtype
        self._data = view.data or 0
        self._on_device = lib.fusionopt_value_memory(handle) == 1
        self._device_id = device_id if self._on_device else 0

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            lib.fusionopt_value_free(handle)
            self._handle = None

    @property
    def dtype(self):
        return np.dtype(_NUMPY_BY_ONNX[self._onnx_type]) if self._onnx_type in _NUMPY_BY_ONNX else None

    @property
    def device(self):
        return f"cuda:{self._device_id}" if self._on_device else "cpu"

    def __repr__(self):
        return f"fusionopt.Tensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype}, device={self.device!r})"

    def __dlpack_device__(self):
        return (CUDA, self._device_id) if self._on_device else (CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A "dltensor" capsule over this tensor's memory. The session has finished writing it
        when run_dlpack returns, so `stream` needs no wait. copy=True and a dl_device other than
        this tensor's are refused (BufferError), as the protocol asks."""
        if copy:
            raise BufferError("fusionopt.Tensor lends its memory; it does not copy through DLPack")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"the tensor is on {self.device}; it cannot be exported to device {tuple(dl_device)}")
        managed = ctypes.c_void_p()
        check(lib.fusionopt_value_to_dlpack(self._handle, ctypes.byref(managed)))
        return _capsule_new(managed, _NAME, ctypes.cast(_release_unconsumed, ctypes.c_void_p))

    def numpy(self):
        """The tensor as a numpy array sharing its memory (host tensors only: a CUDA tensor goes to
        torch or CuPy through DLPack, or comes back to the host from `run`)."""
        if self._on_device:
            raise InvalidArgumentError(f"output {self.name!r} is on {self.device}: use torch.from_dlpack or "
                                       "cupy.from_dlpack, or InferenceSession.run for host arrays")
        if self.dtype is None:
            raise InvalidArgumentError(f"output {self.name!r} has an ONNX type numpy cannot hold")
        return np.from_dlpack(self)


class Feed:
    """One input as the C API takes it: the ONNX type, the dims, the data pointer, whether it is
    device memory, and what must stay alive until the run returns."""

    __slots__ = ("onnx_type", "shape", "data", "on_device", "keep")

    def __init__(self, onnx_type, shape, data, on_device, keep):
        self.onnx_type, self.shape, self.data, self.on_device, self.keep = onnx_type, shape, data, on_device, keep


def from_dlpack_device(name, value, stream, device_id):
    """The Feed of a CUDA array through its DLPack capsule: dense and row-major, on `device_id`.
    `stream` is the session's CUDA stream, which the producer orders its pending writes before."""
    capsule = value.__dlpack__(stream=stream)
    if not _is_capsule(capsule, _NAME):
        raise InvalidArgumentError(f"input {name!r}: __dlpack__ did not return a \"dltensor\" capsule")
    managed = ctypes.cast(_pointer_in(capsule, _NAME), ctypes.POINTER(_ManagedTensor)).contents
    tensor = managed.dl_tensor
    if tensor.device.device_id != device_id:
        raise InvalidArgumentError(f"input {name!r} is on cuda:{tensor.device.device_id}; the session runs on "
                                   f"cuda:{device_id}")
    if tensor.dtype.lanes != 1 or (tensor.dtype.code, tensor.dtype.bits) not in _ONNX_BY_DLPACK:
        raise InvalidArgumentError(f"input {name!r}: DLPack type code {tensor.dtype.code}, {tensor.dtype.bits} bits, "
                                   f"{tensor.dtype.lanes} lanes has no ONNX tensor type here")
    shape = tuple(tensor.shape[axis] for axis in range(tensor.ndim))
    if tensor.strides:
        expected = 1
        for axis in reversed(range(tensor.ndim)):
            if shape[axis] != 1 and tensor.strides[axis] != expected:
                raise InvalidArgumentError(f"input {name!r} is not dense and row-major (strides "
                                           f"{[tensor.strides[a] for a in range(tensor.ndim)]}); make it contiguous")
            expected *= shape[axis]
    data = (tensor.data or 0) + tensor.byte_offset
    return Feed(_ONNX_BY_DLPACK[(tensor.dtype.code, tensor.dtype.bits)], shape, data, True, capsule)
