"""The table machine: every compiled backward and every ``anb.compile`` program is a table, run
in ONE call into compiled code by one of two loops: :func:`run` (a single run) and
:func:`run_batched` (the rows of a batch, in blocks, a ``prange`` over them).

A plan is lowered into a table (:func:`autograd_nb.engine.executor.lower` for a backward, with
a small strategy that says where each buffer lives; ``anb.compile``'s recorder for a forward);
the machine runs tables. It knows nothing of graphs, ops or programs: a row calls a *driver*
(:mod:`autograd_nb.ops._pointers`'s convention: ``driver(operands, ints, floats, like)`` as a
C entry point) on the data pointers of its operands, with its int and float attributes. So the
loops, compiled once and cached on disk, run any table of known drivers: a new graph or a new
recorded function compiles nothing.

The format, in one place (the pages ``docs/compiled-backward.rst`` and ``docs/compile.rst``
refer here). A table is one int64 array: a header of ``HEADER`` section lengths (rows, values,
operands, entries, ints), then

* ``rows``: ``ROW`` columns per row, in the order they run: ``ENTRY`` (an index into the
  entries; ``ZERO``: clear ``ints[INTS]`` bytes, per batch row, at the row's one operand),
  ``N_OPERANDS``, ``FIRST`` (where its run of operands starts in the operand list), ``INTS``
  and ``FLOATS`` (where its attributes start), ``MODE`` (in a batch: ``PER_ROW``, one driver
  call per batch row, or ``BLOCK``, one call for the block's rows, whose count the driver gets
  as one more operand: ``Op.exec_rows_spec``);
* ``values``: ``VALUE`` columns per value, a place in memory: ``OBJECT`` (an index into the
  objects the run is given), ``OFFSET`` (bytes from that object's data) and ``STRIDE`` (bytes
  from one batch row to the next; 0 for what every row shares, the saved forward values);
* ``operands``: value indices, each row's run of them;
* ``entries``: driver entry addresses (:func:`~autograd_nb.ops._pointers.entry_address`);
* ``ints``: every row's int attributes, then a 0.

The float attributes are a float64 array of their own (ending in a 0). A run gets the
``id()`` of each object (an array; the machine reads its data pointer), so nothing of a
table's is a Python object. :class:`Builder` writes tables.

A batch (``grad(..., is_grads_batched=True)``) runs the same table over blocks of its rows,
one block per ``BLOCK_ROWS`` rows (at most ``MAX_BLOCKS``; the blocks depend on the batch
alone, never on the threads, so the bits do not either): each block clears, reads and writes
only its own rows of every value with a stride, calls a ``PER_ROW`` driver once per row and a
``BLOCK`` driver once, and reads what has no stride, shared.
"""

import itertools

import numba
import numpy as np
from numba import njit, prange

from .. import config
from ..ops import _pointers
from ..ops._parallel import parallel_allowed

ENTRY, N_OPERANDS, FIRST, INTS, FLOATS, MODE = range(6)
ROW = 6
OBJECT, OFFSET, STRIDE = range(3)
VALUE = 3
HEADER = 5
#: An ``ENTRY`` that clears ``ints[INTS]`` bytes (per batch row) at the row's one operand.
ZERO = -1
#: Modes of a row in a batch: a driver call per batch row, or one for a block of rows.
PER_ROW, BLOCK = 0, 1
#: The most operands one row may have (the size of the operand buffer the loops pass): a
#: ``BLOCK`` row's count of rows takes one more.
MAX_OPERANDS = 63
_OPERAND_BUFFER = MAX_OPERANDS + 1
#: Batched runs split the batch into blocks of consecutive rows (``config.BATCH_BLOCK_ROWS``,
#: ``BATCH_MAX_BLOCKS``, ``BATCH_BLOCK_ALIGN``), read when the loops below compile.
BLOCK_ROWS = config.BATCH_BLOCK_ROWS
MAX_BLOCKS = config.BATCH_MAX_BLOCKS
BLOCK_ALIGN = config.BATCH_BLOCK_ALIGN

_BYTES = np.empty(0, dtype=np.uint8)


