"""What Python's garbage collector sees of recorded graphs: as little as is safe.

Every recorded op leaves a :class:`~autograd_nb.tape.Node` and a few tuples, and they live
until backward. CPython's cyclic collector scans every object it tracks: a young-generation
collection scans the objects made since the last one, and a full collection, which runs each
time the survivors of younger collections reach a quarter of the old generation, scans every
tracked object in the process. A long graph keeps tens of thousands of nodes alive through
its forward pass, so with the collector on it triggers full collections over the whole heap
(numba, NumPy, and whatever else the program imported). Measured here: the 10,000-op scalar
graph of ``fastest_autograd`` took 172 ms per iteration with the collector on and 66 ms with
it off, in a process that had also imported torch and JAX. PyTorch's graph lives in C++, out
of the collector's sight.

A plain node can never be part of a reference cycle that the collector would have to break:
it refers only to other nodes (the graph is acyclic, ordered by ``seq``), leaf tensors, NumPy
arrays, the registered op and its shared attributes. The only way back from that graph to a
node is through a tensor's ``.grad``: ``backward(create_graph=True)`` stores a gradient whose
graph reaches the leaf it is stored on (torch documents the cycle and warns about it), and a
user may assign ``x.grad = y`` with ``y`` computed from ``x``. So:

* At the start of every collection (a ``gc.callbacks`` hook), the plain nodes among the
  youngest objects, with their ``edges`` and ``versions`` tuples, are untracked: the
  collector stops scanning them, and reference counting still frees them the moment the last
  tensor that reaches them goes. Nodes of custom Functions, whose ctx may hold anything, stay
  tracked.
* Storing a tensor that has a graph into any tensor's ``.grad`` calls :func:`keep_tracked`,
  which tracks that graph again and marks its nodes ``kept``, so the hook leaves them alone,
  and the collector finds and frees such a cycle as before.

``config.UNTRACK_GRAPHS = False`` turns the hook off (nodes untracked before stay so).
"""

import ctypes
import gc
from operator import attrgetter

from numba import config as numba_config
from numba import njit, types

from . import config
from .ops._pointers import load_address
from .tape import Node

_untrack = types.ExternalFunction("PyObject_GC_UnTrack", types.void(types.int64))

# CPython's object layout (checked below, on this interpreter): an object starts with its
# reference count and its type; a list's length and its item array follow that header.
_TYPE_OFFSET = 8
_LIST_SIZE_OFFSET = 16
_LIST_ITEMS_OFFSET = 24


@njit(cache=True)
def _untrack_nodes_in(young, node_type, edges_offset, versions_offset, kept_offset):
    """Untrack, in the list at address ``young``, each object of type ``node_type`` whose
    ``kept`` slot (at ``kept_offset``) is empty, and the objects in its ``edges`` and
    ``versions`` slots; return how many nodes. A node whose slots are still empty (another
    thread is building it) is left as it is."""
    size = load_address(young + _LIST_SIZE_OFFSET)
    items = load_address(young + _LIST_ITEMS_OFFSET)
    count = 0
    for i in range(size):
        obj = load_address(items + 8 * i)
        if load_address(obj + _TYPE_OFFSET) != node_type or load_address(obj + kept_offset):
            continue
        edges = load_address(obj + edges_offset)
        versions = load_address(obj + versions_offset)
        if edges == 0 or versions == 0:
            continue
        # PyObject_GC_UnTrack leaves an object that is already untracked alone.
        _untrack(obj)
        _untrack(edges)
        _untrack(versions)
        count += 1
    return count


def _word_at(address):
    return ctypes.c_ssize_t.from_address(address).value


def _slot_offset(name):
    """Where a node keeps its ``name`` slot, found by looking for a marker stored there."""
    probe = object.__new__(Node)
    marker = object()
    setattr(probe, name, marker)
    for offset in range(16, type(probe).__basicsize__, 8):
        if _word_at(id(probe) + offset) == id(marker):
            return offset
    return None


def _layout():
    """``(edges offset, versions offset, kept offset)`` where this interpreter lays objects
    out as the compiled walk reads them, else None."""
    probe = [object(), object()]
    if (
        _word_at(id(probe) + _TYPE_OFFSET) != id(list)
        or _word_at(id(probe) + _LIST_SIZE_OFFSET) != 2
        or _word_at(_word_at(id(probe) + _LIST_ITEMS_OFFSET) + 8) != id(probe[1])
    ):
        return None
    offsets = _slot_offset("edges"), _slot_offset("versions"), _slot_offset("kept")
    return None if None in offsets else offsets


_untrack_one = ctypes.pythonapi.PyObject_GC_UnTrack
_untrack_one.argtypes = [ctypes.py_object]
_untrack_one.restype = None
_track_one = ctypes.pythonapi.PyObject_GC_Track
_track_one.argtypes = [ctypes.py_object]
_track_one.restype = None

_edges_of = attrgetter("edges")
_versions_of = attrgetter("versions")


def _untrack_young_in_python(young):
    """:func:`_untrack_nodes_in` without compiled code (``NUMBA_DISABLE_JIT``, or an
    interpreter laid out otherwise): one ctypes call per object."""
    nodes = [
        obj for obj in young
        if type(obj) is Node and hasattr(obj, "versions") and not hasattr(obj, "kept")
    ]
    for obj in [*nodes, *map(_edges_of, nodes), *map(_versions_of, nodes)]:
        _untrack_one(obj)
    return len(nodes)


#: The slot offsets the compiled walk uses; None: walk in Python.
SLOT_OFFSETS = None if numba_config.DISABLE_JIT else _layout()


def untrack_young_nodes():
    """Untrack the plain nodes among the youngest objects, with their edge and version tuples.

    Returns the number of nodes untracked.
    """
    young = gc.get_objects(0)
    if SLOT_OFFSETS is None:
        return _untrack_young_in_python(young)
    return _untrack_nodes_in(id(young), id(Node), *SLOT_OFFSETS)


def _on_collection(phase, info):
    if phase == "start" and config.UNTRACK_GRAPHS:
        untrack_young_nodes()


def keep_tracked(tensor):
    """Track ``tensor``'s recorded graph again, for good: it is being stored as a ``.grad``.

    Nothing to do for a tensor without a graph. Costs a walk over the nodes that are not kept
    already; a cycle through ``.grad`` is rare (torch warns about the one that
    ``backward(create_graph=True)`` makes).
    """
    node = tensor._node
    if node is None:
        return
    stack = [node]
    while stack:
        node = stack.pop()
        if getattr(node, "kept", False):
            continue  # a kept node's whole graph was kept with it
        node.kept = True
        for obj in (node, node.edges):
            if not gc.is_tracked(obj):
                _track_one(obj)
        stack.extend(edge for edge in node.edges if isinstance(edge, Node))


if SLOT_OFFSETS is not None:
    untrack_young_nodes()  # load (or compile, once per machine) now, not in a collection
gc.callbacks.append(_on_collection)
