"""The caching pool (``autograd_nb.cuda.memory``) and the device counters.

The pool's logic is tested over a fake driver (no numba); then under numba's simulator, where
autograd_nb's device arrays come from the same pool, through ``counters()`` and
``memory_stats()``; and the EMM plugin that serves numba-cuda on a GPU in fresh processes off
the simulator (numba-cuda's driver module imports without a GPU; nothing is allocated).
"""

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.cuda import _device, memory
from autograd_nb.cuda.memory import CachingPool, OutOfMemoryError, size_class

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FakeOutOfMemory(Exception):
    pass


class FakeDriver:
    """Hands out integer handles up to ``capacity`` bytes; logs every call."""

    def __init__(self, capacity=1 << 30):
        self.capacity = capacity
        self.used = 0
        self.next_handle = 1
        self.calls = []
        self.sizes = {}

    def allocate(self, nbytes):
        self.calls.append(("allocate", nbytes))
        if self.used + nbytes > self.capacity:
            raise FakeOutOfMemory(nbytes)
        self.used += nbytes
        handle, self.next_handle = self.next_handle, self.next_handle + 1
        self.sizes[handle] = nbytes
        return handle

    def free(self, handle):
        self.calls.append(("free", handle))
        self.used -= self.sizes.pop(handle)

    @staticmethod
    def is_out_of_memory(error):
        return isinstance(error, FakeOutOfMemory)


# -- size classes ------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=1 << 40))
def test_a_size_class_holds_the_request_and_wastes_at_most_a_quarter(nbytes):
    size = size_class(nbytes)
    assert size >= max(nbytes, memory.MIN_BLOCK)
    assert size % memory.MIN_BLOCK == 0
    if nbytes >= memory.SMALL_LIMIT:
        assert size - nbytes <= nbytes // 4
    else:
        assert size - max(nbytes, 1) < memory.MIN_BLOCK
    assert size_class(size) == size  # (a class is its own class: blocks are reused)
    assert size_class(nbytes + 1) >= size


# -- the pool over a fake driver ---------------------------------------------------------------


def test_a_released_block_is_reused_for_its_size_class_only():
    driver = FakeDriver()
    pool = CachingPool(driver)
    first = pool.allocate(1000)
    pool.release(first)
    again = pool.allocate(600)  # (the same 1024-byte class)
    assert again is first and again.requested == 600
    other = pool.allocate(2000)
    assert other is not first
    assert [call for call in driver.calls if call[0] == "allocate"] == [
        ("allocate", 1024), ("allocate", 2048)]


def test_blocks_are_reused_on_their_own_stream():
    driver = FakeDriver()
    pool = CachingPool(driver)
    block = pool.allocate(100, stream=1)
    pool.release(block)
    assert pool.allocate(100, stream=2) is not block
    assert pool.allocate(100, stream=1) is block


def test_out_of_memory_empties_the_cache_and_retries_once():
    driver = FakeDriver(capacity=4096)
    pool = CachingPool(driver)
    cached = pool.allocate(3000)
    pool.release(cached)
    block = pool.allocate(2000)  # (3072 cached + 2048 > 4096: the retry frees the cache)
    assert block.size == 2048
    stats = pool.stats()
    assert stats["num_alloc_retries"] == 1 and stats["num_ooms"] == 0
    assert stats["num_device_free"] == 1
    assert stats["reserved_bytes.all.current"] == 2048
    assert driver.calls == [("allocate", 3072), ("allocate", 2048), ("free", 1),
                            ("allocate", 2048)]


def test_out_of_memory_after_the_retry_names_the_size_and_changes_nothing():
    driver = FakeDriver(capacity=4096)
    pool = CachingPool(driver)
    held = pool.allocate(3000)
    before = pool.stats()
    message = r"tried to allocate 2.00 KiB \(2048 bytes\)"
    with pytest.raises(OutOfMemoryError, match=message) as raised:
        pool.allocate(2000)
    assert isinstance(raised.value, RuntimeError)
    assert "(3072 bytes) are held by live tensors" in str(raised.value)
    after = pool.stats()
    assert after["num_ooms"] == 1 and after["num_alloc_retries"] == 1
    for key in ("allocated_bytes.all.current", "reserved_bytes.all.current",
                "allocation.all.current", "segment.all.current"):
        assert after[key] == before[key]
    pool.release(held)
    assert pool.allocate(2000).size == 2048  # (the cache is emptied and retried again)


def test_other_driver_errors_are_not_retried():
    class Broken(FakeDriver):
        def allocate(self, nbytes):
            raise ValueError("broken driver")

    pool = CachingPool(Broken())
    with pytest.raises(ValueError, match="broken driver"):
        pool.allocate(10)
    assert pool.stats()["num_alloc_retries"] == 0


def test_empty_cache_frees_only_cached_blocks():
    driver = FakeDriver()
    pool = CachingPool(driver)
    kept, cached = pool.allocate(100), pool.allocate(5000)
    pool.release(cached)
    pool.empty_cache()
    assert driver.calls[-1] == ("free", cached.handle)
    assert driver.used == kept.size
    assert pool.cached_bytes() == 0
    assert pool.allocate(100) is not kept


