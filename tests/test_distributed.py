"""autograd_nb.distributed: the same gradients serially and on a Dask cluster, bit for bit.

The cluster tests share one ``LocalCluster(n_workers=2, processes=True, threads_per_worker=1)``
and skip, with the reason, where the ``distributed`` extra is missing. pytest-timeout is not
installed: each call into the cluster runs under ``bounded``, which fails the test after
``TIMEOUT`` seconds instead of hanging the suite. The functions the workers run are defined
at the top of this module, which the workers import (they are pickled by reference).
"""

import concurrent.futures
import os
import pickle
import signal
import sys
import threading
import time

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.autograd.functional import jacobian as functional_jacobian
from autograd_nb.distributed import ValueAndGrad, jacobian, map_grad, warm_workers

#: Seconds any one call into the cluster may take (a cold worker loads its kernels in ~1 s).
TIMEOUT = 60

MISSING_EXTRA = (
    "the `distributed` extra is not installed (pip install -e '.[distributed]'; `make test` "
    "installs it)"
)


# -- what the workers run ----------------------------------------------------------------------


def energy(x, k):
    return anb.sum(k * anb.tanh(x) * x)


compiled_energy = anb.compile(energy)


def compile_traces():
    """Per compiled function this worker unpickled for tasks: its recordings so far."""
    from autograd_nb import distributed

    return [fn.cache_info().traces for fn in distributed._unpickled.values()
            if isinstance(fn, anb.CompiledFunction)]


def wide(x):
    """R^3 -> R^(3 x 40): enough rows for several tasks."""
    return anb.sin(anb.outer(x, anb.linspace(0.0, 2.0, 40)) * anb.sum(x))


def marked_energy(x, folder):
    """``energy`` that leaves a file named after its process in ``folder``: where it ran."""
    open(os.path.join(folder, str(os.getpid())), "w").close()
    return anb.sum(x * x)


def slow_energy(x, k, folder):
    """``energy``, after leaving a marker (this process started input k) and a short nap."""
    open(os.path.join(folder, f"{os.getpid()}-{k}"), "w").close()
    time.sleep(0.1)
    return energy(x, k)


def at_the_same_time(start_at, x):
    """Wait for ``start_at`` (so the workers compile at once), then a gradient, and where this
    process keeps its caches."""
    import numba

    time.sleep(max(0.0, start_at - time.time()))
    (result,) = map_grad(energy, [(x, 2.0)])
    return result, config.KERNEL_DIR, numba.config.CACHE_DIR


def identity(value):
    return value