@njit(cache=True, nogil=True, inline="always")
def _word(address, i):
    """The int64 ``i`` words from ``address``. The loops read a table through this, not by
    indexing: no negative-index check per read (a 1,000-row backward: 14.2 µs by indexing,
    11.9 µs so; docs/benchmarking.rst, "The table machine")."""
    return _pointers.load_address(address + 8 * i)


@njit(cache=True, nogil=True)
def value_pointers(table, bases):
    """The address of every value of ``table`` (of its first batch row), its objects' data
    at ``bases``."""
    t = table.ctypes.data
    at = HEADER + _word(t, 0) * ROW
    n_values = _word(t, 1)
    pointers = np.empty(n_values, dtype=np.int64)
    for v in range(n_values):
        place = at + v * VALUE
        pointers[v] = bases[_word(t, place + OBJECT)] + _word(t, place + OFFSET)
    return pointers


@njit(cache=True, nogil=True)
def pointers_on(table, object_ids):
    """The address of every value of ``table`` (of its first batch row) on the arrays whose
    ``id()`` are ``object_ids``. Where the values are many more than the objects (a program:
    a few objects, an arena among them, and a value per place in them), the objects' data
    pointers are read once, first; where they are about as many (an eager backward: about one
    value per object), each value reads its object's itself, in one pass."""
    t = table.ctypes.data
    ids = object_ids.ctypes.data
    at = HEADER + _word(t, 0) * ROW
    n_values = _word(t, 1)
    if 2 * object_ids.size < n_values:
        bases = np.empty(object_ids.size, dtype=np.int64)
        for i in range(object_ids.size):
            bases[i] = _pointers.data_address(_word(ids, i))
        return value_pointers(table, bases)
    pointers = np.empty(n_values, dtype=np.int64)
    for v in range(n_values):
        place = at + v * VALUE
        pointers[v] = (_pointers.data_address(_word(ids, _word(t, place + OBJECT)))
                       + _word(t, place + OFFSET))
    return pointers


@njit(cache=True, nogil=True)
def walk(table, pointers, floats):
    """The single-run loop: every row of ``table`` once, on the values at ``pointers``."""
    t = table.ctypes.data
    n_rows, n_values, n_operands, n_entries = _word(t, 0), _word(t, 1), _word(t, 2), _word(t, 3)
    rows_at = HEADER
    operands_at = rows_at + n_rows * ROW + n_values * VALUE
    entries_at = operands_at + n_operands
    ints_at = entries_at + n_entries
    ints_address = t + 8 * ints_at
    floats_address = floats.ctypes.data
    p = pointers.ctypes.data
    operands = np.empty(_OPERAND_BUFFER, dtype=np.int64)
    operands_address = operands.ctypes.data
    for r in range(n_rows):
        row = rows_at + r * ROW
        entry = _word(t, row + ENTRY)
        first = operands_at + _word(t, row + FIRST)
        if entry == ZERO:
            region = _pointers.array_at(_word(p, _word(t, first)),
                                        _word(ints_address, _word(t, row + INTS)), _BYTES)
            region[:] = 0
            continue
        for j in range(_word(t, row + N_OPERANDS)):
            operands[j] = _word(p, _word(t, first + j))
        _pointers.call_entry(_word(t, entries_at + entry), operands_address,
                             ints_address + 8 * _word(t, row + INTS),
                             floats_address + 8 * _word(t, row + FLOATS))


