"""Shape ops: reshape, transpose, broadcast_to, concatenate and the composites built on them.

Every op here returns a new buffer (no aliasing between tensors, so version counters stay
simple); transposes and broadcasts go through the one strided-copy kernel of ``_strided``.
"""

import numbers
import operator

import numpy as np
from numba import njit

from . import _broadcast, _numpy_vjp, _strided, registry
from ._pointers import array_at, serves_complex
from .registry import IDENTITY, ExecSpec, Op, call, cuda_twin, public, run_key


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

    def exec_spec(self, k, node):
        # Reshape and same-dtype casts: the gradient adds back element for element.
        n = _size(node.shape)
        return ExecSpec(_strided.accumulate_driver, (), (n,), ())


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _gather_spec(input_shape, out_shape, strides):
    """Forward spec of a strided copy of an input of ``input_shape`` (transpose, broadcast)."""
    ints = _strided.strided_ints(
        _size(out_shape), _size(input_shape), 0, tuple(out_shape), tuple(strides)
    )
    return _strided.gather_driver, ints, ()


def _scatter_spec(node, out_shape, strides):
    """Compiled-executor spec of a VJP that adds the gradient back through ``strides``."""
    ints = _strided.strided_ints(
        _size(out_shape), _size(node.attrs["input_shape"]), 0, tuple(out_shape), tuple(strides)
    )
    return ExecSpec(_strided.scatter_add_driver, (), ints, ())



def _scatter_batch(grad_outputs, out_shape, strides, input_shape, grad_inputs):
    """A strided VJP for a batch of vectors in one kernel call: the batch is one more
    dimension, whose stride in the (C-contiguous) gradients is an input's size."""
    size = int(np.prod(input_shape, dtype=np.int64))
    _strided.strided_scatter_add(
        grad_outputs,
        (grad_outputs.shape[0],) + tuple(out_shape),
        [size] + list(strides),
        grad_inputs,
    )


@cuda_twin("shape", "Copy")
class Reshape(ShapeOp):
    """``reshape(x, shape)``: the same elements in a new shape (one ``-1`` allowed).

    The public function copies, as every op here. Internally (``matmul``'s operands, attribute
    ``view=True``) the result is a view of a C-contiguous input: the caller then gives it the
    input's version counter, so that an in-place change of the input is seen by the nodes that
    saved the view.
    """

    name = "reshape"
    vjp_strategy = IDENTITY

    def __init__(self):
        # The attrs per (shape, strides, dtype, new shape) of C-contiguous inputs: programs
        # repeat their reshapes (``outer`` makes two per call), and the shape resolution costs
        # more than the copy for small tensors.
        self._run_cache = {}
        super().__init__()

    def _run(self, arrays, attrs):
        key = None
        view = attrs.get("view", False)
        if len(arrays) == 1 and len(attrs) == 1 + ("view" in attrs) and view in (False, True):
            new_shape = _int_shape_key(attrs.get("shape"))
            if new_shape is not None:
                x = arrays[0]
                key = (x.shape, x.strides, x.dtype, new_shape, view is True)
                found = self._run_cache.get(key)
                if found is not None:
                    out = x.reshape(found["shape"])
                    return arrays, found, out if view is True else out.copy()
        return self._run_and_remember(key, arrays, attrs)

    def normalize(self, shape, attrs):
        new_shape = attrs["shape"]
        if isinstance(new_shape, numbers.Integral):
            new_shape = (new_shape,)
        size = int(np.prod(shape, dtype=np.int64))
        new_shape = _resolve_shape(size, tuple(int(n) for n in new_shape))
        normalized = {"shape": new_shape, "input_shape": tuple(shape)}
        if attrs.get("view") is True:
            normalized["view"] = True
        return normalized

    def forward(self, arrays, attrs):
        out = arrays[0].reshape(attrs["shape"])
        return out if attrs.get("view") is True else out.copy()

    forward_numpy = forward  # NumPy already (tier 0 records it)

    def forward_spec(self, arrays, attrs, output):
        # A copy into the program's buffer, also where ``view=True`` made ``output`` a view.
        return _strided.copy_driver, (_size(attrs["shape"]),), ()

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        _strided.accumulate(grad_output.reshape(-1), grad_input.reshape(-1))

    vjp_batched = vjp  # the same flat copy, batch and all

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        _numpy_vjp.add_into(grad_input.reshape(-1), grad_output.reshape(-1))

    def rule(self, k, grad_output, inputs, output, attrs):
        return call("reshape", grad_output, shape=attrs["input_shape"])


