"""First use: a fresh process with an empty kernel cache gives a warm process's gradients.

A process whose cache is empty serves its first calls with tier 0 (:mod:`autograd_nb.tiering`:
NumPy forwards, the NumPy twins of the VJP kernels) while a background worker compiles the
kernels. Its results must be the compiled ones, bit for bit: a twin that solved into the
user's grad_outputs once gave a Gaussian process a wrong gradient on a fresh machine only.

The programs of tests/_first_use_programs.py run in child processes with an empty cache and
tiering on, which check that tier 0 served them and wait for the worker; then in new children
on the cache that worker filled, which run compiled. The two give the same bits, and finite
differences (or the closed form) check them, so two equal wrong answers cannot pass.
"""

import os
import pickle
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from tests import _first_use_programs as programs
from tests.checks import BLAS_PRODUCTS, COMPILE_LISTENER

ROOT = Path(__file__).resolve().parents[1]  # (the children import tests._first_use_programs)

CHILD = COMPILE_LISTENER + textwrap.dedent(
    """
    import pickle, sys, time
    from autograd_nb import tiering
    from tests._first_use_programs import GROUPS, PROGRAMS

    started = time.perf_counter()
    report = {"results": {}, "tier0": {}, "compiles": {}}
    for name in GROUPS[int(sys.argv[2])]:
        before, compiled = tiering.backward_pending, len(compiles)
        report["results"][name] = PROGRAMS[name]()
        report["tier0"][name] = [before, tiering.backward_pending,
                                 tiering.status()["pending_calls"]]
        report["compiles"][name] = compiles[compiled:]
    ran = time.perf_counter() - started
    report["finished"] = tiering.wait(timeout=500)
    report["seconds"] = {sys.argv[2]: (ran, time.perf_counter() - started - ran)}
    with open(sys.argv[1], "wb") as stream:
        pickle.dump(report, stream)
    """
)


def run_children(folder, name):
    """Each group of programs in a child process of its own, on its own cache in ``folder``
    (all at once, so that their workers compile side by side): the children's reports,
    merged."""
    children = []
    for group in range(len(programs.GROUPS)):
        cache = folder / f"cache{group}"
        env = dict(os.environ, AUTOGRAD_NB_TIERED="1", AUTOGRAD_NB_CACHE_DIR=str(cache / "k"),
                   NUMBA_CACHE_DIR=str(cache / "n"), **BLAS_PRODUCTS)
        path, errors = folder / f"{name}{group}.pkl", folder / f"{name}{group}.err"
        with open(errors, "w") as stream:
            child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(group)],
                                     env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                     stderr=stream)
        children.append((child, path, errors))
    merged = {}
    for child, path, errors in children:
        assert child.wait(timeout=600) == 0, errors.read_text()
        with open(path, "rb") as stream:
            report = pickle.load(stream)
        assert report.pop("finished")  # (the worker filled the cache)
        for key, value in report.items():
            merged.setdefault(key, {}).update(value)
    return merged


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("first-use")
    cold, warm = run_children(folder, "cold"), run_children(folder, "warm")
    # (-s shows them: per group, the seconds the programs ran and then waited for the worker)
    print("first use, cold:", cold["seconds"], "warm:", warm["seconds"])
    return cold, warm


def kernels(compiles):
    """The compilations of autograd_nb's backward: VJP kernels and drivers, the executor."""
    return [c for c in compiles if c.startswith(("anb_", "autograd_nb.")) and any(
        part in c for part in ("vjp", "_driver", "executor", "backward"))]


# The simulation is left out of the checks of what compiled: the backward anb.compile records
# compiles in the process (its tables need the kernels), and a replay's own driver for its
# inputs' node compiles in the first process that runs it compiled.


@pytest.mark.slow
def test_tier0_served_the_cold_processes(runs):
    cold, _ = runs
    for name, (before, after, pending) in cold["tier0"].items():
        assert before and after and pending > 0, name  # tier 0's walk ran the backward
        if not name.startswith("simulation"):
            assert kernels(cold["compiles"][name]) == [], name


@pytest.mark.slow
def test_the_warm_processes_ran_compiled(runs):
    _, warm = runs
    for name, (before, after, pending) in warm["tier0"].items():
        # (A new cache generation, from an edit to the package while the test ran, fails here.)
        assert (before, after, pending) == (False, False, 0), name
        if not name.startswith("simulation"):
            assert kernels(warm["compiles"][name]) == [], name  # loaded from the cache


@pytest.mark.slow
@pytest.mark.parametrize("name", programs.PROGRAMS)
def test_first_use_gives_the_compiled_bits(runs, name):
    cold, warm = runs
    for got, expected in zip(cold["results"][name], warm["results"][name], strict=True):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def central_differences(loss, arguments, eps):
    """The gradient of ``loss(*arguments)`` w.r.t. each argument, in float64."""
    arguments = [np.array(a, np.float64) for a in arguments]
    grads = []
    for argument in arguments:
        grad = np.zeros_like(argument)
        for index in np.ndindex(argument.shape):
            kept = argument[index]
            argument[index] = kept + eps
            plus = loss(*arguments)
            argument[index] = kept - eps
            grad[index] = (plus - loss(*arguments)) / (2 * eps)
            argument[index] = kept
        grads.append(grad)
    return grads


