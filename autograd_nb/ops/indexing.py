"""Indexing: ``t[index]`` (gather) and ``t[index] = v`` (a recorded in-place op).

Two layouts cover NumPy's whole indexing language:

* basic indices (ints, slices with any step, ``None``, ``...``) select a strided view; we let
  NumPy compute that view's offset and strides and copy through the strided-copy kernel;
* anything with an integer array or a boolean mask goes through a flat index map
  (``arange(size).reshape(shape)[index]``), gathered with ``take`` and scattered back with
  ``put_add``, so repeated indices accumulate in the VJP.
"""

import numbers

import numpy as np
from numba import njit

from . import _broadcast, _strided
from .registry import Op, call


def _is_basic(index):
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if item is None or item is Ellipsis or isinstance(item, slice):
            continue
        if isinstance(item, (numbers.Integral, np.integer)) and not isinstance(item, bool):
            continue
        return False
    return True


def _normalize_index(index):
    if isinstance(index, list):
        return np.asarray(index)
    if isinstance(index, tuple):
        return tuple(np.asarray(i) if isinstance(i, list) else i for i in index)
    return index


class Selection:
    """Where ``x[index]`` reads from ``x``: a strided view, or a flat index map."""

    __slots__ = ("input_shape", "shape", "strides", "offset", "flat")

    def __init__(self, x, index):
        self.input_shape = x.shape
        if _is_basic(index):
            view = x[index]
            itemsize = x.itemsize
            base = x.__array_interface__["data"][0]
            self.offset = (view.__array_interface__["data"][0] - base) // itemsize if view.size else 0
            self.shape = view.shape
            self.strides = [s // itemsize for s in view.strides]
            self.flat = None
        else:
            positions = np.arange(x.size, dtype=np.int64).reshape(x.shape)
            self.flat = np.asarray(positions[index], order="C")
            self.shape = self.flat.shape

    def gather(self, x):
        if self.flat is None:
            return _strided.strided_copy(x, self.shape, self.strides, self.offset)
        out = np.empty(self.shape, dtype=x.dtype)
        _strided.take(x.reshape(-1), self.flat.reshape(-1), out.reshape(-1))
        return out

    def scatter_add(self, values, target):
        if self.flat is None:
            _strided.strided_scatter_add(values, self.shape, self.strides, target, self.offset)
        else:
            _strided.put_add(values.reshape(-1), self.flat.reshape(-1), target.reshape(-1))

    def positions(self):
        """Flat positions selected, in the selection's C order."""
        if self.flat is not None:
            return self.flat.reshape(-1)
        out = np.empty(self.shape, dtype=np.int64)
        positions = np.arange(int(np.prod(self.input_shape, dtype=np.int64)), dtype=np.int64)
        if out.size:
            out = _strided.strided_copy(positions, self.shape, self.strides, self.offset)
        return out.reshape(-1)


class GetItem(Op):
    """``x[index]`` for every NumPy index form; VJP scatters (and accumulates) back."""

    name = "getitem"
    family = "indexing"
    method = False

    def prepare(self, values, attrs):
        (x,) = values
        x = np.asarray(x, order="C")
        index = _normalize_index(attrs["index"])
        return [x], {"index": index, "selection": Selection(x, index)}

    def forward(self, arrays, attrs):
        return attrs["selection"].gather(arrays[0])

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        attrs["selection"].scatter_add(grad_output, grad_input)

    def rule(self, k, grad_output, inputs, output, attrs):
        return call("_index_scatter", grad_output, source=attrs)

    def make_function(self):
        return None


class IndexScatter(Op):
    """The adjoint of ``getitem``: scatter-add values into zeros of the indexed tensor's shape.

    Internal: it is what ``getitem``'s differentiable rule records, and its own rule is a
    ``getitem`` again, so indexing can be differentiated to any order.
    """

    name = "_index_scatter"
    family = "indexing"
    method = False

    def prepare(self, values, attrs):
        (g,) = values
        return [np.asarray(g, order="C")], attrs["source"]

    def forward(self, arrays, attrs):
        selection = attrs["selection"]
        out = np.zeros(selection.input_shape, dtype=arrays[0].dtype)
        selection.scatter_add(arrays[0], out)
        return out

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        gathered = attrs["selection"].gather(grad_output)
        _strided.accumulate(gathered.reshape(-1), grad_input.reshape(-1))

    def rule(self, k, grad_output, inputs, output, attrs):
        return call("getitem", grad_output, index=attrs["index"])

    def make_function(self):
        return None


@njit(cache=True, nogil=True)
def _put(values, index, target):
    for i in range(index.size):
        target[index[i]] = values[i]


@njit(cache=True, nogil=True)
def _copy_except(values, index, target):
    """``target += values`` except at the sorted, unique positions ``index`` (those a setitem
    overwrote)."""
    p = 0
    for i in range(values.size):
        if p < index.size and index[p] == i:
            p += 1
            continue
        target[i] += values[i]


class SetItem(Op):
    """``x[index] = v`` computed out of place; ``Tensor.__setitem__`` writes it back in place."""

    name = "setitem"
    family = "indexing"
    n_inputs = 2
    method = False

    def prepare(self, values, attrs):
        x, v = values
        x = np.asarray(x, order="C")
        dtype = x.dtype
        v = np.asarray(v, dtype=dtype, order="C")
        index = _normalize_index(attrs["index"])
        selection = Selection(x, index)
        positions = np.unique(selection.positions())
        target_shape = selection.shape
        if _broadcast.broadcast_shapes(v.shape, target_shape) != tuple(target_shape):
            raise ValueError(
                f"could not broadcast input array from shape {v.shape} into shape {target_shape}"
            )
        v_strides = _broadcast.broadcast_strides(v.shape, target_shape)
        return [x, v], {
            "index": index,
            "selection": selection,
            "unique": positions,
            "value_shape": v.shape,
            "value_strides": v_strides,
        }

    def forward(self, arrays, attrs):
        x, v = arrays
        out = x.copy()
        selection = attrs["selection"]
        values = _strided.strided_copy(v, selection.shape, attrs["value_strides"])
        _put(values.reshape(-1), selection.positions(), out.reshape(-1))
        return out

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        selection = attrs["selection"]
        if k == 0:
            _copy_except(grad_output.reshape(-1), attrs["unique"], grad_input.reshape(-1))
            return
        gathered = selection.gather(grad_output)
        _strided.strided_scatter_add(
            gathered, selection.shape, attrs["value_strides"], grad_input
        )

    def rule(self, k, grad_output, inputs, output, attrs):
        if k == 0:
            mask = np.ones(attrs["selection"].input_shape, dtype=grad_output.dtype)
            mask.reshape(-1)[attrs["unique"]] = 0
            return grad_output * mask
        picked = call("getitem", grad_output, index=attrs["index"])
        return _broadcast.sum_to_shape(picked, attrs["value_shape"])

    def make_function(self):
        return None


GetItem()
IndexScatter()
SetItem()
