"""Fusion of a replayed forward: a run of elementwise ops over one size is one instruction.

In ``v = v + dt * (f1 - f2)`` the forward table would have an instruction per op, each
writing a fresh buffer of the call's arena: on small arrays the call of each driver and the
stream of fresh arena lines cost more than the arithmetic. A *group* is a run of consecutive
recorded ops, each an :class:`~autograd_nb.ops.elementwise.ElementwiseOp` over ``n``
elements of one float dtype, whose operands have the result's shape, one element (a broadcast
scalar) or any other broadcast shape (gathered into a register first). It becomes ONE
instruction calling :func:`group_driver`, which walks the group in blocks of at most
``config.REPLAY_FUSION_BLOCK`` elements: per block, each op's own flat driver (the same C entry
points an unfused instruction calls, ``forward_exec`` / ``forward_s{mask}_exec``) reads and
writes the block. A value nothing reads after the group (no later instruction, no backward table, no
output) lives in a register (a block-sized slot of scratch memory, reused once the value is
dead) and never reaches the arena; every other value is written to its arena place as
before. Each element is computed by the same formula and the same loop as unfused, so the
results are the same bits.

A broadcast row (a bias added to each row of a batch: strides 0 but along its last axis, of
``config.REPLAY_ROW_MIN`` to ``REPLAY_ROW_MAX`` elements) is not gathered: the group's blocks
are then its rows, one row each, and every block reads the row in place (``tanh(h @ W + b)``
is one pass).

A group of exactly a multiply by a scalar and the add or subtract that reads the product
(``p -= lr * g``) runs :func:`scaled_add_driver` instead: one loop over both memory operands,
which on large arrays streams faster than blocks that read them one after the other.

Unlike the backward's fused loops (:mod:`autograd_nb.engine.fusion`, one generated ``@njit``
loop per distinct chain), the group driver is compiled once per dtype and a group is data
(its micro-program in the instruction's int attributes): recording a new function compiles
nothing.
"""

import numpy as np
from numba import njit

from .. import config
from ..ops import _kernels, _pointers
from ..ops._pointers import _OPEN, array_at, call_entry, int_view
from ..ops.elementwise import ElementwiseOp

#: A group reads and writes at most this many arena or argument buffers: a size limit of the
#: fused loop, below the one cap on a row's operands (``engine.machine.MAX_OPERANDS``, with
#: the register scratch).
MAX_OPERANDS = 48

#: Broadcast operands of at most this many collapsed dimensions are gathered into a
#: register; an op reading one of more stays unfused.
MAX_DIMS = 8

#: Step kinds of a group's micro-program, and where a step's argument lives.
CALL, EXPAND = 0, 1
MEMORY, SCALAR, REGISTER = 0, 1, 2