#: How close a gradient of a dtype is to finite differences in float64 (or a closed form).
TOLERANCES = {np.float32: {"rtol": 1e-4, "atol": 1e-5}, np.float64: {"rtol": 1e-6, "atol": 1e-9}}


def assert_close(got, want, dtype):
    np.testing.assert_allclose(got, want, **TOLERANCES[dtype])


def check_mlp(results, dtype):
    x, labels, params = programs.mlp_data(dtype)
    x = x.astype(np.float64)
    loss = lambda *p: programs.reference_mlp_loss(x, labels, *p)
    assert_close(results[0], loss(*params), dtype)
    for got, want in zip(results[1:], central_differences(loss, params, 1e-6), strict=True):
        assert_close(got, want, dtype)


def check_gaussian_process(results):
    x, y, targets, params = programs.gp_data()
    loss = lambda p, inputs: programs.gp_negative_log_likelihood(p, inputs, y, targets, np)
    assert_close(results[0], loss(params, x), np.float64)
    for got, want in zip(results[1:], central_differences(loss, [params, x], 1e-6),
                         strict=True):
        assert_close(got, want, np.float64)


def check_jacobian(results, dtype):
    x, w = programs.jacobian_data(dtype)
    w = w.astype(np.float64)
    expected = np.stack([
        central_differences(lambda v, row=row: programs.jacobian_function(v, w, np)[row],
                            [x], 1e-6)[0]
        for row in range(len(w))
    ])
    for got in results:  # functional.jacobian's, then grad's with is_grads_batched
        assert_close(got, expected, dtype)


def check_chain(results, dtype):
    x, w = (a.astype(np.float64) for a in programs.chain_data(dtype))
    loss = lambda *a: programs.chain(*a, np)
    assert_close(results[0], loss(x, w), dtype)
    for got, want in zip(results[1:], central_differences(loss, [x, w], 1e-6), strict=True):
        assert_close(got, want, dtype)


def check_simulation(results, dtype):
    state, k = (a.astype(np.float64) for a in programs.simulation_data(dtype))
    loss = lambda *a: programs.leapfrog(*a, np)
    expected = [loss(state, k), *central_differences(loss, [state, k], 1e-6)]
    *calls, counts = results
    assert counts.tolist() == [1, 0, 1, 1]  # one program, recorded once, replayed once
    for start in range(0, len(calls), 3):  # the recording call, the replay, eager
        for got, want in zip(calls[start:start + 3], expected, strict=True):
            assert_close(got, want, dtype)


def check_seed_cases(results, dtype):
    one, matrix, rhs = (a.astype(np.float64) for a in programs.seed_cases_data(dtype))
    inverse, one_grad, solution, matrix_grad, rhs_grad, *seeds_after = results
    inverse_seed, solve_seed = programs.seed((1, 1), dtype), programs.seed((4, 1), dtype)
    # The user's grad_outputs are as they were: the backward wrote into buffers of its own.
    np.testing.assert_array_equal(seeds_after[0], inverse_seed)
    np.testing.assert_array_equal(seeds_after[1], solve_seed)
    # Closed forms: d inv(A) = -inv(A) dA inv(A); x = M^-1 b gives b̄ = M^-T x̄, M̄ = -b̄ xᵀ.
    assert_close(inverse, 1 / one, dtype)
    assert_close(one_grad, -inverse_seed / one**2, dtype)
    expected_solution = np.linalg.solve(matrix, rhs)
    expected_rhs_grad = np.linalg.solve(matrix.T, solve_seed)
    assert_close(solution, expected_solution, dtype)
    assert_close(rhs_grad, expected_rhs_grad, dtype)
    assert_close(matrix_grad, -expected_rhs_grad @ expected_solution.T, dtype)


CHECKS = {
    "mlp float32": partial(check_mlp, dtype=np.float32),
    "mlp float64": partial(check_mlp, dtype=np.float64),
    "elementwise chain float32": partial(check_chain, dtype=np.float32),
    "gaussian process": check_gaussian_process,
    "batched jacobian float32": partial(check_jacobian, dtype=np.float32),
    "simulation float32": partial(check_simulation, dtype=np.float32),
    "seed cases float64": partial(check_seed_cases, dtype=np.float64),
}


def test_every_program_has_an_independent_check():
    assert set(CHECKS) == set(programs.PROGRAMS)
    assert sorted(sum(programs.GROUPS, [])) == sorted(programs.PROGRAMS)


@pytest.mark.slow
@pytest.mark.parametrize("process", ["cold", "warm"])
@pytest.mark.parametrize("name", programs.PROGRAMS)
def test_the_gradients_are_right(runs, process, name):
    cold, warm = runs
    CHECKS[name]({"cold": cold, "warm": warm}[process]["results"][name])
