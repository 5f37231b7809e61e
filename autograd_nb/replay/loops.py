"""``scan`` and ``fori_loop`` recorded once inside ``anb.compile``: the body is one table,
and one row of the program runs it once per trip.

While fn is recorded, :func:`record` runs the loop's body once on stand-ins (copies of the
first carry and of the first slice of ``xs``) under a trace of its own, lays that trace out as
a :class:`~autograd_nb.replay.program.Program` (the body's forward table), and lowers the
backward of the body's graph, from all its outputs at once, into a second table
(:class:`_BodyPlaces`). The loop then becomes one op of fn's program, :class:`Loop`: its
forward driver runs the body's table once per trip, and its VJP driver runs the body's
backward table once per trip in reverse, both on the machine's loop
(:func:`autograd_nb.engine.machine.walk`): no table grows with the trip count.

The values of trip ``i`` are the body's values at a per-trip stride: each carry in a stack of
``n + 1`` carries (trip ``i`` reads carry ``i`` and writes its carry out as carry ``i + 1``),
each ``x`` a slice of ``xs``, each ``y`` a slice of the stacked ``ys`` (copied there), the
values of the body's arena that its backward reads one copy per trip (kept for the backward:
``scan``'s ``checkpoint=None``), the others one copy for all trips. The tensors the body
reads from outside (closures) are the same at every trip; their gradients add up across
trips in the target, in eager's order.

The loop's op has one result, ``outputs``: the last carry, then the ``ys``, one after the
other; the carry and ``ys`` handed back are views of it (basic indexing and reshapes, which a
program reads in place). Behind it, in the same buffer, lie the carries and arenas of every
trip that the backward reads. Its VJP adds into every input's gradient in one pass (a JOINT
step with a target per input, the split VJP of ``VJPStrategy``).

Bits: the body's table gives eager's bits (the tests of ``anb.compile`` hold it), and so does
its backward: each trip's gradients are added in the order eager adds them (a carry's
gradient starts at zero per trip, as the slot of eager's carry does; a slice's gradient is
summed in its own slot, then added into ``xs``'s, as eager's ``getitem`` does; a closure's
gradient is added into directly, trip after trip).

Where the body cannot be recorded so (a branch or value read on a traced value, an in-place
write, a gradient taken inside, several dtypes, a carry handed back unchanged, too many
operands), :func:`record` gives None and the loop unrolls into the program, as before.
"""

import numpy as np
from numba import njit

from .. import engine, tape
from ..engine import backward as backward_module
from ..engine import executor, machine
from ..ops import _pointers
from ..ops.registry import DerivativeNotImplemented, ExecSpec, Op, VJPStrategy
from ..tensor import Tensor
from . import program as program_module
from . import tracer

_ALIGN = 64
_BYTES = np.empty(0, dtype=np.uint8)
#: The most operands the loop's rows may have: the gradient, the saved arrays, the targets.
_MAX_OPERANDS = machine.MAX_OPERANDS - 2

# Object kinds of a driver's description (see ``_describe``).
_OPERAND, _SCRATCH, _PINGPONG, _PINGPONG_NEXT = 0, 1, 2, 3
# When an object's other address applies: never, on the last trip, on the first.
_NEVER, _LAST, _FIRST = 0, 1, 2
_OBJECT_INTS = 8


