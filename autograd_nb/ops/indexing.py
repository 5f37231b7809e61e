"""Indexing: ``t[index]`` (gather) and ``t[index] = v`` (a recorded in-place op).

NumPy's whole indexing language is supported, with NumPy's semantics, because NumPy itself
interprets the index; what this module adds is the way back (the VJPs):

* basic indices (ints, slices with any step, ``None``, ``...``) select a strided view of the
  input. The forward copies that view with NumPy (a strided C loop; faster than our kernel
  for the small tensors that dominate eager code, since it skips the Python-side layout work).
  The VJP adds back through the view's layout (shape, element strides, offset), worked out
  once per node, with the one strided scatter-add kernel of ``_strided``.
* anything with an integer array or a boolean mask goes through a flat index map
  (``arange(size).reshape(shape)[index]``), built only when a gradient is needed, and is
  scattered back with ``put_add``, so repeated indices accumulate in the VJP.
"""

import functools
import numbers

import numpy as np
from numba import njit

from . import _broadcast, _numpy_vjp, _strided
from ._pointers import array_at
from .registry import ExecSpec, Op, call, cuda_twin


def _is_basic(items):
    for item in items:
        if item is None or item is Ellipsis or isinstance(item, slice):
            continue
        if isinstance(item, (numbers.Integral, np.integer)) and not isinstance(item, bool):
            continue
        return False
    return True


def _normalize_item(item):
    if isinstance(item, list):
        item = np.asarray(item)
        if item.size == 0 and item.dtype.kind == "f":
            item = item.astype(np.intp)  # NumPy reads ``x[[]]`` as an empty integer index
    elif isinstance(item, np.ndarray) and item.ndim:
        # The caller's index array or mask (or a Tensor's buffer) may be refilled after the
        # forward: the node keeps what indexed it, so the gradient is that of the forward.
        item = item.copy()
    if isinstance(item, np.ndarray) and item.ndim == 0 and item.dtype.kind in "iu":
        return int(item)  # a 0-d integer array indexes like an integer (NumPy's rule)
    return item


def normalize_index(index):
    """``index`` as a tuple of plain items: lists become arrays, arrays copies of themselves,
    0-d int arrays ints."""
    if isinstance(index, tuple):
        return tuple(_normalize_item(item) for item in index)
    return (_normalize_item(index),)


