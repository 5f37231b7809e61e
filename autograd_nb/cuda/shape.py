"""Shape ops on the device: reshape, transpose, broadcast_to, astype, concatenate, stack.

As on the CPU, every op returns a new buffer, and transposes, broadcasts and the blocks of a
join all go through one strided-copy kernel (and its accumulating twin for the VJPs), with
shape and element strides passed as int tuples (by value: no host-to-device copy per launch).
The accumulating kernel adds atomically, so the VJP of a broadcast sums over its stride-0
dimensions without write races. A batch of grad_outputs is one more (leading) dimension.
"""

from ..ops import _broadcast
from . import _device, _kernels


def _contiguous(shape):
    return list(_broadcast.contiguous_strides(tuple(shape)))


def _scatter_add(values, out_shape, strides, target, batch=None, row=0):
    """``target[pos . strides] += values[pos]`` over ``out_shape`` (the VJP of a gather);
    with ``batch``, rows of ``row`` target elements, one per leading entry of ``values``."""
    shape = tuple(out_shape)
    strides = list(strides)
    if batch is not None:
        shape = (batch,) + shape
        strides = [row] + strides
    _kernels.add_strided(values, 0, _contiguous(shape), target, 0, strides, shape)


def _gather(source, out_shape, strides, dtype=None):
    out = _device.empty(out_shape, source.dtype if dtype is None else dtype)
    _kernels.copy_strided(source, 0, strides, out, 0, _contiguous(out_shape), out_shape)
    return out


class Copy:
    """``reshape`` and ``astype``: a flat copy (cast for ``astype``); the VJP adds back."""

    takes_complex = True  # (dtype-generic copies and sums)

    @staticmethod
    def forward(op, arrays, attrs):
        (x,) = arrays
        shape = attrs["shape"] if op.name == "reshape" else x.shape
        out = _device.copy(x, attrs.get("dtype", x.dtype))
        return out.reshape(shape)

    @staticmethod
    def vjp(op, k, grad_output, saved, attrs, grad_input):
        _kernels.add_flat(grad_output, grad_input)  # cast to the input's dtype for astype

    vjp_batched = vjp  # the same flat sum, batch and all


class Transpose:
    """``transpose``: a gather through permuted strides; the VJP scatters back."""

    takes_complex = True  # (dtype-generic copies and sums)

    @staticmethod
    def _layout(attrs):
        shape = attrs["input_shape"]
        strides = _broadcast.contiguous_strides(shape)
        axes = attrs["axes"]
        return tuple(shape[a] for a in axes), [strides[a] for a in axes]

    @classmethod
    def forward(cls, op, arrays, attrs):
        out_shape, strides = cls._layout(attrs)
        return _gather(arrays[0], out_shape, strides)

    @classmethod
    def vjp(cls, op, k, grad_output, saved, attrs, grad_input):
        out_shape, strides = cls._layout(attrs)
        _scatter_add(grad_output, out_shape, strides, grad_input)

    @classmethod
    def vjp_batched(cls, op, k, grad_outputs, saved, attrs, grad_inputs):
        out_shape, strides = cls._layout(attrs)
        row = grad_inputs.size // max(grad_inputs.shape[0], 1)
        _scatter_add(grad_outputs, out_shape, strides, grad_inputs, grad_outputs.shape[0], row)


class BroadcastTo:
    """``broadcast_to``: a gather with stride 0 on broadcast dimensions; the VJP sums back."""

    takes_complex = True  # (dtype-generic copies and sums)

    @staticmethod
    def forward(op, arrays, attrs):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        return _gather(arrays[0], attrs["shape"], strides)

    @staticmethod
    def vjp(op, k, grad_output, saved, attrs, grad_input):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        _scatter_add(grad_output, attrs["shape"], strides, grad_input)

    @staticmethod
    def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        row = grad_inputs.size // max(grad_inputs.shape[0], 1)
        _scatter_add(grad_outputs, attrs["shape"], strides, grad_inputs, grad_outputs.shape[0],
                     row)


class Join:
    """``concatenate`` and ``stack``: input ``k`` is the column block ``(outer, width_k)`` at
    ``start_k`` of the result seen as ``(outer, total)``; its VJP reads the block back."""

    takes_complex = True  # (dtype-generic copies and sums)

    @staticmethod
    def forward(op, arrays, attrs):
        out = _device.empty(attrs["shape"], arrays[0].dtype)
        outer, total = attrs["outer"], attrs["starts"][-1]
        if out.size == 0:
            return out
        for piece, width, start in zip(arrays, attrs["widths"], attrs["starts"][:-1]):
            if width:
                _kernels.copy_strided(piece, 0, [width, 1], out, start, [total, 1],
                                      (outer, width))
        return out

    @classmethod
    def vjp(cls, op, k, grad_output, saved, attrs, grad_input):
        cls._add_back(k, grad_output, attrs["outer"], attrs, grad_input)

    @classmethod
    def vjp_batched(cls, op, k, grad_outputs, saved, attrs, grad_inputs):
        cls._add_back(k, grad_outputs, grad_outputs.shape[0] * attrs["outer"], attrs,
                      grad_inputs)

    @staticmethod
    def _add_back(k, grad_output, outer, attrs, grad_input):
        width, total = attrs["widths"][k], attrs["starts"][-1]
        if grad_input.size == 0:
            return
        _kernels.add_strided(grad_output, attrs["starts"][k], [total, 1], grad_input, 0,
                             [width, 1], (outer, width))
