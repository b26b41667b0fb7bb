"""Loading libfusionopt.so and declaring its C API (include/fusionopt/runtime.h) for ctypes.

The library is looked for, in order: $FUSIONOPT_LIBRARY, the copy installed inside this
package (fusionopt/lib/), then a development build beside the sources (build/). Every call
that returns a status goes through `check`, which turns a failure into the exception of its
category with the library's one-line message.
"""
import ctypes
import os
from pathlib import Path

from .errors import error_for

API_VERSION = 1


class BufferHandle(ctypes.Structure):
    pass


class SessionHandle(ctypes.Structure):
    pass


class ValueHandle(ctypes.Structure):
    pass


class SessionOptionsStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", ctypes.c_int32), ("threads", ctypes.c_int32),
                ("cuda_device", ctypes.c_int32), ("cuda_graph", ctypes.c_int32), ("fused_kernels", ctypes.c_int32)]


class ValueInfoStruct(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("dim_symbols", ctypes.POINTER(ctypes.c_char_p))]


class TensorStruct(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p)]


class RunOptionsStruct(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("input_memory", ctypes.POINTER(ctypes.c_int32)),
                ("output_memory", ctypes.c_int32)]


class ValueViewStruct(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


def _candidates():
    explicit = os.environ.get("FUSIONOPT_LIBRARY")
    if explicit:
        yield Path(explicit)
        return
    here = Path(__file__).resolve().parent
    yield here / "lib" / "libfusionopt.so.1"
    yield here.parent.parent / "build" / "libfusionopt.so.1"


def _declare(lib):
    status = ctypes.c_int
    size_t = ctypes.c_size_t
    signatures = {
        "fusionopt_api_version": (ctypes.c_uint32, []),
        "fusionopt_version": (ctypes.c_char_p, []),
        "fusionopt_last_error": (ctypes.c_char_p, []),
        "fusionopt_set_log_level": (None, [ctypes.c_int32]),
        "fusionopt_buffer_data": (ctypes.c_void_p, [ctypes.POINTER(BufferHandle)]),
        "fusionopt_buffer_size": (size_t, [ctypes.POINTER(BufferHandle)]),
        "fusionopt_buffer_free": (None, [ctypes.POINTER(BufferHandle)]),
        "fusionopt_optimize": (status, [ctypes.c_void_p, size_t, ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.POINTER(ctypes.POINTER(BufferHandle)),
                                        ctypes.POINTER(ctypes.POINTER(BufferHandle))]),
        "fusionopt_optimize_file": (status, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32,
                                             ctypes.POINTER(ctypes.POINTER(BufferHandle))]),
        "fusionopt_session_options_default": (SessionOptionsStruct, []),
        "fusionopt_session_create": (status, [ctypes.c_char_p, ctypes.POINTER(SessionOptionsStruct),
                                              ctypes.POINTER(ctypes.POINTER(SessionHandle))]),
        "fusionopt_session_create_from_bytes": (status, [ctypes.c_void_p, size_t, ctypes.c_char_p,
                                                         ctypes.POINTER(SessionOptionsStruct),
                                                         ctypes.POINTER(ctypes.POINTER(SessionHandle))]),
        "fusionopt_session_destroy": (None, [ctypes.POINTER(SessionHandle)]),
        "fusionopt_session_describe": (ctypes.c_char_p, [ctypes.POINTER(SessionHandle)]),
        "fusionopt_session_input_count": (size_t, [ctypes.POINTER(SessionHandle)]),
        "fusionopt_session_output_count": (size_t, [ctypes.POINTER(SessionHandle)]),
        "fusionopt_session_input": (status, [ctypes.POINTER(SessionHandle), size_t, ctypes.POINTER(ValueInfoStruct)]),
        "fusionopt_session_output": (status, [ctypes.POINTER(SessionHandle), size_t, ctypes.POINTER(ValueInfoStruct)]),
        "fusionopt_session_run": (status, [ctypes.POINTER(SessionHandle), ctypes.POINTER(TensorStruct), size_t,
                                           ctypes.POINTER(ctypes.c_char_p), size_t,
                                           ctypes.POINTER(ctypes.POINTER(ValueHandle))]),
        "fusionopt_value_name": (ctypes.c_char_p, [ctypes.POINTER(ValueHandle)]),
        "fusionopt_value_dtype": (ctypes.c_int32, [ctypes.POINTER(ValueHandle)]),
        "fusionopt_value_rank": (ctypes.c_int32, [ctypes.POINTER(ValueHandle)]),
        "fusionopt_value_dims": (ctypes.POINTER(ctypes.c_int64), [ctypes.POINTER(ValueHandle)]),
        "fusionopt_value_data": (ctypes.c_void_p, [ctypes.POINTER(ValueHandle)]),
        "fusionopt_value_bytes": (size_t, [ctypes.POINTER(ValueHandle)]),
        "fusionopt_value_view_of": (None, [ctypes.POINTER(ValueHandle), ctypes.POINTER(ValueViewStruct)]),
        "fusionopt_value_free": (None, [ctypes.POINTER(ValueHandle)]),
        "fusionopt_value_memory": (ctypes.c_int32, [ctypes.POINTER(ValueHandle)]),
        "fusionopt_value_to_dlpack": (status, [ctypes.POINTER(ValueHandle), ctypes.POINTER(ctypes.c_void_p)]),
        "fusionopt_run_options_default": (RunOptionsStruct, []),
        "fusionopt_session_run_with_options": (status, [ctypes.POINTER(SessionHandle), ctypes.POINTER(RunOptionsStruct),
                                                        ctypes.POINTER(TensorStruct), size_t,
                                                        ctypes.POINTER(ctypes.c_char_p), size_t,
                                                        ctypes.POINTER(ctypes.POINTER(ValueHandle))]),
        "fusionopt_session_cuda_stream": (ctypes.c_void_p, [ctypes.POINTER(SessionHandle)]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


def _load():
    tried = []
    for path in _candidates():
        if path.exists():
            lib = _declare(ctypes.CDLL(str(path)))
            version = lib.fusionopt_api_version()
            if version != API_VERSION:
                raise ImportError(f"{path}: C API version {version}, this package needs {API_VERSION}")
            return lib
        tried.append(str(path))
    raise ImportError("libfusionopt.so.1 not found (tried " + ", ".join(tried) +
                      "); install the package with pip, or set FUSIONOPT_LIBRARY")


lib = _load()


def check(status):
    """Raises the error of `status`'s category unless it is 0."""
    if status != 0:
        raise error_for(status, lib.fusionopt_last_error().decode("utf-8", "replace"))


def take_buffer(handle):
    """The bytes of a library buffer, which is freed."""
    try:
        size = lib.fusionopt_buffer_size(handle)
        data = lib.fusionopt_buffer_data(handle)
        return ctypes.string_at(data, size) if size else b""
    finally:
        lib.fusionopt_buffer_free(handle)
