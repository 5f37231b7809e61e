"""A child forked after its parent ran parallel kernels computes every gradient, with the
parent's bits.

GNU OpenMP (numba's ``omp`` layer) terminates a forked child that starts a parallel region
once its parent launched numba's threads; ``autograd_nb.ops._parallel`` makes such a child run
every ``prange`` kernel's serial twin instead. Each test runs a fresh Python process (a fork
inherits the threads of the process that forks, so pytest's own must stay out of it) under a
timeout, so that a dying or hanging child fails the test instead of stalling the suite.
"""

import os
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform"),
    pytest.mark.slow,  # fresh processes
]

#: Compile time counts: a cold kernel cache compiles the parallel kernels and their twins.
TIMEOUT = 240
#: The checkout under test, imported by the scripts.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = r'''
import multiprocessing
import os
import sys
import traceback

import numba
import numpy as np

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.ops import _parallel

rng = np.random.default_rng(0)
X = rng.random(100_000) * 4 - 2
W = rng.standard_normal((256, 256)) / 16
V = rng.standard_normal((256, 256))
A = rng.standard_normal((64, 256)) / 16


def chain():
    """A 100,000-element elementwise chain's gradient (a fused loop, parallel where allowed)
    against its closed form."""
    x = anb.tensor(X, requires_grad=True)
    (g,) = anb.grad(anb.sum(anb.exp(anb.sin(x) * x + 1.0)), x)
    expected = np.exp(np.sin(X) * X + 1.0) * (np.cos(X) * X + np.sin(X))
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)
    return g.numpy()


def batched_vjp():
    """256 VJPs of ``tanh(W @ x)`` at once (the compiled executor's blocks of rows)."""
    x = anb.tensor(np.linspace(-1, 1, 256), requires_grad=True)
    y = anb.tanh(anb.tensor(W) @ x)
    (g,) = anb.grad(y, x, grad_outputs=anb.tensor(V), is_grads_batched=True)
    t = np.tanh(W @ np.linspace(-1, 1, 256))
    np.testing.assert_allclose(g.numpy(), (V * (1 - t * t)) @ W, rtol=1e-9, atol=1e-12)
    return g.numpy()


def walked_vjp():
    """128 VJPs through the Python walk: the ops' own batched kernels (elementwise and
    ``sum``'s loops over the batch, ``_bmm``'s split GEMM and its GEMM per vector)."""
    config.COMPILED_BACKWARD = False
    try:
        a = anb.tensor(A, requires_grad=True)
        w = anb.tensor(W, requires_grad=True)
        y = anb.sum(anb.exp(anb.tanh(a @ w) * 0.5), axis=0)
        vectors = V[:128]
        ga, gw = anb.grad(y, [a, w], grad_outputs=anb.tensor(vectors), is_grads_batched=True)
    finally:
        config.COMPILED_BACKWARD = True
    t = np.tanh(A @ W)
    inner = vectors[:, None, :] * np.exp(0.5 * t) * 0.5 * (1 - t * t)
    np.testing.assert_allclose(ga.numpy(), inner @ W.T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gw.numpy(), np.einsum("ik,bij->bkj", A, inner), rtol=1e-9,
                               atol=1e-12)
    return np.concatenate([ga.numpy().ravel(), gw.numpy().ravel()])


def thrice(workload):
    """``workload`` three times (the second run leaves the plan cache a template, the third
    replays it), the same bits each time."""
    result = workload()
    for _ in range(2):
        np.testing.assert_array_equal(workload(), result)
    return result


def everything():
    matvec = (anb.tensor(W) @ anb.tensor(X[:256])).numpy()  # blocks of rows where allowed
    return [thrice(chain), thrice(batched_vjp), walked_vjp(), matvec]


def in_child(expected):
    """Run in a forked child: everything again, with the parent's bits (the parent's cached
    plans met first)."""
    try:
        for got, want in zip(everything(), expected, strict=True):
            np.testing.assert_array_equal(got, want)
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    # Under a layer that is not fork-safe the child ran the serial twins.
    os._exit(0 if _parallel.parallel_allowed() == (layer in _parallel.FORK_SAFE_LAYERS) else 2)


def pool_worker(i):
    return chain()[i], batched_vjp()[i, i]


if __name__ == "__main__":
    case = sys.argv[1]
    if case == "unguarded":  # the guard off: the child should die (a check of the check)
        _parallel.FORK_SAFE_LAYERS = ("tbb", "omp", "workqueue")
    if case.startswith("pool"):
        batched_vjp()
    else:
        expected = everything()
    layer = numba.threading_layer()
    assert _parallel.threads_started()
    print(layer)
    if case.startswith("pool"):
        method = case.split("-")[1]
        with multiprocessing.get_context(method).Pool(2) as pool:
            got = pool.map_async(pool_worker, range(4)).get(timeout=90)
        want = [pool_worker(i) for i in range(4)]
        assert got == want, (got, want)
        print(0)
    else:
        pid = os.fork()
        if pid == 0:
            in_child(expected)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
'''


def _run(tmp_path, case):
    script = tmp_path / "fork_script.py"
    script.write_text(_SCRIPT)
    paths = [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    return subprocess.run([sys.executable, str(script), case], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env)


@pytest.mark.parametrize("case", ["fork", "pool-fork", "pool-spawn"])
def test_a_child_forked_after_parallel_work_computes_the_parents_gradients(tmp_path, case):
    # "fork": the parent ran a large elementwise backward, a batched VJP in the compiled
    # executor and one through the ops' batched kernels, then forks; the child does it all
    # again. "pool-*": after a batched VJP, a pool's workers take gradients.
    done = _run(tmp_path, case)
    assert done.returncode == 0, done.stderr
    assert "Terminating" not in done.stderr
    layer, child_status = done.stdout.split()
    assert child_status == "0", done.stderr


def test_without_the_guard_the_child_is_terminated(tmp_path):
    # The check of the check: the same fork with the guard off, where GNU OpenMP runs.
    done = _run(tmp_path, "unguarded")
    assert done.returncode == 0, done.stderr
    layer, child_status = done.stdout.split()
    if layer != "omp":
        pytest.skip(f"numba runs the {layer!r} threading layer, not GNU OpenMP")
    assert child_status != "0"
    assert "Terminating: fork() called from a process already using GNU OpenMP" in done.stderr
