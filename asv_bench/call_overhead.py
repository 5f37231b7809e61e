"""The fixed cost of a call: a compiled function of one element, and its backward, beside JAX's
jitted dispatch and torch eager, in one process.

    PYTHONPATH=.. /work/benchvenv/bin/python call_overhead.py [--rounds N] [--calls N]

Each row times one call (median of ``--rounds`` blocks of ``--calls`` calls each, the garbage
collector off while timing, every library at one thread and the process on one CPU, as
``compare.py --threads 1``):

* ``forward``: ``f(x)`` with ``f(x) = x * 2.0 + 1.0`` on a 1-element float64 ``x`` that
  requires grad (autograd_nb: ``anb.compile(f)``, a replay; JAX: ``jax.jit(f)``; torch: eager,
  recording its graph);
* ``forward + grad``: ``grad(f(x).sum(), x)`` (autograd_nb: the compiled forward and the
  program's backward; JAX: ``jax.jit(jax.grad(...))``, one dispatch; torch: eager);
* ``no-grad forward``: ``f(x)`` on an ``x`` that does not require grad.

The results are what a short simulation step pays per call before any arithmetic.
"""

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import compare  # noqa: E402

compare.limit_threads(1)  # (before numpy, torch and jax are imported)

from benchmarks import workloads  # noqa: E402


def block_us(call, calls, rounds, clock=time.perf_counter):
    """Median over ``rounds`` blocks of the time per call of ``calls`` calls, in us."""
    for _ in range(max(10, calls // 10)):  # (warm: numba loads kernels, XLA compiles)
        call()
    times = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            start = clock()
            for _ in range(calls):
                call()
            times.append((clock() - start) / calls)
    finally:
        if enabled:
            gc.enable()
    return statistics.median(times) * 1e6


def f(ns, x):
    return x * 2.0 + 1.0


def autograd_nb_calls():
    import numpy as np

    import autograd_nb as anb

    compiled = anb.compile(lambda x: f(anb, x).sum())
    x = anb.tensor(np.array([0.5]), requires_grad=True)
    x_const = anb.tensor(np.array([0.5]))
    return {
        "forward": lambda: compiled(x),
        "forward + grad": lambda: anb.grad(compiled(x), x),
        "no-grad forward": lambda: compiled(x_const),
    }


def jax_calls():
    import jax
    import jax.numpy as jnp

    loss = jax.jit(lambda x: f(jnp, x).sum())
    grad = jax.jit(jax.grad(lambda x: f(jnp, x).sum()))
    x = jnp.asarray([0.5])
    return {
        "forward": lambda: loss(x).block_until_ready(),
        "forward + grad": lambda: grad(x).block_until_ready(),
        "no-grad forward": lambda: loss(x).block_until_ready(),
    }


def torch_calls():
    import torch

    x = torch.tensor([0.5], dtype=torch.float64, requires_grad=True)
    x_const = torch.tensor([0.5], dtype=torch.float64)
    return {
        "forward": lambda: f(torch, x).sum(),
        "forward + grad": lambda: torch.autograd.grad(f(torch, x).sum(), x),
        "no-grad forward": lambda: f(torch, x_const).sum(),
    }


ENGINES = {"autograd_nb": autograd_nb_calls, "jax": jax_calls, "torch": torch_calls}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--cpu", action="store_true",
                        help="time by the process's CPU time (on a loaded machine: time "
                        "taken by other processes is left out)")
    args = parser.parse_args()
    clock = time.process_time if args.cpu else time.perf_counter
    workloads.set_threads(1)
    rows = {}
    for engine in args.engines.split(","):
        try:
            calls = ENGINES[engine]()
        except ImportError as error:
            print(f"({engine} skipped: {error})")
            continue
        rows[engine] = {name: block_us(call, args.calls, args.rounds, clock)
                        for name, call in calls.items()}
    names = list(next(iter(rows.values())))
    print(f"load: {os.getloadavg()[0]:.2f}; us per call ({'CPU' if args.cpu else 'wall'} "
          f"time), median of {args.rounds} blocks of {args.calls}")
    print(f"{'':18}" + "".join(f"{engine:>14}" for engine in rows))
    for name in names:
        print(f"{name:18}" + "".join(f"{rows[e][name]:14.2f}" for e in rows))


if __name__ == "__main__":
    main()
