"""The compiled backward: a plan becomes an instruction table, run in ONE call into compiled code.

:func:`run` is what :func:`autograd_nb.engine.run_plan` tries first for ``create_graph=False``,
with or without a batch. It writes the plan's steps (:func:`autograd_nb.engine.schedule.schedule`
of the plan of :func:`autograd_nb.engine.backward.make_plan`, which has already pruned the graph
and checked every saved buffer's version) as flat tables, one table slot per schedule slot:

* ``objects``: every array the backward reads or writes outside the arena (saved values,
  seeds, the gradient buffers handed back to the caller), passed as ``id()`` values; the
  executor reads their data pointers (:mod:`autograd_nb.ops._pointers`);
* ``slots``: gradient buffers, one per node or leaf that receives a gradient. Intermediate
  ones live in one arena and are reused once consumed; the caller's results are separate
  arrays. No buffer comes zeroed: the table's first instruction clears the small arena slots
  (``SMALL_SLOT_BYTES``) together, and every other slot's first writer (again after each
  reuse) either writes it whole (``Op.exec_set_spec``: a VJP that would add into zeros) or
  follows a ZERO instruction that clears it, just before use, while it stays in the cache;
* ``code``: one row per VJP: the driver's entry (a C function address of
  :func:`~autograd_nb.ops._pointers.entry_address`), the gradient slot it reads, the run of
  objects it reads (the op's saved arrays), the slot it accumulates into (or writes), and
  offsets into the int and float attribute arrays.

:func:`execute` is compiled once per dtype (cached on disk) and is the same for every graph,
so a graph of any length or shape costs no compilation beyond the drivers of the ops it uses.
Fused groups of elementwise VJPs (:mod:`autograd_nb.engine.fusion`) are drivers too.

A batch (``grad(..., is_grads_batched=True)``) runs the same instructions over blocks of its
rows, one block per ``BLOCK_ROWS`` rows, as a ``prange`` over numba's threads
(:func:`execute_batched`): each block zeroes, reads and writes only its own rows of every
gradient slot, calls a driver once per row, or once per block where the op gives a driver for
many rows (``Op.exec_rows_spec``: ``_bmm`` stacks the rows into one GEMM), and the saved
forward values are shared, read only.

When a node's op has no driver (``Op.exec_spec`` returns None: custom Functions,
``setitem``, reductions over non-adjacent axes), the dtypes are mixed, the arrays are on a
GPU, or NumPy's array struct is not the one this module reads, :func:`run` returns None
before anything ran, and the Python walk runs the plan instead.
"""

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from .. import config
from ..ops import _pointers, _strided
from ..ops._blas import hold_blas_threads, release_blas_threads
from ..ops._parallel import parallel_allowed
from ..ops.registry import ExecSpec
from . import fusion, schedule

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

#: Columns of a code row: the driver's entry, the gradient slot it reads, the saved arrays it
#: reads (``N_SAVED`` objects from ``SAVED``), the slot it accumulates into, and its offsets
#: into the int and float attributes. A driver's operands are the gradient, the saved arrays
#: and the target, in that order.
ENTRY, GRAD, N_SAVED, SAVED, TARGET, INTS, FLOATS = range(7)
ROW = 7
#: Length of the table's header (the lengths of its sections).
HEADER = 3
#: An ``ENTRY`` of ZERO clears a slot (an arena slot or a result, before its first writer
#: where that writer adds into it): ``GRAD`` is the slot and ``INTS`` its size in bytes (in a
#: batch, per row).
ZERO = -1
#: Makes a new arena or result buffer, ``uninitialised(shape, dtype)``, left as it comes: the
#: tables clear each slot, or write it whole, before they read it (``_Tables.first_write``).
#: NumPy's own function, so that mapping it over many results costs no Python call each; the
#: tests put one in its place that fills the buffers with NaN.
uninitialised = np.empty
#: Arena slots of at most this many bytes are cleared together when a table starts, not each
#: by a row of its own before its first writer (``_Tables.place_arena``): ``fastest_autograd``'s
#: 1,000-op replay, ~700 slots of one to four elements, took 1.5% longer with a row each.
SMALL_SLOT_BYTES = 4096
#: At most this many saved arrays per instruction: the executors pass a driver's operands (the
#: gradient, the saved arrays, the target and, for a block of rows, their count) in a 64-entry
#: array. An op or fused group that reads more runs in the Python walk.
MAX_SAVED = 60
#: Batched runs split the batch into blocks of consecutive rows (``config.BATCH_BLOCK_ROWS``,
#: ``BATCH_MAX_BLOCKS``, ``BATCH_BLOCK_ALIGN``), read when the compiled functions below compile.
BLOCK_ROWS = config.BATCH_BLOCK_ROWS
MAX_BLOCKS = config.BATCH_MAX_BLOCKS
BLOCK_ALIGN = config.BATCH_BLOCK_ALIGN


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


