"""numpy element types <-> ONNX TensorProto.DataType codes, for feeds and outputs.

The types numpy has natively map directly. The 8- and 4-bit float types and the 4- and 2-bit
integers are ml_dtypes' (what onnx itself uses for them) when ml_dtypes is installed: ONNX stores
4- and 2-bit values two and four to a byte, low bits first, where ml_dtypes keeps one a byte,
so feeds of those types are packed and outputs unpacked here."""
import numpy as np

_NATIVE = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
           9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
# ONNX code -> (ml_dtypes name, bits per element)
_ML_DTYPES = {16: ("bfloat16", 16), 17: ("float8_e4m3fn", 8), 18: ("float8_e4m3fnuz", 8), 19: ("float8_e5m2", 8),
              20: ("float8_e5m2fnuz", 8), 21: ("uint4", 4), 22: ("int4", 4), 23: ("float4_e2m1fn", 4),
              25: ("uint2", 2), 26: ("int2", 2)}
TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
              9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16",
              17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4",
              22: "int4", 23: "float4e2m1", 25: "uint2", 26: "int2"}


def _ml_dtypes():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes


def _numpy_by_code():
    table = {code: np.dtype(t) for code, t in _NATIVE.items()}
    ml_dtypes = _ml_dtypes()
    if ml_dtypes is not None:
        for code, (name, _) in _ML_DTYPES.items():
            if hasattr(ml_dtypes, name):
                table[code] = np.dtype(getattr(ml_dtypes, name))
    return table


NUMPY_BY_CODE = _numpy_by_code()
CODE_BY_NUMPY = {dtype: code for code, dtype in NUMPY_BY_CODE.items()}


def bits_of(code):
    return _ML_DTYPES[code][1] if code in _ML_DTYPES else None


def packed_feed(array, code):
    """The bytes the runtime reads for `array` of ONNX type `code`: the array itself, or its 4-
    or 2-bit values packed."""
    bits = bits_of(code)
    if bits is None or bits >= 8:
        return array
    per_byte = 8 // bits
    codes = (array.reshape(-1).view(np.uint8) & ((1 << bits) - 1)).astype(np.uint8)
    padded = np.zeros(-(-codes.size // per_byte) * per_byte, np.uint8)
    padded[:codes.size] = codes
    grouped = padded.reshape(-1, per_byte).astype(np.uint16)
    packed = np.zeros(grouped.shape[0], np.uint16)
    for slot in range(per_byte):
        packed |= grouped[:, slot] << (slot * bits)
    return packed.astype(np.uint8)


def unpacked_output(raw, code, shape):
    """An output of ONNX type `code` from the runtime's bytes `raw` (uint8) as a numpy array."""
    dtype = NUMPY_BY_CODE[code]
    bits = bits_of(code)
    count = int(np.prod(shape, dtype=np.int64))
    if bits is None or bits >= 8:
        return raw.view(dtype).reshape(shape)
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    slots = np.stack([(raw >> (slot * bits)) & mask for slot in range(per_byte)], axis=-1).reshape(-1)[:count]
    if code in (22, 26):  # signed: two's complement of `bits` bits
        values = slots.astype(np.int16)
        values[values >= 1 << (bits - 1)] -= 1 << bits
        return values.astype(dtype).reshape(shape)
    if code == 23:  # float4e2m1: the codes are ml_dtypes' own, one a byte
        return slots.astype(np.uint8).view(dtype).reshape(shape)
    return slots.astype(dtype).reshape(shape)
