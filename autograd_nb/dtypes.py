"""The element types a Tensor may hold, and how other data is brought to one of them.

A tensor is float32, float64, complex64, complex128, int64, int32 or bool, in the machine's
byte order: the kernels are compiled for those alone (complex ones run NumPy code: see
``docs/complex.rst``). Other data is converted where NumPy converts it without loss
(big-endian to native, float16 to float32, smaller integers to int64, uint64 whose values fit
to int64) and refused otherwise, here, when the tensor is made: never a numba error later.

>>> import numpy as np
>>> from autograd_nb import dtypes
>>> dtypes.for_request(">f8")
dtype('float64')
>>> dtypes.for_request(np.complex128)
dtype('complex128')
>>> dtypes.for_request(np.float16)
dtype('float32')
>>> dtypes.for_request(object)
Traceback (most recent call last):
...
TypeError: autograd_nb does not support the dtype object; supported: float32, float64, \
complex64, complex128, int64, int32, bool (float16 data becomes float32, other integers int64)
"""

import numbers

import numpy as np

FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INT64 = np.dtype(np.int64)
INT32 = np.dtype(np.int32)
BOOL = np.dtype(bool)
COMPLEX64 = np.dtype(np.complex64)
COMPLEX128 = np.dtype(np.complex128)

SUPPORTED = (FLOAT32, FLOAT64, COMPLEX64, COMPLEX128, INT64, INT32, BOOL)
FLOATS = (FLOAT32, FLOAT64)
COMPLEXES = (COMPLEX64, COMPLEX128)
#: The dtypes whose tensors may require grad (torch's floating point and complex ones).
DIFFERENTIABLE = FLOATS + COMPLEXES

_INT64_MAX = np.iinfo(np.int64).max


def unsupported(dtype):
    """The TypeError for a dtype no tensor can hold, naming it and the supported ones."""
    names = ", ".join(d.name for d in SUPPORTED)
    return TypeError(
        f"autograd_nb does not support the dtype {np.dtype(dtype).name}; supported: {names} "
        "(float16 data becomes float32, other integers int64)"
    )


def _native(dtype):
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def for_request(dtype):
    """The tensor dtype that an explicit ``dtype=`` asks for: one of ``SUPPORTED``, or a
    TypeError naming ``dtype``."""
    try:
        dtype = np.dtype(dtype)
    except TypeError as error:
        raise TypeError(f"{dtype!r} is not a dtype: {error}") from None
    dtype = _native(dtype)
    if dtype in SUPPORTED:
        return dtype
    kind = dtype.kind
    if kind == "f" and dtype.itemsize < 4:
        return FLOAT32
    if kind in "iu" and (np.can_cast(dtype, INT64) or dtype == np.uint64):
        return INT64  # uint64: its values are checked against int64's range (``convert``)
    raise unsupported(dtype)


def for_data(dtype):
    """The tensor dtype that data of ``dtype`` becomes when no dtype is requested: float32,
    float64, complex64 and complex128 keep theirs, float16 gives float32, integers int64,
    bool bool."""
    dtype = _native(np.dtype(dtype))
    kind = dtype.kind
    if kind == "f" and dtype.itemsize <= 8:
        return FLOAT32 if dtype.itemsize <= 4 else FLOAT64
    if kind == "c" and dtype.itemsize <= 16:
        return COMPLEX64 if dtype.itemsize <= 8 else COMPLEX128
    if kind in "iu":
        return INT64
    if kind == "b":
        return BOOL
    raise unsupported(dtype)


def convert(array, dtype=None):
    """``array`` (a NumPy array) as a C-contiguous array of its tensor dtype (``dtype`` if
    given, as :func:`for_request`): itself when it already is one, else a converted copy.
    uint64 values above int64's range raise OverflowError rather than wrap."""
    wanted = for_data(array.dtype) if dtype is None else for_request(dtype)
    source = array.dtype
    if source.kind == "u" and source.itemsize == 8 and wanted.kind == "i":
        if array.size and array.max() > _INT64_MAX:
            raise OverflowError(
                f"uint64 value {int(array.max())} does not fit in int64, the integer dtype "
                "of tensors"
            )
    elif source.kind == "c" and wanted.kind != "c":
        # NumPy would cast complex to real, dropping the imaginary part: refuse, saying so
        raise TypeError(
            f"autograd_nb does not convert {source.name} data to {wanted.name}: it would drop "
            "the imaginary part (take .real of the data first, or ask for a complex dtype)"
        )
    elif source.kind in "OSUVMm":
        # NumPy would parse objects and strings: refuse data that does not convert without
        # loss.
        raise unsupported(source)
    return np.asarray(array, dtype=wanted, order="C")


def check_scalar(value):
    """A Python scalar operand of an op: numbers that are neither real nor complex, and NumPy
    scalars of a dtype no tensor holds, raise the dtype TypeError."""
    if isinstance(value, np.generic):
        if value.dtype.kind not in "fiubc" or value.dtype.itemsize > 16:
            raise unsupported(value.dtype)
    elif isinstance(value, numbers.Number) and not isinstance(value, numbers.Complex):
        raise unsupported(np.dtype(object))