class Selection:
    """Where ``x[index]`` reads from an array of ``input_shape``.

    ``basic`` selections are strided views: ``layout()`` gives their shape, element strides
    and offset into the flat input. Other selections read through ``flat_map()``, the flat
    input position of every selected element. Both are computed on first use and kept, so
    an eager forward with no gradient pays for neither.
    """

    __slots__ = ("input_shape", "index", "basic", "_layout", "_flat", "_unique", "_last",
                 "_ints", "_block")

    def __init__(self, input_shape, index):
        self.input_shape = tuple(input_shape)
        items = normalize_index(index)
        self.basic = _is_basic(items)
        if self.basic and not any(item is Ellipsis for item in items):
            # Without an Ellipsis an all-integer index gives a NumPy scalar, not a view.
            items = items + (Ellipsis,)
        self.index = items
        self._layout = None
        self._flat = None
        self._unique = None
        self._last = None
        self._ints = None  # (``exec_ints``'s last: its ``n`` and ints)
        self._block = None  # (``block_offset``'s, -1 for none)

    def __eq__(self, other):
        """Selections are equal when they index equal input shapes with the same index
        (the plan cache compares the attributes of two graphs' nodes by value)."""
        if type(other) is not Selection:
            return NotImplemented
        return self.input_shape == other.input_shape and same_index(self.index, other.index)

    __hash__ = None

    def gather(self, x):
        """``x[index]`` as a new C-contiguous array (never a view of ``x``)."""
        if not self.basic:
            along = _along_one_axis(self.index)
            if along is not None:
                return np.take(x, along[1], axis=along[0])
        selected = x[self.index]
        if self.basic:
            return selected.copy(order="C")
        return np.asarray(selected, order="C")  # advanced indexing always copies

    def scatter_add(self, values, target):
        """``target[index] += values``, with repeated positions accumulating."""
        if self.basic:
            shape, strides, offset = self.layout()
            _strided.strided_scatter_add(values, shape, strides, target, offset)
        else:
            _strided.put_add(values.reshape(-1), self.flat_map(), target.reshape(-1))

    def scatter_add_numpy(self, values, target):
        """:meth:`scatter_add` in NumPy, each position receiving its values in the kernels'
        order (``np.add.at`` adds repeated positions one after another, in index order)."""
        if self.basic:
            shape, strides, offset = self.layout()
            _numpy_vjp.scatter_add(values, shape, strides, target.reshape(-1), offset)
        else:
            np.add.at(target.reshape(-1), self.flat_map(), values.reshape(-1))

    def scatter_add_batched(self, values, targets):
        """:meth:`scatter_add` for each row of a leading batch dimension, in one kernel call
        for basic selections (the batch is one more strided dimension)."""
        if not self.basic:
            for b in range(values.shape[0]):
                # ``[b, ...]``: a view even when a row is 0-d (``[b]`` would be a scalar copy).
                self.scatter_add(values[b, ...], targets[b, ...])
            return
        shape, strides, offset = self.layout()
        row = int(np.prod(self.input_shape, dtype=np.int64))
        _strided.strided_scatter_add(
            values, (values.shape[0],) + tuple(shape), [row] + strides, targets, offset
        )

    def layout(self):
        """Shape, element strides and flat offset of a basic selection's view."""
        if self._layout is None:
            key = tuple(
                ("slice", i.start, i.stop, i.step) if isinstance(i, slice) else i
                for i in self.index
            )
            shape, strides, offset = _basic_layout(self.input_shape, key)
            self._layout = (shape, list(strides), offset)
        return self._layout

    def block_offset(self):
        """Where a basic selection is one C-ordered block of the (C-contiguous) input: its
        element offset there; else None (advanced indexing, a step, a partial inner axis)."""
        if not self.basic:
            return None
        if self._block is None:
            shape, strides, offset = self.layout()
            expected = 1
            for n, stride in zip(reversed(shape), reversed(strides)):
                if n != 1 and stride != expected:
                    offset = -1
                    break
                expected *= n
            self._block = offset
        return self._block if self._block >= 0 else None

    def exec_ints(self, n):
        """``ints`` of the strided drivers (``_strided``) for a basic selection of ``n``
        elements."""
        found = self._ints
        if found is not None and found[0] == n:  # (a recorded program's repeated ``s[k]``)
            return found[1]
        shape, strides, offset = self.layout()
        size = 1
        for d in self.input_shape:
            size *= d
        ints = _strided.strided_ints(n, size, offset, tuple(shape), tuple(strides))
        self._ints = (n, ints)
        return ints

    def flat_map(self):
        """Flat input position of each selected element, in the selection's C order."""
        if self._flat is None:
            size = int(np.prod(self.input_shape, dtype=np.int64))
            positions = np.arange(size, dtype=np.int64).reshape(self.input_shape)
            self._flat = self.gather(positions).reshape(-1)
        return self._flat

    def unique_positions(self):
        """Sorted distinct flat positions selected (those a setitem overwrites)."""
        if self._unique is None:
            self._find_repeats()
        return self._unique

    def last_writes(self):
        """None when no position is selected twice; otherwise a bool mask over the selected
        elements (C order), true for each position's last occurrence: the one whose value
        an assignment keeps, as NumPy's assignment goes in order."""
        if self.basic:
            return None  # a strided view never selects a position twice
        if self._unique is None:
            self._find_repeats()
        return self._last

    def _find_repeats(self):
        flat = self.flat_map()
        reversed_unique, first_from_end = np.unique(flat[::-1], return_index=True)
        self._unique = reversed_unique
        if reversed_unique.size < flat.size:
            last = np.zeros(flat.size, dtype=bool)
            last[flat.size - 1 - first_from_end] = True
            self._last = last


