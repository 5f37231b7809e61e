"""A recorded graph checked against a cached template, and its saved buffers gathered, in
compiled code.

:class:`autograd_nb.engine.plan_cache.Template` replays a backward when the graph has the
template's structure. Checking that in Python costs ~0.1 us per node (a walk over the edges,
then maps over the nodes' ops, dtypes and attributes), and gathering the saved buffers as much
again: more than the compiled backward itself on a graph of scalars. Here the same checks read
the nodes' memory directly (:mod:`autograd_nb.layout`), at a few nanoseconds per node:

* :func:`match` walks the template's tree from the outputs, checking each position holds a
  plain :class:`~autograd_nb.tape.Node` with the template's op, the very dtype and attributes
  objects, the variadic ops' arity, the other edges (to earlier positions, to nothing, to the
  same leaf tensors, all distinct), and notes the oldest node's ``seq``;
* :func:`gather` writes the saved arrays' addresses into the executor's object table and
  takes a reference to each (:func:`release` drops them after the run), so that they outlive
  the run even if another thread frees the graph meanwhile;
* :func:`free` does ``Node.free`` for the nodes that saved buffers, as ``setattr`` would.

They only ever say "verified": anything they do not recognise (another dtype object, an
attribute dict that is equal but not the same, a custom Function's node, a freed buffer)
sends the backward to the Python check, which decides as before. :func:`found_layout` is
None where :mod:`autograd_nb.layout` does not hold (then the Python check always runs).
"""

import numpy as np
from numba import njit

from .. import layout
from ..layout import (
    ITEMS_OFFSET,
    SIZE_OFFSET,
    TYPE_OFFSET,
    decref,
    incref,
    read_int,
    replace_slot,
)
from ..ops._pointers import load_address
from ..tape import Node
from ..tensor import Tensor

# Entries of the layout array (:func:`found_layout`).
NODE_TYPE, TUPLE_TYPE, NONE, TENSOR_TYPE, ARRAY_TYPE, TRUE = range(6)
OP, EDGES, ATTRS, DTYPE, SAVED_INPUTS, SAVED_OUTPUT, SEQ, FREED, INTS = range(6, 15)


# The helpers take ints, not the layout array: an array passed to a function costs a reference
# count increment and decrement (atomic), which made ``match`` five times slower.
@njit(inline="always")
def _item(tuple_address, k, tuple_type):
    """Item ``k`` of the tuple at ``tuple_address``; 0 where it is no tuple that long."""
    if (
        tuple_address != 0
        and load_address(tuple_address + TYPE_OFFSET) == tuple_type
        and k < load_address(tuple_address + SIZE_OFFSET)
    ):
        return load_address(tuple_address + ITEMS_OFFSET + 8 * k)
    return 0


def pack(*parts):
    """The int64 arrays ``parts`` as one: ``len(parts) + 1`` offsets, then the parts (part
    ``i`` is ``packed[packed[i]:packed[i + 1]]``). A compiled call costs ~0.1 us per array
    it is passed (11 arguments: ~1.1 us, 3: ~0.2 us), more than the check of a small graph."""
    parts = [np.asarray(part, dtype=np.int64).ravel() for part in parts]
    offsets = np.cumsum([len(parts) + 1] + [len(part) for part in parts])
    return np.concatenate([offsets.astype(np.int64), *parts])


@njit(inline="always")
def _part(packed, i):
    return packed[packed[i]:packed[i + 1]]


@njit(cache=True)
def match_packed(n_roots, template, lay, found):
    """:func:`match` with the template's arrays :func:`pack`-ed into one, in its order
    (``tree`` to ``leaf_links``)."""
    return match(n_roots, _part(template, 0), _part(template, 1), _part(template, 2),
                 _part(template, 3), _part(template, 4), _part(template, 5),
                 _part(template, 6), _part(template, 7), lay, found)