# -- batches -----------------------------------------------------------------------------------
# With ``grad(..., is_grads_batched=True)`` every gradient slot holds one row per vector of the
# batch, ``slot_rows[s]`` elements each, the rows of a slot one after another. The table is
# header, code, ``modes`` (per code row: 1 where the driver takes a block of rows,
# ``Op.exec_rows_spec``; 0: one call per row), slot offsets, ``slot_rows``, entries, ints. The
# arena's slots and the caller's results are zeroed by ZERO rows, each block its own rows, just
# before the first instruction that writes into them: the memory a thread writes is the memory
# it zeroed, and still in its cache (zeroing every slot when the block starts, ~0.7 MB a block
# for ``jacobian_batched``, left it to be fetched again).


@njit(cache=True, nogil=True)
def _batched_pointers(table, objects, arena):
    """The data pointers of the objects, then of every slot's first row."""
    n_code, n_slots = table[0], table[1]
    at = HEADER + n_code * (ROW + 1)
    slot_offsets = table[at:at + n_slots]
    n_objects = objects.size
    pointers = np.empty(n_objects + n_slots, dtype=np.int64)
    for i in range(n_objects):
        pointers[i] = _pointers.data_address(objects[i])
    base = arena.ctypes.data
    for s in range(n_slots):
        offset = slot_offsets[s]
        if offset >= 0:
            pointers[n_objects + s] = base + offset * arena.itemsize
        else:
            pointers[n_objects + s] = pointers[-offset - 1]
    return pointers


@njit(cache=True, nogil=True)
def _run_rows(table, pointers, n_objects, floats, itemsize, first, stop):
    """Run the batched table for the batch rows ``first:stop`` on this thread."""
    n_code, n_slots, n_entries = table[0], table[1], table[2]
    at = HEADER
    code = table[at:at + n_code * ROW]
    at += n_code * ROW
    modes = table[at:at + n_code]
    at += n_code + n_slots  # (the slot offsets: already in ``pointers``)
    slot_rows = table[at:at + n_slots]
    at += n_slots
    entries = table[at:at + n_entries]
    at += n_entries
    ints_address = table.ctypes.data + 8 * at
    floats_address = floats.ctypes.data
    rows = stop - first
    operands = np.empty(64, dtype=np.int64)
    operands_address = operands.ctypes.data
    for r in range(n_code):
        row = r * ROW
        entry = code[row + ENTRY]
        slot = code[row + GRAD]
        g_step = slot_rows[slot] * itemsize
        g_first = pointers[n_objects + slot] + first * g_step
        if entry == ZERO:
            region = _pointers.array_at(g_first, rows * g_step, _BYTES)
            region[:] = 0
            continue
        saved = code[row + SAVED]
        n_saved = code[row + N_SAVED]
        for j in range(n_saved):
            operands[1 + j] = pointers[saved + j]
        target = code[row + TARGET]
        t_step = slot_rows[target] * itemsize
        t_first = pointers[n_objects + target] + first * t_step
        function = entries[entry]
        ints_at = ints_address + 8 * code[row + INTS]
        floats_at = floats_address + 8 * code[row + FLOATS]
        if modes[r]:
            operands[0] = g_first
            operands[1 + n_saved] = t_first
            operands[2 + n_saved] = rows
            _pointers.call_entry(function, operands_address, ints_at, floats_at)
        else:
            for b in range(rows):
                operands[0] = g_first + b * g_step
                operands[1 + n_saved] = t_first + b * t_step
                _pointers.call_entry(function, operands_address, ints_at, floats_at)


