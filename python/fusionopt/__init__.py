"""fusionopt from Python: optimize ONNX models and run them on fusionopt's runtimes.

    import fusionopt
    optimized, report = fusionopt.optimize("model.onnx", level=3)
    session = fusionopt.InferenceSession(optimized, providers=["CPUExecutionProvider"])
    outputs = session.run(None, {"input": x})

The whole API is in docs/python.md.
"""
from ._library import lib as _lib
from .errors import (FileError, FusionoptError, InvalidArgumentError, InvalidModelError, UnsupportedModelError,
                     VerificationError)
from .optimize import optimize
from .dlpack import Tensor
from .session import InferenceSession, NodeArg, SessionOptions

__version__ = _lib.fusionopt_version().decode()


def set_log_level(level):
    """How much fusionopt logs to stderr: 0 errors, 1 warnings (the default), 2 info, 3 debug."""
    _lib.fusionopt_set_log_level(int(level))


__all__ = ["optimize", "InferenceSession", "SessionOptions", "NodeArg", "Tensor", "FusionoptError", "InvalidModelError",
           "InvalidArgumentError", "FileError", "UnsupportedModelError", "VerificationError", "set_log_level"]
