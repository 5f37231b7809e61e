"""The CUDA device: availability, allocation, transfers and the CUDA Array Interface.

``numba.cuda`` is imported lazily, the first time something here needs it: ``import
autograd_nb`` never imports it, and a machine without numba-cuda only meets it when it asks for
``device="cuda"`` (and then gets a clear error naming why).

Device arrays are numba-cuda ``DeviceNDArray`` objects (``FakeCUDAArray`` under numba's CUDA
simulator, ``NUMBA_ENABLE_CUDASIM=1``), always C-contiguous: every kernel of the backend reads
them as flat buffers.
"""

import functools
import importlib.util
import warnings

import numpy as np

from . import _counters, memory

_cuda = None  # the numba.cuda module, once imported
_device_types = ()  # the device array classes, once numba.cuda is imported

#: Python scalars (and 0-d NumPy arrays) mixed with device arrays go to the device once per
#: value and dtype, not once per op: a small cache of 0-d device constants.
_CONSTANTS_MAX = 256
_constants = {}


def simulator_enabled():
    """Whether numba's CUDA simulator is on (``NUMBA_ENABLE_CUDASIM=1`` when numba loaded)."""
    from numba.core import config

    return bool(config.ENABLE_CUDASIM)


@functools.cache
def _probe():
    if importlib.util.find_spec("numba.cuda") is None:
        return (
            "numba-cuda is not installed (install the cuda extra: "
            "pip install 'autograd_nb[cuda]')"
        )
    try:
        cuda = cuda_module()
        if cuda.is_available():
            return None
    except Exception as error:  # a broken driver or toolkit: report it, don't crash
        return f"numba.cuda failed to initialise ({type(error).__name__}: {error})"
    return (
        "numba.cuda found no usable NVIDIA GPU and driver (numba.cuda.is_available() is "
        "False); to run the CUDA code on the CPU, set NUMBA_ENABLE_CUDASIM=1 (numba's CUDA "
        "simulator) before importing autograd_nb"
    )


def unavailable_reason():
    """Why ``device="cuda"`` cannot be used here, or None when it can.

    Examples
    --------
    >>> from autograd_nb.cuda import _device
    >>> _device.unavailable_reason() is None or isinstance(_device.unavailable_reason(), str)
    True
    """
    return _probe()


def is_available():
    """True when tensors can be put on ``device="cuda"`` (a GPU, or the simulator)."""
    return unavailable_reason() is None


