"""The compiled backward: a plan is lowered into a table, and the machine runs it in ONE call.

:func:`run` is what :func:`autograd_nb.engine.run_plan` tries first for ``create_graph=False``,
with or without a batch. :func:`build` writes the plan's steps
(:func:`autograd_nb.engine.schedule.schedule` of the plan of
:func:`autograd_nb.engine.backward.make_plan`, which has already pruned the graph and checked
every saved buffer's version) as a table of :mod:`autograd_nb.engine.machine`, the one table
format (its docstring says the rows and values); :func:`lower` is that writing, the one way a
schedule becomes rows, for every backward:

* each schedule slot is one value: an intermediate gradient (``ARENA``) a place in an arena,
  reused once consumed; a seed and a gradient handed back (``SEED``, ``RESULT``) wherever the
  run keeps them; each saved array a VJP reads, one value too. *Where* they live is a
  :class:`Places` strategy's answer: :class:`ArenaPlaces` for an eager backward (an arena
  made per run, the seeds and fresh result arrays as objects of their own, which
  :mod:`.plan_cache` keeps as a template's), and ``anb.compile``'s for a replayed call's
  buffers and for a recorded trace (:mod:`autograd_nb.replay`);
* a row per VJP calls its driver on the gradient's value, the saved values and the target's
  value, in that order (``Op.exec_spec``); fused groups of elementwise VJPs
  (:mod:`autograd_nb.engine.fusion`) and a grad_output's accumulation are drivers too;
* no buffer comes zeroed: the table's first row clears the small arena slots
  (``SMALL_SLOT_BYTES``) together, and every other slot's first writer (again after each
  reuse) either writes it whole (``Op.exec_set_spec``: a VJP that would add into zeros) or
  follows a ZERO row that clears it, just before use, while it stays in the cache.

In a batch (``grad(..., is_grads_batched=True)``) every slot's value has a row stride, the
saved values none, and the machine runs the table over blocks of rows
(:func:`autograd_nb.engine.machine.run_batched`): each block zeroes, reads and writes only its
own rows of every gradient slot, calls a driver once per row, or once per block where the op
gives a driver for many rows (``Op.exec_rows_spec``: ``_bmm`` stacks the rows into one GEMM).

When a node's op has no driver (``Op.exec_spec`` returns None: custom Functions,
reductions over non-adjacent axes), the dtypes are mixed, the arrays are on a
GPU, or NumPy's array struct is not the one the machine reads, :func:`run` returns None
before anything ran, and the Python walk runs the plan instead.
"""

from typing import NamedTuple

import numpy as np

from .. import config
from ..ops import _pointers, _strided
from ..ops._blas import hold_blas_threads, release_blas_threads
from ..ops.registry import ExecSpec, defines
from . import fusion, machine, schedule

#: The dtypes of a plan the executor runs, one per plan: a complex plan lowers where every
#: driver it needs computes the complex case (``_pointers.serves_complex``), else the
#: Python walk runs it.
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64),
           np.dtype(np.complex64), np.dtype(np.complex128))

#: Makes a new arena or result buffer, ``uninitialised(shape, dtype)``, left as it comes: the
#: table clears each slot, or writes it whole, before it reads it (``Lowering.first_write``).
#: NumPy's own function, so that mapping it over many results costs no Python call each; the
#: tests put one in its place that fills the buffers with NaN.
uninitialised = np.empty
#: Arena slots of at most this many bytes are cleared together when a table starts, not each
#: by a row of its own before its first writer (``Lowering.place_arena``):
#: ``fastest_autograd``'s 1,000-op replay, ~700 slots of one to four elements, took 1.5% longer
#: with a row each.
SMALL_SLOT_BYTES = 4096
#: At most this many saved arrays per row: a driver's operands are the gradient, the saved
#: arrays and the target (``machine.MAX_OPERANDS``). An op or fused group that reads more runs
#: in the Python walk.
MAX_SAVED = machine.MAX_OPERANDS - 2
#: The object an eager backward's arena is (:class:`ArenaPlaces`): its ``id`` is set per run.
ARENA_OBJECT = 0