def _int_shape_key(shape):
    """``shape`` when it is an int or a tuple of ints (exact types: a cache key), else None."""
    if type(shape) is int:
        return shape
    if type(shape) is not tuple:
        return None
    for n in shape:
        if type(n) is not int:
            return None
    return shape


def _resolve_shape(size, shape):
    # NumPy reads any negative length as the one unknown dimension.
    unknown = [i for i, n in enumerate(shape) if n < 0]
    known = int(np.prod([n for n in shape if n >= 0], dtype=np.int64))
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if n < 0 else n for n in shape)
    if int(np.prod(shape, dtype=np.int64)) != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return tuple(int(n) for n in shape)


@cuda_twin("shape", "Transpose")
class Transpose(ShapeOp):
    """``transpose(x, axes=None)``: permute the dimensions (reversed when ``axes`` is None)."""

    name = "transpose"

    def normalize(self, shape, attrs):
        ndim = len(shape)
        axes = attrs.get("axes")
        if axes is None:
            axes = tuple(range(ndim))[::-1]
        axes = tuple(axes)
        if len(axes) != ndim:
            raise ValueError(f"axes don't match array: {axes} for {ndim} dimension(s)")
        axes = tuple(_broadcast.normalize_axis((a,), ndim)[0] for a in axes)
        if len(set(axes)) != ndim:
            raise ValueError("repeated axis in transpose")
        return {"axes": axes, "input_shape": tuple(shape)}

    def _layout(self, attrs):
        shape = attrs["input_shape"]
        strides = _broadcast.contiguous_strides(shape)
        axes = attrs["axes"]
        return tuple(shape[a] for a in axes), [strides[a] for a in axes]

    def forward(self, arrays, attrs):
        out_shape, strides = self._layout(attrs)
        return _strided.strided_copy(arrays[0], out_shape, strides)

    def forward_numpy(self, arrays, attrs):
        # A copy always, as the kernel's: ``ascontiguousarray`` would hand back the input
        # itself for the identity permutation, and a 0-d array as 1-d.
        return np.array(arrays[0].transpose(attrs["axes"]), order="C")

    def forward_spec(self, arrays, attrs, output):
        return _gather_spec(attrs["input_shape"], *self._layout(attrs))

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        out_shape, strides = self._layout(attrs)
        _strided.strided_scatter_add(grad_output, out_shape, strides, grad_input)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        out_shape, strides = self._layout(attrs)
        _numpy_vjp.scatter_add(grad_output, out_shape, strides, grad_input.reshape(-1))

    def exec_spec(self, k, node):
        return _scatter_spec(node, *self._layout(node.attrs))

    def vjp_batched(self, k, grad_outputs, saved, attrs, grad_inputs):
        out_shape, strides = self._layout(attrs)
        _scatter_batch(grad_outputs, out_shape, strides, attrs["input_shape"], grad_inputs)

    def rule(self, k, grad_output, inputs, output, attrs):
        inverse = tuple(np.argsort(attrs["axes"]))
        return call("transpose", grad_output, axes=inverse)


@cuda_twin("shape", "BroadcastTo")
class BroadcastTo(ShapeOp):
    """``broadcast_to(x, shape)``: NumPy broadcasting, materialised; its VJP sums back."""

    name = "broadcast_to"

    def normalize(self, shape, attrs):
        target = attrs["shape"]
        target = (int(target),) if isinstance(target, numbers.Integral) else tuple(target)
        target = tuple(int(n) for n in target)
        if any(n < 0 for n in target):
            raise ValueError("all elements of broadcast shape must be non-negative")
        fits = len(target) >= len(shape) and all(
            n in (1, t) for n, t in zip(shape[::-1], target[::-1], strict=False)
        )
        if not fits:
            raise ValueError(f"cannot broadcast an array of shape {shape} to shape {target}")
        return {"shape": target, "input_shape": tuple(shape)}

    def forward(self, arrays, attrs):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        return _strided.strided_copy(arrays[0], attrs["shape"], strides)

    def forward_numpy(self, arrays, attrs):
        # (A copy of a 0-d result stays 0-d: ``ascontiguousarray`` makes it 1-d.)
        return np.array(np.broadcast_to(arrays[0], attrs["shape"]), order="C")

    def forward_spec(self, arrays, attrs, output):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        return _gather_spec(attrs["input_shape"], attrs["shape"], strides)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        _strided.strided_scatter_add(grad_output, attrs["shape"], strides, grad_input)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        _numpy_vjp.scatter_add(grad_output, attrs["shape"], strides, grad_input.reshape(-1))

    def exec_spec(self, k, node):
        attrs = node.attrs
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        return _scatter_spec(node, attrs["shape"], strides)

    def vjp_batched(self, k, grad_outputs, saved, attrs, grad_inputs):
        strides = _broadcast.broadcast_strides(attrs["input_shape"], attrs["shape"])
        _scatter_batch(grad_outputs, attrs["shape"], strides, attrs["input_shape"], grad_inputs)

    def rule(self, k, grad_output, inputs, output, attrs):
        return _broadcast.sum_to_shape(grad_output, attrs["input_shape"])


