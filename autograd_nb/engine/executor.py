"""The compiled backward: a plan becomes an instruction table, run in ONE call into compiled code.

:func:`run` is what :func:`autograd_nb.engine.run_plan` tries first for ``create_graph=False``
without a batch. It turns the plan (:func:`autograd_nb.engine.backward.make_plan`, which has
already pruned the graph and checked every saved buffer's version) into flat tables:

* ``objects``: every array the backward reads or writes outside the arena (saved values,
  seeds, the gradient buffers handed back to the caller), passed as ``id()`` values; the
  executor reads their data pointers (:mod:`autograd_nb.ops._pointers`);
* ``slots``: gradient buffers, one per node or leaf that receives a gradient. Intermediate
  ones live in one zeroed arena and are reused once consumed (a freed slot is zeroed again
  before reuse, by an instruction); the caller's results are separate arrays;
* ``code``: one row per VJP: the driver's entry (a C function address of
  :func:`~autograd_nb.ops._pointers.entry_address`), the gradient slot it reads, the run of
  objects it reads (the op's saved arrays), the slot it accumulates into, and offsets into
  the int and float attribute arrays.

:func:`execute` is compiled once per dtype (cached on disk) and is the same for every graph,
so a graph of any length or shape costs no compilation beyond the drivers of the ops it uses.
Fused groups of elementwise VJPs (:mod:`autograd_nb.engine.fusion`) are drivers too.

When a node's op has no driver (``Op.exec_spec`` returns None: custom Functions,
``setitem``, reductions over non-adjacent axes), the dtypes are mixed, the arrays are on a
GPU, or NumPy's array struct is not the one this module reads, :func:`run` returns None
before anything ran, and the Python walk runs the plan instead.
"""

import numpy as np
from numba import njit

from .. import tape
from ..ops import _pointers, _strided
from . import fusion

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

#: Columns of a code row: the driver's entry, the gradient slot it reads, the saved arrays it
#: reads (``N_SAVED`` objects from ``SAVED``), the slot it accumulates into, and its offsets
#: into the int and float attributes. A driver's operands are the gradient, the saved arrays
#: and the target, in that order.
ENTRY, GRAD, N_SAVED, SAVED, TARGET, INTS, FLOATS = range(7)
ROW = 7
#: Length of the table's header (the lengths of its sections).
HEADER = 3
#: An ``ENTRY`` of ZERO clears a reused arena slot: ``GRAD`` is the slot and ``INTS`` its
#: size in bytes.
ZERO = -1


@njit(cache=True, nogil=True)
def execute(table, objects, floats, arena):
    """Run a backward; see the module docstring. ``table`` holds, after a header of section
    lengths, the code rows, the slot offsets, the driver entries and the int attributes (one
    array: one argument to type-check); ``objects`` the ``id()`` of the operand arrays."""
    n_code, n_slots, n_entries = table[0], table[1], table[2]
    at = HEADER
    code = table[at:at + n_code * ROW]
    at += n_code * ROW
    slot_offsets = table[at:at + n_slots]
    at += n_slots
    entries = table[at:at + n_entries]
    at += n_entries
    ints_address = table.ctypes.data + 8 * at
    n_objects = objects.size
    # Pointers: the objects' data, then the slots' (in the arena, or an object's).
    pointers = np.empty(n_objects + n_slots, dtype=np.int64)
    for i in range(n_objects):
        pointers[i] = _pointers.data_address(objects[i])
    base = arena.ctypes.data
    itemsize = arena.itemsize
    for s in range(n_slots):
        offset = slot_offsets[s]
        if offset >= 0:
            pointers[n_objects + s] = base + offset * itemsize
        else:
            pointers[n_objects + s] = pointers[-offset - 1]
    operands = np.empty(64, dtype=np.int64)
    operands_address = operands.ctypes.data
    floats_address = floats.ctypes.data
    for r in range(n_code):
        row = r * ROW
        entry = code[row + ENTRY]
        if entry == ZERO:
            region = _pointers.array_at(pointers[n_objects + code[row + GRAD]],
                                        code[row + INTS], _BYTES)
            region[:] = 0
            continue
        operands[0] = pointers[n_objects + code[row + GRAD]]
        first = code[row + SAVED]
        n_saved = code[row + N_SAVED]
        for j in range(n_saved):
            operands[1 + j] = pointers[first + j]
        operands[1 + n_saved] = pointers[n_objects + code[row + TARGET]]
        _pointers.call_entry(
            entries[entry],
            operands_address,
            ints_address + 8 * code[row + INTS],
            floats_address + 8 * code[row + FLOATS],
        )