class Places:
    """Where the buffers of a lowered backward live: a strategy of :func:`lower`. Each method
    returns a value of ``builder`` (:class:`autograd_nb.engine.machine.Builder`); ``stride``
    is a slot's bytes per batch row (0 outside a batch).

    ``arena(offset, stride)``: an intermediate gradient at ``offset`` bytes in the run's arena
    (``arena_bytes(n)`` is told the arena's size once the slots are placed);
    ``seed(index, array, stride)``: grad_output ``index`` (``array``: C-contiguous, of the
    run's dtype, the batch in front); ``result(edge, shape, stride)``: the gradient of
    ``edge`` handed back; ``saved(arrays, origin)``: the values of the arrays a row of
    ``origin`` (a node or fused group) reads, in order."""

    builder = None

    def arena_bytes(self, n_bytes):
        """Told the arena's size once the slots are placed; only the eager arena keeps it."""


class ArenaPlaces(Places):
    """An eager backward's places: object ``ARENA_OBJECT`` is an arena made per run, every
    other object an array of its own (a seed, a fresh result, a saved array), in ``objects``
    with what it came from in ``origins``: ``("arena", None)``, ``("seed", index)``,
    ``("result", edge)``, or the node or fused group whose row reads it (:mod:`.plan_cache`
    reads them)."""

    def __init__(self, builder, dtype):
        self.builder = builder
        self.dtype = dtype
        self.objects = [None]
        self.origins = [("arena", None)]
        self.results = {}  # id of each result's edge -> its array
        self.arena_size = 0  # (elements)

    def arena_bytes(self, n_bytes):
        self.arena_size = n_bytes // self.dtype.itemsize

    def arena(self, offset, stride):
        return self.builder.value(ARENA_OBJECT, offset, stride)

    def _object(self, array, origin, stride):
        self.objects.append(array)
        self.origins.append(origin)
        return self.builder.value(len(self.objects) - 1, 0, stride)

    def seed(self, index, array, stride):
        return self._object(array, ("seed", index), stride)

    def result(self, edge, shape, stride):
        array = uninitialised(shape, self.dtype)
        self.results[id(edge)] = array
        return self._object(array, ("result", edge), stride)

    def saved(self, arrays, origin):
        objects, values = self.objects, self.builder.values
        first_object, first_value = len(objects), len(values) // machine.VALUE
        objects.extend(arrays)
        self.origins.extend([origin] * len(arrays))
        for j in range(first_object, len(objects)):
            values.extend((j, 0, 0))
        return range(first_value, first_value + len(arrays))