@cuda_twin("shape", "Copy")
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

    forward_numpy = forward  # NumPy already (tier 0 records it)

    def forward_spec(self, arrays, attrs, output):
        source, target = arrays[0].dtype, output.dtype
        if source not in _CAST_CODES or target not in _CAST_CODES:
            return None
        if source.kind == "f" and target in _UNSIGNED_WIDE:
            return None  # NumPy's casts of negative and NaN floats there differ from numba's
        return _cast_driver, (output.size, _CAST_CODES[source]), ()

    def is_differentiable(self, k):
        return True

    @staticmethod
    def _cast_back(grad_output, dtype):
        """The gradient in the input's ``dtype``: a complex one's real part for a real input
        (torch's rule, :doc:`/complex`; a plain cast would warn that it drops the imaginary
        part)."""
        grad = grad_output.reshape(-1)
        if grad.dtype.kind == "c" and dtype.kind != "c":
            grad = grad.real
        return grad.astype(dtype)

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        grad = self._cast_back(grad_output, grad_input.dtype)
        _strided.accumulate(grad, grad_input.reshape(-1))

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        grad = self._cast_back(grad_output, grad_input.dtype)
        _numpy_vjp.add_into(grad_input.reshape(-1), grad)

    vjp_batched = vjp

    def rule(self, k, grad_output, inputs, output, attrs):
        if grad_output.dtype.kind == "c" and attrs["input_dtype"].kind != "c":
            grad_output = call("_real", grad_output)
        return call("astype", grad_output, dtype=attrs["input_dtype"])


#: The dtypes ``astype``'s forward driver converts between, by the code of the input's dtype.
_CAST_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64,
))
_CAST_CODES = {dtype: code for code, dtype in enumerate(_CAST_DTYPES)}
_UNSIGNED_WIDE = (np.dtype(np.uint32), np.dtype(np.uint64))
# The input's element type, for the driver's views (``like`` is the output's).
_BOOL, _INT8, _INT16, _INT32, _INT64, _UINT8, _UINT16, _UINT32, _UINT64, _FLOAT32, _FLOAT64 = (
    np.empty(0, dtype=dtype) for dtype in _CAST_DTYPES
)


@njit(cache=True, nogil=True)
def _cast(source, out):
    for i in range(out.size):
        out[i] = source[i]


@njit(cache=True, nogil=True)
def _cast_driver(operands, ints, floats, like):  # noqa: C901 (njit: a branch per dtype)
    """``astype``'s forward driver: ``ints`` is ``[n, code]``, ``code`` the input's dtype in
    ``_CAST_DTYPES``; numba's conversions, which are NumPy's (C's) for these pairs."""
    n, code = ints[0], ints[1]
    address = operands[0]
    out = array_at(operands[1], n, like)
    if code == 0:
        _cast(array_at(address, n, _BOOL), out)
    elif code == 1:
        _cast(array_at(address, n, _INT8), out)
    elif code == 2:
        _cast(array_at(address, n, _INT16), out)
    elif code == 3:
        _cast(array_at(address, n, _INT32), out)
    elif code == 4:
        _cast(array_at(address, n, _INT64), out)
    elif code == 5:
        _cast(array_at(address, n, _UINT8), out)
    elif code == 6:
        _cast(array_at(address, n, _UINT16), out)
    elif code == 7:
        _cast(array_at(address, n, _UINT32), out)
    elif code == 8:
        _cast(array_at(address, n, _UINT64), out)
    elif code == 9:
        _cast(array_at(address, n, _FLOAT32), out)
    else:
        _cast(array_at(address, n, _FLOAT64), out)


