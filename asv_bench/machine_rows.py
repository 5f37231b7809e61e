"""Time the table machine alone: the table of a 1,000-op chain's eager backward (16 elements,
the rows a plan-cache template runs), run again and again through ``executor.run_tables``.

Usage: ``PYTHONPATH=. python asv_bench/machine_rows.py`` (docs/benchmarking.rst, "The table
machine"). ``executor.run_tables`` takes the same arguments in trees before the machine, so
two trees can be timed side by side with ``PYTHONPATH`` set to each.
"""

import _ctypes
import os
import time

import numpy as np

# (the compiled backward, not tier 0's NumPy twins: benchmarks/__init__.py)
os.environ.setdefault("AUTOGRAD_NB_TIERED", "0")

import autograd_nb as anb  # noqa: E402
from autograd_nb.engine import executor  # noqa: E402


def chain_table():
    """``(args, held)``: the last ``run_tables`` arguments of a chain's backward, and the
    arrays its object ids name (kept alive here)."""
    rng = np.random.default_rng(0)
    x = anb.tensor(rng.standard_normal(16), requires_grad=True)
    captured, held = [], []
    original = executor.run_tables

    def capture(*args):
        captured.append(args)
        result = original(*args)
        held.append([_ctypes.PyObj_FromPtr(int(i)) for i in args[1][1:]])
        return result

    executor.run_tables = capture
    try:
        for _ in range(4):
            h = x
            for _ in range(200):
                h = anb.tanh(anb.sin(h) * 0.9 + x)
            y = anb.sum(h)
            held.append((y, anb.grad(y, x, retain_graph=True)))
    finally:
        executor.run_tables = original
    if not captured:
        raise SystemExit("the backward did not run in the compiled executor (tier 0?)")
    return captured[-1], held


def main():
    (table, ids, floats, arena_size, dtype), held = chain_table()

    def run():
        executor.run_tables(table, ids.copy(), floats, arena_size, dtype)

    for _ in range(100):
        run()
    blocks = []
    for _ in range(30):
        start = time.perf_counter()
        for _ in range(200):
            run()
        blocks.append((time.perf_counter() - start) / 200)
    blocks.sort()
    print(f"table of a 1,000-op chain's backward: {blocks[0] * 1e6:.2f} µs (best block), "
          f"{blocks[len(blocks) // 2] * 1e6:.2f} µs (median block)")
    return held


if __name__ == "__main__":
    main()