class Lowering:
    """The table of one backward being written from a schedule (see the module docstring):
    its :class:`~autograd_nb.engine.machine.Builder`, its places and, per schedule slot, the
    slot's value and elements per batch row."""

    def __init__(self, places, dtype, batch=None):
        self.places = places
        self.builder = places.builder
        self.dtype = dtype
        self.batch = batch  # None, or the number of rows of every slot (a batched run)
        self.slot_values = []
        self.slot_rows = []
        self.entry_index = {}  # driver -> the builder's entry number
        self.written = set()  # (the slots written, or cleared by a ZERO row, so far)

    def add_slots(self, slots, seeds):
        """A value per schedule slot, same numbering: the seeds (read as they are where
        C-contiguous and of the dtype, else converted), the results, the arena's places.
        Every edge must have the table's dtype."""
        dtype, places = self.dtype, self.places
        itemsize = dtype.itemsize
        lead = () if self.batch is None else (self.batch,)
        batched = self.batch is not None
        values = self.slot_values
        arena = []  # (slot, elements) of the ARENA slots, placed by ``place_arena``
        for slot in slots:
            edge = slot.edge
            if edge.dtype != dtype:
                raise Unsupported(f"gradients of {edge.dtype} and {dtype} in one backward")
            size = _size(edge.shape)
            self.slot_rows.append(size)
            stride = size * itemsize if batched else 0
            if slot.kind == schedule.ARENA:
                arena.append((len(values), size))
                values.append(-1)
            elif slot.kind == schedule.SEED:
                array = np.ascontiguousarray(seeds[slot.seed][1], dtype=dtype).reshape(
                    lead + edge.shape)
                values.append(places.seed(slot.seed, array, stride))
            else:
                values.append(places.result(edge, lead + edge.shape, stride))
        self.place_arena(arena)

    def place_arena(self, arena):
        """The arena places of the ARENA slots ``(slot, elements)``. Outside a batch, the
        slots of at most ``SMALL_SLOT_BYTES`` come first, all cleared by one ZERO row that
        starts the table: a row each before its first writer would cost more than the
        clearing (``fastest_autograd``'s slots of one to four elements). The others are
        cleared, or written whole, by their first writers (``first_write``)."""
        itemsize = self.dtype.itemsize
        values, places = self.slot_values, self.places
        at = 0  # (elements)
        small = ()
        if self.batch is None:
            limit = SMALL_SLOT_BYTES // itemsize
            small = {s for s, size in arena if size <= limit}
            for s, size in arena:
                if s in small:
                    values[s] = places.arena(at * itemsize, 0)
                    at += size
            if at:
                self.builder.zero(values[min(small)], at * itemsize)
                self.written.update(small)
        for s, size in arena:
            if s not in small:
                stride = 0 if self.batch is None else size * itemsize
                values[s] = places.arena(at * itemsize, stride)
                at += size * (1 if self.batch is None else self.batch)
        self.arena_size = at
        places.arena_bytes(at * itemsize)

    def write(self, steps):
        """One row per step (see the module docstring). (The hot loop of an uncached
        backward: local names, one call per step.)"""
        batch = self.batch
        builder = self.builder
        rows, operands, int_list, float_list = (builder.rows, builder.operands, builder.ints,
                                                builder.floats)
        saved_values = self.places.saved
        values = self.slot_values
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
                spec, mode = self.special(origin, k, source, target)
                if spec is None:
                    continue
            driver, saved, ints, floats = spec
            if len(saved) > MAX_SAVED or any(type(a) is not ndarray for a in saved):
                raise Unsupported  # (too many, or a device array: CUDA graphs run the walk)
            entry = entry_of.get(driver)
            if entry is None:
                entry = self.entry(driver)
            first = len(operands)
            operands.append(values[source])
            operands.extend(saved_values(saved, origin))
            if type(target) is int:
                operands.append(values[target])
            else:  # (a JOINT step of distinct tensors: a target each)
                operands.extend([values[t] for t in target])
            rows.extend((entry, len(operands) - first, first, len(int_list), len(float_list),
                         mode))
            int_list.extend(ints)
            float_list.extend(floats)  # not ``+=``: a NumPy ``floats`` would take that over

    def first_spec(self, origin, k, target):
        """``(spec, mode)`` of VJP ``k`` of ``origin`` where it is the first to write
        ``target``: its set driver (``Op.exec_set_spec``) where it has one, else its adding
        driver after a ZERO row; in a batch, :meth:`batched_spec`."""
        if self.batch is not None:
            return self.batched_spec(origin, k, target)
        self.written.add(target)
        op = origin.op
        if defines(op, "exec_set_spec"):
            spec = op.exec_set_spec(k, origin)
            if spec is not None:
                return spec, 0
        self.zero(target)
        return op.exec_spec(k, origin), 0

    def joint_spec(self, node, target):
        """``(spec, mode)`` of ``node``'s JOINT step (``VJPStrategy.exec_joint_spec``; of
        distinct tensors, a tuple of targets, ``VJPStrategy.exec_split_spec``): writing each
        target whole where it is the first to write it; in a batch, its adding driver once
        per row (``machine.PER_ROW``) after the block's ZERO row where it is the first, which
        gives each row the bits of the same step outside a batch (the set driver's sums start
        at ``+0.0``, as adding into zeros does)."""
        targets = target if type(target) is tuple else (target,)
        if self.batch is not None:
            for t in targets:
                self.first_write(t)
            overwrites, mode = (False,) * len(targets), machine.PER_ROW
        else:
            overwrites, mode = tuple(t not in self.written for t in targets), 0
            self.written.update(targets)
        op = node.op
        if type(target) is tuple:
            spec = op.vjp_strategy.exec_split_spec(op, node, overwrites)
        else:
            spec = op.vjp_strategy.exec_joint_spec(op, schedule.joint_inputs(node), node,
                                                   overwrites[0])
        if spec is None:
            raise Unsupported(f"{node.op.name}'s joint gradient, which has no compiled driver")
        return spec, mode

    def first_write(self, target):
        """A ZERO row before the first row that writes ``target``, for rows that add into it
        (a grad_output's, a fused group's, every row of a batch; ``first_spec`` gives a VJP
        its set driver instead where it has one): a slot is cleared just before use, while
        it stays in the cache; in a batch, each block clears its own rows of it."""
        if target not in self.written:
            self.zero(target)
            self.written.add(target)

    def batched_spec(self, node, k, target):
        """``(spec, mode)`` of VJP ``k`` of ``node`` in a batch: its driver taking a block of
        rows (``Op.exec_rows_spec``, ``machine.BLOCK``) where it has one, else its driver per
        row."""
        self.first_write(target)
        spec = node.op.exec_rows_spec(k, node)
        if spec is not None:
            return spec, machine.BLOCK
        return node.op.exec_spec(k, node), machine.PER_ROW

    def special(self, origin, k, source, target):
        """``(spec, mode)`` of a step that is not one VJP: a grad_output's accumulation, a
        fused group (whose loop stays serial in a batch: its blocks already run in parallel),
        a joint VJP (:meth:`joint_spec`); a RESET step (spec None: its slot is cleared at its
        next first write)."""
        if k == schedule.RESET:
            self.written.discard(target)  # (cleared by its next writer's first write)
            return None, 0
        if k == schedule.JOINT:
            return self.joint_spec(origin, target)
        self.first_write(target)
        if k == schedule.SEED_STEP:
            return ExecSpec(_strided.accumulate_driver, (), (self.slot_rows[source],), ()), 0
        return origin.spec(parallel=None if self.batch is None else False), 0

    def zero(self, slot):
        """A ZERO row: clear ``slot`` (in a batch, the block's rows of it)."""
        self.builder.zero(self.slot_values[slot], self.slot_rows[slot] * self.dtype.itemsize)

    def entry(self, driver):
        try:
            address = _pointers.entry_address(driver, self.dtype)
        except _pointers.NoComplexDriver as error:  # (a real VJP's driver: no complex case)
            raise Unsupported(str(error)) from error
        index = self.entry_index[driver] = self.builder.entry(address)
        return index