# -- concatenate and stack: one variadic op family over a 2-D layout ---------------------------
#
# Joining along ``axis`` is a copy into column blocks of a ``(outer, total)`` view of the result,
# where ``outer`` is the product of the dimensions before the axis: input ``k`` is a
# ``(outer, width_k)`` block starting at column ``start_k``. Its VJP reads that block back.


@njit(cache=True, nogil=True)
def _copy_block(piece, out, outer, width, total, start):
    """Copy the flat ``(outer, width)`` ``piece`` into columns ``start:start + width`` of the
    flat ``(outer, total)`` ``out``. Flat: a ``reshape`` of a view goes through numba's C
    helper, most of the call for small pieces (``ode_rollout``'s ``concatenate([tension,
    zero_row])`` in its driver: 114 -> 38 ns)."""
    for o in range(outer):
        row = out[o * total + start:o * total + start + width]
        source = piece[o * width:(o + 1) * width]
        for j in range(width):
            row[j] = source[j]


@njit(cache=True, nogil=True)
def _add_block(grad_output, start, grad_piece):
    for o in range(grad_piece.shape[0]):
        for j in range(grad_piece.shape[1]):
            grad_piece[o, j] += grad_output[o, start + j]


@serves_complex
@njit(cache=True, nogil=True)
def _join_driver(operands, ints, floats, like):
    """The forward driver of ``concatenate`` and ``stack``: ``ints`` is ``[count, outer, total,
    widths.., starts..]``; input ``k`` is the ``(outer, widths[k])`` block from column
    ``starts[k]`` of the ``(outer, total)`` result."""
    count, outer, total = ints[0], ints[1], ints[2]
    out = array_at(operands[count], outer * total, like)
    for k in range(count):
        width = ints[3 + k]
        _copy_block(array_at(operands[k], outer * width, like), out, outer, width, total,
                    ints[3 + count + k])


def _same_dtype_arrays(values):
    """``values`` when they are all C-contiguous arrays of one dtype (the common case, which
    needs no conversion), else None."""
    first = values[0]
    if type(first) is not np.ndarray:
        return None
    dtype = first.dtype
    for v in values:
        if type(v) is not np.ndarray or v.dtype != dtype or not v.flags.c_contiguous:
            return None
    return list(values)


_NO_AXIS = object()


