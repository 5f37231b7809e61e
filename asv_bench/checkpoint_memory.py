"""Peak memory and time of a long rollout's gradient with ``anb.scan(..., checkpoint=...)``.

    python asv_bench/checkpoint_memory.py [--steps 10000] [--particles 4] [--rounds 1]
        [--schedules none,sqrt,binomial]

The body is the ``ode_rollout`` workload's step (a chain of springs, semi-implicit Euler)
on ``--particles`` particles; the loss is the final energy, the gradient is taken w.r.t. the
initial positions. For each schedule (every step kept, every ``k``-th carry kept for
``k = round(sqrt(steps))``, and the recursive ``"binomial"`` one) it prints the peak memory
that ``tracemalloc`` saw during forward plus backward (Python objects and NumPy buffers),
the median time of forward plus backward, their ratios to the uncheckpointed run, and
whether the gradient is the same bit for bit. docs/loops.rst quotes its output.
"""

import argparse
import os
import statistics
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmarks.workloads import _ode_energy, _ode_step  # noqa: E402

import autograd_nb as anb  # noqa: E402


def rollout_gradient(x0, v0, zero_row, steps, schedule):
    def body(carry, _):
        return _ode_step(anb, *carry, zero_row), None

    (x, v), _ = anb.scan(body, (x0, v0), length=steps, checkpoint=schedule)
    return anb.grad(_ode_energy(anb, x, v), x0)[0].numpy()


def measure(x0, v0, zero_row, steps, schedule, rounds):
    tracemalloc.start()
    gradient = rollout_gradient(x0, v0, zero_row, steps, schedule)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        rollout_gradient(x0, v0, zero_row, steps, schedule)
        times.append(time.perf_counter() - start)
    return gradient, peak, statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--particles", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--schedules", default="none,sqrt,binomial",
        help="comma-separated, from none, sqrt, binomial (the ratios are to the first)",
    )
    args = parser.parse_args()
    rng = np.random.default_rng(40)
    positions = np.zeros((args.particles, 2))
    positions[:, 0] = 1.1 * np.arange(args.particles)
    positions += 0.1 * rng.standard_normal(positions.shape)
    x0 = anb.tensor(positions, requires_grad=True)
    v0, zero_row = anb.zeros((args.particles, 2)), anb.zeros((1, 2))
    rollout_gradient(x0, v0, zero_row, 8, None)  # warm the kernels
    k = max(1, round(args.steps**0.5))
    print(f"{args.steps} steps, {args.particles} particles, forward + backward")
    print(f"{'schedule':>10} {'peak MiB':>9} {'memory':>7} {'time s':>7} {'time':>6}  same")
    base = None
    names = {"none": None, "sqrt": k, "binomial": "binomial"}
    for schedule in (names[name] for name in args.schedules.split(",")):
        gradient, peak, seconds = measure(x0, v0, zero_row, args.steps, schedule, args.rounds)
        if base is None:
            base = gradient, peak, seconds
        same = np.array_equal(gradient, base[0])
        print(
            f"{schedule!s:>10} {peak / 2**20:9.2f} {peak / base[1]:7.3f} {seconds:7.2f} "
            f"{seconds / base[2]:6.2f}  {same}"
        )


if __name__ == "__main__":
    main()
