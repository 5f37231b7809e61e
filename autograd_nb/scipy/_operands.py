"""What ``autograd_nb.scipy.signal`` and ``autograd_nb.scipy.linalg`` share: SciPy's own
function where no argument is a Tensor, and the Tensor arguments in one floating dtype."""

import numpy

from ..tensor import Tensor, as_tensor

_FLOATS = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))
_COMPLEX64 = numpy.dtype(numpy.complex64)


def holds_tensor(values):
    return any(isinstance(v, Tensor) for v in values)


def float_operands(function, names, values, cuda=False, complex=False):
    """``values`` as Tensors in one floating dtype, as SciPy's LAPACK-backed functions give:
    float32 where every one is float32, else float64 (integers and bools included). Raises
    TypeError naming ``function`` and the argument for a complex or non-numeric one. A CUDA
    Tensor raises NotImplementedError unless ``cuda`` (the function runs on the device): then
    the other values become constants on the Tensors' device. With ``complex`` complex
    values are taken too, and then all become complex64 (where every one is complex64 or
    float32) or complex128."""
    device = next((v.device for v in values if isinstance(v, Tensor)), "cpu")
    tensors = []
    for name, value in zip(names, values, strict=True):
        if not isinstance(value, Tensor):
            value = numpy.asarray(value)
        elif value.device != "cpu" and not cuda:
            raise NotImplementedError(
                f"{function} is not implemented for CUDA tensors (yet); move {name} to the "
                "CPU with .cpu()")
        if value.dtype.kind not in ("fiubc" if complex else "fiub"):
            raise TypeError(f"{function}: {name} has dtype {value.dtype}; supported are "
                            "float32 and float64 (integers and bools become float64)")
        tensors.append(value if isinstance(value, Tensor) else as_tensor(value, device=device))
    single = all(t.dtype in (_FLOATS[0], _COMPLEX64) for t in tensors)
    dtype = _FLOATS[0] if single else _FLOATS[1]
    if any(t.dtype.kind == "c" for t in tensors):
        dtype = _COMPLEX64 if single else numpy.dtype(numpy.complex128)
    return [t if t.dtype == dtype else t.astype(dtype) for t in tensors]