@njit(cache=True, nogil=True)
def walk_rows(table, pointers, floats, start, stop):
    """The batch loop: every row of ``table`` for the batch rows ``start:stop`` (one block),
    each value advanced by its ``STRIDE`` per batch row."""
    t = table.ctypes.data
    n_rows, n_values, n_operands, n_entries = _word(t, 0), _word(t, 1), _word(t, 2), _word(t, 3)
    rows_at = HEADER
    values_at = rows_at + n_rows * ROW
    operands_at = values_at + n_values * VALUE
    entries_at = operands_at + n_operands
    ints_at = entries_at + n_entries
    ints_address = t + 8 * ints_at
    floats_address = floats.ctypes.data
    p = pointers.ctypes.data
    count = stop - start
    operands = np.empty(_OPERAND_BUFFER, dtype=np.int64)
    operands_address = operands.ctypes.data
    steps = np.empty(_OPERAND_BUFFER, dtype=np.int64)
    firsts = np.empty(_OPERAND_BUFFER, dtype=np.int64)
    for r in range(n_rows):
        row = rows_at + r * ROW
        entry = _word(t, row + ENTRY)
        first = operands_at + _word(t, row + FIRST)
        if entry == ZERO:
            v = _word(t, first)
            step = _word(t, values_at + v * VALUE + STRIDE)
            region = _pointers.array_at(_word(p, v) + start * step,
                                        count * _word(ints_address, _word(t, row + INTS)),
                                        _BYTES)
            region[:] = 0
            continue
        n = _word(t, row + N_OPERANDS)
        for j in range(n):
            v = _word(t, first + j)
            step = _word(t, values_at + v * VALUE + STRIDE)
            steps[j] = step
            firsts[j] = _word(p, v) + start * step
        function = _word(t, entries_at + entry)
        ints_here = ints_address + 8 * _word(t, row + INTS)
        floats_here = floats_address + 8 * _word(t, row + FLOATS)
        if _word(t, row + MODE) == BLOCK:
            for j in range(n):
                operands[j] = firsts[j]
            operands[n] = count
            _pointers.call_entry(function, operands_address, ints_here, floats_here)
            continue
        for b in range(count):
            for j in range(n):
                operands[j] = firsts[j] + b * steps[j]
            _pointers.call_entry(function, operands_address, ints_here, floats_here)


@njit(cache=True, nogil=True)
def run(table, object_ids, floats):
    """Run ``table`` once on the objects whose ``id()`` are ``object_ids`` (the caller keeps
    them alive)."""
    walk(table, pointers_on(table, object_ids), floats)


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
def _blocks_in_parallel(table, pointers, floats, batch, blocks):
    for p in prange(blocks):
        walk_rows(table, pointers, floats, block_start(batch, blocks, p),
                  block_start(batch, blocks, p + 1))


@njit(cache=True, nogil=True)
def run_batched(table, object_ids, floats, batch, parallel):
    """Run ``table`` over a batch of ``batch`` rows in ``batch_blocks(batch)`` blocks: a
    ``prange`` over numba's threads where ``parallel``, else one after the other on this
    thread (the same blocks, so the same bits)."""
    pointers = pointers_on(table, object_ids)
    blocks = batch_blocks(batch)
    if parallel and blocks > 1:
        _blocks_in_parallel(table, pointers, floats, batch, blocks)
        return
    for p in range(blocks):
        walk_rows(table, pointers, floats, block_start(batch, blocks, p),
                  block_start(batch, blocks, p + 1))


def row_blocks(batch):
    """The blocks of rows :func:`run_batched` runs, as ``(start, stop)`` pairs, from Python
    (tier 0 runs the same blocks, compiling nothing)."""
    blocks = batch_blocks.py_func(batch)
    starts = [block_start.py_func(batch, blocks, p) for p in range(blocks + 1)]
    return list(zip(starts[:-1], starts[1:]))


def parallel_blocks(batch):
    """Whether a batch's blocks run in parallel, with OpenBLAS's own threads held at one:
    where the batch makes several blocks, numba has several threads and this process may
    start them (``ops._parallel``)."""
    return batch >= 2 * BLOCK_ROWS and parallel_allowed() and numba.get_num_threads() > 1


