"""The maximum resident size and time of one long rollout's gradient, in a process of its own.

    python asv_bench/checkpoint_rss.py STEPS none|sqrt|binomial

The rollout of ``checkpoint_memory.py`` (``ode_rollout``'s step on 4 particles) through
``anb.scan`` with the given ``checkpoint`` schedule (``sqrt``: every ``round(sqrt(STEPS))``-th
carry). It prints the process's maximum RSS after the warm-up and after the gradient, and
the time of the gradient: a measurement without ``tracemalloc``'s overhead, for runs too long
to trace. docs/benchmarking.rst quotes its output.
"""

import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkpoint_memory import rollout_gradient  # noqa: E402

import autograd_nb as anb  # noqa: E402


def main():
    steps, name = int(sys.argv[1]), sys.argv[2]
    schedule = {"none": None, "sqrt": round(steps**0.5), "binomial": "binomial"}[name]
    rng = np.random.default_rng(40)
    positions = np.zeros((4, 2))
    positions[:, 0] = 1.1 * np.arange(4)
    positions += 0.1 * rng.standard_normal(positions.shape)
    x0 = anb.tensor(positions, requires_grad=True)
    v0, zero_row = anb.zeros((4, 2)), anb.zeros((1, 2))
    rollout_gradient(x0, v0, zero_row, 8, None)  # warm the kernels
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    rollout_gradient(x0, v0, zero_row, steps, schedule)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"{name} {steps}: max RSS {after / 1024:.0f} MiB (after warm-up {before / 1024:.0f} "
        f"MiB, growth {(after - before) / 1024:.0f} MiB), {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