@njit(cache=True, nogil=True)
def batch_blocks(batch):
    """How many blocks a batch of ``batch`` rows runs in: one per ``BLOCK_ROWS`` rows, at most
    ``MAX_BLOCKS``. A function of the batch alone, never of the thread count: BLAS may choose
    its kernel by a product's size, so the blocks, not the threads, fix the bits."""
    return max(1, min(MAX_BLOCKS, batch // BLOCK_ROWS))


@njit(cache=True, nogil=True)
def block_start(batch, blocks, p):
    """Where block ``p`` of ``blocks`` starts: a multiple of ``BLOCK_ALIGN`` rows (or
    ``batch``)."""
    if p >= blocks:
        return batch
    return batch * p // blocks // BLOCK_ALIGN * BLOCK_ALIGN


@njit(cache=True, nogil=True, parallel=True)
def _execute_blocks(table, pointers, n_objects, floats, itemsize, batch, blocks):
    for p in prange(blocks):
        _run_rows(table, pointers, n_objects, floats, itemsize, block_start(batch, blocks, p),
                  block_start(batch, blocks, p + 1))


@njit(cache=True, nogil=True)
def execute_batched(table, objects, floats, arena, batch, parallel):
    """Run a batched table (see above) in ``batch_blocks(batch)`` blocks of consecutive rows:
    a ``prange`` over numba's threads where ``parallel``, else one after the other on this
    thread (the same blocks, so the same bits)."""
    pointers = _batched_pointers(table, objects, arena)
    blocks = batch_blocks(batch)
    if parallel and blocks > 1:
        _execute_blocks(table, pointers, objects.size, floats, arena.itemsize, batch, blocks)
        return
    for p in range(blocks):
        _run_rows(table, pointers, objects.size, floats, arena.itemsize,
                  block_start(batch, blocks, p), block_start(batch, blocks, p + 1))


class Rows(NamedTuple):
    """The code rows of a backward's tables, decoded (:meth:`_Tables.decoded_rows`): one
    int64 array per field, one entry per row, in the order they run. A row either clears a
    slot (``clears``: slot ``grad``, ``cleared_bytes`` bytes of it; in a batch, per row), or
    calls the driver ``entries[entry]`` on the gradient slot ``grad``, the ``n_saved``
    objects from ``saved`` and the target slot ``target``, in that order, with its ints and
    floats from ``ints_at`` and ``floats_at``."""

    clears: np.ndarray
    entry: np.ndarray
    grad: np.ndarray
    n_saved: np.ndarray
    saved: np.ndarray
    target: np.ndarray
    ints_at: np.ndarray
    floats_at: np.ndarray
    cleared_bytes: np.ndarray


class Slots(NamedTuple):
    """Where each gradient slot of a backward's tables lives (:meth:`_Tables.slot_places`),
    int64 arrays, one entry per slot: the object it is (an index into ``objects`` and
    ``origins``: a seed or a result), or -1 for a slot in the arena, at ``arena_offset``
    elements (-1 for an object)."""

    object: np.ndarray
    arena_offset: np.ndarray


class _Tables:
    """The tables of one run as Python lists, written from a schedule (see the module
    docstring); :meth:`execute` hands them to the compiled executor.

    What a reader of the tables (``anb.compile``'s program, the plan cache) may use: the
    attributes ``dtype``, ``objects``, ``origins``, ``entries``, ``ints``, ``floats`` and
    ``arena_size``, and :meth:`decoded_rows` and :meth:`slot_places`, which decode the code
    rows and the slot offsets (their encoding is this module's own)."""

    def __init__(self, dtype, batch=None):
        self.dtype = dtype
        self.batch = batch  # None, or the number of rows of every slot (a batched run)
        self.rows = 1 if batch is None else batch
        self.objects = []  # the arrays whose data the drivers read
        # Per object, where it came from: the node (or fused group) whose instruction reads
        # it, ("seed", index) or ("result", edge); :mod:`.plan_cache` reads them.
        self.origins = []
        self.slot_offsets = []
        self.arena_size = 0
        self.code = []
        self.ints = []
        self.floats = []
        self.entries = []
        self.entry_index = {}
        # Batched runs only: per slot, its elements per row; per code row, whether its driver
        # takes a block of rows.
        self.slot_rows = []
        self.modes = []
        self.written = set()  # (the slots written, or cleared by a ZERO row, so far)

    def add_slots(self, slots, seeds):
        """A table slot per schedule slot, same numbering: the seeds (read as they are where
        C-contiguous and of the dtype, else converted), fresh result arrays (by ``id`` of
        their edge: returned), arena offsets. Every edge must have the tables' dtype."""
        dtype = self.dtype
        lead = () if self.batch is None else (self.batch,)
        results = {}
        offsets = self.slot_offsets
        arena = []  # (slot, elements) of the ARENA slots, placed by ``place_arena``
        for slot in slots:
            edge = slot.edge
            if edge.dtype != dtype:
                raise Unsupported(f"gradients of {edge.dtype} and {dtype} in one backward")
            size = _size(edge.shape)
            self.slot_rows.append(size)
            if slot.kind == schedule.ARENA:
                arena.append((len(offsets), size))
                offsets.append(0)
                continue
            if slot.kind == schedule.SEED:
                array = np.ascontiguousarray(seeds[slot.seed][1], dtype=dtype).reshape(
                    lead + edge.shape)
                origin = ("seed", slot.seed)
            else:
                array = uninitialised(lead + edge.shape, dtype)
                results[id(edge)] = array
                origin = ("result", edge)
            self.objects.append(array)
            self.origins.append(origin)
            offsets.append(-len(self.objects))
        self.place_arena(arena)
        return results

    def place_arena(self, arena):
        """The arena offsets of the ARENA slots ``(slot, elements)``. Outside a batch, the
        slots of at most ``SMALL_SLOT_BYTES`` come first, all cleared by one ZERO row that
        starts the table: a row each before its first writer would cost more than the
        clearing (``fastest_autograd``'s slots of one to four elements). The others are
        cleared, or written whole, by their first writers (``first_write``)."""
        offsets = self.slot_offsets
        small = set()
        if self.batch is None:
            limit = SMALL_SLOT_BYTES // self.dtype.itemsize
            small = {s for s, size in arena if size <= limit}
            for s, size in arena:
                if s in small:
                    offsets[s] = self.arena_size
                    self.arena_size += size
            if self.arena_size:
                first = min(small, key=offsets.__getitem__)
                self.zero(first, self.arena_size)
                self.written.update(small)
        for s, size in arena:
            if s not in small:
                offsets[s] = self.arena_size
                self.arena_size += size * self.rows

    def write(self, steps):
        """One code row per step (see the module docstring). (The hot loop of an uncached
        backward: local names, one call per step.)"""
        batch = self.batch
        code, objects, origins = self.code, self.objects, self.origins
        ints_list, floats_list, modes = self.ints, self.floats, self.modes
        entry_of = self.entry_index
        ndarray = np.ndarray
        written = self.written
        for origin, k, source, target in steps:
            if k >= 0:
                if batch is None and target in written:
                    spec, mode = origin.op.exec_spec(k, origin), 0
                else:  # (a first write, or in a batch)
                    spec, mode = self.first_spec(origin, k, target)
                if spec is None:
                    raise Unsupported(f"{origin.op.name}'s gradient, which has no compiled "
                                      "driver")
            else:
                spec, mode = self.special(origin, k, source, target), 0
                if spec is None:
                    continue
            driver, saved, ints, floats = spec
            if len(saved) > MAX_SAVED:
                raise Unsupported
            entry = entry_of.get(driver)
            if entry is None:
                entry = self.entry(driver)
            for array in saved:
                if type(array) is not ndarray:  # a device array: CUDA graphs run the walk
                    raise Unsupported
            code.extend((entry, source, len(saved), len(objects), target, len(ints_list),
                         len(floats_list)))
            objects.extend(saved)
            origins.extend([origin] * len(saved))
            ints_list.extend(ints)
            floats_list.extend(floats)  # not ``+=``: a NumPy ``floats`` would take that over
            modes.append(mode)

    def first_spec(self, origin, k, target):
        """``(spec, mode)`` of VJP ``k`` of ``origin`` where it is the first to write
        ``target``: its set driver (``Op.exec_set_spec``) where it has one, else its adding
        driver after a ZERO row; in a batch, :meth:`batched_spec`."""
        if self.batch is not None:
            return self.batched_spec(origin, k, target)
        self.written.add(target)
        op = origin.op
        if op.sets_first_writes:
            spec = op.exec_set_spec(k, origin)
            if spec is not None:
                return spec, 0
        self.zero(target, self.slot_rows[target])
        return op.exec_spec(k, origin), 0

    def joint_spec(self, node, target):
        """The spec of ``node``'s JOINT step (``Op.exec_joint_spec``): writing ``target``
        whole where it is the first to write it."""
        ks = schedule.joint_inputs(node)
        overwrite = target not in self.written
        self.written.add(target)
        spec = node.op.exec_joint_spec(ks, node, overwrite)
        if spec is None:
            raise Unsupported(f"{node.op.name}'s joint gradient, which has no compiled driver")
        return spec

    def first_write(self, target):
        """A ZERO row before the first row that writes ``target``, for rows that add into it
        (a grad_output's, a fused group's, every row of a batch; ``first_spec`` gives a VJP
        its set driver instead where it has one): a slot is cleared just before use, while
        it stays in the cache; in a batch, each block clears its own rows of it."""
        if target not in self.written:
            self.zero(target, self.slot_rows[target])
            self.written.add(target)

    def batched_spec(self, node, k, target):
        """``(spec, mode)`` of VJP ``k`` of ``node`` in a batch: its driver taking a block of
        rows (``Op.exec_rows_spec``, mode 1) where it has one, else its driver per row."""
        self.first_write(target)
        spec = node.op.exec_rows_spec(k, node)
        if spec is not None:
            return spec, 1
        return node.op.exec_spec(k, node), 0

    def special(self, origin, k, source, target):
        """The spec of a step that is not one VJP: a grad_output's accumulation, a fused
        group (whose loop stays serial in a batch: its blocks already run in parallel), a
        joint VJP; a RESET step (None: its slot is cleared at its next first write)."""
        if k == schedule.RESET:
            self.written.discard(target)  # (cleared by its next writer's first write)
            return None
        if k == schedule.JOINT:
            return self.joint_spec(origin, target)
        self.first_write(target)
        if k == schedule.SEED_STEP:
            return ExecSpec(_strided.accumulate_driver, (), (self.slot_rows[source],), ())
        return origin.spec(parallel=None if self.batch is None else False)

    def zero(self, slot, size):
        """A ZERO row: clear ``slot`` (``size`` elements; in a batch, the block's rows)."""
        self.code.extend((ZERO, slot, 0, 0, 0, size * self.dtype.itemsize, 0))
        self.modes.append(0)

    def decoded_rows(self):
        """The code rows, decoded: :class:`Rows`."""
        code = np.array(self.code, dtype=np.int64).reshape(-1, ROW)
        entry, grad, n_saved, saved, target, ints_at, floats_at = code.T
        clears = entry == ZERO
        no = np.zeros_like(entry)
        return Rows(clears, np.where(clears, -1, entry), grad, np.where(clears, 0, n_saved),
                    np.where(clears, 0, saved), np.where(clears, -1, target),
                    np.where(clears, 0, ints_at), np.where(clears, 0, floats_at),
                    np.where(clears, ints_at, no))

    def slot_places(self):
        """Where each gradient slot lives: :class:`Slots`."""
        offsets = np.array(self.slot_offsets, dtype=np.int64)
        in_arena = offsets >= 0
        return Slots(np.where(in_arena, -1, -offsets - 1), np.where(in_arena, offsets, -1))

    def entry(self, driver):
        index = self.entry_index.get(driver)
        if index is None:
            index = self.entry_index[driver] = len(self.entries)
            self.entries.append(_pointers.entry_address(driver, self.dtype))
        return index

    def execute(self):
        """Convert the lists to arrays (kept as ``table`` and ``float_array``) and run."""
        header = [len(self.code) // ROW, len(self.slot_offsets), len(self.entries)]
        if self.batch is None:
            sections = self.code + self.slot_offsets
        else:
            sections = self.code + self.modes + self.slot_offsets + self.slot_rows
        self.table = np.array(header + sections + self.entries + self.ints + [0],
                              dtype=np.int64)
        self.float_array = np.array(self.floats, dtype=np.float64) if self.floats else _NO_FLOATS
        objects = np.fromiter(map(id, self.objects), dtype=np.int64, count=len(self.objects))
        if self.batch is None:
            run_tables(self.table, objects, self.float_array, self.arena_size, self.dtype)
        else:
            run_batched_tables(self.table, objects, self.float_array, self.arena_size,
                               self.dtype, self.batch)


def run_tables(table, object_ids, floats, arena_size, dtype):
    """One call into :func:`execute` (the caller keeps the objects of ``object_ids`` alive)."""
    execute(table, object_ids, floats, uninitialised(max(arena_size, 1), dtype))


def row_blocks(batch):
    """The blocks of rows :func:`execute_batched` runs, as ``(start, stop)`` pairs, from
    Python (tier 0 runs the same blocks, compiling nothing)."""
    blocks = batch_blocks.py_func(batch)
    starts = [block_start.py_func(batch, blocks, p) for p in range(blocks + 1)]
    return list(zip(starts[:-1], starts[1:]))


def parallel_blocks(batch):
    """Whether :func:`run_batched_tables` runs a batch's blocks in parallel, with OpenBLAS's
    own threads held at one: where the batch makes several blocks, numba has several threads
    and this process may start them (``ops._parallel``)."""
    return batch >= 2 * BLOCK_ROWS and parallel_allowed() and numba.get_num_threads() > 1


def run_batched_tables(table, object_ids, floats, arena_size, dtype, batch):
    """One call into :func:`execute_batched`, in parallel where :func:`parallel_blocks`."""
    arena = uninitialised(max(arena_size, 1), dtype)  # (each block clears its own rows)
    if not parallel_blocks(batch):
        execute_batched(table, object_ids, floats, arena, batch, False)
        return
    previous = hold_blas_threads()
    try:
        execute_batched(table, object_ids, floats, arena, batch, True)
    finally:
        release_blas_threads(previous)


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


class Executed(NamedTuple):
    """A backward the executor ran: the gradients by ``id`` of every target, retaining node
    and (``all_leaves``) leaf that received one, the leaves met, the schedule it ran and its
    tables (:class:`_Tables`, which :mod:`.plan_cache` and ``anb.compile`` keep)."""

    results: dict
    leaves: dict
    schedule: object
    tables: object


def run(plan, seeds, targets, all_leaves, batch=None):
    """Run ``plan`` in one compiled call; None where it cannot (then nothing has changed).

    Arguments as :func:`autograd_nb.engine.backward.run_plan` without ``create_graph``. With
    ``batch`` every seed and result has a leading batch dimension of that size, and the batch
    runs as a ``prange`` over blocks of rows (:func:`execute_batched`). The saved buffers are
    not freed here (the caller frees ``schedule.ran`` unless it retains the graph).
    """
    if not _pointers.SUPPORTED:
        return None
    dtype = _plan_dtype(plan, seeds)
    if dtype is None:
        return None
    try:
        tables, steps, results = build(plan, seeds, targets, all_leaves, dtype, batch)
    except Unsupported:
        return None
    tables.execute()
    return Executed(results, steps.leaves, steps, tables)


def build(plan, seeds, targets, all_leaves, dtype, batch=None, add_to_results=False):
    """The schedule of ``plan`` (:func:`.schedule.schedule`, with the CPU's fused chains)
    written as tables: ``(tables, schedule, results)``; :class:`Unsupported` where a step has
    no driver or an operand is not a host array of ``dtype``. With ``add_to_results`` every
    row only adds into the result slots (buffers that hold gradients already, where the
    tables run elsewhere: ``anb.compile``'s replayed outputs); else each result is cleared,
    or written whole, by its first writer."""
    for _, grad in seeds:
        if not isinstance(grad, (np.ndarray, float, int)):
            raise Unsupported
    groups = None
    if config.FUSE_BACKWARD:
        groups = fusion.groups(plan, targets, all_leaves, {id(edge) for edge, _ in seeds})
    steps = schedule.schedule(plan, seeds, targets, all_leaves, groups, joint=batch is None)
    tables = _Tables(dtype, batch)
    results = tables.add_slots(steps.slots, seeds)
    if add_to_results:
        tables.written.update(s for s, slot in enumerate(steps.slots)
                              if slot.kind == schedule.RESULT)
    tables.write(steps.steps)
    return tables, steps, results


class Unsupported(Exception):
    """A node the executor has no driver for: the Python walk runs the plan instead."""


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n
