"""Indexing on the device: ``t[index]``, its adjoint ``_index_scatter``, and ``t[index] = v``.

NumPy still interprets the index, on the host, through the CPU op's
:class:`autograd_nb.ops.indexing.Selection` (it only reads the indexed tensor's shape):

* a basic index (ints, slices, ``None``, ``...``) is a strided view: shape, element strides
  and offset, copied with the strided-copy kernel and scattered back with its accumulating
  (atomic) twin;
* an index with integer arrays or a bool mask is a flat map of input positions, built on the
  host once per op and copied to the device once (kept in the op's attrs, so backward reads
  it there); gathers are ``take``, VJPs ``put_add`` (atomic: repeated indices accumulate).

Index arrays that are CUDA tensors are copied to the host to be interpreted (as PyTorch does
for a bool mask, this synchronises).
"""

import numpy as np

from ..ops import _broadcast
from ..ops.indexing import _value_layout
from . import _device, _kernels
from .dispatch import BatchFirst, prepare_with_standins


def _contiguous(shape):
    return list(_broadcast.contiguous_strides(tuple(shape)))


def _host_item(item):
    return _device.to_host(item) if _device.is_device_array(item) else item


def _host_index(index):
    if isinstance(index, tuple):
        return tuple(_host_item(item) for item in index)
    return _host_item(index)


def _device_map(attrs, key, make):
    """A host int64 map made by ``make()``, copied to the device once and kept in attrs."""
    found = attrs.get(key)
    if found is None:
        found = attrs[key] = _device.to_device(np.ascontiguousarray(make(), dtype=np.int64))
    return found


def _assignment_maps(attrs, selection, selected):
    """For ``t[index] = v`` with an advanced index, on the device: the flat position in ``v``
    and in ``t`` of every element that the assignment keeps (the last of repeated ones)."""
    values_at = _device_map(
        attrs, "_device_values", lambda: _kept(selection, _value_positions(attrs, selected))
    )
    targets = _device_map(
        attrs, "_device_targets", lambda: _kept(selection, selection.flat_map())
    )
    return values_at, targets


def _selected_shape(selection):
    if selection.basic:
        return tuple(selection.layout()[0])
    # Index a zero-strided stand-in: NumPy works out the shape (bool masks too).
    fake = np.broadcast_to(np.zeros((), np.int8), selection.input_shape)
    return fake[selection.index].shape


def _row_size(selection):
    return int(np.prod(selection.input_shape, dtype=np.int64))


def _gather(selection, attrs, source, batch=None):
    """``source[index]`` as a new C-contiguous device array; with ``batch``, for each row of
    a leading dimension (one launch)."""
    shape = _selected_shape(selection)
    lead = () if batch is None else (batch,)
    out = _device.empty(lead + tuple(shape), source.dtype)
    if out.size == 0:
        return out
    if selection.basic:
        view_shape, strides, offset = selection.layout()
        view_shape, strides = tuple(view_shape), list(strides)
        if batch is not None:
            view_shape, strides = (batch,) + view_shape, [_row_size(selection)] + strides
        _kernels.copy_strided(source, offset, strides, out, 0, _contiguous(view_shape),
                              view_shape)
    else:
        _kernels.take(source, _device_map(attrs, "_device_flat", selection.flat_map), out,
                      batch or 1)
    return out


def _scatter_add(selection, attrs, values, target, batch=None):
    """``target[index] += values``; with ``batch``, for each row of a leading dimension
    (one launch)."""
    if values.size == 0:
        return
    if not selection.basic:
        _kernels.put_add(values, _device_map(attrs, "_device_flat", selection.flat_map),
                         target, batch or 1)
        return
    shape, strides, offset = selection.layout()
    shape, strides = tuple(shape), list(strides)
    if batch is not None:
        shape, strides = (batch,) + shape, [_row_size(selection)] + strides
    _kernels.add_strided(values, 0, _contiguous(shape), target, offset, strides, shape)


def _prepare(op, values, attrs):
    attrs = dict(attrs, index=_host_index(attrs["index"]))
    return prepare_with_standins(op, values, attrs)