def _along_one_axis(items):
    """``(axis, indices)`` when the index is full slices then one integer array
    (``x[:, :, idx]``), else None. NumPy lays that result out with the indexed axis first and
    copying it to C order is slow; ``np.take`` writes it in C order (1000x1000 float64 by 2000
    indices along axis 1: 10.4 ms as ``asarray(x[:, idx], order="C")``, 1.1 ms by ``take``)."""
    last = items[-1] if items else None
    if type(last) is not np.ndarray or last.ndim == 0 or last.dtype.kind not in "iu":
        return None
    for item in items[:-1]:
        if type(item) is not slice or item != slice(None):
            return None
    return len(items) - 1, last


@functools.lru_cache(maxsize=4096)
def _basic_layout(input_shape, key):
    """Shape, element strides and offset of ``x[index]`` (``key``: the index, slices as
    tuples) for an ``x`` of ``input_shape``; cached, as programs repeat their indexing."""
    index = tuple(slice(*i[1:]) if isinstance(i, tuple) else i for i in key)
    # Index a fake byte array with the input's element strides: NumPy works out the view
    # (every basic form, negative steps included) without touching memory.
    strides = _broadcast.contiguous_strides(input_shape)
    fake = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), input_shape, strides)
    view = fake[index]
    offset = 0
    if view.size:
        offset = view.__array_interface__["data"][0] - fake.__array_interface__["data"][0]
    return view.shape, tuple(view.strides), offset


def _index_key(index):
    """A hashable key for ``index`` when it is a basic index that can key a cache: an int,
    a slice of ints and ``None``, or a tuple of those, ``None`` and ``...``; else None.
    Exact types only (``True`` and ``1`` index differently), and slices become tuples (they
    are not hashable before Python 3.12)."""
    if type(index) is int:
        return index
    if type(index) is slice:
        # ``_slice_key``, inlined for the most common index.
        start, stop, step = index.start, index.stop, index.step
        if (
            (start is None or type(start) is int)
            and (stop is None or type(stop) is int)
            and (step is None or type(step) is int)
        ):
            return ("slice", start, stop, step)
        return None
    if type(index) is not tuple:
        return None
    key = []
    for item in index:
        if type(item) is int or item is None or item is Ellipsis:
            key.append(item)
        elif type(item) is slice:
            part = _slice_key(item)
            if part is None:
                return None
            key.append(part)
        else:
            return None
    return tuple(key)


def _slice_key(item):
    parts = (item.start, item.stop, item.step)
    for part in parts:
        if part is not None and type(part) is not int:
            return None
    return ("slice", *parts)