_BYTES = np.empty(0, dtype=np.uint8)


class _Tables:
    """The tables of one run as Python lists, filled by :func:`_build` (see the module
    docstring); :meth:`execute` hands them to the compiled executor."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.objects = []  # the arrays whose data the drivers read
        # Per object, where it came from: the node (or fused group) whose instruction reads
        # it, ("seed", index) or ("result", edge); :mod:`.plan_cache` reads them.
        self.origins = []
        self.slot_offsets = []
        self.arena_size = 0
        self.free = {}
        self.code = []
        self.ints = []
        self.floats = []
        self.entries = []
        self.entry_index = {}

    def external_slot(self, array, origin):
        self.objects.append(array)
        self.origins.append(origin)
        self.slot_offsets.append(-len(self.objects))
        return len(self.slot_offsets) - 1

    def arena_slot(self, shape):
        """A slot for a gradient of ``shape`` in the arena: a freed one of that shape (zeroed
        first) or a new one."""
        reusable = self.free.get(shape)
        size = _size(shape)
        if reusable:
            slot = reusable.pop()
            self.code.extend((ZERO, slot, 0, 0, 0, size * self.dtype.itemsize, 0))
            return slot
        self.slot_offsets.append(self.arena_size)
        self.arena_size += size
        return len(self.slot_offsets) - 1

    def entry(self, driver):
        index = self.entry_index.get(driver)
        if index is None:
            index = self.entry_index[driver] = len(self.entries)
            self.entries.append(_pointers.entry_address(driver, self.dtype))
        return index

    def execute(self):
        """Convert the lists to arrays (kept as ``table`` and ``float_array``) and run."""
        header = [len(self.code) // ROW, len(self.slot_offsets), len(self.entries)]
        self.table = np.array(
            header + self.code + self.slot_offsets + self.entries + self.ints + [0],
            dtype=np.int64,
        )
        self.float_array = np.array(self.floats, dtype=np.float64) if self.floats else _NO_FLOATS
        objects = np.fromiter(map(id, self.objects), dtype=np.int64, count=len(self.objects))
        run_tables(self.table, objects, self.float_array, self.arena_size, self.dtype)


def run_tables(table, object_ids, floats, arena_size, dtype):
    """One call into :func:`execute` (the caller keeps the objects of ``object_ids`` alive)."""
    execute(table, object_ids, floats, np.zeros(max(arena_size, 1), dtype=dtype))


_NO_FLOATS = np.zeros(1)


def _plan_dtype(plan, seeds):
    dtype = None
    for node in plan.nodes:
        if dtype is None:
            dtype = node.dtype
        elif node.dtype != dtype:
            return None
    for edge, _ in seeds:
        if dtype is None:
            dtype = edge.dtype
        elif edge.dtype != dtype:
            return None
    return dtype if dtype in _FLOATS else None


def run(plan, seeds, targets, all_leaves, retain_graph, remember=None):
    """Run ``plan`` in one compiled call; None where it cannot (then nothing has changed).

    Arguments and result as :func:`autograd_nb.engine.backward.run_plan` without
    ``create_graph`` and ``batch``: the gradients by ``id`` of every target, retaining node
    and (``all_leaves``) leaf that received one, and the leaves met. ``remember``, if given,
    is called with ``(tables, ran, results, leaves)`` after the run and before the saved
    buffers are freed (:mod:`.plan_cache` makes its template there).
    """
    if not _pointers.SUPPORTED:
        return None
    dtype = _plan_dtype(plan, seeds)
    if dtype is None:
        return None
    tables = _Tables(dtype)
    slot_of = {}
    results = {}  # id(edge) -> the array handed back
    leaves = {}
    try:
        ran = _build(tables, plan, seeds, targets, all_leaves, slot_of, results, leaves)
    except _Unsupported:
        return None
    tables.execute()
    if remember is not None:
        remember(tables, ran, results, leaves)
    if not retain_graph:
        for node in ran:
            node.free()
    return results, leaves


def _build(tables, plan, seeds, targets, all_leaves, slot_of, results, leaves):
    """Fill ``tables`` with the plan's instructions (the hot Python loop of a backward: it
    keeps to local names and list appends)."""
    dtype = tables.dtype
    Node = tape.Node
    needed = plan.needed
    objects = tables.objects
    code = tables.code
    ints_list = tables.ints
    floats_list = tables.floats
    entry_of = tables.entry_index
    free = tables.free
    slot_offsets = tables.slot_offsets

    def slot_for(edge, key):
        if edge.dtype != dtype:
            raise _Unsupported
        if not isinstance(edge, Node) or key in targets or edge.retained:
            array = np.zeros(edge.shape, dtype=dtype)
            results[key] = array
            slot = tables.external_slot(array, ("result", edge))
        else:
            slot = tables.arena_slot(edge.shape)
        slot_of[key] = slot
        return slot

    origins = tables.origins

    def emit(spec, slot, target, origin):
        """Append one instruction: ``spec`` (of ``Op.exec_spec``, for ``origin``, the node or
        fused group) reading ``slot``, accumulating into ``target``."""
        driver, saved, ints, floats = spec
        entry = entry_of.get(driver)
        if entry is None:
            entry = tables.entry(driver)
        for array in saved:
            if type(array) is not ndarray:  # a device array: CUDA graphs run their own plan
                raise _Unsupported
        code.extend((entry, slot, len(saved), len(objects), target, len(ints_list),
                     len(floats_list)))
        objects.extend(saved)
        origins.extend([origin] * len(saved))
        ints_list.extend(ints)
        floats_list.extend(floats)  # not ``+=``: a NumPy ``floats`` would take that over

    ndarray = np.ndarray
    # The newest node of the plan is no other node's input: when it is an output with one
    # seed (the usual backward of a loss), that seed is its gradient slot as it is, only read.
    newest = plan.nodes[0] if plan.nodes else None
    seeded = [id(edge) for edge, _ in seeds]
    for index, (edge, grad) in enumerate(seeds):
        if not isinstance(grad, (ndarray, float, int)):
            raise _Unsupported
        key = id(edge)
        # Only read: the caller's array itself where it is C-contiguous and of the plan's
        # dtype, else a converted copy.
        seed = np.ascontiguousarray(grad, dtype=dtype).reshape(edge.shape)
        slot = slot_of.get(key)
        if (
            slot is None
            and edge is newest
            and edge.dtype == dtype
            and key not in targets
            and not edge.retained
            and seeded.count(key) == 1
        ):
            slot_of[key] = tables.external_slot(seed, ("seed", index))
            continue
        if slot is None:
            slot = slot_for(edge, key)
        emit((_strided.accumulate_driver, (), (seed.size,), ()),
             tables.external_slot(seed, ("seed", index)), slot, None)
        if not isinstance(edge, Node):
            leaves[key] = edge
    ran = []
    groups = {}
    if fusion.ENABLED:
        groups = fusion.groups(plan, targets, all_leaves, {id(edge) for edge, _ in seeds})
    for node in plan.nodes:
        slot = slot_of.get(id(node))
        if slot is None:
            continue
        ran.append(node)
        group = groups.get(id(node)) if groups else None
        if group is not None:
            ran.extend(group.nodes[1:])
            target = group.target
            key = id(target)
            if not isinstance(target, Node):
                leaves[key] = target
            slot_target = slot_of.get(key)
            if slot_target is None:
                slot_target = slot_for(target, key)
            emit(group.spec(), slot, slot_target, group)
            if slot_offsets[slot] >= 0:
                free.setdefault(node.shape, []).append(slot)
            continue
        exec_spec = node.op.exec_spec
        k = -1
        for edge in node.edges:
            k += 1
            if edge is None:
                continue
            key = id(edge)
            if isinstance(edge, Node):
                if key not in needed:
                    continue
            elif all_leaves or key in targets:
                leaves[key] = edge
            else:
                continue
            spec = exec_spec(k, node)
            if spec is None:
                raise _Unsupported
            target = slot_of.get(key)
            if target is None:
                target = slot_for(edge, key)
            emit(spec, slot, target, node)
        if slot_offsets[slot] >= 0:  # consumed: the arena slot can be reused
            reusable = free.get(node.shape)
            if reusable is None:
                free[node.shape] = [slot]
            else:
                reusable.append(slot)
    return ran


class _Unsupported(Exception):
    """A node the executor has no driver for: the Python walk runs the plan instead."""


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n
