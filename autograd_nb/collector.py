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
then run nothing of numba's. :func:`load_compiled_walk` loads the compiled walk, and only then
hands the hook its compiled entry point, which it calls directly (no dispatch, so no typing,
compiling or importing can start in a collection). It does not re-enter itself. The walk
loads with the process's first compiled function (``cache.after_first_kernel``), not at
import: loading any compiled function first loads numba's typing and target contexts, 0.2-0.3
s that a process serving its first calls in tier 0, or none, need not pay at import
(docs/benchmarking.rst, "Import time"). Until then the Python walk serves. Where the cache
does not hold the walk yet, it compiles at import, as the first thing a cold process does.

Nor may the hook run bytecode once it can help it. Python runs a signal's handler (Ctrl-C's
KeyboardInterrupt) at the next bytecode that checks for one, and an exception raised inside a
``gc.callbacks`` function is reported and dropped (``Exception ignored in: <function
_on_collection ...> KeyboardInterrupt``), even at the function's first instruction, before any
``try`` could catch it. An interrupt that arrives during a long compiled call is pending when
the next collection starts, so it landed there often (about one alarm in twenty in a
``create_graph=True`` gradient of a long chain). So once the compiled walk is loaded, the
callback in ``gc.callbacks`` is made of C functions alone: ``property(fget).__get__(phase,
info)`` calls ``fget(phase)``, and ``fget`` is a ``functools.partial`` of the compiled
:func:`_on_collection_compiled`'s entry point (numba's own CPython wrapper, the one every call
of a compiled function goes through). No bytecode runs, so an interrupt stays pending through
the collection and Python raises it at the first bytecode after it. The Python hook
:func:`_on_collection` serves only before that, and without the JIT.
"""

import atexit
import ctypes
import functools
import gc
import sys
import threading
from operator import attrgetter

from numba import njit, types
from numba.core.compiler_lock import global_compiler_lock

from . import cache, config, layout
from .layout import ITEMS_OFFSET, SIZE_OFFSET, TYPE_OFFSET
from .ops._pointers import load_address
from .tape import Node

_untrack = types.ExternalFunction("PyObject_GC_UnTrack", types.void(types.int64))
_call_object = types.ExternalFunction("PyObject_CallObject",
                                      types.int64(types.int64, types.int64))
_decref = types.ExternalFunction("Py_DecRef", types.void(types.int64))
_clear_error = types.ExternalFunction("PyErr_Clear", types.void())
_get_attribute = types.ExternalFunction("PyObject_GetAttr",
                                        types.int64(types.int64, types.int64))
_is_true = types.ExternalFunction("PyObject_IsTrue", types.int32(types.int64))
_error_matches = types.ExternalFunction("PyErr_ExceptionMatches", types.int32(types.int64))
_set_interrupt = types.ExternalFunction("PyErr_SetInterrupt", types.void())
_write_unraisable = types.ExternalFunction("PyErr_WriteUnraisable", types.void(types.int64))

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
#: (``NUMBA_DISABLE_JIT``, an interpreter laid out otherwise, or before the compiled walk is
#: loaded: :func:`load_compiled_walk`).
LAYOUT = None
#: The compiled :func:`_untrack_young` itself (its loaded overload's entry point, which skips
#: the dispatcher's typing); set by :func:`load_compiled_walk` before ``LAYOUT``.
_untrack_compiled = None
#: Whether the hook is running (it never runs inside itself).
_in_hook = False


def _untrack_young_in_python():
    """:func:`_untrack_young` without compiled code: one ctypes call per object. The list of
    young objects lives across bytecode here, where another thread may take over: only a
    process running Python in this thread alone untracks (see the module docstring)."""
    if _tensor_type is None or len(sys._current_frames()) > 1:
        return 0  # (no Tensor yet: the package is still being imported)
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
    """The hook before the compiled walk is loaded, and without the JIT (an interrupt that
    Python delivers at its first bytecode is dropped: see the module docstring)."""
    global _in_hook
    if phase == "start" and config.UNTRACK_GRAPHS and not _in_hook:
        _in_hook = True
        try:
            untrack_young()
        finally:
            _in_hook = False


@njit(cache=True)
def _attribute(owner, name):
    """The address of ``getattr(owner, name)`` for the objects at these addresses (``owner``
    keeps it alive), or 0 where the lookup raised (the error is cleared)."""
    found = _get_attribute(owner, name)
    if found == 0:
        _clear_error()
        return 0
    _decref(found)
    return found


@njit(cache=True)
def _on_collection_compiled(
    switch, switch_name, module, layout_name, none, fallback, interrupt,
    get_objects, arguments, node_type, edges, versions, node_kept, tensor_type, tensor_kept,
    tuple_type, phase,
):
    """:func:`_on_collection` in compiled code (see the module docstring), over the objects
    at these addresses: ``config`` and ``"UNTRACK_GRAPHS"``, this module and ``"LAYOUT"``,
    None, :func:`untrack_young` (the Python walk, called where ``LAYOUT`` was set to None
    since; an interrupt raised in it is handed on, and Python raises it again after the
    collection) and KeyboardInterrupt; then :func:`_untrack_young`'s arguments, and gc's
    ``phase``. Returns what the walk returned, or 0."""
    if len(phase) != 5:  # "stop" (only "start" has five letters)
        return 0
    on = _attribute(switch, switch_name)
    if on == 0 or _is_true(on) != 1:
        _clear_error()  # (where PyObject_IsTrue raised)
        return 0
    if _attribute(module, layout_name) == none:
        done = _call_object(fallback, 0)
        if done != 0:
            _decref(done)
        elif _error_matches(interrupt):
            _clear_error()
            _set_interrupt()
        else:
            _write_unraisable(fallback)
        return 0
    return _untrack_young(
        get_objects, arguments, node_type, edges, versions, node_kept, tensor_type,
        tensor_kept, tuple_type,
    )


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


#: The arguments of :func:`_untrack_young` after the list, once :func:`watch_tensors` found
#: the layout (None: not found); :data:`LAYOUT` once the compiled walk is loaded.
_found = None
_loading_walk = False  # (while :func:`load_compiled_walk` loads it)


def watch_tensors(tensor_type):
    """Untrack ``tensor_type``'s instances too (``tensor.py`` calls this once, at import);
    the compiled walk loads with the process's first compiled function
    (:func:`load_compiled_walk`), or at once where it is not in the cache yet: compiling it
    takes seconds, which a process with an empty cache spends at import, not in its first
    op's call, where tier 0's background worker would be compiling too."""
    global _tensor_type, _found
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
    _found = (id(_get_objects), id(_YOUNGEST), id(Node), edges, versions, node_kept,
              id(tensor_type), tensor_kept, id(tuple))
    if cache.in_cache(_untrack_young) and cache.in_cache(_on_collection_compiled):
        cache.after_first_kernel(load_compiled_walk)
    else:  # (an empty cache: it compiles now, as the first thing, before any worker starts)
        load_compiled_walk()


def load_compiled_walk():
    """Load (or compile, once per machine) the compiled walk and put the compiled hook in
    ``gc.callbacks``; collections meanwhile untrack in Python. Whether the compiled walk
    runs now (False: a CPython laid out otherwise, or no JIT). Runs once; later calls
    return at once."""
    global LAYOUT, _untrack_compiled, _loading_walk
    # (numba's compiler lock, which a first kernel's thread holds already as it calls this:
    # one lock, so that two threads cannot wait for each other)
    with global_compiler_lock:
        if LAYOUT is not None or _found is None or _loading_walk:
            return LAYOUT is not None  # (loading it calls this again: cache.after_first_kernel)
        _loading_walk = True
        try:
            _untrack_young(*_found)
        finally:
            _loading_walk = False
        overloads = getattr(_untrack_young, "overloads", None)  # (none without the JIT)
        if not overloads:
            return False
        _untrack_compiled = next(iter(overloads.values())).entry_point
        LAYOUT = _found
        untrack_young()
        _install_compiled_hook(_found)
        return True


#: The names the compiled hook looks up (kept alive here).
_HOOK_NAMES = ("UNTRACK_GRAPHS", "LAYOUT")
#: The hook in ``gc.callbacks`` once the compiled walk is loaded (None until then).
_hook = None


def _install_compiled_hook(found):
    """Load (or compile) :func:`_on_collection_compiled` and put the C-only callback made of
    it in ``gc.callbacks`` in :func:`_on_collection`'s place."""
    global _hook
    head = (id(config), id(_HOOK_NAMES[0]), id(sys.modules[__name__]), id(_HOOK_NAMES[1]),
            id(None), id(untrack_young), id(KeyboardInterrupt))
    _on_collection_compiled(*head, *found, "stop")  # (typed with a str, as gc passes)
    entry = next(iter(_on_collection_compiled.overloads.values())).entry_point
    _hook = property(functools.partial(entry, *head, *found)).__get__
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
