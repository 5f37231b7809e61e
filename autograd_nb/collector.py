"""What Python's garbage collector sees of recorded graphs: as little as is safe.

Every recorded op leaves a Tensor, a :class:`~autograd_nb.tape.Node` and a few tuples, and
a long forward pass keeps tens of thousands of them alive until backward. CPython's cyclic
collector scans what it tracks: a young-generation collection the objects made since the last
one, and a full collection, which runs each time the survivors of younger collections reach a
quarter of the old generation, every tracked object in the process (numba's, NumPy's, and
whatever else the program imported). So with the collector on, a long graph triggers full
collections over the whole heap again and again: before this module, the 10,000-op scalar
graph of ``fastest_autograd`` took 298 ms per iteration with the collector on and 76 ms with
it off, in a process that had also imported torch and JAX (``docs/benchmarking.rst``).
PyTorch keeps its graph in C++, out of the collector's sight.

The collector only has to see objects that can be on a reference cycle, and tensors and plain
nodes almost never are. A node refers to other nodes (the graph is acyclic: ordered by
``seq``), to leaf tensors, to NumPy arrays, to its registered op and to shared attributes; a
tensor refers to its buffer, its node and its ``.grad``. So every path from a tensor or a node
back to itself goes through some tensor's ``.grad``: ``backward(create_graph=True)`` stores a
gradient whose graph reaches the leaf it is stored on (torch documents that cycle and warns
about it), and a user may assign ``x.grad = y`` with ``y`` computed from ``x``, or
``x.grad = w; w.grad = x``. Hence:

* At the start of every collection (a ``gc.callbacks`` hook), the Tensors and plain nodes among
  the youngest objects, with the nodes' ``edges`` and ``versions`` tuples, are untracked: the
  collector no longer scans them, and reference counting frees them, as before, the moment
  they are no longer used. Subclasses (the nodes of custom Functions, whose ctx may hold
  anything) stay tracked. The youngest objects are listed (``gc.get_objects(0)``), walked and
  released inside one compiled call: while that list exists, it holds a reference to every
  young object, also to a tuple that another thread is still filling from an iterator
  (``tuple(int(n) for n in v)``), and CPython refuses to resize a tuple that anything else
  holds (``SystemError: bad argument to internal function``). No bytecode runs inside the
  call, so no other thread does either. The Python walk (no compiled walk here) has no such
  call: it untracks only while no other thread is running Python.
* Storing a tensor as another's ``.grad`` calls :func:`keep_tracked` (except for a fresh
  gradient that backward has just made, which nothing else can reach): the owner, the stored
  tensor and the whole graph behind it (its nodes, their tuples, the leaves they reach) are
  tracked again and marked ``kept``, and the hook leaves them alone from then on. Every tensor
  or node on a cycle is one of those, so the collector finds and frees such cycles as before.

``config.UNTRACK_GRAPHS = False`` turns the hook off (what it untracked before stays so).

A collection can start at any allocation, also while numba compiles or imports: the hook must
then run nothing of numba's. :func:`watch_tensors` loads the compiled walk at import, and only
then hands the hook its compiled entry point, which it calls directly (no dispatch, so no
typing, compiling or importing can start in a collection). It does not re-enter itself.

Nor may the hook run bytecode. Python runs a signal's handler (Ctrl-C's KeyboardInterrupt) at
the next bytecode that checks for one, and a handler that raises inside a ``gc.callbacks``
function has its exception reported and dropped (``Exception ignored in: <function
_on_collection ...> KeyboardInterrupt``), even at the function's first instruction, before any
``try`` could catch it. An interrupt that arrives during a long compiled call or a collection
is pending when the next collection starts or ends, so it landed there often (in a
``create_graph=True`` gradient of a long chain: ``tests/reliability/test_fault_probes.py``
sets off alarms during one). So once compiled code is loaded, the callback in
``gc.callbacks`` is a C function (:func:`_on_collection_compiled`, called through ctypes,
which runs no bytecode either): an interrupt stays pending through the collection, and Python
raises it at the first bytecode after it. The Python hook serves only until then, and without
the JIT.
"""