def test_stats_use_torchs_keys_and_split_the_small_and_large_pools():
    pool = CachingPool(FakeDriver())
    small, large = pool.allocate(100), pool.allocate(3 << 20)
    stats = pool.stats()
    assert stats["allocation.all.current"] == 2
    assert stats["allocated_bytes.all.current"] == 512 + (3 << 20)
    assert stats["allocated_bytes.small_pool.current"] == 512
    assert stats["allocated_bytes.large_pool.current"] == 3 << 20
    assert stats["requested_bytes.all.current"] == 100 + (3 << 20)
    assert stats["segment.all.current"] == 2 and stats["num_device_alloc"] == 2
    pool.release(large)
    stats = pool.stats()
    assert stats["allocated_bytes.all.current"] == 512
    assert stats["allocated_bytes.all.peak"] == 512 + (3 << 20)
    assert stats["allocated_bytes.all.freed"] == 3 << 20
    assert stats["reserved_bytes.all.current"] == 512 + (3 << 20)  # (cached, still held)
    assert stats["active.all.current"] == stats["allocation.all.current"] == 1
    pool.reset_peak_stats()
    assert pool.stats()["allocated_bytes.all.peak"] == 512
    pool.release(small)


def test_releases_wait_for_the_end_of_a_deferral():
    pool = CachingPool(FakeDriver())
    block = pool.allocate(100)
    with pool.defer_releases():
        with pool.defer_releases():
            pool.release(block)
        assert pool.allocate(100) is not block
    assert pool.allocate(100) is block


def test_blocks_of_a_reset_context_are_dropped():
    driver = FakeDriver()
    pool = CachingPool(driver)
    live, cached = pool.allocate(100), pool.allocate(100)
    pool.release(cached)
    pool.reset()
    pool.release(live)
    assert pool.cached_bytes() == 0 and pool.stats()["segment.all.current"] == 0
    assert ("free", live.handle) not in driver.calls  # (the context freed them)


# -- the simulator's arrays from the pool ------------------------------------------------------


@pytest.fixture
def small_launches(monkeypatch):
    monkeypatch.setattr(config, "CUDA_FUSION_MIN_ELEMENTS", 4)
    monkeypatch.setattr(config, "CUDA_THREADS_PER_BLOCK", 8)


def test_a_view_keeps_its_block_from_the_pool():
    gc.collect()
    anb.cuda.reset_counters()
    array = _device.empty((4, 8), np.float64)
    view = array.reshape(32)[8:]
    del array
    other = _device.empty((4, 8), np.float64)  # (must not be the block the view reads)
    view.copy_to_device(np.arange(24.0))
    _device.assign(other, _device.to_device(np.full((4, 8), -1.0)))
    np.testing.assert_array_equal(view.copy_to_host(), np.arange(24.0))
    start = _device.interface(view)["data"][0]
    other_start = _device.interface(other)["data"][0]
    assert other_start + 32 * 8 <= start - 8 * 8 or start + 24 * 8 <= other_start
    del view, other
    anb.cuda.reset_counters()
    again = _device.empty((4, 8), np.float64)  # (a released block of the class: no driver)
    assert anb.cuda.counters()["allocations"] == 0
    del again


def test_counters_count_launches_allocations_and_copies():
    gc.collect()
    anb.cuda.reset_counters()
    assert set(anb.cuda.counters().values()) == {0}
    x = anb.tensor(np.arange(6.0), device="cuda")  # one host-to-device copy
    y = anb.exp(x)  # one launch
    counts = anb.cuda.counters()
    assert counts["launches"] == 1 and counts["synchronizations"] == 1
    y.cpu()
    anb.cuda.synchronize()
    assert anb.cuda.counters()["synchronizations"] == 3
    anb.cuda.reset_counters()
    assert set(anb.cuda.counters().values()) == {0}


