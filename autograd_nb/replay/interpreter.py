"""The compiled interpreter of a recorded program: one call runs a whole table of instructions.

A program's table names *values*, each a place in memory: ``(object, byte offset)``, where
the objects are the arrays of one call (its arena of intermediate values, the input and
captured tensors' buffers, the constants; in a backward also the incoming gradient and the
gradient buffer). An instruction calls an op's driver (:mod:`autograd_nb.ops._pointers`'s
convention, the same C entry points the compiled backward calls) on the data pointers of its
operand values, with its int and float attributes. So the interpreter, compiled once, runs
any program of known ops: recording a new function compiles nothing.

The table (int64) is a header of section lengths, then

* ``rows``: per instruction ``ENTRY`` (index into the entries; ``ZERO`` clears
  ``INTS`` bytes at its one operand), ``N_OPERANDS``, ``FIRST`` (into the operand list),
  ``INTS`` (offset into the int attributes), ``FLOATS`` (into the float attributes);
* ``values``: per value its object and byte offset;
* ``operands``: value indices, each row's run of them;
* ``entries``: driver entry addresses;
* ``ints``: the int attributes of every row.

The float attributes are a float64 array of their own.
"""

import itertools

import numpy as np
from numba import njit

from ..ops import _pointers

ENTRY, N_OPERANDS, FIRST, INTS, FLOATS = range(5)
ROW = 5
HEADER = 5
#: An ``ENTRY`` that clears ``ints[INTS]`` bytes at the row's one operand.
ZERO = -1
#: The most operands one instruction may have (the size of the operand buffer).
MAX_OPERANDS = 64


@njit(cache=True, nogil=True)
def _walk(table, bases, floats):
    """Run the rows of ``table`` with the objects' data pointers ``bases``."""
    n_rows, n_values, n_operands, n_entries = table[0], table[1], table[2], table[3]
    at = HEADER
    rows = table[at:at + n_rows * ROW]
    at += n_rows * ROW
    values = table[at:at + 2 * n_values]
    at += 2 * n_values
    operand_list = table[at:at + n_operands]
    at += n_operands
    entries = table[at:at + n_entries]
    at += n_entries
    ints_address = table.ctypes.data + 8 * at
    floats_address = floats.ctypes.data
    pointers = np.empty(n_values, dtype=np.int64)
    for v in range(n_values):
        pointers[v] = bases[values[2 * v]] + values[2 * v + 1]
    operands = np.empty(MAX_OPERANDS, dtype=np.int64)
    operands_address = operands.ctypes.data
    for r in range(n_rows):
        row = r * ROW
        entry = rows[row + ENTRY]
        first = rows[row + FIRST]
        if entry == ZERO:
            region = _pointers.array_at(pointers[operand_list[first]],
                                        table[at + rows[row + INTS]], _BYTES)
            region[:] = 0
            continue
        for j in range(rows[row + N_OPERANDS]):
            operands[j] = pointers[operand_list[first + j]]
        _pointers.call_entry(entries[entry], operands_address,
                             ints_address + 8 * rows[row + INTS],
                             floats_address + 8 * rows[row + FLOATS])


_BYTES = np.empty(0, dtype=np.uint8)


@njit(cache=True, nogil=True)
def run(table, object_ids, floats):
    """Run a forward program on the arrays whose object addresses are ``object_ids``."""
    bases = np.empty(object_ids.size, dtype=np.int64)
    for i in range(object_ids.size):
        bases[i] = _pointers.data_address(object_ids[i])
    _walk(table, bases, floats)


@njit(cache=True, nogil=True)
def backward_driver(operands, ints, floats, like):
    """The VJP of a replayed output as one driver (``ReplayOutput``'s ``exec_spec``).

    ``operands``: the output's gradient, the call's object-id array, the backward table, its
    float attributes, then the gradient buffer of the call's inputs (accumulated into; after
    the inputs' gradients it holds the scratch the table's intermediate gradients use).
    ``ints``: ``[number of objects, scratch offset in bytes, scratch size in bytes]`` (the
    buffer's layout; the driver reads only the first: the table clears each scratch slot, or
    writes it whole, before it reads it). The table's objects are the call's, then the
    gradient (``n``) and the buffer (``n + 1``).
    """
    _backward(operands, ints)


@njit(cache=True, nogil=True)
def backward_set_driver(operands, ints, floats, like):
    """:func:`backward_driver` where it is the first to write the gradient buffer
    (``ReplayOutput``'s ``exec_set_spec``): it clears the inputs' gradients (the buffer's
    first ``ints[1]`` bytes), which the table then adds into, and leaves the scratch to the
    table. Cheaper than the executor's clear of the whole buffer, scratch included, and the
    same bits."""
    _pointers.array_at(operands[4], ints[1], _BYTES)[:] = 0
    _backward(operands, ints)


