"""What recording a loop costs in ``anb.compile``: ``ode_rollout``'s step under ``anb.scan``
for a few trip counts, its first call (recording) with its gradient, the median of later
calls with their gradients, and the rows of the program's forward table.

    python asv_bench/loop_recording.py [--steps 200,2000] [--rounds 5]

A body recorded once gives a table of the same rows for every trip count; an unrolled one
grows by a copy of the body per step (docs/benchmarking.rst, "ode_rollout written with
anb.scan").
"""

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))

import workloads  # noqa: E402

import autograd_nb as anb  # noqa: E402
from autograd_nb.engine import machine  # noqa: E402


def compiled_rollout(steps, v, zero_row):
    def body(state, _):
        return workloads._ode_step(anb, *state, zero_row), None

    def rollout(x):
        (x_end, v_end), _ = anb.scan(body, (x, v), length=steps)
        return workloads._ode_energy(anb, x_end, v_end)

    return anb.compile(rollout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="200,2000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    positions, velocities, zero_row = workloads._ode_data()
    x = anb.tensor(positions, requires_grad=True)
    v, zero_row = anb.tensor(velocities), anb.tensor(zero_row)
    warm = compiled_rollout(3, v, zero_row)  # (the kernels and drivers loaded first)
    for _ in range(2):
        anb.grad(warm(x), x)
    gc.disable()
    print(f"{'steps':>6} {'first call ms':>14} {'replay ms':>10} {'forward rows':>13}")
    for steps in map(int, args.steps.split(",")):
        step = compiled_rollout(steps, v, zero_row)
        start = time.perf_counter()
        anb.grad(step(x), x)
        first = time.perf_counter() - start
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            anb.grad(step(x), x)
            times.append(time.perf_counter() - start)
        (entry,) = step._programs.values()
        rows = machine.sections(entry.program.forward_table).rows.shape[0]
        print(f"{steps:>6} {first * 1e3:>14.1f} {np.median(times) * 1e3:>10.2f} {rows:>13}")


if __name__ == "__main__":
    main()