#: 20 elementwise ops, each VJP reading a saved value: (op, its NumPy twin, its derivative)
CHAIN = [
    (anb.sin, np.sin, np.cos),
    (anb.tanh, np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    (anb.cos, np.cos, lambda x: -np.sin(x)),
    (anb.sigmoid, lambda x: 1 / (1 + np.exp(-x)), lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2),
] * 5


def _chain(x):
    for op, _, _ in CHAIN:
        x = op(x)
    return x


def _chain_vjp(x, v):
    """The chain's VJP in NumPy: ``v`` times the derivatives at each op's input."""
    derivative = np.ones_like(x)
    for _, forward, slope in CHAIN:
        derivative *= slope(x)
        x = forward(x)
    return v * derivative


def test_a_steady_state_step_of_a_20_op_chain_makes_no_allocation(small_launches):
    x = anb.tensor(np.linspace(-1.0, 1.0, 16), device="cuda", requires_grad=True)
    v = anb.tensor(np.linspace(0.5, 1.5, 16), device="cuda")
    steps = []
    for _ in range(3):
        y = _chain(x)
        anb.cuda.reset_counters()
        (g,) = anb.grad(y, x, grad_outputs=v)
        backward = anb.cuda.counters()
        steps.append((backward, g.cpu().numpy()))
        del y, g
    reserved = anb.cuda.memory_stats()["reserved_bytes.all.current"]
    # one fused kernel per chain of at most FUSION_MAX_NODES nodes, storing into the fresh
    # buffer of its target (no zero fill), the seed read in place: nothing else
    groups = -(-20 // config.FUSION_MAX_NODES)
    assert steps[0][0]["launches"] == groups
    for backward, _ in steps[1:]:
        assert backward["allocations"] == 0 and backward["bytes_allocated"] == 0
        assert backward["synchronizations"] == 0
        assert backward["launches"] == steps[0][0]["launches"]
    # the whole step (forward too) after warm-up
    anb.cuda.reset_counters()
    y = _chain(x)
    (g,) = anb.grad(y, x, grad_outputs=v)
    assert anb.cuda.counters()["allocations"] == 0
    assert anb.cuda.memory_stats()["reserved_bytes.all.current"] == reserved
    expected = _chain_vjp(np.linspace(-1.0, 1.0, 16), np.linspace(0.5, 1.5, 16))
    np.testing.assert_allclose(g.cpu().numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(steps[-1][1], expected, rtol=1e-12)


def test_empty_cache_gives_cached_blocks_back():
    x = anb.ones((7, 5), device="cuda")
    del x
    gc.collect()
    stats = anb.cuda.memory_stats()
    assert stats["reserved_bytes.all.current"] > stats["allocated_bytes.all.current"]
    anb.cuda.reset_counters()
    anb.cuda.empty_cache()
    stats = anb.cuda.memory_stats()
    assert stats["reserved_bytes.all.current"] == stats["allocated_bytes.all.current"]
    assert anb.cuda.counters()["frees"] > 0
    assert anb.cuda.memory_reserved() == anb.cuda.memory_allocated()


def test_out_of_memory_in_backward_leaves_the_graph_usable(monkeypatch):
    x = anb.tensor(np.linspace(-1.0, 1.0, 6), device="cuda", requires_grad=True)
    y = anb.sum(anb.exp(x) * x)
    pool = memory.pool()

    class Full(memory.HostDriver):
        @staticmethod
        def allocate(nbytes):
            raise MemoryError

    anb.cuda.empty_cache()  # (no cached block left: backward's buffers need the driver)
    monkeypatch.setattr(pool, "driver", Full)
    before = pool.stats()["num_ooms"]
    with pytest.raises(OutOfMemoryError, match="tried to allocate 512 bytes"):
        y.backward()
    assert x.grad is None
    assert pool.stats()["num_ooms"] == before + 1
    monkeypatch.setattr(pool, "driver", memory.HostDriver)
    anb.cuda.empty_cache()
    y.backward()
    expected = np.exp(np.linspace(-1.0, 1.0, 6)) * (1 + np.linspace(-1.0, 1.0, 6))
    np.testing.assert_allclose(x.grad.cpu().numpy(), expected, rtol=1e-12)


# -- the EMM plugin (a GPU's path), in fresh processes off the simulator -----------------------


def _off_the_simulator(source):
    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=ROOT)
    environment.pop("NUMBA_CUDA_MEMORY_MANAGER", None)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_emm_plugin_serves_numba_from_the_pool():
    out = _off_the_simulator("""
        import gc, weakref
        from numba.cuda.cudadrv import driver
        from autograd_nb.cuda import _emm, memory

        class FakeDriver:
            handles = iter(range(4096, 1 << 20, 4096))
            @staticmethod
            def allocate(nbytes): return next(FakeDriver.handles)
            @staticmethod
            def free(handle): pass
            @staticmethod
            def is_out_of_memory(error): return False

        class Context:
            pass

        assert _emm.install() and _emm.installed()
        assert driver._memory_manager is _emm.PoolMemoryManager
        memory._pool = memory.CachingPool(FakeDriver)
        context = Context()
        manager = _emm.PoolMemoryManager(context=context)
        pointer = manager.memalloc(3000)
        first = pointer.device_pointer_value
        assert pointer.size == 3000
        del pointer
        gc.collect()
        again = manager.memalloc(2900)
        stats = memory.memory_stats()
        print(first == again.device_pointer_value, stats["num_device_alloc"],
              stats["allocated_bytes.all.current"])
        codes = driver.binding.CUresult
        full = driver.CudaAPIError(codes.CUDA_ERROR_OUT_OF_MEMORY, "out of memory")
        other = driver.CudaAPIError(codes.CUDA_ERROR_INVALID_VALUE, "invalid value")
        print(_emm.DeviceDriver.is_out_of_memory(full),
              _emm.DeviceDriver.is_out_of_memory(other))
    """)
    assert out.split() == ["True", "1", "3072", "True", "False"]


def test_a_memory_manager_the_user_installed_is_kept():
    out = _off_the_simulator("""
        from numba import cuda
        from numba.cuda.cudadrv import driver

        class Theirs(driver.NumbaCUDAMemoryManager):
            pass

        cuda.set_memory_manager(Theirs)
        from autograd_nb.cuda import _emm

        print(_emm.install(), driver._memory_manager is Theirs)
    """)
    assert out.split() == ["False", "True"]