@cuda_twin("shape", "Join")
class Join(Op):
    """Base of ``concatenate`` and ``stack``: any number of inputs, copied into blocks."""

    family = "shape"
    n_inputs = None
    method = False
    verb = None

    def __init__(self):
        self._attrs = {}
        # The attrs ``prepare`` gives, per (axis, shapes, strides, dtype) of the inputs.
        self._run_cache = {}
        super().__init__()

    def prepare(self, values, attrs):
        if not values:
            raise ValueError(f"need at least one array to {self.verb}")
        arrays = _same_dtype_arrays(values)
        if arrays is None:
            arrays = [np.asarray(v) for v in values]
            dtype = np.result_type(*arrays)
            arrays = [np.asarray(a, dtype=dtype, order="C") for a in arrays]
        shapes = tuple(a.shape for a in arrays)
        axis = attrs.get("axis", 0)
        # Only an int or None keys the layout: ``axis=1.0`` equals ``1`` but is an error.
        key = (shapes, axis) if axis is None or type(axis) is int else None
        cached = None if key is None else self._attrs.get(key)
        if cached is None:
            shape, outer, widths, index = self.layout(shapes, axis)
            starts = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
            cached = {
                "axis": axis,
                "shape": shape,
                "outer": outer,
                "widths": tuple(widths),
                "starts": tuple(int(n) for n in starts),
                "input_shapes": shapes,
                "index": tuple(index),
            }
            if key is not None:
                registry.remember(self._attrs, key, cached)
        # A program repeats its joins: the attributes are worked out once per layout (and
        # shared, read-only, by the nodes of that layout).
        return arrays, cached

    def _run(self, arrays, attrs):
        key = None
        if arrays and len(attrs) == 1:
            # The public functions pass ``axis`` alone; an int or None (not a bool or a NumPy
            # integer, which compare equal but may prepare differently) keys the cache.
            axis = attrs.get("axis", _NO_AXIS)
            if type(axis) is int or axis is None:
                if len(arrays) == 2:
                    a, b = arrays
                    key = (axis, a.shape, b.shape, a.strides, b.strides, a.dtype, b.dtype)
                else:
                    layouts = [axis]
                    for a in arrays:
                        layouts += (a.shape, a.strides, a.dtype)
                    key = tuple(layouts)
        elif arrays:
            key = run_key(attrs)
            if key is not None:
                layouts = [key]
                for a in arrays:
                    layouts += (a.shape, a.strides, a.dtype)
                key = tuple(layouts)
        if key is not None:
            found = self._run_cache.get(key)
            if found is not None:
                return arrays, found, self.forward(arrays, found)
        return self._run_and_remember(key, arrays, attrs)

    def forward_numpy(self, arrays, attrs):
        outer = attrs["outer"]
        blocks = [a.reshape(outer, w) for a, w in zip(arrays, attrs["widths"], strict=True)]
        return np.concatenate(blocks, axis=1).reshape(attrs["shape"])

    def forward(self, arrays, attrs):
        out = np.empty(attrs["shape"], dtype=arrays[0].dtype)
        outer, total = attrs["outer"], attrs["starts"][-1]
        if out.size:
            flat = out.reshape(-1)
            starts = attrs["starts"][:-1]
            for piece, width, start in zip(arrays, attrs["widths"], starts, strict=True):
                if width:
                    _copy_block(piece.reshape(-1), flat, outer, width, total, start)
        return out

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        self._add_back(k, grad_output, attrs["outer"], attrs, grad_input)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        if grad_input.size:
            outer, start = attrs["outer"], attrs["starts"][k]
            blocks = grad_output.astype(grad_input.dtype, copy=False)
            blocks = blocks.reshape(outer, attrs["starts"][-1])
            piece = grad_input.reshape(outer, attrs["widths"][k])
            _numpy_vjp.add_into(piece, blocks[:, start:start + piece.shape[1]])

    def vjp_batched(self, k, grad_outputs, saved, attrs, grad_inputs):
        # The batch is one more leading dimension: ``outer`` rows per vector.
        outer = grad_outputs.shape[0] * attrs["outer"]
        self._add_back(k, grad_outputs, outer, attrs, grad_inputs)

    def forward_spec(self, arrays, attrs, output):
        # NumPy's join (``forward``) moves the same elements as the block copies.
        widths, starts = attrs["widths"], attrs["starts"][:-1]
        ints = (len(widths), attrs["outer"], attrs["starts"][-1], *widths, *starts)
        return _join_driver, ints, ()

    def exec_spec(self, k, node):
        # Input k is the (outer, width) block of columns from ``start`` of the (outer, total)
        # gradient: a strided read of it.
        attrs = node.attrs
        outer, width, total = attrs["outer"], attrs["widths"][k], attrs["starts"][-1]
        if outer * width == 0:
            return ExecSpec(_strided.accumulate_driver, (), (0,), ())
        ints = _strided.strided_ints(
            outer * width, outer * total, attrs["starts"][k], (outer, width), (total, 1)
        )
        return ExecSpec(_strided.gather_add_driver, (), ints, ())

    def _add_back(self, k, grad_output, outer, attrs, grad_input):
        if grad_input.size == 0:
            return
        if grad_output.dtype != grad_input.dtype:
            grad_output = grad_output.astype(grad_input.dtype)
        blocks = grad_output.reshape(outer, attrs["starts"][-1])
        _add_block(blocks, attrs["starts"][k], grad_input.reshape(outer, attrs["widths"][k]))

    def rule(self, k, grad_output, inputs, output, attrs):
        piece = call("getitem", grad_output, index=attrs["index"][k])
        if piece.shape != attrs["input_shapes"][k]:  # concatenate(axis=None)
            piece = call("reshape", piece, shape=attrs["input_shapes"][k])
        return piece

    def make_function(self):
        return None


