"""Running registered ops on device arrays: the CUDA twin of ``op.prepare``/``forward``/``vjp``.

An op names its CUDA twin beside its CPU class, with
:func:`autograd_nb.ops.registry.cuda_twin`; the twin is a class in this package's module for
the family (``elementwise``, ``shape``, ``indexing``, ``reduction``, ``linalg``, ``transfer``),
next to its ``@cuda.jit`` kernels::

    # autograd_nb/ops/reduction.py
    @cuda_twin("reduction", "Sum")
    class Sum(AxisOp): ...

    # autograd_nb/cuda/reduction.py
    class Sum:
        @staticmethod
        def forward(op, arrays, attrs): ...            # -> a new device array
        @staticmethod
        def vjp(op, k, grad_output, saved, attrs, grad_input): ...   # accumulates (+=)
        @staticmethod
        def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs): ...  # optional
        @staticmethod
        def prepare(op, values, attrs): ...             # optional

:func:`lookup` imports the module on the op's first run on the device and makes one instance
of the class (no arguments; its methods may be static, class or plain methods). Every
:class:`~autograd_nb.ops.elementwise.ElementwiseOp` inherits the one generated elementwise twin.

The calling convention is the CPU ops' (see :mod:`autograd_nb.ops.registry`) with device
arrays in place of NumPy arrays: ``op`` is the registered op (its attributes, its formulas), and
``attrs`` are the canonical attributes that the CPU ``op.prepare`` computed.

Preparing the arguments reuses the CPU ``op.prepare``: it is called with *stand-ins* for the
device arrays, host arrays of the same shape and dtype backed by untouched read-only zero pages
(so they cost no memory and no copy), which gives the canonical attrs and the computation dtype
without touching device data; the device arrays are then cast or reshaped on the device to
match. Python scalars (and 0-d NumPy arrays) become cached 0-d device constants.
"""

import functools
import importlib
import mmap

import numpy as np

from . import _device

MIXED_DEVICES = (
    "Expected all tensors to be on the same device, but found at least two devices, cuda and "
    "cpu! (move one with .to('cuda') or .cpu(); Python scalars, NumPy arrays and 0-d CPU "
    "tensors may be mixed with cuda tensors: they are copied over as constants)"
)


class BatchFirst:
    """Base of implementations written as a batched VJP: the plain VJP is a batch of one."""

    @classmethod
    def vjp(cls, op, k, grad_output, saved, attrs, grad_input):
        one = (1,)
        cls.vjp_batched(op, k, grad_output.reshape(one + grad_output.shape), saved, attrs,
                        grad_input.reshape(one + grad_input.shape))


@functools.cache
def resolve(twin):
    """The implementation that ``twin`` (a :class:`~autograd_nb.ops.registry.CudaTwin`)
    names: its class, imported and instantiated once."""
    module = importlib.import_module(f"{__package__}.{twin.module}")
    implementation = getattr(module, twin.name)
    return implementation() if isinstance(implementation, type) else implementation


def complex_error(op, dtype):
    """The TypeError of an op whose CUDA implementation has no complex case, given complex
    operands or gradients on the device (its CPU implementation may have one)."""
    return TypeError(
        f"{op.name} is not implemented for complex CUDA tensors ({np.dtype(dtype).name}): "
        "run it on the CPU (.cpu()); docs/complex.rst lists the complex ops on CUDA"
    )


def _check_complex(op, implementation, arrays):
    """Refuse complex ``arrays`` where ``implementation`` does not declare ``takes_complex``
    (its kernels were written for real dtypes: never a wrong result)."""
    if getattr(implementation, "takes_complex", False):
        return
    for array in arrays:
        dtype = getattr(array, "dtype", None)
        if dtype is not None and dtype.kind == "c":
            raise complex_error(op, dtype)


def lookup(op):
    """The implementation of ``op``; NotImplementedError naming the op if there is none."""
    twin = getattr(op, "cuda_twin", None)
    if twin is None:
        raise NotImplementedError(
            f"the op {op.name!r} has no CUDA implementation; run it on the CPU (.cpu())"
        )
    return resolve(twin)


# -- the calling convention --------------------------------------------------------------------


