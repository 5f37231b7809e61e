"""What a compiled step's first two calls cost (the first records the program, the second is its
first replay), alone, for A/B runs of the recording between two trees.

    python asv_bench/first_calls.py [--workload fastest_autograd] [--param n_ops=10000]
                                    [--variant autograd_nb:compile] [--rounds 7] [--pieces]

A step of the workload runs three times first (numba loads its kernels: issue 19's "warm
kernel cache"); then ``--rounds`` fresh steps each time their first two calls
(``benchmarks.workloads.compiled_first_calls``, which clears the backward templates), and the
median and the least of the rounds are printed; with ``--pieces`` also the median of each
piece of the recording (timers around them: they add a little to the total). To compare two
trees, alternate processes of each, pinned to one CPU, the older tree in a worktree:

    git worktree add /tmp/old <commit>
    for i in 1 2 3; do
        PYTHONPATH=/tmp/old taskset -c 0 .venv/bin/python asv_bench/first_calls.py
        taskset -c 0 .venv/bin/python asv_bench/first_calls.py
    done
"""

import argparse
import collections
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks import workloads  # noqa: E402

import autograd_nb  # noqa: E402
from autograd_nb.engine import backward, executor  # noqa: E402
from autograd_nb.replay import fusion, program, tracer  # noqa: E402

#: ``(label, owner, attribute)``: the pieces ``--pieces`` times (nested ones indented).
PIECES = [
    ("fn run while recording", tracer.recording, None),
    ("laying the program out", program.Program, "__init__"),
    ("  backward tables", program.Program, "_backward"),
    ("    planning", backward, "make_plan"),
    ("    schedule", executor, "plan_schedule"),
    ("    lowering into rows", executor, "lower"),
    ("  forward table", program.Program, "_forward"),
    ("    fusion plan", fusion, "plan"),
    ("    arena places", program.Program, "_pack_arena"),
    ("    rows", program, "_forward_rows"),
]


def _time_pieces(seconds):
    """Wrap each piece of ``PIECES`` with a timer adding to ``seconds[label]``."""
    for label, owner, name in PIECES:
        if name is None:  # a context manager: from its ``__enter__`` to its ``__exit__``
            enter, leave = owner.__enter__, owner.__exit__

            def entered(self, enter=enter):
                self.started = time.perf_counter()
                return enter(self)

            def left(self, *exc, leave=leave, label=label):
                seconds[label] += time.perf_counter() - self.started
                return leave(self, *exc)

            owner.__enter__, owner.__exit__ = entered, left
            continue
        function = getattr(owner, name)

        @functools.wraps(function)
        def timed(*args, function=function, label=label, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[label] += time.perf_counter() - start

        setattr(owner, name, timed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="fastest_autograd")
    parser.add_argument("--variant", default="autograd_nb:compile")
    parser.add_argument("--param", action="append", default=[],
                        help="NAME=INT, a parameter of the workload (default n_ops=10000 for "
                             "fastest_autograd)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pieces", action="store_true",
                        help="also time the pieces of the recording")
    args = parser.parse_args()
    params = dict(item.split("=", 1) for item in args.param)
    params = {name: int(value) for name, value in params.items()}
    if not params and args.workload == "fastest_autograd":
        params = {"n_ops": 10_000}
    step = workloads.make_step(args.workload, args.variant, **params)
    for _ in range(3):
        step()
    seconds = collections.defaultdict(float)
    if args.pieces:
        _time_pieces(seconds)
    rounds, pieces = [], collections.defaultdict(list)
    for _ in range(args.rounds):
        seconds.clear()
        rounds.append(workloads.compiled_first_calls(args.workload, args.variant, **params))
        for label, value in seconds.items():
            pieces[label].append(value)
    both = [record + replay for record, replay in rounds]
    print(f"{args.workload} {params} / {args.variant} ({autograd_nb.__file__}): first two "
          f"calls, median {statistics.median(both) * 1e3:.1f} ms, least "
          f"{min(both) * 1e3:.1f} ms (records: median "
          f"{statistics.median(r for r, _ in rounds) * 1e3:.1f} ms), {args.rounds} rounds")
    for label, _, _ in PIECES if args.pieces else ():
        print(f"  {label:38s} {statistics.median(pieces[label]) * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
