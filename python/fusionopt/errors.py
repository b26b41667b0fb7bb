"""The exceptions fusionopt raises: one per exit-code category of the CLI, all FusionoptError.

Each carries the library's one-line message and `code`, the exit code the CLI would have used
for the same problem (README, "Exit codes").
"""


class FusionoptError(Exception):
    """A fusionopt failure; `code` is the CLI's exit code for its category."""

    code = 70

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidModelError(FusionoptError, ValueError):
    """The model is malformed, or feeds contradict what it declares (exit code 1)."""
    code = 1


class InvalidArgumentError(FusionoptError, ValueError):
    """A bad argument or option (exit code 2)."""
    code = 2


class FileError(FusionoptError, OSError):
    """A file cannot be read or written (exit code 3)."""
    code = 3


class UnsupportedModelError(FusionoptError):
    """A valid model using something fusionopt cannot run or optimize (exit code 4)."""
    code = 4


class VerificationError(FusionoptError):
    """Verification found the optimized model's outputs differ from the original's (exit code 5)."""
    code = 5


_BY_CODE = {1: InvalidModelError, 2: InvalidArgumentError, 3: FileError, 4: UnsupportedModelError,
            5: VerificationError}


def error_for(code, message):
    cls = _BY_CODE.get(code, FusionoptError)
    return cls(message) if cls is not FusionoptError else FusionoptError(message, code)