def lower(steps, seeds, places, dtype, batch=None, add_to_results=False):
    """The schedule ``steps`` (:class:`.schedule.Schedule`) of a backward with grad_outputs
    ``seeds`` written as rows of ``places.builder``, its buffers where ``places`` (a
    :class:`Places`) puts them: the :class:`Lowering`. :class:`Unsupported` where a step has
    no driver or an operand is not a host array of ``dtype``. With ``add_to_results`` every
    row only adds into the result slots (buffers that hold gradients already, where the
    table runs elsewhere: ``anb.compile``'s replayed outputs); else each result is cleared,
    or written whole, by its first writer."""
    lowering = Lowering(places, dtype, batch)
    lowering.add_slots(steps.slots, seeds)
    if add_to_results:
        lowering.written.update(s for s, slot in enumerate(steps.slots)
                                if slot.kind == schedule.RESULT)
    lowering.write(steps.steps)
    return lowering


def plan_schedule(plan, seeds, targets, all_leaves, batch=None):
    """The schedule of ``plan`` (:func:`.schedule.schedule`) with the CPU's fused chains and
    joint VJPs, as the machine runs it, with or without a ``batch`` (a batch runs each JOINT
    step once per row: :meth:`Lowering.joint_spec`); :class:`Unsupported` where a
    grad_output is not a host value."""
    for _, grad in seeds:
        if not isinstance(grad, (np.ndarray, float, int)):
            raise Unsupported
    groups = None
    if config.FUSE_BACKWARD:
        groups = fusion.groups(plan, targets, all_leaves, {id(edge) for edge, _ in seeds},
                               complex_values=True)
    return schedule.schedule(plan, seeds, targets, all_leaves, groups, joint=True)