@njit(cache=True, nogil=True)
def _backward(operands, ints):
    n = ints[0]
    ids = _pointers.int_view(operands[1])
    target = operands[4]
    bases = np.empty(n + 2, dtype=np.int64)
    for i in range(n):
        bases[i] = _pointers.data_address(ids[i])
    bases[n] = operands[0]
    bases[n + 1] = target
    table = _pointers.int_view(operands[2])
    size = HEADER + table[0] * ROW + 2 * table[1] + table[2] + table[3] + table[4] + 1
    _walk(_pointers.array_at(operands[2], size, table), bases,
          _pointers.float_view(operands[3]))


@njit(cache=True, nogil=True)
def copy_driver(operands, ints, floats, like):
    """``ints[0]`` bytes from operand 0 to operand 1 (in-place writes, returned aliases)."""
    n = ints[0]
    _pointers.array_at(operands[1], n, _BYTES)[:] = _pointers.array_at(operands[0], n, _BYTES)


@njit(cache=True, nogil=True)
def slice_accumulate_driver(operands, ints, floats, like):
    """``target += gradient[ints[0]:ints[0] + ints[1]]`` (one input's part of the gradient of
    a call's inputs; ``ReplayInputs``'s ``exec_spec``), where a zero of ``target`` takes the
    part as it is (:func:`add_part`)."""
    start, n = ints[0], ints[1]
    source = _pointers.array_at(operands[0], start + n, like)
    target = _pointers.array_at(operands[1], n, like)
    for i in range(n):
        target[i] = add_part(target[i], source[start + i])


@njit(cache=True, nogil=True)
def slice_copy_driver(operands, ints, floats, like):
    """``target = gradient[ints[0]:ints[0] + ints[1]]``: :func:`slice_accumulate_driver`
    where it is the first to write ``target`` (``ReplayInputs``' ``exec_set_spec``), which
    into zeros leaves the part as it is (:func:`add_part`)."""
    start, n = ints[0], ints[1]
    source = _pointers.array_at(operands[0], start + n, like)
    _pointers.array_at(operands[1], n, like)[:] = source[start:]


@njit(cache=True, nogil=True, inline="always")
def add_part(total, part):
    """``total + part``, but ``part`` itself where ``total`` is zero. Eager mode adds an op's
    contribution into the input's zeroed gradient with one rounding; a replay adds it into
    the call's gradient buffer, then the buffer into the input's: a float32 contribution
    worked in float64 that rounds to -0.0 there (``x ** b``'s ``b * x ** (b - 1)``) would
    become +0.0 + -0.0 = +0.0 where eager's is -0.0. With a zero total the sum is the part
    anyway, but for that sign."""
    return part if total == 0 else total + part


class Builder:
    """The sections of one table as Python lists (filled while a program is made)."""

    def __init__(self):
        self.rows = []
        self.values = []
        self.operands = []
        self.entries = []
        self.entry_index = {}
        self.ints = []
        self.floats = []

    def value(self, obj, offset):
        self.values.extend((obj, offset))
        return len(self.values) // 2 - 1

    def entry(self, address):
        index = self.entry_index.get(address)
        if index is None:
            index = self.entry_index[address] = len(self.entries)
            self.entries.append(address)
        return index

    def call(self, address, operand_values, ints=(), floats=()):
        self.call_entry(self.entry(address), operand_values, ints, floats)

    def call_entry(self, entry, operand_values, ints=(), floats=()):
        """:meth:`call` of the entry point numbered ``entry`` (:meth:`entry`)."""
        if len(operand_values) > MAX_OPERANDS:
            raise ValueError("too many operands for one instruction")
        self.rows.extend((entry, len(operand_values), len(self.operands), len(self.ints),
                          len(self.floats)))
        self.operands.extend(operand_values)
        if type(ints) is tuple:  # (Python or NumPy ints: :meth:`tables` makes them int64)
            self.ints.extend(ints)
        else:
            self.ints.extend(np.asarray(ints, dtype=np.int64).reshape(-1).tolist())
        if len(floats):
            if type(floats) is tuple:
                self.floats.extend(floats)
            else:
                self.floats.extend(np.asarray(floats, dtype=np.float64).reshape(-1).tolist())

    def zero(self, value, n_bytes):
        self.rows.extend((ZERO, 1, len(self.operands), len(self.ints), len(self.floats)))
        self.operands.append(value)
        self.ints.append(int(n_bytes))

    def tables(self):
        """``(table, floats)``: the int64 table and the float64 attributes."""
        header = [len(self.rows) // ROW, len(self.values) // 2, len(self.operands),
                  len(self.entries), len(self.ints)]
        sections = (header, self.rows, self.values, self.operands, self.entries, self.ints,
                    [0])
        # (``np.fromiter`` over the lists: half ``np.array``'s time on a 10,000-op program)
        table = np.fromiter(itertools.chain(*sections), dtype=np.int64,
                            count=sum(map(len, sections)))
        floats = np.fromiter(itertools.chain(self.floats, [0.0]), dtype=np.float64,
                             count=len(self.floats) + 1)
        return table, floats