def same_index(a, b):
    """Whether two normalized indices select alike: items of the same types, equal values,
    index arrays of the same dtype, shape and contents."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if type(x) is not type(y):
            return False
        if type(x) is np.ndarray:
            if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
                return False
        elif type(x) is slice:
            if not same_index((x.start, x.stop, x.step), (y.start, y.stop, y.step)):
                return False
        elif x != y:
            return False
    return True


def _offsets_ints(n, selection):
    """``ints`` of the drivers that read an advanced selection's flat map: ``[n, size,
    offsets..]``."""
    size = int(np.prod(selection.input_shape, dtype=np.int64))
    return np.concatenate(([n, size], selection.flat_map())).astype(np.int64)


def _exec_sizes(node):
    n = 1
    for d in node.shape:
        n *= d
    return n


@cuda_twin("indexing", "GetItem")
class GetItem(Op):
    """``x[index]`` for every NumPy index form; VJP scatters (and accumulates) back."""

    name = "getitem"
    family = "indexing"
    method = False

    def __init__(self):
        # The attrs (and their Selection) per (shape, strides, dtype, index) of basic
        # selections, so that a program's repeated ``x[i]`` skips building them.
        self._run_cache = {}
        super().__init__()

    def prepare(self, values, attrs):
        (x,) = values
        x = np.asarray(x, order="C")
        selection = Selection(x.shape, attrs["index"])
        return [x], {"index": selection.index, "selection": selection}

    def forward(self, arrays, attrs):
        return attrs["selection"].gather(arrays[0])

    forward_numpy = forward  # NumPy already (tier 0 records it)

    def _run(self, arrays, attrs):
        key = None
        if len(arrays) == 1 and len(attrs) == 1:
            index = attrs.get("index")
            if type(index) is not int:  # an int is its own key (``s[k]``, the common case)
                index = _index_key(index)
            if index is not None:
                x = arrays[0]
                key = (x.shape, x.strides, x.dtype, index)
                found = self._run_cache.get(key)
                if found is not None:
                    # Selection.gather of a basic index (it always copies).
                    return arrays, found, x[found["index"]].copy()
        return self._run_and_remember(key, arrays, attrs)

    def input_block(self, attrs):
        return attrs["selection"].block_offset()

    def forward_spec(self, arrays, attrs, output):
        # A strided read for a basic index; else output[i] = input[flat_map[i]] (what NumPy
        # gathers, worked out once from the index, which the attrs hold).
        selection = attrs["selection"]
        n = output.size
        if selection.basic:
            return _strided.gather_driver, selection.exec_ints(n), ()
        return _strided.take_driver, _offsets_ints(n, selection), ()

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        attrs["selection"].scatter_add(grad_output, grad_input)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        attrs["selection"].scatter_add_numpy(grad_output, grad_input)

    def vjp_batched(self, k, grad_outputs, saved, attrs, grad_inputs):
        attrs["selection"].scatter_add_batched(grad_outputs, grad_inputs)

    def exec_spec(self, k, node):
        selection = node.attrs["selection"]
        n = _exec_sizes(node)
        if selection.basic:
            return ExecSpec(_strided.scatter_add_driver, (), selection.exec_ints(n), ())
        size = int(np.prod(selection.input_shape, dtype=np.int64))
        return ExecSpec(_strided.put_add_driver, (selection.flat_map(),), (n, size), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        return call("_index_scatter", grad_output, source=attrs)

    def make_function(self):
        return None


@cuda_twin("indexing", "IndexScatter")
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

    def forward_numpy(self, arrays, attrs):
        selection = attrs["selection"]
        out = np.zeros(selection.input_shape, dtype=arrays[0].dtype)
        np.add.at(out.reshape(-1), selection.flat_map(), arrays[0].reshape(-1))
        return out

    def forward_spec(self, arrays, attrs, output):
        # Zeros, then the scatter-add of ``forward`` (adding to +0 as it does, so -0.0 gives
        # +0.0 alike, and repeated positions accumulate in the same order).
        selection = attrs["selection"]
        n = arrays[0].size
        if selection.basic:
            return _strided.scatter_driver, selection.exec_ints(n), ()
        return _strided.put_driver, _offsets_ints(n, selection), ()

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        gathered = attrs["selection"].gather(grad_output)
        _strided.accumulate(gathered.reshape(-1), grad_input.reshape(-1))

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        gathered = attrs["selection"].gather(grad_output)
        _numpy_vjp.add_into(grad_input.reshape(-1), gathered.reshape(-1))

    def exec_spec(self, k, node):
        # The selection of the scattered gradient, added into this node's input.
        selection = node.attrs["selection"]
        if selection.basic:
            n = int(np.prod(selection.layout()[0], dtype=np.int64))
            return ExecSpec(_strided.gather_add_driver, (), selection.exec_ints(n), ())
        flat = selection.flat_map()
        operands = (flat,)
        return ExecSpec(_strided.take_add_driver, operands, (flat.size, _exec_sizes(node)), ())

    def rule(self, k, grad_output, inputs, output, attrs):
        return call("getitem", grad_output, index=attrs["index"])

    def make_function(self):
        return None


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


_INDEX = np.empty(0, dtype=np.int64)


@njit(cache=True, nogil=True)
def copy_except_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``setitem``'s VJP for the written tensor:
    :func:`_copy_except` of the ``ints[0]`` gradient elements, skipping the ``ints[1]``
    sorted positions at ``operands[1]`` (int64), into the target."""
    n, m = ints[0], ints[1]
    _copy_except(array_at(operands[0], n, like), array_at(operands[1], m, _INDEX),
                 array_at(operands[2], n, like))