class Concatenate(Join):
    """``concatenate(arrays, axis=0)``: join along an existing axis (flattened when None)."""

    name = "concatenate"
    verb = "concatenate"

    def forward(self, arrays, attrs):
        # NumPy's own join (a memcpy per block) costs less than the block-copy kernel's
        # dispatch; the inputs are of one dtype, so the result is what the kernel gives.
        axis = attrs["axis"]
        out = np.concatenate(arrays, axis if axis is None or type(axis) is int else int(axis))
        return out if out.flags.c_contiguous else np.ascontiguousarray(out)

    def layout(self, shapes, axis):
        if axis is None:
            sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
            starts = np.cumsum([0] + sizes)
            index = [slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:], strict=True)]
            return (int(starts[-1]),), 1, sizes, index
        ndim = len(shapes[0])
        if ndim == 0:
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        for k, s in enumerate(shapes[1:], 1):
            if len(s) != ndim:
                raise ValueError(
                    "all the input arrays must have same number of dimensions, but the array "
                    f"at index 0 has {ndim} dimension(s) and the array at index {k} has "
                    f"{len(s)} dimension(s)"
                )
        (axis,) = _broadcast.normalize_axis(axis, ndim)
        first = shapes[0]
        for k, s in enumerate(shapes[1:], 1):
            for d in range(ndim):
                if d != axis and s[d] != first[d]:
                    raise ValueError(
                        "all the input array dimensions except for the concatenation axis must "
                        f"match exactly, but along dimension {d}, the array at index 0 has size "
                        f"{first[d]} and the array at index {k} has size {s[d]}"
                    )
        outer = int(np.prod(first[:axis], dtype=np.int64))
        inner = int(np.prod(first[axis + 1 :], dtype=np.int64))
        lengths = [s[axis] for s in shapes]
        ends = np.cumsum(lengths)
        lead = (slice(None),) * axis
        index = [lead + (slice(int(e - n), int(e)),) for e, n in zip(ends, lengths, strict=True)]
        shape = first[:axis] + (int(ends[-1]),) + first[axis + 1 :]
        return shape, outer, [n * inner for n in lengths], index


class Stack(Join):
    """``stack(arrays, axis=0)``: join arrays of one shape along a new axis."""

    name = "stack"
    verb = "stack"

    def layout(self, shapes, axis):
        first = shapes[0]
        if any(s != first for s in shapes):
            raise ValueError("all input arrays must have the same shape")
        (axis,) = _broadcast.normalize_axis(axis, len(first) + 1)
        outer = int(np.prod(first[:axis], dtype=np.int64))
        width = int(np.prod(first[axis:], dtype=np.int64))
        lead = (slice(None),) * axis
        index = [lead + (k,) for k in range(len(shapes))]
        shape = first[:axis] + (len(shapes),) + first[axis:]
        return shape, outer, [width] * len(shapes), index

    def forward(self, arrays, attrs):
        if attrs["outer"] == 1:
            # Every input is one block of the result, in order (the new axis has only
            # length-1 dimensions before it): the memory of NumPy's ``array(arrays)``, at a
            # fraction of the cost of a kernel call per input (the arrays are C-contiguous, of
            # one shape and dtype).
            out = np.array(arrays)
            return out if out.shape == attrs["shape"] else out.reshape(attrs["shape"])
        return super().forward(arrays, attrs)


Reshape()
Transpose()
BroadcastTo()
AsType()
CONCATENATE = Concatenate()
STACK = Stack()


@public(family="shape")
def reshape(x, shape):
    """Give ``x`` a new shape holding the same elements (C order).

    Parameters
    ----------
    x : Tensor or array_like
    shape : int or tuple of int
        One dimension may be -1: it is inferred from the size.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.reshape(anb.arange(6.0), (2, -1)).shape
    (2, 3)
    """
    return call("reshape", x, shape=shape)


@public(family="shape")
def transpose(x, axes=None):
    """Permute the dimensions of ``x``.

    Parameters
    ----------
    x : Tensor or array_like
    axes : tuple of int, optional
        A permutation of the dimensions (negative axes count from the end); None reverses
        them.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.transpose(anb.ones((2, 3, 4)), (0, -1, 1)).shape
    (2, 4, 3)
    """
    return call("transpose", x, axes=axes)


@public(family="shape")
def broadcast_to(x, shape):
    """Broadcast ``x`` to ``shape`` under NumPy's rules; the gradient sums back.

    Parameters
    ----------
    x : Tensor or array_like
    shape : int or tuple of int

    Returns
    -------
    Tensor
        A new tensor (a copy, not a view as in NumPy).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> x = anb.tensor([1.0, 2.0], requires_grad=True)
    >>> y = anb.broadcast_to(x, (3, 2))
    >>> anb.grad(y.sum(), x)
    (tensor([3., 3.]),)
    """
    return call("broadcast_to", x, shape=shape)


