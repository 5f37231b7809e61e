"""The CUDA twin of ``_convolve`` (:mod:`autograd_nb.ops.signal`): the direct n-d convolution.

One kernel does the forward and the four VJPs, as on the CPU: ``out[n] (+)= sum_k b[k] *
a[n + shift - k]``, one thread per element ``n`` of the result (grid-stride), summing over the
box of ``k`` whose index ``n + shift - k`` lies inside ``a`` (an odometer over that box, in C
order, so no product outside it is formed). The VJPs convolve the gradient with an input
reversed along every axis (the module table of :mod:`autograd_nb.ops.signal`); the kernel
reads an operand reversed through a flag (``a[size - 1 - j]``), so no reversed copy is made.
The shapes and the shift are passed as tuples: one compiled kernel per number of dimensions
and dtype.
"""

from numba import cuda, int64

from ..ops.signal import output_shape
from . import _device, _kernels
from .dispatch import prepare_with_standins

#: The most dimensions the kernel's per-thread index arrays hold.
MAX_DIMS = 32


@cuda.jit(device=True)
def _at(array, j, reversed_):
    return array[array.size - 1 - j] if reversed_ else array[j]


@cuda.jit
def _convolve_kernel(a, a_shape, reverse_a, b, b_shape, reverse_b, out, out_shape, shift,
                     accumulate, zero):
    nd = len(a_shape)
    lo = cuda.local.array(MAX_DIMS, int64)
    hi = cuda.local.array(MAX_DIMS, int64)
    k = cuda.local.array(MAX_DIMS, int64)
    base = cuda.local.array(MAX_DIMS, int64)  # n + shift
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        rest = i
        empty = False
        for d in range(nd - 1, -1, -1):
            n = rest % out_shape[d]
            rest //= out_shape[d]
            base[d] = n + shift[d]
            # 0 <= base - k < a_shape  and  0 <= k < b_shape
            lo[d] = max(0, base[d] - a_shape[d] + 1)
            hi[d] = min(b_shape[d], base[d] + 1)
            k[d] = lo[d]
            empty = empty or hi[d] <= lo[d]
        total = zero
        while not empty:
            flat_b = 0
            flat_a = 0
            for d in range(nd):
                flat_b = flat_b * b_shape[d] + k[d]
                flat_a = flat_a * a_shape[d] + base[d] - k[d]
            total += _at(b, flat_b, reverse_b) * _at(a, flat_a, reverse_a)
            d = nd - 1  # the odometer's next k, in C order
            while d >= 0:
                k[d] += 1
                if k[d] < hi[d]:
                    break
                k[d] = lo[d]
                d -= 1
            empty = d < 0
        out[i] = out[i] + total if accumulate else total


def _shift(b_shape, valid):
    return tuple(n - 1 for n in b_shape) if valid else (0,) * len(b_shape)


def _launch(first, reverse_first, second, reverse_second, out, valid, accumulate):
    """``out (+)= _convolve(first, second, "valid" if valid else "full")``, an operand read
    reversed where its flag says so (C-contiguous device arrays)."""
    _launch_at(first, reverse_first, second, reverse_second, out, _shift(second.shape, valid),
               accumulate)


def _launch_at(first, reverse_first, second, reverse_second, out, shift, accumulate):
    """``out[n] (+)= sum_k second[k] * first[n + shift - k]`` (the kernel, any ``shift``)."""
    _kernels.launch(
        _convolve_kernel, out.size, _kernels.flat(first), first.shape, reverse_first,
        _kernels.flat(second), second.shape, reverse_second, _kernels.flat(out), out.shape,
        tuple(int(n) for n in shift), accumulate, out.dtype.type(0),
    )


class Convolve:
    """``_convolve`` on device arrays (``attrs["mode"]`` ``"full"`` or ``"valid"``)."""

    @staticmethod
    def prepare(op, values, attrs):
        arrays, attrs = prepare_with_standins(op, values, attrs)
        if arrays[0].ndim > MAX_DIMS:
            raise ValueError(f"_convolve on CUDA takes at most {MAX_DIMS} dimensions, not "
                             f"{arrays[0].ndim}")
        return arrays, attrs

    @staticmethod
    def forward(op, arrays, attrs):
        a, b = arrays
        shape = output_shape(a.shape, b.shape, attrs["mode"])
        out = _device.empty(shape, a.dtype)
        _launch(a, False, b, False, out, attrs["mode"] == "valid", False)
        return out

    @staticmethod
    def vjp(op, k, grad_output, saved, attrs, grad_input):
        a, b = saved[0], saved[1]
        g = _as_operand(grad_output, a.dtype)
        full = attrs["mode"] == "full"
        # the table of ops/signal.py: the second operand reversed, or (valid, k = 1) the first
        if k == 0:
            _launch(g, False, b, True, grad_input, full, True)
        elif full:
            _launch(g, False, a, True, grad_input, True, True)
        else:
            _launch(a, True, g, False, grad_input, True, True)

    @classmethod
    def vjp_batched(cls, op, k, grad_outputs, saved, attrs, grad_inputs):
        """One launch for the batch: the gradient, the kernel's first operand, gains the
        batch as a leading axis, and the saved operand a leading axis of 1 (so the kernel
        convolves row by row). The valid mode's ``b_bar = valid(flip(a), g)`` has ``g`` as
        its second operand; it runs as ``b_bar[m] = sum_k flip(a)[k] * g[m + s - k]`` with
        ``g`` first and the offset ``s = a - b`` on every axis (``a`` is the larger)."""
        a, b = saved[0], saved[1]
        full = attrs["mode"] == "full"
        batch = grad_outputs.shape[0]
        if a.ndim + 1 > MAX_DIMS:
            for row in range(batch):
                cls.vjp(op, k, _device.row(grad_outputs, row), saved, attrs,
                        _device.row(grad_inputs, row))
            return
        g = _as_operand(grad_outputs, a.dtype)
        other = b if k == 0 else a
        other = other.reshape((1,) + tuple(other.shape))
        if k == 1 and not full:
            shift = (0,) + tuple(m - n for m, n in zip(a.shape, b.shape))
            _launch_at(g, False, other, True, grad_inputs, shift, True)
            return
        _launch(g, False, other, True, grad_inputs, full if k == 0 else True, True)


def _as_operand(grad, dtype):
    """``grad`` in ``dtype``, C-contiguous (the kernel reads flat buffers)."""
    if grad.dtype != dtype:
        grad = _device.copy(grad, dtype)
    return grad if _device.is_c_contiguous(grad) else _device.copy(grad)