@njit(cache=True, nogil=True)
def value_add_driver(operands, ints, floats, like):
    """The compiled executor's driver of ``setitem``'s VJP for the value: per selected
    element ``i`` in C order, ``target[value[i]] += g[picked[i]]`` (``+= 0`` where
    ``picked[i]`` is -1, a value a repeated position overwrote), as ``SetItem.vjp`` adds the
    gathered gradient through the value's broadcast. ``ints``: ``[count, size, value_size]``;
    ``operands[1]`` the ``count`` picks then the ``count`` value positions (int64)."""
    count, size, value_size = ints[0], ints[1], ints[2]
    grad = array_at(operands[0], size, like)
    maps = array_at(operands[1], 2 * count, _INDEX)
    target = array_at(operands[2], value_size, like)
    for i in range(count):
        at = maps[i]
        if at >= 0:
            target[maps[count + i]] += grad[at]
        else:
            target[maps[count + i]] += 0.0


def _value_maps(selection, value_shape):
    """``value_add_driver``'s maps: the flat position of each selected element (C order; -1
    where a later write to its position wins) and of the value element written there."""
    picked = selection.flat_map().copy()
    last = selection.last_writes()
    if last is not None:
        picked[~last] = -1
    shape = selection.input_shape
    selected = np.empty(shape, dtype=np.bool_)[selection.index].shape
    value_shape, _ = _value_layout(value_shape, selected)
    values = np.arange(int(np.prod(value_shape, dtype=np.int64)), dtype=np.int64)
    sources = np.broadcast_to(values.reshape(value_shape), selected).reshape(-1)
    return np.concatenate((picked, sources)).astype(np.int64)


def _value_layout(value_shape, target_shape):
    """The value's shape without the leading ones NumPy drops when assigning, and the
    element strides that broadcast it over the selected region."""
    shape = tuple(value_shape)
    while len(shape) > len(target_shape) and shape[0] == 1:
        shape = shape[1:]
    return shape, _broadcast.broadcast_strides(shape, target_shape)


def _assignment(selection, value_shape):
    """Where ``x[index] = v`` writes, for an advanced index: the flat positions of ``x`` it
    overwrites (each once) and the flat position in ``v`` of the value each one keeps.

    Which of a repeated position's values is kept is NumPy's choice (the last, in the order
    its assignment goes): found by NumPy's own assignment of the element numbers.
    """
    shape = selection.input_shape
    size = int(np.prod(shape, dtype=np.int64))
    selected = np.arange(size, dtype=np.int64).reshape(shape)[selection.index].shape
    count = int(np.prod(selected, dtype=np.int64))
    kept = np.full(size, -1, dtype=np.int64)
    kept.reshape(shape)[selection.index] = np.arange(count, dtype=np.int64).reshape(selected)
    targets = np.flatnonzero(kept >= 0)
    value_shape, _ = _value_layout(value_shape, selected)
    values = np.arange(int(np.prod(value_shape, dtype=np.int64)), dtype=np.int64)
    sources = np.broadcast_to(values.reshape(value_shape), selected).reshape(-1)
    return targets, sources[kept[targets]]