@public(family="shape")
def swapaxes(x, axis1, axis2):
    """Interchange two dimensions of ``x``.

    Parameters
    ----------
    x : Tensor or array_like
    axis1, axis2 : int

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.swapaxes(anb.ones((2, 3, 4)), 0, -1).shape
    (4, 3, 2)
    """
    ndim = np.ndim(x)
    axes = list(range(ndim))
    first = _one_axis(axis1, ndim, "axis1")
    second = _one_axis(axis2, ndim, "axis2")
    axes[first], axes[second] = axes[second], axes[first]
    return call("transpose", x, axes=tuple(axes))


def _one_axis(axis, ndim, name):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim, msg_prefix=name)
    return axis % ndim


@public(family="shape")
def expand_dims(x, axis):
    """Insert dimensions of length one.

    Parameters
    ----------
    x : Tensor or array_like
    axis : int or tuple of int
        Positions of the new dimensions in the result (negative ones count from its end).

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.expand_dims(anb.ones((2, 3)), (0, -1)).shape
    (1, 2, 3, 1)
    """
    shape = np.shape(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    ndim = len(shape) + len(axes)
    axes = [_broadcast.normalize_axis((a,), ndim)[0] for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    lengths = iter(shape)
    new_shape = tuple(1 if d in axes else next(lengths) for d in range(ndim))
    return call("reshape", x, shape=new_shape)


@public(family="shape")
def squeeze(x, axis=None):
    """Remove dimensions of length one.

    Parameters
    ----------
    x : Tensor or array_like
    axis : int or tuple of int, optional
        The dimensions to remove (each must have length one); None removes all of length one.

    Returns
    -------
    Tensor

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.squeeze(anb.ones((1, 2, 1)), axis=(0, -1)).shape
    (2,)
    """
    shape = np.shape(x)
    if axis is None:
        axes = tuple(d for d, n in enumerate(shape) if n == 1)
    else:
        axes = _broadcast.normalize_axis(axis, len(shape))
        if any(shape[d] != 1 for d in axes):
            raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    new_shape = tuple(n for d, n in enumerate(shape) if d not in axes)
    return call("reshape", x, shape=new_shape)


@public(family="shape")
def ravel(x):
    """The elements of ``x`` as a one-dimensional tensor (C order).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.ravel(anb.ones((2, 3))).shape
    (6,)
    """
    return call("reshape", x, shape=(-1,))


def _sequence(arrays):
    # A single Tensor or array is a sequence of its sub-arrays along the first axis, as NumPy.
    if type(arrays) is list or type(arrays) is tuple:
        return tuple(arrays)
    if hasattr(arrays, "shape"):
        return tuple(arrays[i] for i in range(len(arrays)))
    return tuple(arrays)


@public(method=False, family="shape")
def concatenate(arrays, axis=0):
    """Join a sequence of tensors along an existing axis.

    Parameters
    ----------
    arrays : sequence of Tensor or array_like
        They must have the same shape except along ``axis``.
    axis : int or None, optional
        The axis to join along (negative counts from the end); None flattens every input
        first. Default 0.

    Returns
    -------
    Tensor
        The inputs' common dtype; each input's gradient is its slice of the result's.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([[1.0, 2.0]], requires_grad=True)
    >>> b = anb.tensor([[3.0, 4.0], [5.0, 6.0]])
    >>> anb.concatenate([a, b])
    tensor([[1., 2.],
            [3., 4.],
            [5., 6.]], grad_fn=<ConcatenateBackward>)
    >>> anb.concatenate([a, b], axis=None).shape
    (6,)
    """
    return registry._dispatch(CONCATENATE, _sequence(arrays), {"axis": axis})


@public(method=False, family="shape")
def stack(arrays, axis=0):
    """Join a sequence of tensors of one shape along a new axis.

    Parameters
    ----------
    arrays : sequence of Tensor or array_like
        All of the same shape.
    axis : int, optional
        Position of the new axis in the result (negative counts from its end). Default 0.

    Returns
    -------
    Tensor
        One dimension more than the inputs.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> a = anb.tensor([1.0, 2.0], requires_grad=True)
    >>> anb.stack([a, a * 10], axis=1)
    tensor([[ 1., 10.],
            [ 2., 20.]], grad_fn=<StackBackward>)
    """
    return registry._dispatch(STACK, _sequence(arrays), {"axis": axis})