import atexit
import ctypes
import functools
import gc
import sys
import threading
from operator import attrgetter

from numba import cfunc, njit, types

from . import config, layout
from .layout import ITEMS_OFFSET, SIZE_OFFSET, TYPE_OFFSET
from .ops._pointers import load_address
from .tape import Node

_untrack = types.ExternalFunction("PyObject_GC_UnTrack", types.void(types.int64))
_call_object = types.ExternalFunction("PyObject_CallObject",
                                      types.int64(types.int64, types.int64))
_decref = types.ExternalFunction("Py_DecRef", types.void(types.int64))
_clear_error = types.ExternalFunction("PyErr_Clear", types.void())
_unicode_length = types.ExternalFunction("PyUnicode_GetLength", types.int64(types.int64))
_get_attribute = types.ExternalFunction("PyObject_GetAttr",
                                        types.int64(types.int64, types.int64))
_write_unraisable = types.ExternalFunction("PyErr_WriteUnraisable", types.void(types.int64))
_is_true = types.ExternalFunction("PyObject_IsTrue", types.int32(types.int64))

#: ``gc.get_objects`` and its arguments ``(0,)``, called by address from the compiled walk.
_get_objects = gc.get_objects
_YOUNGEST = (0,)


@njit(cache=True)
def _untrack_young(
    get_objects, arguments, node_type, edges, versions, node_kept, tensor_type, tensor_kept,
    tuple_type,
):
    """``get_objects(*arguments)`` (the objects at these addresses: ``gc.get_objects(0)``),
    :func:`_untrack_listed` on that list, and the list released: the list never meets
    bytecode (see the module docstring). -1 where the call raised (the error is cleared: a
    collection goes on without untracking)."""
    young = _call_object(get_objects, arguments)
    if young == 0:
        _clear_error()
        return -1
    count = _untrack_listed(
        young, node_type, edges, versions, node_kept, tensor_type, tensor_kept, tuple_type
    )
    _decref(young)
    return count


@njit(cache=True)
def _untrack_listed(
    young, node_type, edges, versions, node_kept, tensor_type, tensor_kept, tuple_type
):
    """Untrack, in the list at address ``young``: each object of type ``node_type`` whose
    ``kept`` slot (at offset ``node_kept``) is empty, with the tuples in its slots at
    offsets ``edges`` and ``versions``, and each object of type ``tensor_type`` whose slot at
    ``tensor_kept`` is empty. Returns how many nodes and tensors. A node whose slots do not
    hold tuples (not set yet: another thread is building it) is left as it is: untracking
    anything but an object the collector knows would corrupt memory."""
    size = load_address(young + SIZE_OFFSET)
    items = load_address(young + ITEMS_OFFSET)
    count = 0
    for i in range(size):
        obj = load_address(items + 8 * i)
        kind = load_address(obj + TYPE_OFFSET)
        if kind == tensor_type:
            if not load_address(obj + tensor_kept):
                _untrack(obj)
                count += 1
        elif kind == node_type and not load_address(obj + node_kept):
            edge_tuple = load_address(obj + edges)
            version_tuple = load_address(obj + versions)
            if (
                edge_tuple
                and version_tuple
                and load_address(edge_tuple + TYPE_OFFSET) == tuple_type
                and load_address(version_tuple + TYPE_OFFSET) == tuple_type
            ):
                # PyObject_GC_UnTrack leaves an object that is already untracked alone.
                _untrack(obj)
                _untrack(edge_tuple)
                _untrack(version_tuple)
                count += 1
    return count


_untrack_one = ctypes.pythonapi.PyObject_GC_UnTrack
_untrack_one.argtypes = [ctypes.py_object]
_untrack_one.restype = None
_track_one = ctypes.pythonapi.PyObject_GC_Track
_track_one.argtypes = [ctypes.py_object]
_track_one.restype = None

_edges_of = attrgetter("edges")
_versions_of = attrgetter("versions")