@cuda_twin("indexing", "SetItem")
class SetItem(Op):
    """``x[index] = v`` computed out of place; ``Tensor.__setitem__`` writes it back in place.

    As NumPy's assignment: ``v`` is cast to ``x``'s dtype and broadcast over the selection;
    with repeated positions the last write wins. The gradient is ``g`` for ``x`` except at the
    overwritten positions (zero there), and ``g`` gathered at the selection, summed over
    broadcasting, for ``v`` (zero for the values a repeated position overwrote).
    """

    name = "setitem"
    family = "indexing"
    n_inputs = 2
    method = False

    def prepare(self, values, attrs):
        x, v = values
        x = np.asarray(x, order="C")
        v = np.asarray(v, dtype=x.dtype, order="C")
        selection = Selection(x.shape, attrs["index"])
        return [x, v], {"index": selection.index, "selection": selection, "value_shape": v.shape}

    def forward(self, arrays, attrs):
        x, v = arrays
        out = x.copy()
        out[attrs["selection"].index] = v  # NumPy checks the index and the broadcast
        return out

    forward_numpy = forward  # NumPy already (tier 0 records it)

    def forward_spec(self, arrays, attrs, output):
        x, v = arrays
        selection = attrs["selection"]
        if selection.basic:
            shape, strides, offset = selection.layout()
            _, value_strides = _value_layout(v.shape, shape)
            ints = _strided.assign_ints(x.size, v.size, offset, tuple(shape), strides,
                                        value_strides)
            return _strided.assign_strided_driver, ints, ()
        targets, sources = _assignment(selection, v.shape)
        ints = np.concatenate(([x.size, v.size, targets.size], targets, sources))
        return _strided.assign_offsets_driver, ints.astype(np.int64), ()

    def exec_spec(self, k, node):
        # The same additions as ``vjp``, in the same order, through flat maps worked out
        # once from the index (constants of a table, as ``getitem``'s advanced map).
        selection = node.attrs["selection"]
        size = int(np.prod(selection.input_shape, dtype=np.int64))
        if k == 0:
            positions = selection.unique_positions().astype(np.int64)
            return ExecSpec(copy_except_driver, (positions,), (size, positions.size), ())
        value_shape = node.attrs["value_shape"]
        maps = _value_maps(selection, value_shape)
        value_size = int(np.prod(value_shape, dtype=np.int64))
        return ExecSpec(value_add_driver, (maps,), (maps.size // 2, size, value_size), ())

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        selection = attrs["selection"]
        if k == 0:
            positions = selection.unique_positions()
            _copy_except(grad_output.reshape(-1), positions, grad_input.reshape(-1))
            return
        gathered = selection.gather(grad_output)
        last = selection.last_writes()
        if last is not None:
            gathered.reshape(-1)[~last] = 0  # values overwritten by a later one get nothing
        _, strides = _value_layout(attrs["value_shape"], gathered.shape)
        _strided.strided_scatter_add(gathered, gathered.shape, strides, grad_input)

    def vjp_numpy(self, k, grad_output, saved, attrs, grad_input):
        selection = attrs["selection"]
        if k == 0:  # (``_copy_except``: no addition at the overwritten positions)
            keep = np.ones(grad_input.size, dtype=bool)
            keep[selection.unique_positions()] = False
            np.add(grad_input.reshape(-1), grad_output.reshape(-1), out=grad_input.reshape(-1),
                   where=keep)
            return
        gathered = selection.gather(grad_output)
        last = selection.last_writes()
        if last is not None:
            gathered.reshape(-1)[~last] = 0
        _, strides = _value_layout(attrs["value_shape"], gathered.shape)
        _numpy_vjp.scatter_add(gathered, gathered.shape, strides, grad_input.reshape(-1))

    def rule(self, k, grad_output, inputs, output, attrs):
        if k == 0:
            return call("setitem", grad_output, 0.0, index=attrs["index"])
        picked = call("getitem", grad_output, index=attrs["index"])
        last = attrs["selection"].last_writes()
        if last is not None:
            picked = picked * last.reshape(picked.shape).astype(picked.dtype)
        shape, _ = _value_layout(attrs["value_shape"], picked.shape)
        grad = _broadcast.sum_to_shape(picked, shape)
        if shape != attrs["value_shape"]:
            grad = call("reshape", grad, shape=attrs["value_shape"])
        return grad

    def make_function(self):
        return None


GetItem()
IndexScatter()
SetItem()
