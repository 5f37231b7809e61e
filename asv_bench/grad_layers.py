"""Where the time of a small ``grad`` step goes: ``seed_outer``'s step at ``--n`` (100 by
default), each layer of the call timed by a ``perf_counter_ns`` wrapper put around it in this
process only (``outer``, ``grad``, the plan cache's match, buffers, tables and freeing, the
compiled ``execute``).

    NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python asv_bench/grad_layers.py [--n N] [--cpu]

Prints the step's median unwrapped, NumPy's ``outer`` and the joint kernel alone for scale,
then per layer its time per step (nested layers are included in their callers'; each wrapper
adds ~0.2 us; a layer the tree lacks prints 0). Numbers: docs/benchmarking.rst, "Where the
time of seed_outer n = 100 goes".
"""

import argparse
import functools
import gc
import time

import numpy as np

import autograd_nb as anb
from autograd_nb import engine
from autograd_nb.autograd import api
from autograd_nb.engine import executor, plan_cache
from autograd_nb.ops import _rank_one

#: (owner, attribute, label) of the layers timed, outermost first.
LAYERS = [
    (anb, "outer", "outer forward"),
    (anb, "grad", "grad"),
    (api, "_one_grad", "  _one_grad (one output, one input)"),
    (api, "_check_outputs", "  _check_outputs"),
    (api, "_make_seeds", "  _make_seeds"),
    (api, "_grad", "  _grad"),
    (engine, "plan_and_run", "    engine.plan_and_run"),
    (plan_cache, "run", "      plan_cache.run"),
    (plan_cache.Template, "_match_compiled", "        Template._match_compiled"),
    (plan_cache.Template, "_gather_and_run", "        Template._gather_and_run"),
    (plan_cache.Template, "_run_tables", "          Template._run_tables"),
    (plan_cache.Template, "_results", "            Template._results"),
    (executor, "execute", "            executor.execute (compiled)"),
    (plan_cache.Template, "_free", "        Template._free"),
]


def median_us(function, calls, rounds=9, clock=time.perf_counter):
    times = []
    for _ in range(rounds):
        start = clock()
        for _ in range(calls):
            function()
        times.append((clock() - start) / calls)
    return float(np.median(times)) * 1e6


def wrap(owner, name, label, spent):
    function = getattr(owner, name, None)
    if function is None:
        return  # (a layer this tree does not have: printed as 0)

    @functools.wraps(function)
    def timed(*args, **kwargs):
        start = time.perf_counter_ns()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0) + time.perf_counter_ns() - start

    setattr(owner, name, timed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--cpu", action="store_true",
                        help="time the unwrapped step by the process's CPU time (a shared "
                        "machine: leaves out other processes' time)")
    args = parser.parse_args()
    clock = time.process_time if args.cpu else time.perf_counter
    n, steps = args.n, args.steps
    x = anb.tensor(np.random.default_rng(10).standard_normal(n), requires_grad=True)
    ones = anb.tensor(np.ones((n, n)))

    def step():
        return anb.grad(anb.outer(x, x), x, grad_outputs=ones)[0].numpy()

    for _ in range(3000):
        step()
    gc.disable()
    data, g, out = x.numpy(), np.ones((n, n)), np.empty(n)
    print(f"step {median_us(step, 3000, clock=clock):.1f} us; NumPy's outer "
          f"{median_us(lambda: np.outer(data, data), 3000):.1f} us; the joint kernel "
          f"{median_us(lambda: _rank_one.joint_add(g, data, data, out, True), 3000):.1f} us")
    spent = {}
    for owner, name, label in LAYERS:
        wrap(owner, name, label, spent)
    for _ in range(200):
        step()
    spent.clear()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    print(f"wrapped step {(time.perf_counter() - start) / steps * 1e6:.1f} us")
    for _, _, label in LAYERS:
        print(f"{label:45s} {spent.get(label, 0) / steps / 1e3:7.2f} us")


if __name__ == "__main__":
    main()