#: The Tensor class (``tensor.py`` registers it with :func:`watch_tensors`).
_tensor_type = None
#: The arguments of :func:`_untrack_young` after the list; None: untrack in Python
#: (``NUMBA_DISABLE_JIT``, an interpreter laid out otherwise, or before Tensor is known).
LAYOUT = None
#: The compiled :func:`_untrack_young` itself (its loaded overload's entry point, which skips
#: the dispatcher's typing); set by :func:`watch_tensors` before ``LAYOUT``.
_untrack_compiled = None
#: Whether the hook is running (it never runs inside itself).
_in_hook = False


def _untrack_young_in_python():
    """:func:`_untrack_young` without compiled code: one ctypes call per object. The list of
    young objects lives across bytecode here, where another thread may take over: only a
    process running Python in this thread alone untracks (see the module docstring)."""
    if len(sys._current_frames()) > 1:
        return 0
    young = gc.get_objects(0)
    tensors = [obj for obj in young if type(obj) is _tensor_type and not hasattr(obj, "_kept")]
    nodes = [
        obj for obj in young
        if type(obj) is Node
        and not hasattr(obj, "kept")
        and type(getattr(obj, "edges", None)) is tuple
        and type(getattr(obj, "versions", None)) is tuple
    ]
    for obj in [*tensors, *nodes, *map(_edges_of, nodes), *map(_versions_of, nodes)]:
        _untrack_one(obj)
    return len(tensors) + len(nodes)


def untrack_young():
    """Untrack the Tensors and plain nodes among the youngest objects (with the nodes' edge
    and version tuples), except those marked kept. Returns how many tensors and nodes."""
    if LAYOUT is None:
        return _untrack_young_in_python()
    return _untrack_compiled(*LAYOUT)


def _on_collection(phase, info):
    """The hook before compiled code is loaded, and without the JIT (see the module
    docstring: an interrupt that lands here is lost)."""
    global _in_hook
    if phase == "start" and config.UNTRACK_GRAPHS and not _in_hook:
        try:
            _in_hook = True
            untrack_young()
        finally:
            _in_hook = False


#: What :func:`_on_collection_compiled` reads in its ``state``: the arguments of
#: :func:`_untrack_young` (``LAYOUT``) first, then from these positions: ``config`` and
#: ``"UNTRACK_GRAPHS"``; this module and ``"LAYOUT"``; None; :func:`untrack_young`.
_AT_SWITCH, _AT_LAYOUT, _AT_NONE, _AT_FALLBACK = 9, 11, 13, 14
#: The state's address, then gc's two arguments (their addresses).
_HOOK_SIGNATURE = types.void(types.int64, types.int64, types.int64)


def _on_collection_compiled(state, phase, info):
    """:func:`_on_collection` as a C function (compiled by :func:`_compile_hook`): at the
    start of a collection, where ``config.UNTRACK_GRAPHS`` is true, the compiled walk, or
    where ``LAYOUT`` was set to None since, :func:`untrack_young` in Python."""
    if _unicode_length(phase) != 5:  # "stop" (only "start" has five letters)
        return
    switch = _attribute(state, _AT_SWITCH)
    if switch == 0 or _is_true(switch) != 1:
        return
    if _attribute(state, _AT_LAYOUT) == load_address(state + 8 * _AT_NONE):
        fallback = load_address(state + 8 * _AT_FALLBACK)
        done = _call_object(fallback, 0)
        if done == 0:
            _write_unraisable(fallback)
        else:
            _decref(done)
        return
    _untrack_young(
        load_address(state), load_address(state + 8), load_address(state + 16),
        load_address(state + 24), load_address(state + 32), load_address(state + 40),
        load_address(state + 48), load_address(state + 56), load_address(state + 64),
    )


@njit(cache=True)
def _attribute(state, at):
    """The address of ``getattr(owner, name)`` for the objects at positions ``at`` and
    ``at + 1`` of ``state`` (``owner`` keeps it alive), or 0 where that raised."""
    found = _get_attribute(load_address(state + 8 * at), load_address(state + 8 * at + 8))
    if found == 0:
        _clear_error()
        return 0
    _decref(found)
    return found


