"""Forward rules of indexing: linear in the indexed values.

A batch of tangents keeps its batch in front: a basic selection (slices, integers, None,
Ellipsis) takes full slices over the batch first; an advanced one (arrays, masks), whose
selected axes NumPy may move to the front, reads the batched tangent as ``(batch size,
elements)`` through the selection's flat map of input positions instead.
"""

import numpy as np

from ...ops.indexing import Selection
from ...ops.registry import call
from . import aligned, batch_shape, jvp_rule, zeros_for


def _batched_selection(selection, batch):
    """``(selection, flat)``: ``selection`` of a tensor of shape ``input_shape`` as one of a
    batched tangent. ``flat``: the tangent must be read as ``(batch size, elements)`` (an
    advanced selection)."""
    if selection.basic:
        index = (slice(None),) * len(batch) + tuple(selection.index)
        return Selection(tuple(batch) + selection.input_shape, index), False
    count = int(np.prod(batch))
    size = int(np.prod(selection.input_shape, dtype=np.int64))
    return Selection((count, size), (slice(None), selection.flat_map())), True


def _selected_shape(selection):
    return tuple(np.broadcast_to(np.zeros((), dtype=bool), selection.input_shape)[
        selection.index].shape)


def _getitem(tangents, primals, output, attrs):
    (tangent,) = tangents
    if tangent is None:
        return None
    batch = batch_shape(tangents, primals)
    if not batch:
        return call("getitem", tangent, index=attrs["index"])
    selection, flat = _batched_selection(attrs["selection"], batch)
    if not flat:
        return call("getitem", tangent, index=selection.index)
    rows = call("reshape", tangent, shape=selection.input_shape)
    picked = call("getitem", rows, index=selection.index)
    return call("reshape", picked, shape=batch + tuple(output.shape))


def _index_scatter(tangents, primals, output, attrs):
    (tangent,) = tangents
    if tangent is None:
        return None
    batch = batch_shape(tangents, primals)
    if not batch:
        return call("_index_scatter", tangent, source=attrs)
    selection, flat = _batched_selection(attrs["selection"], batch)
    source = {"index": selection.index, "selection": selection}
    if not flat:
        return call("_index_scatter", tangent, source=source)
    rows = call("reshape", tangent, shape=(selection.input_shape[0], -1))
    scattered = call("_index_scatter", rows, source=source)
    return call("reshape", scattered, shape=batch + tuple(output.shape))


jvp_rule("getitem")(_getitem)
jvp_rule("_index_scatter")(_index_scatter)


@jvp_rule("setitem")
def _setitem(tangents, primals, output, attrs):
    """``x[index] = v``, out of place: the tangent is ``tx`` with ``tv`` written at ``index``."""
    batch = batch_shape(tangents, primals)
    target, value = tangents
    target = zeros_for(output, batch) if target is None else target
    value = zeros_for(primals[1], batch) if value is None else value
    if not batch:
        return call("setitem", target, value, index=attrs["index"])
    selected = _selected_shape(attrs["selection"])
    value = call("broadcast_to", aligned(value, primals[1], len(selected)),
                 shape=batch + selected)
    selection, flat = _batched_selection(attrs["selection"], batch)
    if not flat:
        return call("setitem", target, value, index=selection.index)
    rows = call("reshape", target, shape=selection.input_shape)
    values = call("reshape", value, shape=(selection.input_shape[0], -1))
    written = call("setitem", rows, values, index=selection.index)
    return call("reshape", written, shape=batch + tuple(output.shape))
