"""What ``autograd_nb.scipy.integrate.odeint``'s gradient costs beside a plain solve.

    python asv_bench/odeint_costs.py [--rounds 7]

For a non-stiff problem (the ``lotka_volterra_fit`` workload's solve: 21 time points,
rtol = atol = 1e-8) and a stiff one (Robertson's kinetics over [0, 10] at 11 points,
rtol = atol = 1e-8), prints the median time of SciPy's own ``odeint`` (NumPy in, NumPy out),
of our value only (Tensors in, no backward), of the value and the gradient (backward through
y0, t and the parameters), the ratio of the last to SciPy's, how many times the backward
evaluated ``func``'s VJP, and the peak memory (``tracemalloc``) of a value and of a value and
gradient; then the time of one vector-Jacobian product of the Lotka-Volterra ``func`` as
the backward takes it (compiled with ``anb.compile``) and taken eagerly.
docs/benchmarking.rst quotes its output.
"""

import argparse
import os
import statistics
import sys
import time
import tracemalloc

import numpy as np
import scipy.integrate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmarks.workloads import LV_START, LV_TIMES, LV_TRUE, _lv_rhs  # noqa: E402

import autograd_nb as anb  # noqa: E402
import autograd_nb.numpy as anp  # noqa: E402
from autograd_nb.scipy import integrate  # noqa: E402


def lotka_volterra(y, t, theta):
    return _lv_rhs(anp, y, theta)


def robertson(y, t, k):
    fast, slow, square = k[2] * y[1] * y[2], k[0] * y[0], k[1] * y[1] ** 2
    return anp.stack([-slow + fast, slow - fast - square, square])


PROBLEMS = {
    "Lotka-Volterra (non-stiff)": (lotka_volterra, LV_START, LV_TIMES, LV_TRUE),
    "Robertson (stiff)": (robertson, np.array([1.0, 0.0, 0.0]), np.linspace(0.0, 10.0, 11),
                          np.array([0.04, 3e7, 1e4])),
}
TOLERANCES = {"rtol": 1e-8, "atol": 1e-8}


def median_seconds(run, rounds):
    run()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_bytes(run):
    run()
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def measure(func, y0, t, theta, rounds):
    def plain():
        return scipy.integrate.odeint(func, y0, t, args=(theta,), **TOLERANCES)

    def tensors():
        inputs = [anb.tensor(a, requires_grad=True) for a in (y0, t, theta)]
        return inputs, integrate.odeint(func, inputs[0], inputs[1], args=(inputs[2],),
                                        **TOLERANCES)

    def value_only():
        with anb.no_grad():
            tensors()

    def value_and_grad():
        inputs, ys = tensors()
        return anb.grad(anb.sum(ys * ys), inputs)

    calls = [0]
    vjp = integrate._Adjoint.vjp

    def counted(self, *args):
        calls[0] += 1
        return vjp(self, *args)

    value_and_grad()
    integrate._Adjoint.vjp = counted
    try:
        value_and_grad()
    finally:
        integrate._Adjoint.vjp = vjp
    times = [median_seconds(run, rounds) for run in (plain, value_only, value_and_grad)]
    return times, calls[0], peak_bytes(value_only), peak_bytes(value_and_grad)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    print("| problem | SciPy odeint | value (Tensors) | value + gradient | ratio to SciPy "
          "| VJP evaluations | peak memory: value | value + gradient |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, problem in PROBLEMS.items():
        (plain, value, both), calls, peak_value, peak_both = measure(*problem, rounds)
        print(f"| {name} | {plain * 1e3:.2f} ms | {value * 1e3:.2f} ms | {both * 1e3:.1f} ms "
              f"| {both / plain:.0f} | {calls} | {peak_value / 1024:.0f} KiB "
              f"| {peak_both / 1024:.0f} KiB |")
    adjoint = integrate._Adjoint(lotka_volterra, False, (anb.tensor(LV_TRUE, requires_grad=True),),
                                 len(LV_START))
    compiled = median_seconds(lambda: adjoint.vjp(LV_START, 0.5, LV_START), 200 * rounds)
    adjoint.compiled = None
    eager = median_seconds(lambda: adjoint.vjp(LV_START, 0.5, LV_START), 20 * rounds)
    print(f"\nOne VJP of the Lotka-Volterra func: {compiled * 1e6:.0f} µs compiled, "
          f"{eager * 1e6:.0f} µs eager")


if __name__ == "__main__":
    main()