class Builder:
    """A table's sections as Python lists, filled row by row; :meth:`tables` makes the arrays.

    Objects are numbers here: what they are (arrays of an eager backward, the buffers of a
    replayed call or of a recorded trace) is the writer's business, and so is handing their
    ``id()`` to the run in that order."""

    def __init__(self):
        self.rows = []
        self.values = []
        self.operands = []
        self.entries = []
        self.entry_index = {}
        self.ints = []
        self.floats = []

    def value(self, obj, offset=0, stride=0):
        """A new value: ``offset`` bytes into object ``obj``, ``stride`` bytes per batch row."""
        self.values.extend((obj, offset, stride))
        return len(self.values) // VALUE - 1

    def entry(self, address):
        """The entry number of the driver at ``address`` (added on first use)."""
        index = self.entry_index.get(address)
        if index is None:
            index = self.entry_index[address] = len(self.entries)
            self.entries.append(address)
        return index

    def call(self, address, operand_values, ints=(), floats=(), mode=PER_ROW):
        """A row calling the driver at ``address`` on ``operand_values``."""
        self.call_entry(self.entry(address), operand_values, ints, floats, mode)

    def call_entry(self, entry, operand_values, ints=(), floats=(), mode=PER_ROW):
        """:meth:`call` of the entry point numbered ``entry`` (:meth:`entry`)."""
        if len(operand_values) > MAX_OPERANDS:
            raise ValueError("too many operands for one row of a table")
        self.rows.extend((entry, len(operand_values), len(self.operands), len(self.ints),
                          len(self.floats), mode))
        self.operands.extend(operand_values)
        if type(ints) is tuple or type(ints) is list:  # (:meth:`tables` makes them int64)
            self.ints.extend(ints)
        else:
            self.ints.extend(np.asarray(ints, dtype=np.int64).reshape(-1).tolist())
        if len(floats):
            if type(floats) is tuple or type(floats) is list:
                self.floats.extend(floats)
            else:
                self.floats.extend(np.asarray(floats, dtype=np.float64).reshape(-1).tolist())

    def zero(self, value, n_bytes):
        """A row clearing ``n_bytes`` bytes (per batch row) at ``value``."""
        self.rows.extend((ZERO, 1, len(self.operands), len(self.ints), len(self.floats),
                          PER_ROW))
        self.operands.append(value)
        self.ints.append(int(n_bytes))

    def extend(self, other, value_of):
        """Append the rows of the builder ``other``, its values named here by
        ``value_of[its value number]`` (a table written apart, then made part of this one:
        ``anb.compile``'s gradient taken inside a recorded function)."""
        entry_of = [self.entry(address) for address in other.entries]
        operands_base, ints_base, floats_base = (len(self.operands), len(self.ints),
                                                 len(self.floats))
        rows = other.rows
        for r in range(0, len(rows), ROW):
            entry = rows[r + ENTRY]
            self.rows.extend((entry if entry == ZERO else entry_of[entry],
                              rows[r + N_OPERANDS], rows[r + FIRST] + operands_base,
                              rows[r + INTS] + ints_base, rows[r + FLOATS] + floats_base,
                              rows[r + MODE]))
        self.operands.extend([value_of[v] for v in other.operands])
        self.ints.extend(other.ints)
        self.floats.extend(other.floats)

    def tables(self):
        """``(table, floats)``: the int64 table and the float64 attributes."""
        header = [len(self.rows) // ROW, len(self.values) // VALUE, len(self.operands),
                  len(self.entries), len(self.ints)]
        sections = (header, self.rows, self.values, self.operands, self.entries, self.ints,
                    [0])
        # (``np.fromiter`` over the lists: half ``np.array``'s time on a 10,000-op program)
        table = np.fromiter(itertools.chain(*sections), dtype=np.int64,
                            count=sum(map(len, sections)))
        floats = np.fromiter(itertools.chain(self.floats, [0.0]), dtype=np.float64,
                             count=len(self.floats) + 1)
        return table, floats


class Sections:
    """Views of a table's sections (:func:`sections`): ``rows`` (rows x ``ROW``), ``values``
    (values x ``VALUE``), ``operands``, ``entries`` and ``ints``; writable where the table
    is (a writer may move its values)."""

    __slots__ = ("rows", "values", "operands", "entries", "ints")

    def __init__(self, table):
        n_rows, n_values, n_operands, n_entries, n_ints = (int(n) for n in table[:HEADER])
        at = HEADER
        self.rows = table[at:at + n_rows * ROW].reshape(-1, ROW)
        at += n_rows * ROW
        self.values = table[at:at + n_values * VALUE].reshape(-1, VALUE)
        at += n_values * VALUE
        self.operands = table[at:at + n_operands]
        at += n_operands
        self.entries = table[at:at + n_entries]
        at += n_entries
        self.ints = table[at:at + n_ints]

    def row_operands(self, r):
        """The value numbers row ``r`` reads and writes."""
        first, n = self.rows[r, FIRST], self.rows[r, N_OPERANDS]
        return self.operands[first:first + n]


def sections(table):
    """:class:`Sections` of ``table``."""
    return Sections(table)


@njit(cache=True, nogil=True)
def table_size(table):
    """The length of the table that starts at ``table[0]`` (a view of more is fine)."""
    return HEADER + table[0] * ROW + table[1] * VALUE + table[2] + table[3] + table[4] + 1