def bounded(call, *args, **kwargs):
    """``call(*args, **kwargs)``, failing the test if it takes more than TIMEOUT seconds."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(call, *args, **kwargs).result(timeout=TIMEOUT)
    finally:
        pool.shutdown(wait=False)


def inputs_of_mixed_shapes(n=9):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(1 + i % 4), 0.5 + i) for i in range(n)]


def assert_same(results, expected):
    """Bit for bit: values and every gradient."""
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        assert np.array_equal(got.value, want.value)
        got_grads = got.grad if isinstance(got.grad, tuple) else (got.grad,)
        want_grads = want.grad if isinstance(want.grad, tuple) else (want.grad,)
        assert len(got_grads) == len(want_grads)
        for g, w in zip(got_grads, want_grads):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert np.array_equal(g, w)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed", reason=MISSING_EXTRA)
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    )
    with cluster, distributed.Client(cluster, timeout=TIMEOUT) as client:
        yield client


# -- serially (no Dask needed) -----------------------------------------------------------------


def test_map_grad_serially_is_grad_per_input():
    inputs = inputs_of_mixed_shapes()
    results = map_grad(energy, inputs, wrt=(0, 1))
    for (x, k), result in zip(inputs, results):
        leaf, k_leaf = anb.tensor(x, requires_grad=True), anb.tensor(k, requires_grad=True)
        value = energy(leaf, k_leaf)
        grads = anb.grad(value, (leaf, k_leaf))
        assert isinstance(result, ValueAndGrad)
        assert np.array_equal(result.value, value.detach().numpy())
        assert np.array_equal(result.grad[0], grads[0].numpy())
        assert np.array_equal(result.grad[1], grads[1].numpy())
    # An int wrt gives one array; an argument the value does not depend on gets zeros.
    (only_x,) = map_grad(energy, inputs[:1])
    assert np.array_equal(only_x.grad, results[0].grad[0])
    (unused,) = map_grad(lambda x, y: anb.sum(x), [(np.ones(2), np.ones(3))], wrt=(0, 1))
    assert np.array_equal(unused.grad[1], np.zeros(3))


def test_map_grad_of_a_compiled_function_records_once_per_signature():
    inputs = inputs_of_mixed_shapes()
    compiled = anb.compile(energy)
    assert_same(map_grad(compiled, inputs, wrt=(0, 1)), map_grad(energy, inputs, wrt=(0, 1)))
    shapes = {x.shape for x, _ in inputs}
    assert compiled.cache_info().traces == len(shapes) < len(inputs)
    copy = pickle.loads(pickle.dumps(compiled))  # fn and options travel, programs do not
    assert copy.fn is energy and copy.cache_info().programs == 0


def test_jacobian_serially_is_the_functional_jacobian():
    x = np.array([0.3, -0.7, 1.1])
    expected = functional_jacobian(wide, anb.tensor(x), vectorize=True).numpy()
    assert np.allclose(jacobian(wide, x), expected, rtol=1e-14, atol=0)
    for rows_per_task in (1, 7, 500):
        assert np.array_equal(jacobian(wide, x, rows_per_task=rows_per_task), jacobian(wide, x))
    assert jacobian(lambda x: anb.sum(x * x), anb.tensor(x) * 2).shape == (3,)


def test_bad_arguments():
    with pytest.raises(TypeError, match="tuple of fn's arguments"):
        map_grad(energy, [np.ones(2)])
    with pytest.raises(TypeError, match="wrt must be an int or a tuple of ints"):
        map_grad(energy, [(np.ones(2), 1.0)], wrt=[0])
    with pytest.raises(IndexError, match="fn gets 2 arguments"):
        map_grad(energy, [(np.ones(2), 1.0)], wrt=2)
    with pytest.raises(ValueError, match="batch_size"):
        map_grad(energy, [(np.ones(2), 1.0)], batch_size=0)
    with pytest.raises(ValueError, match="rows_per_task"):
        jacobian(wide, np.ones(3), rows_per_task=0)
    with pytest.raises(TypeError, match="must return a Tensor"):
        map_grad(lambda x: 1.0, [(np.ones(2),)])
    with pytest.raises(ValueError, match="mode"):
        warm_workers(None, wide, (np.ones(3),), mode="hessian")
    with pytest.raises(TypeError, match="example_args=\\(x,\\)"):
        warm_workers(None, wide, (np.ones(3), 1.0), mode="jacobian")
    assert warm_workers(None, wide, (np.ones(3),), mode="jacobian") is None


def test_tensors_pickle_as_data_and_requires_grad():
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    copy = pickle.loads(pickle.dumps(x))
    assert copy.is_leaf and copy.requires_grad
    assert np.array_equal(copy.numpy(), x.numpy())
    assert np.array_equal(copy.grad.numpy(), x.grad.numpy())
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        pickle.dumps(x * 2)


# -- on a 2-worker LocalCluster (marked slow: `make test-fast` leaves them out) ----------------


@pytest.mark.slow  # a LocalCluster
def test_tensors_travel_to_a_worker_and_back(client):
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    back = client.submit(identity, x).result(timeout=TIMEOUT)
    assert back.is_leaf and back.requires_grad and np.array_equal(back.numpy(), x.numpy())


@pytest.mark.slow  # a LocalCluster
def test_map_grad_on_the_cluster_is_the_serial_result(client):
    inputs = inputs_of_mixed_shapes()
    serial = map_grad(energy, inputs, wrt=(0, 1))
    assert_same(bounded(map_grad, energy, inputs, wrt=(0, 1), client=client), serial)
    assert_same(bounded(map_grad, energy, inputs, wrt=(0, 1), client=client, batch_size=1), serial)
    # A Tensor computed from others is differentiated from where it stands (detached).
    computed = [(anb.tensor(x, requires_grad=True) * 1.0, k) for x, k in inputs]
    assert_same(bounded(map_grad, energy, computed, client=client), map_grad(energy, inputs))


@pytest.mark.slow  # a LocalCluster
def test_a_compiled_function_records_once_per_signature_on_each_worker(client):
    inputs = inputs_of_mixed_shapes(16)
    serial = map_grad(energy, inputs, wrt=(0, 1))
    got = bounded(map_grad, compiled_energy, inputs, wrt=(0, 1), client=client, batch_size=1)
    assert_same(got, serial)
    shapes = len({x.shape for x, _ in inputs})
    per_worker = list(client.run(compile_traces).values())
    assert sum(map(len, per_worker)) >= 1  # the tasks' function is kept per worker
    for traces in per_worker:
        assert all(t <= shapes for t in traces)  # 16 tasks, at most 4 recordings a worker


@pytest.mark.slow  # a LocalCluster
def test_jacobian_on_the_cluster_is_the_serial_result(client):
    x = np.array([0.3, -0.7, 1.1])
    assert np.array_equal(bounded(jacobian, wide, x, client=client), jacobian(wide, x))
    assert np.array_equal(
        bounded(jacobian, wide, x, client=client, rows_per_task=7),
        jacobian(wide, x, rows_per_task=7),
    )


@pytest.mark.slow  # a LocalCluster
def test_what_cannot_be_pickled_is_refused_before_submitting(client):
    lock = threading.Lock()

    def locked_energy(x):
        with lock:
            return anb.sum(x * x)

    with pytest.raises(TypeError, match="cloudpickle") as error:
        map_grad(locked_energy, [(np.ones(2),)], client=client)
    assert "top level of a module" in str(error.value)
    assert "_thread.lock" in str(error.value)
    with pytest.raises(TypeError, match="cloudpickle"):
        jacobian(locked_energy, np.ones(2), client=client)
    computed = anb.tensor([1.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        map_grad(energy, [(np.ones(1), computed)], client=client)


@pytest.mark.slow  # a LocalCluster
def test_a_function_the_workers_cannot_import_fails_fast(client, tmp_path, monkeypatch):
    """A function pickles by name; where the workers cannot import its module, the task fails
    (with the fix in the message) instead of the worker failing to read it, and the call
    returns."""
    (tmp_path / "only_here.py").write_text(
        "import autograd_nb as anb\n\ndef square(x):\n    return anb.sum(x * x)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))  # here, not on the running workers
    monkeypatch.delitem(sys.modules, "only_here", raising=False)
    from only_here import square

    with pytest.raises(RuntimeError, match="could not unpickle fn") as error:
        bounded(map_grad, square, [(np.ones(2),)], client=client)
    assert "register_pickle_by_value" in str(error.value)
    with pytest.raises(RuntimeError, match="could not unpickle fn"):
        bounded(jacobian, square, np.ones(2), client=client)
    monkeypatch.delitem(sys.modules, "only_here")


@pytest.mark.slow  # a LocalCluster
def test_warm_workers_runs_once_per_worker_and_on_joining_workers(client, tmp_path):
    folder = str(tmp_path)
    plugin = bounded(warm_workers, client, marked_energy, (np.ones(3), folder))
    pids = set(client.run(os.getpid).values())
    assert set(os.listdir(folder)) == {str(pid) for pid in pids}
    # Registering the same warm-up again does not run it again.
    for marker in os.listdir(folder):
        os.remove(os.path.join(folder, marker))
    bounded(warm_workers, client, marked_energy, (np.ones(3), folder))
    assert os.listdir(folder) == []
    cluster = client.cluster
    cluster.scale(3)
    try:
        bounded(client.wait_for_workers, 3)
        joined = set(client.run(os.getpid).values()) - pids
        deadline = time.monotonic() + TIMEOUT
        while set(os.listdir(folder)) != {str(pid) for pid in joined}:
            assert time.monotonic() < deadline, "the joining worker was not warmed"
            time.sleep(0.05)
    finally:
        client.unregister_worker_plugin(plugin)
        cluster.scale(2)
        bounded(_wait_for_exactly, client, 2)


def _wait_for_exactly(client, n):
    while len(client.scheduler_info()["workers"]) != n:
        time.sleep(0.05)


@pytest.mark.slow  # a LocalCluster
def test_workers_filling_one_empty_cache_at_once(tmp_path):
    """Two workers compile the same kernels into one empty kernel folder and numba cache at
    once; then two fresh workers load what they wrote."""
    distributed = pytest.importorskip("distributed", reason=MISSING_EXTRA)
    kernels, numba_cache = str(tmp_path / "kernels"), str(tmp_path / "numba")
    env = {"AUTOGRAD_NB_CACHE_DIR": kernels, "NUMBA_CACHE_DIR": numba_cache}
    x = np.array([0.25, -1.5, 2.0])
    (expected,) = map_grad(energy, [(x, 2.0)])
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0", env=env
    )
    with cluster, distributed.Client(cluster, timeout=TIMEOUT) as client:
        for stage in ("fill", "load"):  # the empty folders, then fresh workers reading them
            if stage == "load":
                bounded(client.restart)
            workers = list(client.scheduler_info()["workers"])
            start_at = time.time() + 1.0
            futures = [
                client.submit(at_the_same_time, start_at, x, workers=[w], pure=False)
                for w in workers
            ]
            for result, kernel_dir, cache_dir in client.gather(futures):
                assert (kernel_dir, cache_dir) == (kernels, numba_cache)
                assert_same([result], [expected])
    written = [name for _, _, names in os.walk(kernels) for name in names]
    assert any(name.endswith(".py") for name in written)
    assert not [name for name in written if name.endswith(".tmp")]
    cached = [name for _, _, files in os.walk(numba_cache) for name in files]
    assert any(name.endswith(".nbi") for name in cached)
    assert not [name for name in cached if ".tmp." in name]


@pytest.mark.slow  # a LocalCluster
def test_a_worker_killed_mid_map_grad_changes_nothing(client, tmp_path):
    """Kill one worker process while its task runs: Dask runs the task again elsewhere, and the
    result is complete and the serial one. (Last: the cluster's worker is then restarted.)"""
    folder = str(tmp_path)
    inputs = [(x, k, folder) for x, k in inputs_of_mixed_shapes(10)]
    expected = map_grad(energy, [(x, k) for x, k, _ in inputs])
    victim = next(iter(client.run(os.getpid).values()))

    def kill_when_busy():
        deadline = time.monotonic() + TIMEOUT
        while not any(name.startswith(f"{victim}-") for name in os.listdir(folder)):
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    results = bounded(map_grad, slow_energy, inputs, client=client, batch_size=1)
    killer.join()
    assert victim not in client.run(os.getpid).values()
    assert_same(results, expected)