class Tables(NamedTuple):
    """An eager backward's table, as its run and :mod:`.plan_cache` read it: the machine's
    ``table`` and ``floats``, the objects (:class:`ArenaPlaces`' ``objects`` and
    ``origins``), the arena's size in elements, the dtype, the batch (None or its rows) and
    the driver of each entry."""

    table: np.ndarray
    floats: np.ndarray
    objects: list
    origins: list
    arena_size: int
    dtype: np.dtype
    batch: object
    drivers: list

    def execute(self):
        """Run the table on its objects (the arena made here)."""
        ids = np.fromiter(map(id, self.objects), dtype=np.int64, count=len(self.objects))
        if self.batch is None:
            run_tables(self.table, ids, self.floats, self.arena_size, self.dtype)
        else:
            run_batched_tables(self.table, ids, self.floats, self.arena_size, self.dtype,
                               self.batch)


#: The machine's two loops, by the names the executor calls them (tests count the backwards
#: run through them).
execute = machine.run
execute_batched = machine.run_batched


def run_tables(table, object_ids, floats, arena_size, dtype):
    """One call into :func:`.machine.run` on an arena of ``arena_size`` elements made here
    (object ``ARENA_OBJECT``; the caller keeps the other objects of ``object_ids`` alive)."""
    arena = uninitialised(max(arena_size, 1), dtype)
    object_ids[ARENA_OBJECT] = id(arena)
    execute(table, object_ids, floats)


def run_batched_tables(table, object_ids, floats, arena_size, dtype, batch):
    """:func:`run_tables` of a batch of ``batch`` rows (:func:`.machine.run_batched`, each
    block clearing its own rows of the arena), in parallel where
    :func:`.machine.parallel_blocks`, with OpenBLAS's own threads held at one."""
    arena = uninitialised(max(arena_size, 1), dtype)
    object_ids[ARENA_OBJECT] = id(arena)
    if not machine.parallel_blocks(batch):
        execute_batched(table, object_ids, floats, batch, False)
        return
    previous = hold_blas_threads()
    try:
        execute_batched(table, object_ids, floats, batch, True)
    finally:
        release_blas_threads(previous)


def plan_dtype(plan, seeds):
    """The one float or complex dtype of ``plan``'s nodes and ``seeds``' edges, or None."""
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
    :class:`Tables` (which :mod:`.plan_cache` keeps)."""

    results: dict
    leaves: dict
    schedule: object
    tables: object


def run(plan, seeds, targets, all_leaves, batch=None):
    """Run ``plan`` in one compiled call; None where it cannot (then nothing has changed).

    Arguments as :func:`autograd_nb.engine.backward.run_plan` without ``create_graph``. With
    ``batch`` every seed and result has a leading batch dimension of that size, and the batch
    runs as a ``prange`` over blocks of rows (:func:`.machine.run_batched`). The saved
    buffers are not freed here (the caller frees ``schedule.ran`` unless it retains the
    graph).
    """
    if not _pointers.SUPPORTED:
        return None
    dtype = plan_dtype(plan, seeds)
    if dtype is None:
        return None
    try:
        tables, steps, results = build(plan, seeds, targets, all_leaves, dtype, batch)
    except Unsupported:
        return None
    tables.execute()
    return Executed(results, steps.leaves, steps, tables)


def build(plan, seeds, targets, all_leaves, dtype, batch=None, add_to_results=False):
    """An eager backward of ``plan``: its schedule (:func:`plan_schedule`) lowered with
    :class:`ArenaPlaces` (``add_to_results`` as :func:`lower`). ``(tables, schedule,
    results)``: the :class:`Tables`, the schedule and the fresh result arrays by ``id`` of
    their edge."""
    steps = plan_schedule(plan, seeds, targets, all_leaves, batch)
    places = ArenaPlaces(machine.Builder(), dtype)
    lowering = lower(steps, seeds, places, dtype, batch, add_to_results)
    table, floats = places.builder.tables()
    tables = Tables(table, floats, places.objects, places.origins, places.arena_size, dtype,
                    batch, list(lowering.entry_index))
    return tables, steps, places.results


class Unsupported(Exception):
    """A node the executor has no driver for: the Python walk runs the plan instead."""


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n
