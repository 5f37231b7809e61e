"""Where a compiled step's time goes: each kind of instruction of its replayed tables, timed.

    python asv_bench/program_rows.py WORKLOAD [VARIANT] [--rows] [--rounds N]

Builds ``VARIANT`` (default ``autograd_nb:compile``) of ``WORKLOAD`` (``benchmarks/workloads.py``),
runs it a few times, and takes the program its ``anb.compile`` recorded: the forward table and,
per replayed output, its backward table (:mod:`autograd_nb.replay.interpreter`). Each table is
timed whole, empty, and reduced to the instructions of one driver (or, with ``--rows``, to one
instruction at a time): the median over ``--rounds`` runs of that reduced table, less the
empty table's, is what those instructions cost. The reduced tables run on the values the last
replay left, so each kind is timed with its data in the cache: the sum of the kinds is below
the whole table's time by what the whole walk loses to cache misses.

Run it with the thread caps of ``compare.py --threads 1`` for numbers comparable to its tables:

    NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 AUTOGRAD_NB_TIERED=0 \\
        taskset -c 0 python asv_bench/program_rows.py ode_rollout
"""

import argparse
import ctypes
import gc
import sys
from collections import defaultdict
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.workloads import make_step, median_us  # noqa: E402

from autograd_nb.engine import machine  # noqa: E402
from autograd_nb.ops import _pointers  # noqa: E402
from autograd_nb.replay import interpreter  # noqa: E402
from autograd_nb.replay.program import Program, ReplayOutput  # noqa: E402

HEADER, ROW = machine.HEADER, machine.ROW


class Table:
    """A replay table, its instructions' driver names, and a way to run part of it."""

    def __init__(self, table, run):
        self.table = table
        self.run = run  # run(table): walk it on the last replay's values
        self.n_rows = int(table[0])
        self.rows = machine.sections(table).rows
        entries = machine.sections(table).entries
        drivers = {address: driver for (driver, _), address in _pointers._entries.items()}
        self.names = []
        for row in self.rows:
            if row[machine.ENTRY] == machine.ZERO:
                self.names.append("(clear a gradient slot)")
                continue
            driver = drivers.get(int(entries[row[0]]))
            function = getattr(driver, "py_func", None)
            self.names.append(f"{function.__module__.rsplit('.', 1)[-1]}.{function.__name__}"
                              if function is not None else hex(int(entries[row[0]])))

    def only(self, indices):
        header = self.table[:HEADER].copy()
        header[0] = len(indices)
        rest = self.table[HEADER + self.n_rows * ROW:]
        return np.concatenate([header, self.rows[indices].reshape(-1), rest])


def _forward_table(program, step):
    """The forward table and the arguments of the last ``interpreter.run`` of ``program``."""
    captured = {}
    original = interpreter.run

    def capture(table, object_ids, floats):
        if table is program.forward_table:
            captured["args"] = (object_ids.copy(), floats)
        return original(table, object_ids, floats)

    interpreter.run = capture
    try:
        step()
    finally:
        interpreter.run = original
    ids, floats = captured["args"]
    return Table(program.forward_table, lambda table: original(table, ids, floats))


def _replayed_output(program, step):
    """``(op, saved, size)`` of the first output with a backward table of one replay of
    ``step``: its :class:`ReplayOutput`, the saved values its node held (kept alive here,
    though the step's backward frees the node) and its number of elements."""
    found = []
    original = Program._connect

    def capture(self, leaves, results, *args):
        original(self, leaves, results, *args)
        if self is program and not found:
            for out in results:
                node = getattr(out, "_node", None)
                op = None if node is None else node.op
                if isinstance(op, ReplayOutput) and op.table is not None:
                    found.append((node.op, node.saved_inputs, out.size))
                    break

    Program._connect = capture
    try:
        step()
    finally:
        Program._connect = original
    return found[0] if found else None


def _backward_table(op, saved, size, dtype):
    """The backward table of a replayed output, run on a ones gradient into a fresh buffer
    (as ``interpreter.backward_driver`` lays them out)."""
    ids = saved[1]
    n, scratch_at, scratch_bytes = op.ints[0], op.ints[1], op.ints[2]
    bases = np.empty(n + 2, dtype=np.int64)
    for i in range(n):
        bases[i] = ctypes.c_int64.from_address(int(ids[i]) + _pointers.DATA_OFFSET).value
    gradient = np.ones(max(size, 1), dtype=dtype)
    buffer = np.zeros((scratch_at + scratch_bytes) // dtype.itemsize + 64, dtype=dtype)
    bases[n], bases[n + 1] = gradient.ctypes.data, buffer.ctypes.data
    keep = (gradient, buffer, saved)
    return Table(op.table, lambda table: (
        keep, machine.walk(table, machine.value_pointers(table, bases), op.floats)))


def report(title, table, by_row, rounds):
    whole = median_us(lambda: table.run(table.table), rounds)
    nothing = table.only([])
    empty = median_us(lambda: table.run(nothing), rounds)
    print(f"\n{title}: {table.n_rows} instructions, {whole:.1f} us whole, {empty:.1f} us empty")
    if by_row:
        groups = [([i], f"{i:4d} {name}") for i, name in enumerate(table.names)]
    else:
        kinds = defaultdict(list)
        for i, name in enumerate(table.names):
            kinds[name].append(i)
        groups = [(indices, name) for name, indices in kinds.items()]
    rows = []
    for indices, label in groups:
        part = table.only(indices)
        cost = median_us(lambda part=part: table.run(part), rounds) - empty
        rows.append((cost, len(indices), label))
    if not by_row:
        rows.sort(reverse=True)
    print(f"{'instructions':>12}  {'us':>8}  {'ns each':>8}  driver")
    for cost, count, label in rows:
        print(f"{count:12d}  {cost:8.1f}  {1000 * cost / count:8.1f}  {label}")
    print(f"{'sum':>12}  {sum(r[0] for r in rows):8.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workload")
    parser.add_argument("variant", nargs="?", default="autograd_nb:compile")
    parser.add_argument("--rows", action="store_true", help="time each instruction alone")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    step = make_step(args.workload, args.variant)
    for _ in range(3):
        step()
    programs = [o for o in gc.get_objects() if isinstance(o, Program)]
    if len(programs) != 1:
        raise SystemExit(f"expected one compiled program, found {len(programs)}")
    program = programs[0]
    print(f"{args.workload} / {args.variant}, numba threads: {numba.get_num_threads()}")
    report("forward", _forward_table(program, step), args.rows, args.rounds)
    found = _replayed_output(program, step)
    if found is not None:
        report("backward (of the first output)", _backward_table(*found, program.dtype),
               args.rows, args.rounds)


if __name__ == "__main__":
    main()
