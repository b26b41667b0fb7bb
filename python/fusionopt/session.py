"""InferenceSession with ONNX Runtime's call shapes over fusionopt's CPU runtime and CUDA backend.

    sess = fusionopt.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    outputs = sess.run(None, {"x": x})

`providers` picks the runtime: "CPUExecutionProvider" (the default) or "CUDAExecutionProvider"
(the CUDA backend, which needs libfusionopt_cuda.so and a GPU; provider options
{"device_id": N}). Inputs are numpy arrays or any DLPack array (fusionopt.dlpack); `run` returns
numpy arrays, `run_dlpack` tensors that stay on the session's device.
"""
import ctypes
import os

import numpy as np

from . import _dtypes, _library, dlpack
from ._library import check, lib
from .errors import InvalidArgumentError

_TYPE_NAMES = _dtypes.TYPE_NAMES
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
        first = (provider_options or [None])[0]
        if first is None and isinstance((providers or [None])[0], tuple):
            first = providers[0][1]
        first = dict(first or {})
        unknown = sorted(set(first) - {"device_id"})
        if unknown:
            raise InvalidArgumentError(f"provider options {', '.join(map(repr, unknown))} are not supported: "
                                       "fusionopt takes device_id")
        device_id = int(first.get("device_id", 0))
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
        self._device_id = device_id if chosen == "CUDAExecutionProvider" else 0
        self._stream = lib.fusionopt_session_cuda_stream(handle)  # None on the CPU
        self._providers = [chosen]
        self._sess_options = options
        self._inputs = [self._info(lib.fusionopt_session_input, i)
                        for i in range(lib.fusionopt_session_input_count(handle))]
        self._outputs = [self._info(lib.fusionopt_session_output, i)
                         for i in range(lib.fusionopt_session_output_count(handle))]
        self._all_output_names = (ctypes.c_char_p * max(len(self._outputs), 1))(*[o.name.encode() for o in self._outputs])
        self._tensors, self._values, self._names = {}, {}, {}
        self._dims = {}
        self._view = _library.ValueViewStruct()

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
        """Runs once: `input_feed` maps input names to arrays — numpy arrays, or any array that
        speaks DLPack (torch, CuPy, JAX; on a CUDA session also on its GPU) — and returns the
        outputs named by `output_names` (None: all, in the model's order) as numpy arrays."""
        values = self._run(output_names, input_feed, run_options, on_device=False)
        return _each_value(values, lambda value: _take_value(value, self._view))

    def run_dlpack(self, output_names, input_feed, run_options=None):
        """`run`, returning fusionopt.Tensor outputs that stay where the session computed them — on
        a CUDA session, its GPU — for torch.from_dlpack, cupy.from_dlpack or numpy.from_dlpack to
        take without a copy, or to feed another session."""
        on_device = self._providers[0] == "CUDAExecutionProvider"
        values = self._run(output_names, input_feed, run_options, on_device=on_device)
        return _each_value(values, lambda value: dlpack.Tensor(value, self._device_id))

    def _run(self, output_names, input_feed, run_options, on_device):
        if not isinstance(input_feed, dict):
            raise InvalidArgumentError("input_feed must be a dict of input name to array")
        if run_options is not None:
            raise InvalidArgumentError("run_options are not supported: fusionopt's run takes none")
        # The C structs are kept from call to call (a session runs on one thread at a time): what
        # a call into the library costs from Python is mostly building them.
        count = len(input_feed)
        tensors = self._tensors.get(count)
        if tensors is None:
            tensors = self._tensors[count] = (_library.TensorStruct * max(count, 1))()
        keep = []  # what the C structs point into, alive until the call returns
        memory = None
        for index, (name, value) in enumerate(input_feed.items()):
            feed = self._feed(name, value)
            keep.append(feed.keep)
            if feed.on_device:
                memory = memory or (ctypes.c_int32 * count)()
                memory[index] = 1
            shape = feed.shape
            dims = self._dims.get(shape)
            if dims is None:
                dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
                if len(self._dims) < 1024:  # shapes that keep changing are not kept
                    self._dims[shape] = dims
            tensor = tensors[index]
            tensor.name = self._names.get(name) or self._encoded(name)
            tensor.dtype = feed.onnx_type
            tensor.rank = len(shape)
            tensor.dims = dims
            tensor.data = feed.data
        if output_names is None:
            name_array, wanted = self._all_output_names, len(self._outputs)
        else:
            wanted = len(output_names)
            name_array = (ctypes.c_char_p * max(wanted, 1))(*[str(n).encode() for n in output_names])
        values = self._values.get(wanted)
        if values is None:
            values = self._values[wanted] = (ctypes.POINTER(_library.ValueHandle) * max(wanted, 1))()
        if memory is None and not on_device:
            check(lib.fusionopt_session_run(self._handle, tensors, count, name_array, wanted, values))
        else:
            options = lib.fusionopt_run_options_default()
            options.input_memory = memory
            options.output_memory = 1 if on_device else 0
            check(lib.fusionopt_session_run_with_options(self._handle, ctypes.byref(options), tensors, count,
                                                         name_array, wanted, values))
        # Copies of the handles: an element of the cached array is a view of it, which the next
        # run overwrites.
        handle_type = ctypes.POINTER(_library.ValueHandle)
        return [handle_type.from_buffer_copy(values[i]) for i in range(wanted)]

    def _feed(self, name, value):
        """One input as the C API takes it (dlpack.Feed)."""
        if isinstance(value, dlpack.Tensor):
            return dlpack.Feed(value._onnx_type, value.shape, value._data, value._on_device, value)
        if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack_device__"):
            device_type, _ = value.__dlpack_device__()
            if device_type == dlpack.CUDA:
                return dlpack.from_dlpack_device(name, value, self._stream, self._device_id)
            if device_type != dlpack.CPU:
                raise InvalidArgumentError(f"input {name!r} is on DLPack device type {device_type}; fusionopt reads "
                                           "host memory and CUDA devices")
            value = np.from_dlpack(value)
        # np.asarray keeps a numpy scalar's shape () (ascontiguousarray would make it [1]).
        array = np.asarray(value)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array).reshape(array.shape)
        code = _dtypes.CODE_BY_NUMPY.get(array.dtype)
        if code is None:
            raise InvalidArgumentError(f"input {name!r}: numpy dtype {array.dtype} has no ONNX tensor type here")
        data = _dtypes.packed_feed(array, code)
        return dlpack.Feed(code, array.shape, data.__array_interface__["data"][0], False, data)

    def _encoded(self, name):
        encoded = str(name).encode()
        if len(self._names) < 1024:
            self._names[name] = encoded
        return encoded


def _each_value(handles, convert):
    """`convert` of each library value, which takes it over; should one fail, the values not yet
    taken are freed before the exception goes on."""
    results = []
    for index, handle in enumerate(handles):
        try:
            results.append(convert(handle))
        except BaseException:
            for rest in handles[index + 1:]:
                lib.fusionopt_value_free(rest)
            raise
    return results


def _take_value(handle, view):
    """The value as a new numpy array (the caller's to keep, as onnxruntime's outputs are); the
    library's value is freed. `view` is scratch for its description."""
    try:
        lib.fusionopt_value_view_of(handle, view)
        if view.dtype not in _dtypes.NUMPY_BY_CODE:
            raise InvalidArgumentError(f"output {view.name.decode()!r} is {_TYPE_NAMES.get(view.dtype, view.dtype)}, "
                                       "which numpy cannot hold")
        raw = np.empty(view.bytes, dtype=np.uint8)
        if view.bytes:
            ctypes.memmove(raw.__array_interface__["data"][0], view.data, view.bytes)
        return _dtypes.unpacked_output(raw, view.dtype, tuple(view.dims[:view.rank]))
    finally:
        lib.fusionopt_value_free(handle)
