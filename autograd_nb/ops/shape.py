"""Shape ops: reshape, transpose, broadcast_to, concatenate and the composites built on them.

Every op here returns a new buffer (no aliasing between tensors, so version counters stay
simple); transposes and broadcasts go through the one strided-copy kernel of ``_strided``.
"""

import numbers

import numpy as np

from . import _broadcast, _strided
from .registry import Op, call, public


class ShapeOp(Op):
    """Base for single-input shape ops: no dtype change, nothing saved but shapes."""

    family = "shape"
    n_inputs = 1

    def prepare(self, values, attrs):
        (x,) = values
        x = np.asarray(x, order="C")
        return [x], self.normalize(x.shape, attrs)

    def make_function(self):
        return None  # each op below publishes its NumPy signature


class Reshape(ShapeOp):
    """``reshape(x, shape)``: the same elements in a new shape (one ``-1`` allowed)."""

    name = "reshape"

    def normalize(self, shape, attrs):
        new_shape = attrs["shape"]
        if isinstance(new_shape, numbers.Integral):
            new_shape = (new_shape,)
        size = int(np.prod(shape, dtype=np.int64))
        new_shape = _resolve_shape(size, tuple(int(n) for n in new_shape))
        return {"shape": new_shape, "input_shape": tuple(shape)}

    def forward(self, arrays, attrs):
        return arrays[0].reshape(attrs["shape"]).copy()

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        _strided.accumulate(grad_output.reshape(-1), grad_input.reshape(-1))

    def rule(self, k, grad_output, inputs, output, attrs):
        return call("reshape", grad_output, shape=attrs["input_shape"])


def _resolve_shape(size, shape):
    unknown = [i for i, n in enumerate(shape) if n == -1]
    known = int(np.prod([n for n in shape if n != -1], dtype=np.int64))
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if int(np.prod(shape, dtype=np.int64)) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return tuple(int(n) for n in shape)


class Transpose(ShapeOp):
    """``transpose(x, axes=None)``: permute the dimensions (reversed when ``axes`` is None)."""

    name = "transpose"

    def normalize(self, shape, attrs):
        ndim = len(shape)
        axes = attrs.get("axes")
        if axes is None:
            axes = tuple(range(ndim))[::-1]
        axes = tuple(int(a) % ndim if ndim else int(a) for a in axes)
        if sorted(axes) != list(range(ndim)):
            raise ValueError(f"axes {attrs.get('axes')} don't match an array of {ndim} dims")
        return {"axes": axes, "input_shape": tuple(shape)}

    def _layout(self, attrs):
        shape = attrs["input_shape"]
        strides = _broadcast.contiguous_strides(shape)
        axes = attrs["axes"]
        return tuple(shape[a] for a in axes), [strides[a] for a in axes]

    def forward(self, arrays, attrs):
        out_shape, strides = self._layout(attrs)
        return _strided.strided_copy(arrays[0], out_shape, strides)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        out_shape, strides = self._layout(attrs)
        _strided.strided_scatter_add(grad_output, out_shape, strides, grad_input)

    def rule(self, k, grad_output, inputs, output, attrs):
        inverse = tuple(np.argsort(attrs["axes"]))
        return call("transpose", grad_output, axes=inverse)


class BroadcastTo(ShapeOp):
    """``broadcast_to(x, shape)``: NumPy broadcasting, materialised; its VJP sums back."""

    name = "broadcast_to"

    def normalize(self, shape, attrs):
        target = attrs["shape"]
        target = (int(target),) if isinstance(target, numbers.Integral) else tuple(target)
        if _broadcast.broadcast_shapes(shape, target) != target:
            raise ValueError(f"cannot broadcast an array of shape {shape} to shape {target}")
        return {"shape": target, "input_shape": tuple(shape)}

    def forward(self, arrays, attrs):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        return _strided.strided_copy(arrays[0], attrs["shape"], strides)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        _strided.strided_scatter_add(grad_output, attrs["shape"], strides, grad_input)

    def rule(self, k, grad_output, inputs, output, attrs):
        return _broadcast.sum_to_shape(grad_output, attrs["input_shape"])


class AsType(ShapeOp):
    """``x.astype(dtype)``: a cast; the gradient is cast back to the input's dtype."""

    name = "astype"
    method = False

    def normalize(self, shape, attrs):
        return {"dtype": np.dtype(attrs["dtype"]), "input_shape": tuple(shape)}

    def prepare(self, values, attrs):
        (x,) = values
        x = np.asarray(x, order="C")
        return [x], dict(self.normalize(x.shape, attrs), input_dtype=x.dtype)

    def forward(self, arrays, attrs):
        return arrays[0].astype(attrs["dtype"])

    def is_differentiable(self, k):
        return True

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        _strided.accumulate(grad_output.reshape(-1).astype(grad_input.dtype), grad_input.reshape(-1))

    def rule(self, k, grad_output, inputs, output, attrs):
        return call("astype", grad_output, dtype=attrs["input_dtype"])


Reshape()
Transpose()
BroadcastTo()
AsType()


@public(family="shape")
def reshape(x, shape):
    """Give ``x`` a new ``shape`` (an int or tuple; one dimension may be -1).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.reshape(anb.arange(6.0), (2, -1)).shape
    (2, 3)
    """
    return call("reshape", x, shape=shape)


@public(family="shape")
def transpose(x, axes=None):
    """Permute the dimensions of ``x``; reverse them when ``axes`` is None."""
    return call("transpose", x, axes=axes)


@public(family="shape")
def broadcast_to(x, shape):
    """Broadcast ``x`` to ``shape`` under NumPy's rules; the gradient sums back."""
    return call("broadcast_to", x, shape=shape)


@public(family="shape")
def swapaxes(x, axis1, axis2):
    """Swap two dimensions of ``x``."""
    axes = list(range(x.ndim))
    axis1, axis2 = _broadcast.normalize_axis((axis1,), x.ndim)[0], _broadcast.normalize_axis(
        (axis2,), x.ndim
    )[0]
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return call("transpose", x, axes=tuple(axes))


@public(family="shape")
def expand_dims(x, axis):
    """Insert dimensions of length one at ``axis`` (an int or a tuple), as NumPy."""
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    ndim = x.ndim + len(axes)
    axes = _broadcast.normalize_axis(axes, ndim)
    shape = iter(x.shape)
    new_shape = tuple(1 if d in axes else next(shape) for d in range(ndim))
    return call("reshape", x, shape=new_shape)


@public(family="shape")
def squeeze(x, axis=None):
    """Remove dimensions of length one (all of them, or those at ``axis``)."""
    if axis is None:
        axes = tuple(d for d, n in enumerate(x.shape) if n == 1)
    else:
        axes = _broadcast.normalize_axis(axis, x.ndim)
        for d in axes:
            if x.shape[d] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    new_shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    return call("reshape", x, shape=new_shape)


@public(family="shape")
def ravel(x):
    """The elements of ``x`` as a one-dimensional tensor (C order)."""
    return call("reshape", x, shape=(-1,))