class GetItem:
    """``x[index]``: a strided copy or a take; the VJP scatters (and accumulates) back."""

    takes_complex = True  # (dtype-generic copies and sums)

    prepare = staticmethod(_prepare)

    @staticmethod
    def forward(op, arrays, attrs):
        return _gather(attrs["selection"], attrs, arrays[0])

    @staticmethod
    def vjp(op, k, grad_output, saved, attrs, grad_input):
        _scatter_add(attrs["selection"], attrs, grad_output, grad_input)

    @staticmethod
    def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs):
        _scatter_add(attrs["selection"], attrs, grad_outputs, grad_inputs,
                     batch=grad_outputs.shape[0])


class IndexScatter(BatchFirst):
    """Scatter-add into zeros of the indexed shape (``getitem``'s recorded adjoint)."""

    takes_complex = True  # (dtype-generic copies and sums)

    @staticmethod
    def forward(op, arrays, attrs):
        selection = attrs["selection"]
        out = _device.zeros(selection.input_shape, arrays[0].dtype)
        _scatter_add(selection, attrs, arrays[0], out)
        return out

    @staticmethod
    def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs):
        gathered = _gather(attrs["selection"], attrs, grad_outputs, grad_outputs.shape[0])
        _device.add_into(grad_inputs, gathered)


def _value_positions(attrs, selected_shape):
    """For each selected element (C order), the position of the value written there."""
    shape, _ = _value_layout(attrs["value_shape"], selected_shape)
    size = int(np.prod(shape, dtype=np.int64))
    try:
        positions = np.broadcast_to(np.arange(size).reshape(shape), selected_shape)
    except ValueError:
        raise ValueError(
            f"could not broadcast input array from shape {attrs['value_shape']} into shape "
            f"{selected_shape}"
        ) from None
    return positions.reshape(-1)


def _kept(selection, positions):
    """The selected elements whose write survives (the last of repeated positions)."""
    last = selection.last_writes()
    return positions if last is None else positions[last]


class SetItem(BatchFirst):
    """``x[index] = v`` out of place: a copy of ``x`` with ``v`` written at the selection.

    Basic indices write through the strided kernel (``v`` broadcast by stride 0); array
    indices write only each position's last value, as NumPy's assignment does in order.
    """

    takes_complex = True  # (dtype-generic copies and sums)

    prepare = staticmethod(_prepare)

    @staticmethod
    def forward(op, arrays, attrs):
        x, v = arrays
        selection = attrs["selection"]
        out = _device.copy(x)
        selected = _selected_shape(selection)
        if selection.basic:
            _, strides, offset = selection.layout()
            value_shape, value_strides = _value_layout(attrs["value_shape"], selected)
            if _broadcast.broadcast_shapes(value_shape, selected) != tuple(selected):
                raise ValueError(
                    f"could not broadcast input array from shape {attrs['value_shape']} into "
                    f"shape {selected}"
                )
            _kernels.copy_strided(v, 0, value_strides, out, offset, strides, selected)
            return out
        values_at, targets = _assignment_maps(attrs, selection, selected)
        picked = _device.empty((values_at.size,), v.dtype)
        _kernels.take(v, values_at, picked)
        _kernels.put(picked, targets, out)
        return out

    @staticmethod
    def vjp_batched(op, k, grad_outputs, saved, attrs, grad_inputs):
        selection = attrs["selection"]
        batch = grad_outputs.shape[0]
        if k == 0:
            # g everywhere but at the overwritten positions.
            overwritten = _device_map(attrs, "_device_unique", selection.unique_positions)
            passed = _device.copy(grad_outputs)
            _kernels.fill_at(passed, overwritten, 0, batch)
            _device.add_into(grad_inputs, passed)
            return
        selected = _selected_shape(selection)
        if selection.basic:
            shape, strides, offset = selection.layout()
            _, value_strides = _value_layout(attrs["value_shape"], selected)
            value_row = int(np.prod(attrs["value_shape"], dtype=np.int64))
            _kernels.add_strided(grad_outputs, offset, [_row_size(selection)] + list(strides),
                                 grad_inputs, 0, [value_row] + list(value_strides),
                                 (batch,) + tuple(selected))
            return
        values_at, targets = _assignment_maps(attrs, selection, selected)
        picked = _device.empty((batch, targets.size), grad_outputs.dtype)
        _kernels.take(grad_outputs, targets, picked, batch)
        _kernels.put_add(picked, values_at, grad_inputs, batch)
