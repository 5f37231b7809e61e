"""The steady-state time of workload steps, one median each, for A/B runs between two trees.

    python asv_bench/steady_steps.py [--rounds N] WORKLOAD[:VARIANT][,NAME=INT...] ...

Each argument is a workload of ``benchmarks/workloads.py``, optionally with its variant
(default ``autograd_nb:compile``) and parameters, e.g. ``mlp_train_step:autograd_nb:compile_step``
or ``fastest_autograd,n_ops=1000``. Each step runs a few times untimed (numba loads its
kernels), then ``--rounds`` times; the median is printed in microseconds. To compare two trees,
alternate processes of each, pinned to one CPU, the older tree in a worktree:

    git worktree add /tmp/old <commit>
    for i in 1 2 3 4; do
        PYTHONPATH=/tmp/old taskset -c 0 .venv/bin/python asv_bench/steady_steps.py ode_rollout
        taskset -c 0 .venv/bin/python asv_bench/steady_steps.py ode_rollout
    done
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks import workloads  # noqa: E402

import autograd_nb  # noqa: E402


def parse(argument):
    """``(workload, variant, params)`` of one argument (see the module docstring)."""
    name, *params = argument.split(",")
    workload, _, variant = name.partition(":")
    params = dict(item.split("=", 1) for item in params)
    return workload, variant or "autograd_nb:compile", {k: int(v) for k, v in params.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("steps", nargs="+", help="WORKLOAD[:VARIANT][,NAME=INT...]")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print(f"({autograd_nb.__file__})")
    for argument in args.steps:
        workload, variant, params = parse(argument)
        step = workloads.make_step(workload, variant, **params)
        median = workloads.median_us(step, args.rounds, warmup=10)
        print(f"{argument}: {median:.1f} us")


if __name__ == "__main__":
    main()
