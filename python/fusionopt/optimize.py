"""fusionopt.optimize: a model in, the optimized model and the report out, as onnxsim's
`simplify` and onnxslim's `slim` are called."""
import ctypes
import json
import os
from pathlib import Path

from . import _library
from ._library import check, lib, take_buffer
from .errors import InvalidArgumentError


def _options(level, runtime, target, dims, verify, disable, only, pass_options, fusion_timing):
    options = {"level": level, "runtime": runtime, "verify": bool(verify), "disable": list(disable),
               "only": list(only), "fusion_timing": bool(fusion_timing)}
    if target is not None:
        options["target"] = target
    if dims:
        options["dims"] = {str(k): int(v) for k, v in dict(dims).items()}
    if pass_options:
        options["pass_options"] = {str(k): str(v) for k, v in dict(pass_options).items()}
    return json.dumps(options).encode()


def optimize(model, level=3, *, runtime="portable", target=None, dims=None, verify=False, disable=(), only=(),
             pass_options=None, fusion_timing=True, output_path=None, external_data=False):
    """Optimizes `model` (an onnx.ModelProto, serialized bytes, or a path) at `level` 0-3.

    Returns (optimized, report): the optimized onnx.ModelProto — or, with `output_path`, None
    after writing it there (large tensors in OUTPUT.data when the model passes 2 GB or
    `external_data` is set) — and the report as a dict: per-pass statistics, every fusion, and
    the checks that ran. `verify` runs the fail-safe check: a fusion that changes an output is
    undone, and a model that still differs raises VerificationError. Options are the CLI's:
    `runtime` "portable" or "ort", `target` ("h100" by default, "cpu" to measure fusions on this
    machine), `dims` {symbol: size}, `disable`/`only` pass names, `pass_options`
    {"pass.option": value}. Errors raise FusionoptError subclasses; the input is never modified.
    """
    if not isinstance(level, int) or isinstance(level, bool):
        raise InvalidArgumentError(f"level must be an int 0-3, not {level!r}")
    options = _options(level, runtime, target, dims, verify, disable, only, pass_options, fusion_timing)
    report_handle = ctypes.POINTER(_library.BufferHandle)()
    if isinstance(model, (str, os.PathLike)) and output_path is not None:
        check(lib.fusionopt_optimize_file(os.fsencode(model), os.fsencode(output_path), options, int(bool(external_data)),
                                          ctypes.byref(report_handle)))
        return None, json.loads(take_buffer(report_handle))
    base_dir = None
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        try:
            data = path.read_bytes()
        except OSError as error:
            from .errors import FileError
            raise FileError(f"{path}: {error.strerror or error}") from None
        base_dir = os.fsencode(path.resolve().parent)
    elif hasattr(model, "SerializeToString"):
        data = model.SerializeToString()
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
    else:
        raise InvalidArgumentError(f"expected an onnx.ModelProto, bytes or a path, not {type(model).__name__}")
    optimized_handle = ctypes.POINTER(_library.BufferHandle)()
    check(lib.fusionopt_optimize(data, len(data), base_dir, options, ctypes.byref(optimized_handle),
                                 ctypes.byref(report_handle)))
    optimized = take_buffer(optimized_handle)
    report = json.loads(take_buffer(report_handle))
    import onnx

    proto = onnx.load_from_string(optimized)
    if output_path is not None:
        onnx.save(proto, os.fspath(output_path), save_as_external_data=bool(external_data))
        return None, report
    return proto, report