def _round(n_bytes):
    return -(-n_bytes // _ALIGN) * _ALIGN


# -- drivers ------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _trip_pointers(table, ints, at, n_objects, operands, scratch, i, n, bases, pointers):
    """Fill ``bases`` and ``pointers`` (the address of each object of a driver's
    description, and of each value of ``table``) for trip ``i``: arrays made once per run,
    not per trip (``machine.value_pointers`` makes its own)."""
    _bases(ints, at, n_objects, operands, scratch, i, n, bases)
    values_at = machine.HEADER + table[0] * machine.ROW
    for v in range(table[1]):
        place = values_at + v * machine.VALUE
        pointers[v] = bases[table[place + machine.OBJECT]] + table[place + machine.OFFSET]


@njit(cache=True, nogil=True)
def _bases(ints, at, n_objects, operands, scratch, i, n, bases):
    """The address of each object of a driver's description at trip ``i``, into
    ``bases``."""
    for o in range(n_objects):
        d = at + o * 8
        kind, operand, start, step = ints[d], ints[d + 1], ints[d + 2], ints[d + 3]
        alt_operand, alt_start, when = ints[d + 4], ints[d + 5], ints[d + 6]
        if alt_operand >= 0 and ((when == 1 and i == n - 1) or (when == 2 and i == 0)):
            bases[o] = operands[alt_operand] + alt_start
        elif kind == 0:
            bases[o] = operands[operand] + start + i * step
        elif kind == 1:
            bases[o] = scratch + start
        elif kind == 2:
            bases[o] = scratch + start + (i % 2) * step
        else:
            bases[o] = scratch + start + ((i + 1) % 2) * step


@njit(cache=True, nogil=True)
def _copy(source, target, n_bytes, like):
    """``n_bytes`` (a multiple of ``like``'s itemsize) from ``source`` to ``target``, a loop
    over elements: a slice assignment of bytes ran byte by byte, about 1 µs per KiB."""
    n = n_bytes // like.itemsize
    from_array = _pointers.array_at(source, n, like)
    to_array = _pointers.array_at(target, n, like)
    for j in range(n):
        to_array[j] = from_array[j]


@njit(cache=True, nogil=True)
def _clear(address, n_bytes, like):
    """``n_bytes`` (a multiple of ``like``'s itemsize) at ``address`` set to zero."""
    _pointers.array_at(address, n_bytes // like.itemsize, like)[:] = 0


@njit(cache=True, nogil=True)
def forward_driver(operands, ints, floats, like):
    """The loop's forward (``Loop.forward_spec``): operands the body's table and floats, the
    inputs, then the loop's buffer. ``ints``: the trip count, the objects' description
    (``_describe``), the copies before the loop, per trip and after it (``_Layout``)."""
    n, n_objects = ints[0], ints[1]
    at = 2
    objects_at = at
    at += n_objects * 8
    table = _pointers.int_view(operands[0])
    table = _pointers.array_at(operands[0], machine.table_size(table), table)
    body_floats = _pointers.float_view(operands[1])
    n_before = ints[at]
    for c in range(n_before):
        d = at + 1 + 7 * c
        _copy(operands[ints[d]] + ints[d + 1], operands[ints[d + 3]] + ints[d + 4],
              ints[d + 6], like)
    at += 1 + 7 * n_before
    n_each = ints[at]
    each_at = at + 1
    at += 1 + 7 * n_each
    bases = np.empty(n_objects, dtype=np.int64)
    pointers = np.empty(table[1], dtype=np.int64)
    for i in range(n):
        _trip_pointers(table, ints, objects_at, n_objects, operands, 0, i, n, bases, pointers)
        machine.walk(table, pointers, body_floats)
        for c in range(n_each):
            d = each_at + 7 * c
            _copy(operands[ints[d]] + ints[d + 1] + i * ints[d + 2],
                  operands[ints[d + 3]] + ints[d + 4] + i * ints[d + 5], ints[d + 6], like)
    n_after = ints[at]
    for c in range(n_after):
        d = at + 1 + 7 * c
        _copy(operands[ints[d]] + ints[d + 1], operands[ints[d + 3]] + ints[d + 4],
              ints[d + 6], like)


@njit(cache=True, nogil=True)
def backward_driver(operands, ints, floats, like):
    """The loop's VJP (``Loop.exec_split_spec``): operands the gradient of the loop's
    outputs, the body's backward table and floats, the saved arrays, then the targets.
    ``ints``: the trip count, the scratch bytes, the objects' description (``_describe``),
    the targets to clear first, and the slices' gradients to add into their targets after
    each trip (``_BodyPlaces``)."""
    n, scratch_bytes, n_objects = ints[0], ints[1], ints[2]
    objects_at = 3
    at = objects_at + n_objects * 8
    table = _pointers.int_view(operands[1])
    table = _pointers.array_at(operands[1], machine.table_size(table), table)
    body_floats = _pointers.float_view(operands[2])
    scratch_array = np.zeros(max(scratch_bytes, 1), dtype=np.uint8)
    n_clear = ints[at]
    for c in range(n_clear):
        d = at + 1 + 2 * c
        _clear(operands[ints[d]], ints[d + 1], like)
    at += 1 + 2 * n_clear
    n_add = ints[at]
    add_at = at + 1
    bases = np.empty(n_objects, dtype=np.int64)
    pointers = np.empty(table[1], dtype=np.int64)
    for i in range(n - 1, -1, -1):
        # (its address read here, every trip: an array numba sees unused after a line is
        # freed there, and the next allocation would take its memory)
        scratch = scratch_array.ctypes.data
        _trip_pointers(table, ints, objects_at, n_objects, operands, scratch, i, n, bases,
                       pointers)
        for o in range(n_objects):  # (the gradients of this trip's carry and slices)
            d = objects_at + o * 8
            clear = ints[d + 7]
            if clear and not (ints[d + 4] >= 0 and ((ints[d + 6] == 1 and i == n - 1)
                                                    or (ints[d + 6] == 2 and i == 0))):
                _clear(bases[o], clear, like)
        machine.walk(table, pointers, body_floats)
        for c in range(n_add):
            d = add_at + 5 * c
            count = ints[d + 4]
            source = _pointers.array_at(bases[ints[d]], count, like)
            target = _pointers.array_at(operands[ints[d + 1]] + ints[d + 2] + i * ints[d + 3],
                                        count, like)
            for j in range(count):
                target[j] += source[j]


# -- the loop's op ------------------------------------------------------------------------


class _LoopVJPs(VJPStrategy):
    """A loop's VJPs into every input's gradient in one run of the body's backward table."""

    def split(self, op, node):
        return op.backward_parts is not None

    def exec_split_spec(self, op, node, overwrites):
        return op.backward_parts.spec(node, range(len(node.edges)), overwrites)

    def vjp_split(self, op, grad_output, saved, attrs, grad_inputs):
        op._backward_into(grad_output, saved, range(len(grad_inputs)), grad_inputs)

    vjp_split_numpy = vjp_split


class Loop(Op):
    """A loop recorded once (see the module docstring): not registered, one per recording.
    Its node's edges are the differentiable tensors among the first carry, ``xs`` and the
    body's outside tensors; its VJP adds into all their gradients at once."""

    family = "replay"
    n_inputs = None
    saves = (0,)
    vjp_strategy = _LoopVJPs()

    def __init__(self, name, forward, backward):
        self.name = name
        self.forward_parts = forward  # (table, floats, ints)
        self.backward_parts = backward  # a _Backward, or None

    def forward_spec(self, arrays, attrs, output):
        return forward_driver, self.forward_parts[2], ()

    # The backward (the same driver for the compiled executor and the Python walk); the
    # VJP into all targets at once is the split strategy's (``_LoopVJPs``).

    def exec_spec(self, k, node):
        return self.backward_parts.spec(node, (k,), (False,))

    def exec_set_spec(self, k, node):
        return self.backward_parts.spec(node, (k,), (True,))

    def vjp(self, k, grad_output, saved, attrs, grad_input):
        self._backward_into(grad_output, saved, (k,), [grad_input])

    vjp_numpy = vjp

    def _backward_into(self, grad_output, saved, ks, grad_inputs):
        parts = self.backward_parts
        dtype = parts.dtype
        g = np.ascontiguousarray(grad_output, dtype=dtype).reshape(-1)
        targets = [np.ascontiguousarray(t) for t in grad_inputs]
        arrays = [g, parts.table, parts.floats, *saved.inputs, *parts.consts, *targets]
        ints = parts.spec(None, ks, (False,) * len(ks)).ints
        operands = np.array([a.ctypes.data for a in arrays], dtype=np.int64)
        entry = _pointers.entry_address(backward_driver, dtype)
        _pointers._call_once(entry, operands, np.array(ints + (0,), dtype=np.int64),
                             np.zeros(1))
        for target, given in zip(targets, grad_inputs):
            if target is not given:
                given[...] = target

    def rule(self, k, grad_output, inputs, output, attrs):
        raise DerivativeNotImplemented(
            "a loop recorded inside anb.compile has no differentiable rule (create_graph): "
            "call the function uncompiled")


class _Backward:
    """The loop's VJP: the body's backward table and its description, per set of targets."""

    def __init__(self, table, floats, consts, dtype, n, scratch_bytes, objects, clears, adds,
                 n_saved):
        self.table = table
        self.floats = floats
        self.consts = consts
        self.dtype = dtype
        self.n = n
        self.scratch_bytes = scratch_bytes
        self.objects = objects  # per object: kind, operand name, start, step, alt, clear
        self.clears = clears
        self.adds = adds  # (slot object, target edge, start, step, count)
        self.n_saved = n_saved  # (the node's saved arrays)

    def spec(self, node, ks, overwrites):
        """The ExecSpec of the loop's VJP into the targets of edges ``ks`` (written whole
        where ``overwrites``)."""
        first_target = 3 + self.n_saved + len(self.consts)
        target_of = {k: first_target + j for j, k in enumerate(ks)}
        scratch = self.scratch_bytes
        described = []
        extra = 0
        for kind, operand, start, step, alt, clear in self.objects:
            if kind == "target":  # (a target, or scratch where it is not one of ``ks``)
                if operand in target_of:
                    described.append((_OPERAND, target_of[operand], 0, 0, -1, 0, 0, 0))
                else:
                    described.append((_SCRATCH, 0, scratch + extra, 0, -1, 0, 0, 0))
                    extra += _round(clear)
                continue
            alt_operand, alt_start, when = -1, 0, _NEVER
            if alt is not None:
                when, alt_edge, alt_operand, alt_start = alt
                if alt_edge is not None:
                    alt_operand = target_of.get(alt_edge, -1)
            index = operand if kind == _OPERAND else 0
            described.append((kind, index, start, step, alt_operand, alt_start, when, clear))
        ints = [self.n, scratch + extra, len(described)]
        for d in described:
            ints.extend(d)
        cleared = [(target_of[k], self.clears[k]) for k, o in zip(ks, overwrites) if o]
        ints.append(len(cleared))
        for c in cleared:
            ints.extend(c)
        adds = [a for a in self.adds if a[1] in target_of]
        ints.append(len(adds))
        for slot, edge, start, step, count in adds:
            ints.extend((slot, target_of[edge], start, step, count))
        saved = () if node is None else (self.table, self.floats, *node.saved_inputs,
                                         *self.consts)
        return ExecSpec(backward_driver, saved, tuple(ints), ())


# -- recording ----------------------------------------------------------------------------


class _Refused(Exception):
    """The loop cannot be recorded once; it unrolls."""


class _swapped:
    """This thread records into ``sub`` (a body's trace) instead of ``outer`` meanwhile."""

    def __init__(self, outer, sub):
        self.outer, self.sub = outer, sub

    def __enter__(self):
        tracer._local.trace = self.sub
        engine.set_backward_hook(self.sub.inner_backward)

    def __exit__(self, *exc):
        tracer._local.trace = self.outer
        engine.set_backward_hook(self.outer.inner_backward)
        return False


def _body_trace(trace, body, carry, x_slices, grad):
    """The body run once on stand-ins under a trace of its own: ``(sub, stand-ins,
    outputs, n_carry)``."""
    standins = [Tensor._make(np.array(t._data), requires_grad=grad and t.dtype.kind == "f")
                for t in carry]
    x_standins = [Tensor._make(np.array(x), requires_grad=grad and t.requires_grad)
                  for x, t in x_slices]
    sub = tracer.Trace(standins + x_standins, guards=False)
    with _swapped(trace, sub):
        carry_out, ys = body(standins, x_standins)
    if (sub.unsupported is not None or sub.value_dependent is not None or sub.guards
            or sub.writes or any(e.op == "block" for e in sub.events)):
        raise _Refused
    outputs = list(carry_out) + list(ys)
    if not all(isinstance(t, Tensor) for t in outputs) or len(
            {id(t) for t in outputs}) != len(outputs):
        raise _Refused
    sub.adopt_outputs(outputs)
    sub.own_outputs(outputs)
    return sub, standins + x_standins, outputs, len(carry_out)


def record(trace, body, carry, xs, n, reverse, twin=None):
    """Record a loop of ``n`` trips into ``trace``, its body run once: ``body(carry, xs) ->
    (carry, ys)`` on lists of tensors (a carry, the slices of ``xs``). Returns ``(carry,
    ys)`` (``ys`` stacked), computed, or None where the loop must unroll (nothing of
    ``trace`` changed then). ``twin``: the body of another trip (``fori_loop``'s next ``i``),
    which must record the same tables, else None."""
    if n < 1 or not tracer._pointers.SUPPORTED:
        return None
    for t in list(carry) + list(xs):
        if type(t._data) is not np.ndarray or not t._data.flags.c_contiguous:
            return None
    grad = tape.is_grad_enabled()
    first = n - 1 if reverse else 0
    x_slices = [(x._data[first], x) for x in xs]
    try:
        with tracer.gc_paused():
            made = _made(trace, body, carry, xs, x_slices, n, reverse, grad)
            if twin is not None and n > 1:
                again = _made(trace, twin, carry, xs, x_slices, n, reverse, grad)
                if not _same(made, again):
                    return None
    except (_Refused, program_module.Unsupported, executor.Unsupported):
        return None
    return _emit(trace, made, carry, xs)


class _Made:
    """A body laid out: its program, its backward and the loop's layout."""


def _made(trace, body, carry, xs, x_slices, n, reverse, grad):
    sub, standins, outputs, n_carry = _body_trace(trace, body, carry, x_slices, grad)
    dtypes = {t.dtype for t in outputs}
    if len(dtypes) != 1 or any(t.dtype != s.dtype or t.shape != s.shape
                               for t, s in zip(outputs[:n_carry], standins)):
        raise _Refused  # (one dtype for the loop's buffer; a changed carry raised before)
    body_program = program_module.Program(sub, outputs, None, None)
    if body_program.written or any(o[0] != "arena" for o in body_program.outputs):
        raise _Refused
    made = _Made()
    made.dtype = next(iter(dtypes))
    made.program = body_program
    made.sub = sub
    made.outputs = outputs
    made.n_carry = n_carry
    made.n = n
    made.reverse = reverse
    made.standins = standins
    made.ys_shapes = [t.shape for t in outputs[n_carry:]]
    made.edges = _edges(made, carry, xs, grad)
    lowered = _lower_backward(made) if made.edges else None
    _carry_in_place(made, None if lowered is None else lowered[1])
    kept = _keep_per_trip(made, set() if lowered is None else lowered[0].reads,
                          None if lowered is None else lowered[1])
    made.layout = _Layout(made, carry, xs, kept)
    made.backward = None if lowered is None else _describe(made, *lowered, xs)
    made.forward_ints = made.layout.forward_ints()
    return made


def _carry_in_place(made, backward_table):
    """Let the body write each carry out where the next trip reads its carry in (the next
    slot of the carry's stack): the values of the carry out's place in the body's arena
    moved there, in both tables, so that no trip copies its carry."""
    program = made.program
    tables = [program.forward_table] + ([] if backward_table is None else [backward_table])
    for k in range(made.n_carry):
        start = program.outputs[k][1]
        n_bytes = made.outputs[k]._data.nbytes
        for table in tables:
            values = machine.sections(table).values
            offsets = values[:, machine.OFFSET]
            inside = (values[:, machine.OBJECT] == 0) & (offsets >= start) & (
                offsets < start + n_bytes)
            values[inside, machine.OFFSET] = offsets[inside] - start + n_bytes
            values[inside, machine.OBJECT] = 1 + k


def _keep_per_trip(made, reads, backward_table):
    """Split the body's arena in two objects: the values its backward reads, packed, one
    copy per trip (object 0), and the others, one copy for all trips (the object after the
    constants); the tables' values moved there. The per-trip bytes."""
    program, sub = made.program, made.sub
    carries = {program.outputs[k][1] for k in range(made.n_carry)}  # (``_carry_in_place``)
    places = sorted({(program.arena_offsets[index], sub.arena_buffers[index].array.nbytes)
                     for kind, index in reads if kind == "arena"
                     and program.arena_offsets[index] not in carries})
    starts, ends, moved = [], [], []
    at = 0
    for start, n_bytes in places:
        if starts and start < ends[-1]:  # (one place named twice, or overlapping)
            ends[-1] = max(ends[-1], start + n_bytes)
            continue
        starts.append(start)
        ends.append(start + n_bytes)
        moved.append(at)
        at = _round(at + n_bytes)
    shared = program.const_base + len(program.consts)
    starts_array, ends_array = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    moved_array = np.array(moved, dtype=np.int64)

    def move(values, all_kept):
        arena = np.flatnonzero(values[:, machine.OBJECT] == 0)
        offsets = values[arena, machine.OFFSET]
        place = np.searchsorted(starts_array, offsets, side="right") - 1
        inside = place >= 0
        inside[inside] = offsets[inside] < ends_array[place[inside]]
        if all_kept and not inside.all():
            raise _Refused  # (a value the body's forward does not keep)
        values[arena[inside], machine.OFFSET] = (moved_array[place[inside]]
                                                 + offsets[inside] - starts_array[place[inside]])
        values[arena[~inside], machine.OBJECT] = shared

    move(machine.sections(program.forward_table).values, False)
    if backward_table is not None:
        move(machine.sections(backward_table).values, True)
    made.relocate = lambda offset: _relocated(offset, starts, ends, moved)
    return at


def _relocated(offset, starts, ends, moved):
    """``(per trip, offset)`` of the arena's byte ``offset`` after ``_keep_per_trip``."""
    for start, end, at in zip(starts, ends, moved):
        if start <= offset < end:
            return True, at + offset - start
    return False, offset


def _same(a, b):
    """Whether two recordings of a body made the same tables."""
    pa, pb = a.program, b.program
    if not (np.array_equal(pa.forward_table, pb.forward_table)
            and np.array_equal(pa.forward_floats, pb.forward_floats)
            and len(pa.consts) == len(pb.consts) and a.forward_ints == b.forward_ints
            and all(np.array_equal(x, y) for x, y in zip(pa.consts, pb.consts))):
        return False
    if (a.backward is None) != (b.backward is None):
        return False
    if a.backward is None:
        return True
    ba, bb = a.backward, b.backward
    return (np.array_equal(ba.table, bb.table) and np.array_equal(ba.floats, bb.floats)
            and len(ba.consts) == len(bb.consts)
            and all(np.array_equal(x, y) for x, y in zip(ba.consts, bb.consts)))


class _Layout:
    """Where the loop's values lie in its buffer (bytes): the outputs (the last carry, the
    ``ys``), then each carry's stack of ``n + 1``, the body's arena values that no backward
    reads (one copy), and those it reads, one copy per trip (``_keep_per_trip``)."""

    def __init__(self, made, carry, xs, kept_bytes):
        program, n = made.program, made.n
        itemsize = made.dtype.itemsize
        self.carry_bytes = [t._data.nbytes for t in carry]
        self.y_bytes = [int(np.prod(s, dtype=np.int64)) * itemsize for s in made.ys_shapes]
        at = 0
        self.final = []
        for b in self.carry_bytes:
            self.final.append(at)
            at += b
        self.ys = []
        for b in self.y_bytes:
            self.ys.append(at)
            at += n * b
        self.output_bytes = at
        at = _round(at)
        self.stacks = []
        for b in self.carry_bytes:
            self.stacks.append(at)
            at += _round((n + 1) * b)
        self.shared = at
        at += _round(program.arena_bytes)
        self.arena = at
        self.arena_bytes = kept_bytes
        self.total = at + n * kept_bytes
        self.x_bytes = [x._data[0].nbytes for x in xs]
        self.outputs_at = [made.relocate(o[1]) for o in program.outputs]
        self.n_carry = made.n_carry
        self.n = n
        self.reverse = made.reverse
        self.n_externals = len(program.externals)
        self.n_consts = len(program.consts)

    def x_start_step(self, j):
        b = self.x_bytes[j]
        return ((self.n - 1) * b, -b) if self.reverse else (0, b)

    def y_start_step(self, m):
        b = self.y_bytes[m]
        return (self.ys[m] + (self.n - 1) * b, -b) if self.reverse else (self.ys[m], b)

    def output(self, k):
        """``(start, step)`` in the loop's buffer of the body's output ``k``."""
        per_trip, offset = self.outputs_at[k]
        if per_trip:
            return self.arena + offset, self.arena_bytes
        return self.shared + offset, 0

    def forward_ints(self):
        """The forward driver's ints (``forward_driver``): operands ``0`` the body's table,
        ``1`` its floats, then the carry, ``xs``, the outside tensors, the constants, and
        the loop's buffer last."""
        n_carry, n_x = self.n_carry, len(self.x_bytes)
        carry_op, x_op = 2, 2 + n_carry
        external_op = x_op + n_x
        const_op = external_op + self.n_externals
        out = const_op + self.n_consts
        objects = [(_OPERAND, out, self.arena, self.arena_bytes)]
        for k in range(n_carry):
            objects.append((_OPERAND, out, self.stacks[k], self.carry_bytes[k]))
        for j in range(n_x):
            objects.append((_OPERAND, x_op + j, *self.x_start_step(j)))
        for e in range(self.n_externals):
            objects.append((_OPERAND, external_op + e, 0, 0))
        for c in range(self.n_consts):
            objects.append((_OPERAND, const_op + c, 0, 0))
        objects.append((_OPERAND, out, self.shared, 0))
        ints = [self.n, len(objects)]
        for d in objects:
            ints.extend((*d, -1, 0, 0, 0))
        before = [(carry_op + k, 0, 0, out, self.stacks[k], 0, b)
                  for k, b in enumerate(self.carry_bytes)]
        each = []  # (the carry out is written in its place: ``_carry_in_place``)
        for m, b in enumerate(self.y_bytes):
            each.append((out, *self.output(n_carry + m), out, *self.y_start_step(m), b))
        after = [(out, self.stacks[k] + self.n * b, 0, out, self.final[k], 0, b)
                 for k, b in enumerate(self.carry_bytes)]
        for copies in (before, each, after):
            ints.append(len(copies))
            for c in copies:
                ints.extend(c)
        return tuple(ints)


def _edges(made, carry, xs, grad):
    """The node's edges: the differentiable tensors among the carry, ``xs`` and the body's
    outside tensors (``(kind, index, tensor)``), or [] where no gradient is taken."""
    if not grad:
        return []
    edges = []
    for k, t in enumerate(carry):
        if t.requires_grad:
            edges.append(("carry", k, t))
    for j, t in enumerate(xs):
        if t.requires_grad:
            edges.append(("x", j, t))
    for e, t in enumerate(made.program.externals):
        if t.requires_grad:
            edges.append(("external", e, t))
    if len({id(t) for _, _, t in edges}) != len(edges):
        raise _Refused  # (one tensor in two roles: a joint VJP needs distinct inputs)
    if edges and made.dtype.kind != "f":
        raise _Refused
    return edges


class _BodyPlaces(executor.Places):
    """Where the body's backward finds its buffers, per trip (:func:`.executor.lower`'s
    strategy): the body's forward objects at their per-trip strides, and objects of its own
    (negative numbers until :meth:`finish` numbers them): its scratch, the seeds, the
    results."""

    def __init__(self, made):
        self.builder = machine.Builder()
        self.made = made
        self.program = made.program
        self.extra = []  # (kind, ...) per object of its own
        self.scratch_at = {}
        self.reads = set()
        self.found = {}
        self.seed_objects = {}
        self.result_objects = {}
        self.scratch_bytes = 0

    def _own(self, description):
        self.extra.append(description)
        return -len(self.extra)

    def arena_bytes(self, n_bytes):
        self.body_scratch = n_bytes

    def arena(self, offset, stride):
        obj = self.seed_objects.get("scratch")
        if obj is None:
            obj = self.seed_objects["scratch"] = self._own(("scratch",))
        return self.builder.value(obj, offset)

    def seed(self, index, array, stride):
        return self.builder.value(self._own(("seed", index)), 0)

    def result(self, edge, shape, stride):
        return self.builder.value(self._own(("result", id(edge))), 0)

    def saved(self, arrays, origin):
        values = []
        for array in arrays:
            value = self.found.get(id(array))
            if value is None:
                value = self.found[id(array)] = self.builder.value(*self._place(array))
            values.append(value)
        return values

    def _place(self, array):
        program = self.program
        found = self.made.sub.find(array)
        if found is None:
            program.consts.append(array)
            return program.const_base + len(program.consts) - 1, 0
        buffer, offset = found
        if buffer.kind == "const":
            return program.location(buffer, offset)
        self.reads.add((buffer.kind, buffer.index))
        return program.location(buffer, offset)


def _lower_backward(made):
    """The body's backward, from all its outputs at once, lowered per trip (see the module
    docstring): a :class:`_Backward`."""
    program, sub = made.program, made.sub
    dtype = made.dtype
    standins = made.standins
    n_carry = made.n_carry
    roots = [(m, t) for m, t in enumerate(made.outputs) if t._node is not None]
    targets = []  # (edge of the body's graph, kind, index)
    for k, s in enumerate(standins[:n_carry]):
        if s.requires_grad:
            targets.append((s, "carry", k))
    for j, s in enumerate(standins[n_carry:]):
        if s.requires_grad:
            targets.append((s, "x", j))
    for e, t in enumerate(program.externals):
        if t.requires_grad:
            targets.append((t._node if t._node is not None else t, "external", e))
    if not roots or not targets:
        raise _Refused
    target_edges = [edge for edge, _, _ in targets]
    target_ids = {id(e) for e in target_edges}
    plan = backward_module.make_plan([t._node for _, t in roots], target_edges, False)
    nodes = [node for node in plan.nodes if node.seq > sub.start_seq]
    needed = {id(node) for node in nodes} | (plan.needed & target_ids)
    plan = backward_module.Plan(nodes, plan.reachable, needed)
    seeds = [(t._node, np.zeros(t.shape, dtype=dtype)) for _, t in roots]
    steps = executor.plan_schedule(plan, seeds, target_ids, False)
    places = _BodyPlaces(made)
    executor.lower(steps, seeds, places, dtype, add_to_results=True)
    kept = {(kind, index) for entry in program.backward_outputs.values()
            for kind, index in entry[2]}
    kept |= {("arena", sub.find(t._data)[0].index) for t in made.outputs}
    if not {r for r in places.reads if r[0] == "arena"} <= kept:
        raise _Refused  # (a value the body's forward does not keep)
    table, floats = places.builder.tables()
    return places, table, floats, roots, targets


def _describe(made, places, table, floats, roots, targets, xs):
    """Number the backward's own objects after the body's and describe every object for
    ``backward_driver`` (targets are resolved per spec: ``_Backward.spec``)."""
    program, layout = made.program, made.layout
    n_saved = 1 + len(xs) + len(program.externals)
    if 3 + n_saved + len(program.consts) + len(made.edges) > _MAX_OPERANDS:
        raise _Refused
    objects = _body_objects(made, len(xs))
    first_own = len(objects)
    # The scratch: the backward's own arena, two gradients per carry (this trip's and the
    # next's), a gradient per slice of xs.
    scratch = _round(places.body_scratch)
    carry_at = np.cumsum([scratch] + [2 * _round(b) for b in layout.carry_bytes]).tolist()
    x_at = np.cumsum([carry_at[-1]] + [_round(b) for b in layout.x_bytes]).tolist()
    own = _OwnObjects(made, roots, targets, carry_at, x_at)
    for description in places.extra:
        objects.append(own.describe(description, len(objects)))
    values = machine.sections(table).values
    numbered = values[:, machine.OBJECT] < 0
    values[numbered, machine.OBJECT] = first_own - 1 - values[numbered, machine.OBJECT]
    clears = [t._data.nbytes for _, _, t in made.edges]
    return _Backward(table, floats, list(program.consts), made.dtype, made.n, x_at[-1],
                     objects, clears, own.adds, n_saved)


def _body_objects(made, n_x):
    """The body's forward objects as the VJP driver sees them: its operands ``3`` the
    loop's buffer, then ``xs``, the outside tensors and the constants (``0`` is the
    gradient, ``1`` and ``2`` the table and its floats)."""
    program, layout = made.program, made.layout
    buffer_op, x_op = 3, 4
    external_op = x_op + n_x
    const_op = external_op + len(program.externals)
    objects = [(_OPERAND, buffer_op, layout.arena, layout.arena_bytes, None, 0)]
    for k in range(made.n_carry):
        objects.append((_OPERAND, buffer_op, layout.stacks[k], layout.carry_bytes[k], None, 0))
    for j in range(n_x):
        objects.append((_OPERAND, x_op + j, *layout.x_start_step(j), None, 0))
    for e in range(len(program.externals)):
        objects.append((_OPERAND, external_op + e, 0, 0, None, 0))
    for c in range(len(program.consts)):
        objects.append((_OPERAND, const_op + c, 0, 0, None, 0))
    objects.append((_OPERAND, buffer_op, layout.shared, 0, None, 0))
    return objects


class _OwnObjects:
    """The descriptions of the backward's own objects (:class:`_BodyPlaces`' ``extra``),
    and the slices' gradients to add into ``xs``'s after each trip (``adds``)."""

    def __init__(self, made, roots, targets, carry_at, x_at):
        self.made = made
        self.roots = roots
        self.by_target = {id(edge): (kind, index) for edge, kind, index in targets}
        self.edge_number = {(kind, index): k for k, (kind, index, _) in enumerate(made.edges)}
        self.carry_at = carry_at
        self.x_at = x_at
        self.adds = []

    def describe(self, description, number):
        layout = self.made.layout
        what = description[0]
        if what == "scratch":
            return (_SCRATCH, 0, 0, 0, None, 0)
        if what == "seed":
            m = self.roots[description[1]][0]
            if m >= self.made.n_carry:  # a y's gradient: its slice of the loop's gradient
                return (_OPERAND, 0, *layout.y_start_step(m - self.made.n_carry), None, 0)
            # The carry out's: the next trip's carry in's, the loop's gradient on the last.
            return (_PINGPONG_NEXT, 0, self.carry_at[m], _round(layout.carry_bytes[m]),
                    (_LAST, None, 0, layout.final[m]), 0)
        kind, index = self.by_target[description[1]]
        number_of = self.edge_number.get((kind, index))
        if kind == "carry":  # this trip's carry in: the init's target on the first trip
            b = layout.carry_bytes[index]
            return (_PINGPONG, 0, self.carry_at[index], _round(b), (_FIRST, number_of, -1, 0),
                    b)
        if kind == "x":  # this trip's slice: its own slot, then added into xs's gradient
            b = layout.x_bytes[index]
            if number_of is not None:
                start, step = layout.x_start_step(index)
                self.adds.append((number, number_of, start, step,
                                  b // self.made.dtype.itemsize))
            return (_SCRATCH, 0, self.x_at[index], 0, None, b)
        return ("target", number_of, 0, 0, None,
                self.made.program.externals[index]._data.nbytes)


def _emit(trace, made, carry, xs):
    """The loop as one op of ``trace``'s program: computed, recorded, its node made;
    ``(carry, ys)``."""
    program, layout = made.program, made.layout
    dtype = made.dtype
    externals = program.externals
    inputs = list(carry) + list(xs) + list(externals)
    consts = list(program.consts)
    if 3 + len(inputs) + len(consts) > _MAX_OPERANDS:
        return None
    op = Loop("scan", (program.forward_table, program.forward_floats, made.forward_ints),
              made.backward)
    buffer = np.empty(-(-layout.total // dtype.itemsize), dtype=dtype)
    arrays = [program.forward_table, program.forward_floats,
              *[t._data for t in inputs], *consts]
    operands = np.array([a.ctypes.data for a in arrays] + [buffer.ctypes.data],
                        dtype=np.int64)
    entry = _pointers.entry_address(forward_driver, dtype)
    _pointers._call_once(entry, operands, np.array(made.forward_ints + (0,), dtype=np.int64),
                         np.zeros(1))
    node = None
    outputs = buffer[:layout.output_bytes // dtype.itemsize]
    if made.backward is not None:
        edges = tuple(t._node if t._node is not None else t for _, _, t in made.edges)
        versions = []
        for t in list(xs) + list(externals):
            versions += (t._version, t._version[0])
        node = tape.new_node(op, edges, {}, (buffer, *[x._data for x in xs],
                                             *[t._data for t in externals]),
                             None, tuple(versions), outputs)
    trace.record_op(op, [None, None, *inputs, *[None] * len(consts)], arrays, {}, buffer, None)
    result = Tensor._make(outputs, node=node, requires_grad=node is not None)
    n_carry = made.n_carry
    final = [result[layout.final[k] // dtype.itemsize:
                    (layout.final[k] + layout.carry_bytes[k]) // dtype.itemsize
                    ].reshape(carry[k].shape) for k in range(n_carry)]
    ys = [result[layout.ys[m] // dtype.itemsize:
                 (layout.ys[m] + made.n * layout.y_bytes[m]) // dtype.itemsize
                 ].reshape((made.n, *made.ys_shapes[m])) for m in range(len(made.ys_shapes))]
    return final, ys