#: Int64 words at the start of the scratch before the registers: a driver's argument
#: pointers, the block length handed to it as its ``ints``, the coordinates of a gather.
_ARGUMENTS = 8
_HEADER_WORDS = _ARGUMENTS + 1 + MAX_DIMS
_HEADER_BYTES = -(-_HEADER_WORDS * 8 // 64) * 64

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


# -- the driver ----------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _gather(source, target, start, m, shape, strides, coords):
    """``target[:m]`` = the elements ``start:start + m`` (in C order over ``shape``) of the
    broadcast operand ``source`` read through ``strides`` (elements; 0 on broadcast axes)."""
    nd = shape.size
    if nd == 2:
        _gather_rows(source, target, start, m, shape[1], strides[0], strides[1])
        return
    last = nd - 1
    rest = start
    offset = 0
    for d in range(last, -1, -1):
        c = rest % shape[d]
        rest //= shape[d]
        coords[d] = c
        offset += c * strides[d]
    inner = shape[last]
    step = strides[last]
    i = 0
    while i < m:
        run = min(inner - coords[last], m - i)
        if step == 0:
            value = source[offset]
            for j in range(run):
                target[i + j] = value
        else:
            for j in range(run):
                target[i + j] = source[offset + j * step]
        i += run
        offset += run * step
        coords[last] += run
        d = last
        while d > 0 and coords[d] == shape[d]:
            offset -= shape[d] * strides[d]
            coords[d] = 0
            d -= 1
            coords[d] += 1
            offset += strides[d]


@njit(cache=True, nogil=True)
def _gather_rows(source, target, start, m, inner, row_stride, step):
    """:func:`_gather` over two dimensions (the usual broadcasts: a ``(63, 1)`` column times a
    ``(63, 2)`` matrix, a bias added to each row), a row at a time without the general carry:
    with ``concatenate``'s flat driver, ``ode_rollout``'s forward table 257 -> 226 us."""
    row = start // inner
    column = start - row * inner
    i = 0
    while i < m:
        run = min(inner - column, m - i)
        offset = row * row_stride + column * step
        if step == 0:
            value = source[offset]
            for j in range(run):
                target[i + j] = value
        elif step == 1:  # (a bias read along the rows: the loop vectorises)
            for j in range(run):
                target[i + j] = source[offset + j]
        else:
            for j in range(run):
                target[i + j] = source[offset + j * step]
        i += run
        column = 0
        row += 1


@njit(cache=True, nogil=True)
def group_driver(operands, ints, floats, like):
    """Run a group (see the module docstring) in blocks.

    ``operands``: the group's memory values and its scratch (a header, then the registers).
    ``ints``: ``[n, block, steps, scratch operand]``, then per step ``[CALL, entry, arguments,
    float offset, (where, index) per argument]`` or ``[EXPAND, operand, register, nd,
    shape.., strides..]``; ``floats``: the steps' parameters.
    """
    n = ints[0]
    block = ints[1]
    n_steps = ints[2]
    itemsize = like.itemsize
    scratch = operands[ints[3]]
    arguments = int_view(scratch)
    length = scratch + 8 * _ARGUMENTS
    coords = int_view(scratch + 8 * (_ARGUMENTS + 1))
    arguments[_ARGUMENTS] = 0
    registers = scratch + _HEADER_BYTES
    register_bytes = block * itemsize
    floats_address = floats.ctypes.data
    for start in range(0, n, block):
        m = min(block, n - start)
        arguments[_ARGUMENTS] = m
        skip = start * itemsize
        at = 4
        for _ in range(n_steps):
            if ints[at] == EXPAND:
                nd = ints[at + 3]
                _gather(array_at(operands[ints[at + 1]], _OPEN, like),
                        array_at(registers + ints[at + 2] * register_bytes, m, like), start, m,
                        ints[at + 4:at + 4 + nd], ints[at + 4 + nd:at + 4 + 2 * nd], coords)
                at += 4 + 2 * nd
                continue
            entry = ints[at + 1]
            count = ints[at + 2]
            floats_at = ints[at + 3]
            at += 4
            for j in range(count):
                where = ints[at + 2 * j]
                index = ints[at + 2 * j + 1]
                if where == MEMORY:
                    arguments[j] = operands[index] + skip
                elif where == SCALAR:
                    arguments[j] = operands[index]
                else:
                    arguments[j] = registers + index * register_bytes
            at += 2 * count
            call_entry(entry, scratch, length, floats_address + 8 * floats_at)


@njit(cache=True, nogil=True)
def scaled_add_driver(operands, ints, floats, like):
    """``out = a + s * b`` (``ints[1]`` 0) or ``out = a - s * b`` (1) over ``ints[0]``
    elements, ``s`` one element: the group of a multiply by a scalar and the add or subtract
    that reads it (a step of gradient descent, ``p -= lr * g``) in one loop. Each element is
    rounded as the two ops round it (the product, then the sum: numba contracts no
    multiply-add), so it gives their bits; but it streams ``a`` and ``b`` together where the
    blocks of :func:`group_driver` stream them one after the other (``p -= lr * g`` on
    784 x 512 float32: 160 -> 97 µs, docs/benchmarking.rst, "Fused forward")."""
    n = ints[0]
    s = array_at(operands[1], 1, like)[0]
    if ints[1]:
        s = -s  # (a - s * b is a + (-s) * b, bit for bit: negation is exact)
    b = array_at(operands[2], n, like)
    out = array_at(operands[3], n, like)
    if operands[0] == operands[3]:
        # In place, as one array: LLVM's overlap check between two would fail and run the
        # scalar loop (128 µs instead of 97 on the example above).
        for i in range(n):
            out[i] = out[i] + s * b[i]
        return
    a = array_at(operands[0], n, like)
    for i in range(n):
        out[i] = a[i] + s * b[i]


# -- planning --------------------------------------------------------------------------------


class Step:
    """One op of a group: its event, the flat driver that runs it on a block, and per input
    its layout: "full", "scalar" or ``(shape, strides)`` (gathered into a register)."""

    __slots__ = ("event", "driver", "layouts", "row")

    def __init__(self, event, driver, layouts, row=None):
        self.event = event
        self.driver = driver
        self.layouts = layouts
        self.row = row  # the length of its "row" operands (read in place), or None


class Group:
    """Consecutive steps over ``n`` elements of ``dtype``; ``last``: the index of the last
    event in the trace."""

    __slots__ = ("steps", "n", "dtype", "made", "read", "last", "row")

    def __init__(self, step, n, dtype, index):
        self.steps = []
        self.n = n
        self.dtype = dtype
        self.made = set()
        self.read = set()  # the operands from outside the group
        self.row = None  # with "row" operands: their length, which is the block's
        self.add(step, index)

    def add(self, step, index):
        self.steps.append(step)
        if step.row is not None:
            self.row = step.row
        event = step.event
        for buffer, offset in event.operands:
            if buffer not in self.made:
                self.read.add((buffer, offset))
        self.made.add(event.output)
        self.last = index

    def operand_count(self):
        """At most how many memory operands the group's instruction has (every value it
        makes may have to be written)."""
        return len(self.read) + len(self.made) + 1


def _layouts(event, minimum=0):
    """``(n, flat driver, layouts)`` of an event a group can run, or None; None too for one
    of fewer than ``minimum`` elements whose operands are all whole or scalars (a group of
    those is not worth running: ``_worth``)."""
    op = event.op
    if not isinstance(op, ElementwiseOp) or op.input_kinds is not None:
        return None
    if event.dtype not in _FLOATS or len(event.operands) != op.n_inputs:
        return None
    driver, ints, _ = event.spec
    kernels = op.kernels
    n = int(ints[0])
    if n < minimum and driver is not kernels.forward_strided_exec:
        return None  # (a scalar graph's every op: ``fastest_autograd``)
    count = op.n_inputs
    if driver is kernels.forward_exec:
        return n, driver, ["full"] * count
    if driver is kernels.forward_strided_exec:
        return _strided_layouts(kernels, ints, count)
    for mask in _kernels.scalar_masks(count, False):
        if driver is getattr(kernels, f"forward_s{mask}_exec", None):
            return n, driver, ["scalar" if mask >> i & 1 else "full" for i in range(count)]
    return None


def _strided_layouts(kernels, ints, count):
    n, nd = int(ints[0]), int(ints[1])
    if nd > MAX_DIMS or n == 0:
        return None
    shape = np.array(ints[2:2 + nd], dtype=np.int64)
    contiguous = np.ones(nd, dtype=np.int64)
    for d in range(nd - 2, -1, -1):
        contiguous[d] = contiguous[d + 1] * shape[d + 1]
    layouts = []
    mask = 0
    for i in range(count):
        strides = np.array(ints[2 + nd * (i + 1):2 + nd * (i + 2)], dtype=np.int64)
        if not strides.any():
            layouts.append("scalar")
            mask |= 1 << i
        elif np.array_equal(strides, contiguous):
            layouts.append("full")
        else:
            layouts.append((shape.tolist(), strides.tolist()))
    if mask == (1 << count) - 1:
        return None
    driver = kernels.forward_exec if not mask else getattr(kernels, f"forward_s{mask}_exec")
    return n, driver, layouts


def fold_in_place_writes(events, kept):
    """The events with each in-place write of an argument or outside tensor (``p -= lr * g``:
    an elementwise op into a fresh buffer, then a copy into ``p``) made one event that writes
    the op's result into the target itself; and the targets so written.

    Folded where the op is elementwise with a layout :func:`_layouts` knows, the copy comes
    right after it, nothing else reads the fresh buffer (no later event, no backward table,
    no output: ``kept``), and the op reads the target, if at all, element for element (a
    flat operand at its start): each element is then read before it is written, and what
    runs after the copy saw the new values anyway. Saves the copy's pass over the target
    (``mlp_train_step``'s compiled step: six copies, 587 us of its 7.81 ms table).
    """
    candidates = {event.output for event, following in zip(events, events[1:])
                  if following.op is None and event.output is not None}
    if not candidates:
        return events, set()
    reads = {}
    for event in events:
        for buffer in _read_buffers(event):
            if buffer in candidates:
                reads[buffer] = reads.get(buffer, 0) + 1
    folded = []
    targets = set()
    skip = False
    for index, event in enumerate(events):
        if skip:
            skip = False
            continue
        following = events[index + 1] if index + 1 < len(events) else None
        target = _fold_target(event, following, reads, kept)
        if target is None:
            folded.append(event)
            continue
        folded.append(type(event)(event.op, event.operands, target, event.spec, event.dtype))
        targets.add(target)
        skip = True
    return folded, targets


def _fold_target(event, copy, reads, kept):
    """The buffer ``event`` may write in place of ``copy``'s target (see
    :func:`fold_in_place_writes`), or None."""
    if copy is None or copy.op is not None or event.output is None:
        return None
    (source, source_offset), (target, target_offset) = copy.operands
    output = event.output
    if source is not output or source_offset or target_offset or output in kept:
        return None
    if target.kind not in ("input", "external") or reads.get(output) != 1:
        return None
    if target.array.dtype != event.dtype or target.array.nbytes != output.array.nbytes:
        return None
    found = _layouts(event)
    if found is None:
        return None
    n, _, layouts = found
    for (buffer, offset), layout in zip(event.operands, layouts, strict=True):
        if buffer is target and (offset or (layout != "full" and n != 1)):
            return None
    return target


def plan(events):
    """The events as they run, each an event or a :class:`Group`, and per buffer the index of
    the last event that reads it."""
    readers = {}  # buffer -> index of its last reading event
    for index, event in enumerate(events):
        if event.op == "block":
            for buffer in _read_buffers(event):
                readers[buffer] = index
        else:  # (inline, not a generator per event: this runs once per recorded op)
            for buffer, _ in event.operands:
                readers[buffer] = index
    planned = []
    for item in _grouped(events):
        if type(item) is Group and not _worth(item):
            planned.extend(step.event for step in item.steps)
        else:
            planned.append(item)
    return planned, readers


def _grouped(events):
    """The events with each run of them that may fuse gathered into a :class:`Group`."""
    items = []
    group = None
    minimum = config.REPLAY_FUSION_MIN_ELEMENTS
    fuse = config.FUSE_REPLAY
    for index, event in enumerate(events):
        found = _layouts(event, minimum) if fuse else None
        if found is not None and found[0] < minimum and _flat(found[2]):
            found = None  # (a group of these would not be worth running fused: ``_worth``)
        if found is not None:
            found = _rows_in_place(*found)
        if found is not None and _long_rows(found[2]):
            found = None
        if found is not None and group is not None and not _joins(group, event, *found):
            items.append(group)
            group = None
        if found is None:
            if group is not None:
                items.append(group)
                group = None
            items.append(event)
            continue
        n, driver, layouts, row = found
        step = Step(event, driver, layouts, row)
        if group is None:
            group = Group(step, n, event.dtype, index)
        else:
            group.add(step, index)
    if group is not None:
        items.append(group)
    return items


def _joins(group, event, n, driver, layouts, row):
    if n != group.n or event.dtype != group.dtype:
        return False
    if row is not None and group.row is not None and row != group.row:
        return False  # (a group's blocks are the rows of one length)
    for (buffer, offset), layout in zip(event.operands, layouts, strict=True):
        # A value of the group is in the block being computed only: read whole, as it is.
        if buffer in group.made and (offset or (layout != "full" and n != 1)):
            return False
    return group.operand_count() + len(event.operands) + 1 <= MAX_OPERANDS


def _flat(layouts):
    """Whether no operand of these layouts is gathered (every one full or a scalar)."""
    return all(type(layout) is str for layout in layouts)


def _rows_in_place(n, driver, layouts):
    """``(n, driver, layouts, row)``: each gathered operand that is a row repeated along the
    leading axes (strides 0 but a last stride of 1), of ``config.REPLAY_ROW_MIN`` to
    ``REPLAY_ROW_MAX`` elements, marked "row" (read in place, a block per row) where every
    such row has one length ``row``; else ``row`` is None."""
    row = None
    marked = list(layouts)
    for i, layout in enumerate(layouts):
        if type(layout) is str:
            continue
        shape, strides = layout
        inner = shape[-1]
        if strides[-1] != 1 or any(strides[:-1]) or not (
                config.REPLAY_ROW_MIN <= inner <= config.REPLAY_ROW_MAX):
            continue
        if row is not None and inner != row:
            return n, driver, layouts, None
        row = inner
        marked[i] = "row"
    return (n, driver, marked, row) if row is not None else (n, driver, layouts, None)


def _long_rows(layouts):
    """Whether an op gathers a broadcast operand of rows of at least
    ``config.REPLAY_GATHER_ROW`` elements: its own strided driver then reads the operand in
    place, row by row (a bias added to a batch), where gathering it into a register first
    would cost a second pass: ``mlp_train_step``'s ``tanh(h @ W + b)``, float32 ``(256,
    512)``, 224 us fused -> 12 + 153 us (``asv_bench/program_rows.py``)."""
    for layout in layouts:
        if type(layout) is not str and layout[0][-1] >= config.REPLAY_GATHER_ROW:
            return True
    return False


def _worth(group):
    """Whether ``group`` runs fused: when it gathers a broadcast operand (the strided
    driver is slow on short rows: ``(63, 1) * (63, 2)``), or when it chains ops over at least
    ``config.REPLAY_FUSION_MIN_ELEMENTS`` elements."""
    for step in group.steps:
        if not _flat(step.layouts):
            return True
    return len(group.steps) > 1 and group.n >= config.REPLAY_FUSION_MIN_ELEMENTS


_FULL_AND_SCALAR = (["full", "scalar"], ["scalar", "full"])


def scaled_add(group, kept, readers):
    """``(a, s, b, subtract)``, each operand a ``(buffer, offset)``, when ``group`` is a
    multiply of a full operand by a scalar whose product only the add or subtract after it
    reads, as ``a + s * b`` or ``a - s * b`` (``s * b + a`` too): :func:`scaled_add_driver`
    runs it. Else None."""
    if len(group.steps) != 2:
        return None
    product, total = group.steps
    # (A gathered operand's layout is a tuple: compare the lists, do not sort them.)
    if product.event.op.name != "multiply" or product.layouts not in _FULL_AND_SCALAR:
        return None
    made = product.event.output
    if made in kept or readers.get(made, -1) > group.last:
        return None
    name = total.event.op.name
    operands = total.event.operands
    if name not in ("add", "subtract") or total.layouts != ["full", "full"]:
        return None
    if operands[1] == (made, 0) and operands[0][0] is not made:
        a = operands[0]
    elif name == "add" and operands[0] == (made, 0) and operands[1][0] is not made:
        a = operands[1]
    else:
        return None
    scalar = product.layouts.index("scalar")
    s, b = product.event.operands[scalar], product.event.operands[1 - scalar]
    if any(buffer.array.dtype != group.dtype for buffer, _ in (a, s, b)):
        return None
    return a, s, b, name == "subtract"


def _read_buffers(event):
    if event.op == "block":  # (the buffers its table names: ``Program._block_rows``)
        yield from event.operands[1]
        return
    for buffer, _ in event.operands:
        yield buffer


def encode(group, kept, readers, memory):
    """``(ints, floats, scratch bytes)`` of ``group``; ``memory(buffer, offset)`` numbers a
    memory operand of the group's instruction (its scratch is numbered by the caller, last:
    its index is ``ints[3]``, filled in there)."""
    itemsize = group.dtype.itemsize
    block = group.row if group.row is not None else min(group.n, config.REPLAY_FUSION_BLOCK)
    last_use = _last_uses(group)
    registers = {}  # buffer -> register
    free = []
    count = 0
    ints = [group.n, block, len(group.steps), -1]
    floats = []

    def take():
        nonlocal count
        if free:
            return free.pop()
        count += 1
        return count - 1

    for position, step in enumerate(group.steps):
        event = step.event
        arguments, gathered = _step_arguments(step, registers, take, ints, memory)
        output = event.output
        if output in kept or readers.get(output, -1) > group.last:
            arguments += (MEMORY, memory(output, 0))
        else:
            registers[output] = take()
            arguments += (REGISTER, registers[output])
        for register in gathered:
            free.append(register)
        for buffer, _ in event.operands:
            if last_use.get(buffer) == position and buffer in registers:
                free.append(registers.pop(buffer))
        ints += (CALL, _pointers.entry_address(step.driver, group.dtype), len(arguments) // 2,
                 len(floats), *arguments)
        floats.extend(np.asarray(event.spec[2], dtype=np.float64).reshape(-1).tolist())
    return ints, floats, _HEADER_BYTES + count * block * itemsize


def _last_uses(group):
    """Per value the group makes, the position of the last step that reads it."""
    last_use = {}
    for position, step in enumerate(group.steps):
        for buffer, _ in step.event.operands:
            if buffer in group.made:
                last_use[buffer] = position
    return last_use


def _step_arguments(step, registers, take, ints, memory):
    """The (kind, index) pairs of ``step``'s operands, flat, and the registers it gathers
    broadcast operands into (their EXPAND instructions are appended to ``ints``)."""
    arguments = []
    gathered = []
    for (buffer, offset), layout in zip(step.event.operands, step.layouts, strict=True):
        register = registers.get(buffer)
        if register is not None:
            arguments += (REGISTER, register)
        elif type(layout) is str:
            # (a "row" is read whole at its start by every block, as a scalar is read there)
            fixed = layout == "scalar" or layout == "row"
            arguments += (SCALAR if fixed else MEMORY, memory(buffer, offset))
        else:
            shape, strides = layout
            register = take()
            gathered.append(register)
            ints += (EXPAND, memory(buffer, offset), register, len(shape), *shape, *strides)
            ints[2] += 1
            arguments += (REGISTER, register)
    return arguments, gathered