#: Held while keeping: two threads must not both find an object untracked and track it (the
#: interpreter aborts on tracking a tracked object). The hook only untracks, which is safe.
_keeping = threading.Lock()


def keep_tracked(owner, grad):
    """``owner.grad = grad`` is about to happen: keep tracked, for good, both tensors and
    ``grad``'s recorded graph, so that any cycle through them stays visible to the collector.

    Costs a walk over the nodes not kept already; a graph stored as a ``.grad`` is rare (torch
    warns about the one that ``backward(create_graph=True)`` makes).
    """
    with _keeping:
        _keep_tensor(owner)
        _keep_tensor(grad)
        _keep_graph(grad._node)


def _keep_graph(node):
    stack = [node]
    while stack:
        node = stack.pop()
        if node is None or getattr(node, "kept", False):
            continue  # a kept node's whole graph was kept with it
        node.kept = True
        for obj in (node, node.edges):
            if not gc.is_tracked(obj):
                _track_one(obj)
        for edge in node.edges:
            if isinstance(edge, Node):
                stack.append(edge)
            elif edge is not None:
                _keep_tensor(edge)  # a leaf


def _keep_tensor(tensor):
    if not getattr(tensor, "_kept", False):
        tensor._kept = True
        if not gc.is_tracked(tensor):
            _track_one(tensor)


def watch_tensors(tensor_type):
    """Untrack ``tensor_type``'s instances too (``tensor.py`` calls this once, at import)."""
    global _tensor_type, LAYOUT, _untrack_compiled
    _tensor_type = tensor_type
    if not layout.SUPPORTED:
        return
    offsets = (
        layout.slot_offset(Node, "edges"),
        layout.slot_offset(Node, "versions"),
        layout.slot_offset(Node, "kept"),
        layout.slot_offset(tensor_type, "_kept"),
    )
    if None in offsets:
        return
    edges, versions, node_kept, tensor_kept = offsets
    found = (id(_get_objects), id(_YOUNGEST), id(Node), edges, versions, node_kept,
             id(tensor_type), tensor_kept, id(tuple))
    # Load (or compile, once per machine) now; collections meanwhile untrack in Python. Only
    # then the hook calls the compiled walk.
    _untrack_young(*found)
    overloads = getattr(_untrack_young, "overloads", None)  # (none without the JIT)
    if not overloads:
        return
    _untrack_compiled = next(iter(overloads.values())).entry_point
    LAYOUT = found
    untrack_young()
    _compile_hook(found)


#: The C hook in ``gc.callbacks`` once compiled (a partial of ctypes' call of it), and what it
#: reads (kept alive with it).
_hook = None
_hook_kept = ()


def _compile_hook(found):
    """Compile (or load) :func:`_on_collection_compiled` and put it in ``gc.callbacks`` in the
    Python hook's place (collections meanwhile run the Python hook)."""
    global _hook, _hook_kept
    compiled = cfunc(_HOOK_SIGNATURE, cache=True)(_on_collection_compiled)
    names = ("UNTRACK_GRAPHS", "LAYOUT")
    state = (ctypes.c_int64 * 15)(
        *found, id(config), id(names[0]), id(sys.modules[__name__]), id(names[1]), id(None),
        id(untrack_young),
    )
    # PYFUNCTYPE: called with the GIL held, and no bytecode runs on the way in or out.
    call = ctypes.PYFUNCTYPE(None, ctypes.c_int64, ctypes.py_object, ctypes.py_object)(
        compiled.address
    )
    _hook_kept = (compiled, names, state, call, untrack_young)
    _hook = functools.partial(call, ctypes.addressof(state))
    for i, callback in enumerate(gc.callbacks):
        if callback is _on_collection:
            gc.callbacks[i] = _hook


def _stop():
    # Out of the way before the interpreter tears modules down (it collects then too).
    for callback in (_on_collection, _hook):
        if callback is not None and callback in gc.callbacks:
            gc.callbacks.remove(callback)


gc.callbacks.append(_on_collection)
atexit.register(_stop)