def prepare(op, values, attrs):
    """``op.prepare`` for device arrays: ``(device_arrays, attrs)``."""
    custom = getattr(lookup(op), "prepare", None)
    if custom is not None:
        return custom(op, values, attrs)
    return prepare_with_standins(op, values, attrs)


def forward(op, device_arrays, attrs):
    """Run ``op``'s CUDA forward; a new device array."""
    implementation = lookup(op)
    _check_complex(op, implementation, device_arrays)
    return implementation.forward(op, device_arrays, attrs)


def vjp(op, k, grad_output, saved, attrs, grad_input):
    """Accumulate input ``k``'s vector-Jacobian product into the device array ``grad_input``."""
    implementation = lookup(op)
    _check_complex(op, implementation, (grad_output, grad_input))
    implementation.vjp(op, k, grad_output, saved, attrs, grad_input)


def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs):
    """:func:`vjp` for a leading batch dimension on ``grad_outputs`` and ``grad_inputs``.

    Falls back to one :func:`vjp` per row when the implementation has no batched form.
    """
    implementation = lookup(op)
    _check_complex(op, implementation, (grad_outputs, grad_inputs))
    batched = getattr(implementation, "vjp_batched", None)
    if batched is not None:
        batched(op, k, grad_outputs, saved, attrs, grad_inputs)
        return
    for b in range(grad_outputs.shape[0]):
        implementation.vjp(op, k, _device.row(grad_outputs, b), saved, attrs,
                           _device.row(grad_inputs, b))


def run(op, values, attrs):
    """The eager forward on the device: ``(arrays, attrs, output)``, as ``tensor.apply``
    needs them (``arrays`` are what the tape saves).

    ``values`` are device arrays and host constants: Python scalars and NumPy arrays that
    were not tensor data (the caller rejects CPU tensors), copied to the device.
    """
    arrays, attrs = prepare(op, values, attrs)
    return arrays, attrs, forward(op, arrays, attrs)


# -- stand-ins -----------------------------------------------------------------------------------


class _ZeroPages:
    """A growing read-only anonymous mapping: zero bytes that cost nothing until read."""

    def __init__(self):
        self.buffer = None
        self.size = 0

    def take(self, nbytes):
        if nbytes > self.size:
            size = max(1 << 20, 1 << (nbytes - 1).bit_length())
            self.buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
            self.size = size
        return self.buffer


_zero_pages = _ZeroPages() if hasattr(mmap, "PROT_READ") else None


def standin(shape, dtype):
    """A read-only, C-contiguous host array of zeros with this shape and dtype that takes no
    memory (and no time to make) until something reads it."""
    dtype = np.dtype(dtype)
    size = 1
    for n in shape:
        size *= int(n)
    nbytes = size * dtype.itemsize
    if _zero_pages is None or nbytes == 0:
        return np.zeros(shape, dtype)
    buffer = _zero_pages.take(nbytes)
    return np.frombuffer(buffer, dtype=dtype, count=size).reshape(shape)


def prepare_with_standins(op, values, attrs):
    """Run the CPU ``op.prepare`` on stand-ins, then bring the device arrays to what it chose.

    Position ``k`` of the prepared arrays must come from value ``k`` (true of every family's
    prepare); a device array is cast on the device if the op computes in another dtype, and
    reshaped if the op reads it in another shape.
    """
    hosts = [
        standin(v.shape, v.dtype) if _device.is_device_array(v) else v for v in values
    ]
    arrays, attrs = op.prepare(hosts, attrs)
    if len(arrays) != len(values):
        raise NotImplementedError(
            f"the CUDA implementation of {op.name!r} needs its own prepare: the CPU prepare "
            f"returned {len(arrays)} arrays for {len(values)} values"
        )
    device_arrays = []
    for value, array in zip(values, arrays):
        if array is None:
            device_arrays.append(None)
        elif _device.is_device_array(value):
            if array.dtype != value.dtype:
                value = _device.copy(value, array.dtype)
            if array.shape != value.shape:
                value = value.reshape(array.shape)
            device_arrays.append(value)
        elif np.ndim(array) == 0:
            device_arrays.append(_device.constant(array, array.dtype))
        else:
            device_arrays.append(_device.to_device(array))
    return device_arrays, attrs