def require():
    """Raise a RuntimeError naming why CUDA is unavailable; otherwise return numba.cuda."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"device='cuda' is not available: {reason}")
    return cuda_module()


def cuda_module():
    """``numba.cuda``, imported on first use."""
    global _cuda, _device_types
    if _cuda is None:
        from numba import cuda

        if simulator_enabled():
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            _device_types = (FakeCUDAArray,)
        else:
            from numba.cuda.cudadrv.devicearray import DeviceNDArray

            _install_pool()
            _device_types = (DeviceNDArray,)
        _cuda = cuda
    return _cuda


def _install_pool():
    """Make the caching pool numba's memory manager (before numba makes a context: it reads
    the manager then); a numba-cuda whose plugin interface differs keeps its own, with a
    warning, rather than losing the device."""
    try:
        from . import _emm

        _emm.install()
    except Exception as error:  # (an EMM interface this module does not know)
        warnings.warn(
            f"autograd_nb's caching pool could not be installed as numba-cuda's memory "
            f"manager ({type(error).__name__}: {error}); numba's own serves the device",
            RuntimeWarning, stacklevel=3,
        )


def is_device_array(value):
    """Whether ``value`` is a device array of this backend (never imports numba.cuda)."""
    return type(value) is not np.ndarray and isinstance(value, _device_types)


def any_device_array(values):
    """Whether any of ``values`` is a device array."""
    for value in values:
        if type(value) is not np.ndarray and isinstance(value, _device_types):
            return True
    return False


# -- allocation and transfers ------------------------------------------------------------------


def empty(shape, dtype):
    """An uninitialised C-contiguous device array, from the caching pool (:mod:`.memory`).

    Every device buffer of autograd_nb is made here. On a GPU ``numba.cuda.device_array``
    asks numba's memory manager, which is the pool unless the user installed another (then
    each request counts as an allocation: that manager's cache is not visible here). Under
    the simulator, which consults no memory manager, the pool's host blocks back the array.
    """
    cuda = cuda_module()
    shape, dtype = tuple(shape), np.dtype(dtype)
    if not simulator_enabled():
        out = cuda.device_array(shape, dtype=dtype)
        if not _pool_serves_numba():
            _counters.add("allocations")
            _counters.add("bytes_allocated", out.nbytes)
        return out
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    if _count(shape) == 0:
        return cuda.device_array(shape, dtype=dtype)
    return FakeCUDAArray(memory.simulated_array(memory.pool(memory.HostDriver), shape, dtype))


@functools.cache
def _pool_serves_numba():
    try:
        from . import _emm
    except Exception:  # (see _install_pool)
        return False
    return _emm.installed()


def _count(shape):
    size = 1
    for n in shape:
        size *= int(n)
    return size


def full(shape, value, dtype):
    """A device array of ``shape`` filled with ``value`` (on the device: no host buffer)."""
    from . import _kernels

    out = empty(shape, dtype)
    _kernels.fill_array(out, value)
    return out


def zeros(shape, dtype):
    """A device array of zeros."""
    return full(shape, 0, dtype)


def to_device(array):
    """Copy a host array (or scalar) to a new C-contiguous device array (from the pool)."""
    host = np.asarray(array, order="C")
    out = empty(host.shape, host.dtype)
    if host.size:
        out.copy_to_device(host)
        _counters.add("synchronizations")  # (a copy from pageable host memory waits)
    return out


def to_host(device_array):
    """Copy a device array to a new NumPy array (the host waits for the device)."""
    _counters.add("synchronizations")
    return device_array.copy_to_host()


def synchronize():
    """Wait for every kernel launched so far to finish (``numba.cuda.synchronize``)."""
    _counters.add("synchronizations")
    cuda_module().synchronize()


def constant(value, dtype):
    """A 0-d device array holding ``value`` (cached: never write into it)."""
    dtype = np.dtype(dtype)
    host = np.asarray(value, dtype=dtype)
    key = (dtype.str, host.tobytes())
    found = _constants.get(key)
    if found is None:
        if len(_constants) >= _CONSTANTS_MAX:
            _constants.clear()
        found = _constants[key] = to_device(host)
    return found


def copy(device_array, dtype=None):
    """A new C-contiguous device array with the values of ``device_array`` cast to ``dtype``."""
    from . import _kernels

    out = empty(device_array.shape, device_array.dtype if dtype is None else dtype)
    _kernels.copy_flat(device_array, out)
    return out


def assign(target, source):
    """``target[...] = source`` on the device (same shape; cast to ``target``'s dtype)."""
    from . import _kernels

    _kernels.copy_flat(source, target)


def add_into(target, source):
    """``target += source`` on the device (same number of elements)."""
    from . import _kernels

    _kernels.add_flat(source, target)


# -- the CUDA Array Interface ------------------------------------------------------------------


def has_interface(obj):
    """Whether ``obj`` exposes ``__cuda_array_interface__`` (or is our device array)."""
    return is_device_array(obj) or hasattr(obj, "__cuda_array_interface__")


def interface(device_array):
    """The ``__cuda_array_interface__`` (version 3) of a device array.

    Under the simulator the "device" memory is host memory, so the interface describes that
    buffer; :func:`from_interface` reads it back without a copy.
    """
    if not simulator_enabled():
        return device_array.__cuda_array_interface__
    host = np.asarray(device_array)
    described = host.__array_interface__
    return {
        "shape": tuple(host.shape),
        "typestr": host.dtype.str,
        "data": described["data"],
        "strides": None if host.flags.c_contiguous else tuple(host.strides),
        "descr": described["descr"],
        "stream": None,
        "version": 3,
    }


class _HostView:
    """Reads a CUDA Array Interface dict as NumPy's array interface (simulator only)."""

    def __init__(self, described):
        self.__array_interface__ = {
            "shape": tuple(described["shape"]),
            "typestr": described["typestr"],
            "data": tuple(described["data"]),
            "strides": described.get("strides"),
            "version": 3,
        }


class _Exported:
    """An object exposing a given ``__cuda_array_interface__`` dict."""

    def __init__(self, described):
        self.__cuda_array_interface__ = described


def from_interface(obj):
    """A device array sharing the memory of ``obj`` (any ``__cuda_array_interface__``
    exporter: numba device arrays, CuPy arrays, PyTorch CUDA tensors); no copy, except for a
    non-contiguous array (a transposed view), copied into a C-contiguous one."""
    cuda = cuda_module()
    if is_device_array(obj):
        array = obj
    elif simulator_enabled():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        host = np.asarray(_HostView(obj.__cuda_array_interface__))
        return FakeCUDAArray(host if host.flags.c_contiguous else np.array(host, order="C"))
    else:
        array = cuda.as_cuda_array(obj)
    return array if array.is_c_contiguous() else _contiguous_copy(array)


def _contiguous_copy(array):
    # Read the strided array through a flat view of the memory it spans.
    from ..ops import _broadcast
    from . import _kernels

    itemsize = array.dtype.itemsize
    strides = [s // itemsize for s in array.strides]
    if any(s < 0 for s in strides):
        raise ValueError("arrays with negative strides are not supported; copy them first")
    span = 1 + sum((n - 1) * s for n, s in zip(array.shape, strides)) if array.size else 0
    described = dict(array.__cuda_array_interface__, shape=(span,), strides=None)
    flat = cuda_module().as_cuda_array(_Exported(described))
    out = empty(array.shape, array.dtype)
    _kernels.copy_strided(flat, 0, strides, out, 0, _broadcast.contiguous_strides(array.shape),
                          array.shape)
    return out


def row(device_array, b):
    """Row ``b`` of a device array's leading dimension, as a view (``a[b]`` of a 1-d device
    array would be a host scalar)."""
    return device_array[b : b + 1].reshape(tuple(device_array.shape[1:]))


def is_c_contiguous(device_array):
    """Whether a device array is C-contiguous (the layout every kernel here reads)."""
    return bool(device_array.is_c_contiguous())
