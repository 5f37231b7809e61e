"""What a compiled step's first two calls cost (the first records the program, the second is its
first replay), alone, for A/B runs of the recording between two trees.

    python asv_bench/first_calls.py [--workload fastest_autograd] [--param n_ops=10000]
                                    [--variant autograd_nb:compile] [--rounds 7]

A step of the workload runs three times first (numba loads its kernels: issue 19's "warm
kernel cache"); then ``--rounds`` fresh steps each time their first two calls
(``benchmarks.workloads.compiled_first_calls``, which clears the backward templates), and the
median and the least of the rounds are printed. To compare two trees, alternate processes of
each, pinned to one CPU, the older tree in a worktree:

    git worktree add /tmp/old <commit>
    for i in 1 2 3; do
        PYTHONPATH=/tmp/old taskset -c 0 .venv/bin/python asv_bench/first_calls.py
        taskset -c 0 .venv/bin/python asv_bench/first_calls.py
    done
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks import workloads  # noqa: E402

import autograd_nb  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="fastest_autograd")
    parser.add_argument("--variant", default="autograd_nb:compile")
    parser.add_argument("--param", action="append", default=[],
                        help="NAME=INT, a parameter of the workload (default n_ops=10000 for "
                             "fastest_autograd)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    params = dict(item.split("=", 1) for item in args.param)
    params = {name: int(value) for name, value in params.items()}
    if not params and args.workload == "fastest_autograd":
        params = {"n_ops": 10_000}
    step = workloads.make_step(args.workload, args.variant, **params)
    for _ in range(3):
        step()
    rounds = [workloads.compiled_first_calls(args.workload, args.variant, **params)
              for _ in range(args.rounds)]
    both = [record + replay for record, replay in rounds]
    print(f"{args.workload} {params} / {args.variant} ({autograd_nb.__file__}): first two "
          f"calls, median {statistics.median(both) * 1e3:.1f} ms, least "
          f"{min(both) * 1e3:.1f} ms (records: median "
          f"{statistics.median(r for r, _ in rounds) * 1e3:.1f} ms), {args.rounds} rounds")


if __name__ == "__main__":
    main()
