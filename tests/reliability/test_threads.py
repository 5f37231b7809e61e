"""Threads back-propagating graphs of one structure into shared leaves at once.

Each thread runs the same MLP step (``tanh(x @ W1 + b1) @ W2``, ``log_softmax``, a label
gather, ``mean``) into the same leaves ``W1``, ``b1``, ``W2``. Every step's contribution is
the same array, bit for bit, so whatever the threads' interleaving, the accumulated ``.grad``
must equal that array added to itself once per step: exactly, not within a tolerance. A
backward lost to an exception (the plan cache's templates, a kernel module imported while
another thread still executed it) or an ``+=`` lost to another thread's shows as a mismatch.

Each run is a fresh process, so that every kernel module is first used there by racing
threads, with a tiny GIL switch interval to make the races likely.
"""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # fresh processes, some with empty caches

WORKER = r"""
import json, sys, threading, traceback
import numpy as np
import autograd_nb as anb

threads, steps = int(sys.argv[1]), int(sys.argv[2])
sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up
rng = np.random.default_rng(0)
# W1 has 16,384 elements: NumPy releases the GIL in its ``+=``, so unguarded accumulations
# into .grad overlap for real (without a lock, 3 runs of 4 lost some).
n, d, h, c = 16, 128, 128, 10
x_data = rng.standard_normal((n, d))
W1 = anb.tensor(rng.standard_normal((d, h)) * 0.1, requires_grad=True)
b1 = anb.tensor(rng.standard_normal(h) * 0.1, requires_grad=True)
W2 = anb.tensor(rng.standard_normal((h, c)) * 0.1, requires_grad=True)
rows, labels = anb.arange(n), anb.tensor(rng.integers(0, c, n))
leaves = (W1, b1, W2)


def step():
    logp = anb.log_softmax(anb.tanh(anb.tensor(x_data) @ W1 + b1) @ W2)
    (-logp[rows, labels].mean()).backward()


errors = []


def work():
    try:
        for _ in range(steps):
            step()
    except BaseException:
        errors.append(traceback.format_exc())


workers = [threading.Thread(target=work) for _ in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
got = [leaf.grad.numpy().copy() for leaf in leaves]
for leaf in leaves:
    leaf.grad = None
step()
one = [leaf.grad.numpy().copy() for leaf in leaves]
expected = [g.copy() for g in one]
for total, g in zip(expected, one):
    for _ in range(threads * steps - 1):
        total += g  # identical addends: the sum does not depend on their order
mismatch = [float(np.abs(a - b).max() / np.abs(g).max()) for a, b, g in zip(got, expected, one)]
print(json.dumps({"errors": errors, "mismatch": mismatch}))
"""


def run_worker(tmp_path, threads, steps, cold):
    env = dict(os.environ)
    if cold:
        env["AUTOGRAD_NB_CACHE_DIR"] = str(tmp_path / "kernels")
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    # (Run outside the repository: ``-c`` puts the working folder first on sys.path.)
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(threads), str(steps)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert not result["errors"], result["errors"][0]
    assert result["mismatch"] == [0.0, 0.0, 0.0], result["mismatch"]


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """One run first fills the kernel cache (in case this is the first test of a session)."""
    run_worker(tmp_path_factory.mktemp("warm"), 1, 1, cold=False)


@pytest.mark.parametrize("attempt", range(5))
def test_threads_backward_into_shared_leaves_on_a_warm_cache(warm_cache, tmp_path, attempt):
    run_worker(tmp_path, threads=8, steps=100, cold=False)


# On an empty cache, compiling the step's kernels takes ~10 s a process, which then dominates
# (and is also where the threads race: the first use of each kernel); 3 steps a thread are
# enough there, the 100 of the warm runs exercise the steady state.
@pytest.mark.parametrize("attempt", range(5))
def test_threads_backward_into_shared_leaves_on_an_empty_cache(tmp_path, attempt):
    run_worker(tmp_path, threads=8, steps=3, cold=True)
