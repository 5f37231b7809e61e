"""Time a loop over each of ``ops/_fastmath.py``'s functions in 256-bit and in 512-bit vectors
(its functions ask for 512: ``_fastmath._wide``), float32 and float64, on one thread.

    python asv_bench/vector_width.py [--size 131072] [--rounds 3] [--cpu 0]

Each loop is ``out[i] = f(x[i])`` over ``--size`` elements (standard normal; positive for log
and log1p); the 256-bit loop drops the attribute again after its body is compiled. A row gives
the median of ``--rounds`` medians of 100 calls each in microseconds, their ratio, and whether
both loops gave the same bits.
"""

import argparse
import os
import sys

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmarks.workloads import median_us, set_threads  # noqa: E402

from autograd_nb.ops import _fastmath  # noqa: E402


@intrinsic
def _narrow(typingctx):
    """Drop the 512-bit preference from the function being compiled (called after the loop,
    whose inlined functions added it)."""

    def codegen(context, builder, signature, args):
        set.discard(builder.function.attributes, _fastmath._PREFER_WIDE)
        return context.get_dummy_value()

    return types.void(), codegen


def loops(function):
    """``(256-bit loop, 512-bit loop)`` of ``out[i] = function(x[i])``."""

    @njit(error_model="numpy")
    def narrow(x, out):
        for i in range(x.size):
            out[i] = function(x[i])
        _narrow()

    @njit(error_model="numpy")
    def wide(x, out):
        for i in range(x.size):
            out[i] = function(x[i])

    return narrow, wide


def row(name, dtype, size, rounds, rng):
    x = rng.standard_normal(size)
    if name in ("log", "log1p"):
        x = np.abs(x) + 0.1
    x = x.astype(dtype)
    outs = [np.empty_like(x), np.empty_like(x)]
    calls = [lambda loop=loop, out=out: loop(x, out)
             for loop, out in zip(loops(getattr(_fastmath, name)), outs)]
    for call in calls:
        call()
    same = np.array_equal(outs[0].view(f"u{x.itemsize}"), outs[1].view(f"u{x.itemsize}"))
    medians = [[], []]
    for _ in range(rounds):
        for k, call in enumerate(calls):
            medians[k].append(median_us(call, 100, warmup=0))
    narrow, wide = (float(np.median(m)) for m in medians)
    return narrow, wide, same


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=131072)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    args = parser.parse_args()
    set_threads(1)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    rng = np.random.default_rng(0)
    print("| function | dtype | 256-bit (us) | 512-bit (us) | 512 / 256 | same bits |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for name in _fastmath.FASTMATH_NAMES:
        for dtype in (np.float32, np.float64):
            narrow, wide, same = row(name, dtype, args.size, args.rounds, rng)
            print(f"| {name} | {np.dtype(dtype).name} | {narrow:.1f} | {wide:.1f} | "
                  f"{wide / narrow:.2f} | {same} |")


if __name__ == "__main__":
    main()
