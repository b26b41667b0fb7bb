"""InferenceSession with ONNX Runtime's call shapes over fusionopt's CPU runtime and CUDA backend.

    sess = fusionopt.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"x": x})

`providers` picks the runtime: "CPUExecutionProvider" (the default) or "CUDAExecutionProvider"
(the CUDA backend, which needs libfusionopt_cuda.so and a GPU; provider options
{"device_id": N}). Inputs and outputs are numpy arrays in host memory.
"""
import ctypes
import os

import numpy as np

from . import _library
from ._library import check, lib
from .errors import InvalidArgumentError

# ONNX TensorProto.DataType codes <-> numpy, and the names ONNX Runtime gives the types.
_NUMPY_BY_CODE = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
                  9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
_CODE_BY_NUMPY = {np.dtype(t): code for code, t in _NUMPY_BY_CODE.items()}
_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
               9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16"}
_PROVIDERS = ("CPUExecutionProvider", "CUDAExecutionProvider")


class SessionOptions:
    """ONNX Runtime's SessionOptions, the fields fusionopt reads: intra_op_num_threads (0: every
    core), and fused_kernels (False runs fused nodes' bodies op by op, for comparisons).

    How idle threads wait is process-wide: libgomp reads OMP_WAIT_POLICY when it loads."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.fused_kernels = True
        self.enable_cuda_graph = False


class NodeArg:
    """An input or output as ONNX Runtime describes it: name, shape (ints, symbol strings, None
    for an anonymous unknown dim) and type ("tensor(float)")."""

    def __init__(self, name, shape, type):
        self.name = name
        self.shape = shape
        self.type = type

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def _node_arg(info):
    shape = None
    if info.rank >= 0:
        shape = []
        for axis in range(info.rank):
            dim = info.dims[axis]
            symbol = info.dim_symbols[axis].decode()
            shape.append(dim if dim >= 0 else (symbol or None))
    return NodeArg(info.name.decode(), shape, f"tensor({_TYPE_NAMES.get(info.dtype, 'undefined')})")


def _provider_name(provider):
    name = provider[0] if isinstance(provider, tuple) else provider
    if name not in _PROVIDERS:
        raise InvalidArgumentError(f"unknown provider {name!r}: fusionopt runs {', '.join(_PROVIDERS)}")
    return name


class InferenceSession:
    """A model prepared for running: `path_or_bytes` is a file path or a serialized ModelProto
    (an onnx.ModelProto is accepted too)."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        if kwargs:
            raise InvalidArgumentError(f"unknown arguments: {', '.join(sorted(kwargs))}")
        options = sess_options or SessionOptions()
        names = [_provider_name(p) for p in (providers or ["CPUExecutionProvider"])]
        chosen = names[0]
        device_id = 0
        if provider_options:
            first = provider_options[0] or {}
            device_id = int(first.get("device_id", 0))
        elif isinstance((providers or [None])[0], tuple):
            device_id = int(providers[0][1].get("device_id", 0))
        raw = lib.fusionopt_session_options_default()
        raw.device = 1 if chosen == "CUDAExecutionProvider" else 0
        threads = int(getattr(options, "intra_op_num_threads", 0) or 0)
        if threads < 0:
            raise InvalidArgumentError(f"intra_op_num_threads must be 0 or more, not {threads}")
        raw.threads = threads
        raw.cuda_device = device_id
        raw.cuda_graph = int(bool(getattr(options, "enable_cuda_graph", False)))
        raw.fused_kernels = int(bool(getattr(options, "fused_kernels", True)))
        handle = ctypes.POINTER(_library.SessionHandle)()
        model = path_or_bytes
        if hasattr(model, "SerializeToString"):
            model = model.SerializeToString()
        if isinstance(model, (bytes, bytearray, memoryview)):
            data = bytes(model)
            check(lib.fusionopt_session_create_from_bytes(data, len(data), None, ctypes.byref(raw), ctypes.byref(handle)))
        elif isinstance(model, (str, os.PathLike)):
            check(lib.fusionopt_session_create(os.fsencode(model), ctypes.byref(raw), ctypes.byref(handle)))
        else:
            raise InvalidArgumentError(f"expected a path, bytes or an onnx.ModelProto, not {type(model).__name__}")
        self._handle = handle
        self._providers = [chosen]
        self._sess_options = options
        self._inputs = [self._info(lib.fusionopt_session_input, i)
                        for i in range(lib.fusionopt_session_input_count(handle))]
        self._outputs = [self._info(lib.fusionopt_session_output, i)
                         for i in range(lib.fusionopt_session_output_count(handle))]

    def _info(self, getter, index):
        info = _library.ValueInfoStruct()
        check(getter(self._handle, index, ctypes.byref(info)))
        return _node_arg(info)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle:
            lib.fusionopt_session_destroy(handle)
            self._handle = None

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return list(self._providers)

    def get_session_options(self):
        return self._sess_options

    def describe(self):
        """The runtime this session runs on: "CPU runtime, every core", or the CUDA device."""
        return lib.fusionopt_session_describe(self._handle).decode()

    def run(self, output_names, input_feed, run_options=None):
        """Runs once: `input_feed` maps input names to arrays; returns the outputs named by
        `output_names` (None: all, in the model's order) as numpy arrays."""
        if not isinstance(input_feed, dict):
            raise InvalidArgumentError("input_feed must be a dict of input name to array")
        keep = []
        tensors = (_library.TensorStruct * max(len(input_feed), 1))()
        for index, (name, value) in enumerate(input_feed.items()):
            array = np.ascontiguousarray(value)
            code = _CODE_BY_NUMPY.get(array.dtype)
            if code is None:
                raise InvalidArgumentError(f"input {name!r}: numpy dtype {array.dtype} has no ONNX tensor type here")
            dims = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
            encoded = str(name).encode()
            keep += [array, dims, encoded]
            tensors[index] = _library.TensorStruct(encoded, code, array.ndim, dims, array.ctypes.data)
        names = [o.name for o in self._outputs] if output_names is None else list(output_names)
        name_array = (ctypes.c_char_p * max(len(names), 1))(*[str(n).encode() for n in names])
        values = (ctypes.POINTER(_library.ValueHandle) * max(len(names), 1))()
        check(lib.fusionopt_session_run(self._handle, tensors, len(input_feed), name_array, len(names), values))
        return [_take_value(values[i]) for i in range(len(names))]


def _take_value(handle):
    try:
        code = lib.fusionopt_value_dtype(handle)
        rank = lib.fusionopt_value_rank(handle)
        dims_pointer = lib.fusionopt_value_dims(handle)
        shape = tuple(dims_pointer[i] for i in range(rank))
        dtype = _NUMPY_BY_CODE.get(code)
        if dtype is None:
            name = lib.fusionopt_value_name(handle).decode()
            raise InvalidArgumentError(f"output {name!r} is {_TYPE_NAMES.get(code, code)}, which numpy cannot hold")
        size = lib.fusionopt_value_bytes(handle)
        data = lib.fusionopt_value_data(handle)
        if not data or size == 0:
            return np.zeros(shape, dtype=dtype)
        array = np.empty(shape, dtype=dtype)
        ctypes.memmove(array.ctypes.data, data, size)
        return array
    finally:
        lib.fusionopt_value_free(handle)