@njit
def match(  # noqa: C901 (njit: a loop per template table; arrays passed to helpers cost refcounts)
    n_roots, tree, ops, dtypes, attrs, variadic, links, nones, leaf_links, lay, found,
):
    """Fill ``found`` from the graph whose ``n_roots`` distinct outputs' addresses are its
    first entries: the nodes' addresses by position (``ops.shape[0]`` of them), then the
    leaves' by leaf index, then the oldest node's ``seq`` (-1 where ints are not read here);
    True where the graph verifiably has the template's structure. (One array for the three
    results: each array made costs ~0.15 us.)

    ``tree`` is ``(parent position, edge index)`` pairs, flat; ``links`` triples
    ``(position, edge index, position)``; ``nones`` pairs; ``variadic`` pairs ``(position,
    arity)``; ``leaf_links`` triples ``(position, edge index, leaf index)``; ``ops``,
    ``dtypes`` and ``attrs`` the template's objects' addresses by position."""
    node_type, tuple_type, none, tensor_type = (
        lay[NODE_TYPE], lay[TUPLE_TYPE], lay[NONE], lay[TENSOR_TYPE])
    op_at, edges_at, attrs_at, dtype_at, seq_at = (
        lay[OP], lay[EDGES], lay[ATTRS], lay[DTYPE], lay[SEQ])
    read_ints = lay[INTS] != 0
    n_nodes = ops.shape[0]
    nodes = found[:n_nodes]
    leaves = found[n_nodes:found.shape[0] - 1]
    n = n_roots
    if n > n_nodes:
        return False
    for r in range(n_roots):
        if load_address(nodes[r] + TYPE_OFFSET) != node_type:
            return False
    for t in range(tree.shape[0] // 2):
        child = _item(load_address(nodes[tree[2 * t]] + edges_at), tree[2 * t + 1], tuple_type)
        if child == 0 or load_address(child + TYPE_OFFSET) != node_type:
            return False
        nodes[n] = child
        n += 1
    if n != nodes.shape[0]:
        return False
    smallest = -1
    for p in range(n):
        node = nodes[p]
        if (
            load_address(node + op_at) != ops[p]
            or load_address(node + dtype_at) != dtypes[p]
            or load_address(node + attrs_at) != attrs[p]
        ):
            return False
        if read_ints:
            seq = read_int(load_address(node + seq_at))
            if seq < 0:
                return False
            if smallest < 0 or seq < smallest:
                smallest = seq
    for t in range(variadic.shape[0] // 2):
        edges = load_address(nodes[variadic[2 * t]] + edges_at)
        if (
            edges == 0
            or load_address(edges + TYPE_OFFSET) != tuple_type
            or load_address(edges + SIZE_OFFSET) != variadic[2 * t + 1]
        ):
            return False
    for t in range(links.shape[0] // 3):
        edge = _item(load_address(nodes[links[3 * t]] + edges_at), links[3 * t + 1], tuple_type)
        if edge == 0 or edge != nodes[links[3 * t + 2]]:
            return False
    for t in range(nones.shape[0] // 2):
        edge = _item(load_address(nodes[nones[2 * t]] + edges_at), nones[2 * t + 1], tuple_type)
        if edge != none:
            return False
    leaves[:] = 0
    for t in range(leaf_links.shape[0] // 3):
        edge = _item(load_address(nodes[leaf_links[3 * t]] + edges_at), leaf_links[3 * t + 1],
                     tuple_type)
        j = leaf_links[3 * t + 2]
        if edge == 0 or load_address(edge + TYPE_OFFSET) != tensor_type:
            return False
        if leaves[j] == 0:
            leaves[j] = edge
        elif leaves[j] != edge:
            return False
    ordered = np.sort(leaves)
    for j in range(ordered.shape[0]):
        if ordered[j] == 0 or (j and ordered[j] == ordered[j - 1]):
            return False  # a leaf not reached, or two of the template's are one here
    found[found.shape[0] - 1] = smallest
    return True


@njit(cache=True)
def gather(nodes, input_nodes, input_indices, output_nodes, objects, ids, lay):
    """Write the address of each saved array (the inputs ``input_indices`` of the nodes at
    ``input_nodes``, then the outputs of those at ``output_nodes``) at ``ids[objects[t]]``,
    holding a reference to each; True if all were found (else none is held, and the caller
    gathers them again).
    Each must be a plain array (a freed node's slots hold None)."""
    tuple_type, array_type = lay[TUPLE_TYPE], lay[ARRAY_TYPE]
    inputs_at, output_at = lay[SAVED_INPUTS], lay[SAVED_OUTPUT]
    n_inputs = input_nodes.shape[0]
    total = objects.shape[0]
    for t in range(total):
        if t < n_inputs:
            found = _item(load_address(nodes[input_nodes[t]] + inputs_at), input_indices[t],
                          tuple_type)
        else:
            found = load_address(nodes[output_nodes[t - n_inputs]] + output_at)
        if found == 0 or load_address(found + TYPE_OFFSET) != array_type:
            return False
        ids[objects[t]] = found
    for t in range(total):
        incref(ids[objects[t]])
    return True


@njit(cache=True)
def gather_packed(nodes, template, ids, lay):
    """:func:`gather` with ``input_nodes``, ``input_indices``, ``output_nodes`` and
    ``objects`` :func:`pack`-ed into one, in that order."""
    return gather(nodes, _part(template, 0), _part(template, 1), _part(template, 2),
                  _part(template, 3), ids, lay)


@njit(cache=True)
def release(ids, objects):
    """Drop the references :func:`gather` took."""
    for t in range(objects.shape[0]):
        decref(ids[objects[t]])


@njit(cache=True)
def free(nodes, positions, lay):
    """``Node.free`` of the nodes at ``positions`` (all needing saved buffers): their saved
    buffers set to None and ``freed`` to True, as ``setattr`` would."""
    none, true = lay[NONE], lay[TRUE]
    inputs_at, output_at, freed_at = lay[SAVED_INPUTS], lay[SAVED_OUTPUT], lay[FREED]
    for t in range(positions.shape[0]):
        node = nodes[positions[t]]
        replace_slot(node + inputs_at, none)
        replace_slot(node + output_at, none)
        replace_slot(node + freed_at, true)


def _layout():
    if not layout.SUPPORTED:
        return None
    names = ("op", "edges", "attrs", "dtype", "saved_inputs", "saved_output", "seq", "freed")
    offsets = [layout.slot_offset(Node, name) for name in names]
    if None in offsets:
        return None
    types = [id(Node), id(tuple), id(None), id(Tensor), id(np.ndarray), id(True)]
    return np.array(types + offsets + [int(layout.ints_as_expected())], dtype=np.int64)


_UNKNOWN = object()
_found = _UNKNOWN


def found_layout():
    """The types, slot offsets and flags the compiled readers take (found on first use, when
    ``Tensor`` exists); None: the Python checks only."""
    global _found
    if _found is _UNKNOWN:
        _found = _layout()
    return _found
