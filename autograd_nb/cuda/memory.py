"""The caching pool that every device buffer of autograd_nb comes from.

``cudaMalloc`` and ``cudaFree`` are slow and ``cudaFree`` synchronises the device, so a
training step that allocated its gradient buffers afresh would wait on the driver at every
op. The pool keeps freed blocks instead, one free list per (stream, size class), and hands
them out again: after the first step of a loop, a step of the same shapes makes no driver
allocation (``autograd_nb.cuda.counters()["allocations"]`` stays put).

* **Size classes.** A request is rounded up to a multiple of 512 bytes below 1 MiB (torch's
  small pool), and above it to one of four classes per power of two (at most a quarter of a
  block unused). Blocks are never split, so a block is a driver allocation ("segment").
* **Stream-ordered reuse.** A block freed on a stream is reused only on that stream: work
  queued on one stream runs in order, so a kernel that still reads the block's old contents
  runs before the kernel of its next owner. Every launch of autograd_nb is on the default
  stream.
* **Out of memory.** When the driver refuses, the pool frees its cached blocks and retries
  once; if that fails too, it raises :class:`OutOfMemoryError` naming the size. Nothing of the
  caller's is changed by the failed call.
* :func:`memory_stats` and :func:`empty_cache` are named as in ``torch.cuda``, with torch's
  keys for what the pool tracks.

One :class:`CachingPool` holds the logic; where its memory comes from is a small *driver*
object (``allocate(nbytes) -> handle``, ``free(handle)``, ``is_out_of_memory(error)``):

* on a GPU, :mod:`._emm` installs the pool as numba-cuda's External Memory Management plugin
  (``numba.cuda.set_memory_manager``), over ``cuMemAlloc``/``cuMemFree``, so that numba's own
  ``device_array``/``to_device`` take from it too; a manager the user installed first is kept
  (then that manager owns the memory, and every request counts as an allocation);
* under numba's simulator, where no memory manager is consulted, :mod:`._device` takes host
  buffers from the same pool (:func:`simulated_array`), so the tests see the same counts.

This module imports nothing from numba.
"""

import contextlib
import threading
import weakref

import numpy as np

from . import _counters

#: Requests below this many bytes are torch's "small pool" (in :func:`memory_stats`).
SMALL_LIMIT = 1 << 20
#: The smallest block, and the rounding step of small requests (torch's).
MIN_BLOCK = 512


class OutOfMemoryError(RuntimeError):
    """The device has no memory left for a block, even after the pool emptied its cache
    (as ``torch.cuda.OutOfMemoryError``, a RuntimeError)."""


def size_class(nbytes):
    """The block size that serves a request of ``nbytes`` bytes.

    Examples
    --------
    >>> size_class(1), size_class(513), size_class(1 << 20), size_class((1 << 20) + 1)
    (512, 1024, 1048576, 1310720)
    """
    nbytes = int(nbytes)
    if nbytes <= MIN_BLOCK:
        return MIN_BLOCK
    if nbytes < SMALL_LIMIT:
        return -(-nbytes // MIN_BLOCK) * MIN_BLOCK
    step = 1 << (nbytes.bit_length() - 3)  # four classes per power of two
    return -(-nbytes // step) * step


def format_bytes(nbytes):
    """``nbytes`` for a message: ``'1.50 GiB (1610612736 bytes)'``."""
    value, unit = float(nbytes), "bytes"
    for name in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, name
    return f"{nbytes} bytes" if unit == "bytes" else f"{value:.2f} {unit} ({nbytes} bytes)"


class Block:
    """A driver allocation of ``size`` bytes (``handle``: what the driver returned), the
    stream it was last used on, and the bytes its current owner asked for."""

    __slots__ = ("handle", "size", "stream", "requested", "generation")

    def __init__(self, handle, size, stream, generation):
        self.handle = handle
        self.size = size
        self.stream = stream
        self.requested = 0
        self.generation = generation


_POOLS = ("all", "small_pool", "large_pool")


class _Stat:
    """One of torch's statistics: ``current``, ``peak``, ``allocated`` (total increase) and
    ``freed`` (total decrease), for all blocks and for the small and large pools (lists
    indexed by ``_POOLS``: this runs at every allocation and release)."""

    __slots__ = ("current", "peak", "allocated", "freed")

    def __init__(self):
        self.current, self.peak, self.allocated, self.freed = [0] * 3, [0] * 3, [0] * 3, [0] * 3

    def change(self, amount, pool):
        current = self.current
        for i in (0, pool):
            current[i] += amount
            if amount > 0:
                self.allocated[i] += amount
                if current[i] > self.peak[i]:
                    self.peak[i] = current[i]
            else:
                self.freed[i] -= amount

    def reset_peak(self):
        self.peak[:] = self.current

    def items(self):
        for i, pool in enumerate(_POOLS):
            yield f"{pool}.current", self.current[i]
            yield f"{pool}.peak", self.peak[i]
            yield f"{pool}.allocated", self.allocated[i]
            yield f"{pool}.freed", self.freed[i]


def _pool_of(block):
    return 1 if block.size < SMALL_LIMIT else 2


#: torch's names of the statistics :class:`CachingPool` tracks; ``allocation`` and
#: ``active`` (blocks handed out, and their bytes) are one here, since the pool never splits
#: a block or holds one back for another stream's events.
STAT_NAMES = ("allocation", "allocated_bytes", "requested_bytes", "segment", "reserved_bytes")
SAME_AS = {"active": "allocation", "active_bytes": "allocated_bytes"}
EVENT_NAMES = ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")


class CachingPool:
    """Blocks from ``driver``, cached on free lists by (stream, size class).

    Parameters
    ----------
    driver : object
        ``allocate(nbytes)`` returns a handle (raising on failure), ``free(handle)`` gives it
        back, ``is_out_of_memory(error)`` says whether an error of ``allocate`` means the
        device is full.
    """

    def __init__(self, driver):
        self.driver = driver
        self._free_lists = {}
        self._lock = threading.RLock()
        self._deferring = 0
        self._deferred = []
        self._generation = 0  # (a context reset invalidates every handle)
        self._stats = {name: _Stat() for name in STAT_NAMES}
        self._events = dict.fromkeys(EVENT_NAMES, 0)

    # -- allocation ----------------------------------------------------------------------

    def allocate(self, nbytes, stream=0):
        """A :class:`Block` of at least ``nbytes`` bytes for use on ``stream``: a cached one
        of its size class, or a new driver allocation."""
        size = size_class(nbytes)
        with self._lock:
            cached = self._free_lists.get((stream, size))
            block = cached.pop() if cached else self._new_block(size, stream)
            block.requested = int(nbytes)
            self._count_out(block, 1)
        return block

    def _new_block(self, size, stream):
        try:
            handle = self.driver.allocate(size)
        except Exception as error:
            if not self.driver.is_out_of_memory(error):
                raise
            self._events["num_alloc_retries"] += 1
            cached = self.cached_bytes()
            self.empty_cache()
            try:
                handle = self.driver.allocate(size)
            except Exception as again:
                if not self.driver.is_out_of_memory(again):
                    raise
                self._events["num_ooms"] += 1
                raise OutOfMemoryError(self._oom_message(size, cached)) from again
        self._events["num_device_alloc"] += 1
        _counters.add("allocations")
        _counters.add("bytes_allocated", size)
        block = Block(handle, size, stream, self._generation)
        pool = _pool_of(block)
        self._stats["segment"].change(1, pool)
        self._stats["reserved_bytes"].change(size, pool)
        return block

    def _oom_message(self, size, cached):
        in_use = self._stats["allocated_bytes"].current[0]
        return (
            f"CUDA out of memory: tried to allocate {format_bytes(size)} for autograd_nb "
            f"after freeing the pool's {format_bytes(cached)} of cached blocks and retrying "
            f"once; {format_bytes(in_use)} are held by live tensors. Free tensors you no "
            "longer need (del, or let them go), call autograd_nb.cuda.empty_cache(), and "
            "try again, or use smaller batches"
        )

    def _count_out(self, block, sign):
        pool = _pool_of(block)
        stats = self._stats
        stats["allocation"].change(sign, pool)
        stats["allocated_bytes"].change(sign * block.size, pool)
        stats["requested_bytes"].change(sign * block.requested, pool)

    # -- release -------------------------------------------------------------------------

    def release(self, block):
        """Give ``block`` back to its free list (held back while :meth:`defer_releases` is
        active; dropped if it outlived a :meth:`reset`)."""
        with self._lock:
            if self._deferring:
                self._deferred.append(block)
                return
            self._count_out(block, -1)
            if block.generation == self._generation:
                self._free_lists.setdefault((block.stream, block.size), []).append(block)
            else:
                self._drop(block)

    @contextlib.contextmanager
    def defer_releases(self):
        """Hold released blocks back until the outermost such context ends (numba's
        ``defer_cleanup``)."""
        with self._lock:
            self._deferring += 1
        try:
            yield
        finally:
            with self._lock:
                self._deferring -= 1
                held = []
                if not self._deferring:
                    held, self._deferred = self._deferred, []
            for block in held:
                self.release(block)

    def empty_cache(self):
        """Free every cached block back to the driver (blocks in use stay)."""
        with self._lock:
            lists, self._free_lists = self._free_lists, {}
            for blocks in lists.values():
                for block in blocks:
                    self.driver.free(block.handle)
                    self._events["num_device_free"] += 1
                    _counters.add("frees")
                    _counters.add("synchronizations")
                    self._drop(block)

    def reset(self):
        """Forget every block without freeing it (the driver context that owned them is
        gone); blocks released later are dropped."""
        with self._lock:
            for blocks in self._free_lists.values():
                for block in blocks:
                    self._drop(block)
            self._free_lists = {}
            self._generation += 1

    def _drop(self, block):
        # (a block no longer held: out of the reserved statistics)
        pool = _pool_of(block)
        self._stats["segment"].change(-1, pool)
        self._stats["reserved_bytes"].change(-block.size, pool)

    # -- statistics ----------------------------------------------------------------------

    def cached_bytes(self):
        """Bytes held on the free lists."""
        with self._lock:
            # (a copy: a collected array's finalizer may release a block meanwhile)
            lists = [list(blocks) for blocks in list(self._free_lists.values())]
        return sum(block.size for blocks in lists for block in blocks)

    def stats(self):
        """The statistics, flat, with torch's keys (see :func:`memory_stats`)."""
        with self._lock:
            result = dict(self._events)
            for name, stat in self._stats.items():
                for key, value in stat.items():
                    result[f"{name}.{key}"] = value
            for name, same in SAME_AS.items():
                for key, value in self._stats[same].items():
                    result[f"{name}.{key}"] = value
        return dict(sorted(result.items()))

    def reset_peak_stats(self):
        """Set every ``peak`` to its ``current`` value."""
        with self._lock:
            for stat in self._stats.values():
                stat.reset_peak()


# -- the simulator's driver and arrays -----------------------------------------------------


class HostDriver:
    """The simulator's "device" memory: host buffers (a failed ``np.empty`` is out of
    memory)."""

    @staticmethod
    def allocate(nbytes):
        return np.empty(nbytes, dtype=np.uint8)

    @staticmethod
    def free(handle):
        pass  # (the buffer goes with its last reference)

    @staticmethod
    def is_out_of_memory(error):
        return isinstance(error, MemoryError)


class _Lease(np.ndarray):
    """The view of a block that one simulated device array holds. Its type stops NumPy from
    collapsing the views' ``base`` chains past it, so it lives exactly as long as some view
    of the array does, and its finalizer gives the block back."""


def simulated_array(pool, shape, dtype):
    """A C-contiguous host array of ``shape``/``dtype`` over a block of ``pool``; the block
    returns to the pool when the array and every view of it are gone."""
    dtype = np.dtype(dtype)
    count = 1
    for n in shape:
        count *= int(n)
    nbytes = count * dtype.itemsize
    block = pool.allocate(nbytes)
    lease = block.handle[:nbytes].view(_Lease)
    weakref.finalize(lease, pool.release, block).atexit = False
    return lease.view(dtype).reshape(tuple(shape)).view(np.ndarray)


# -- the process's pool --------------------------------------------------------------------

_pool = None
_pool_lock = threading.Lock()


def pool(make_driver=None):
    """The process's :class:`CachingPool`, made on first use with ``make_driver()``'s driver
    (None before that, when no ``make_driver`` is given)."""
    global _pool
    if _pool is None and make_driver is not None:
        with _pool_lock:
            if _pool is None:
                _pool = CachingPool(make_driver())
    return _pool


def memory_stats():
    """The pool's statistics, with ``torch.cuda.memory_stats``'s keys.

    ``allocation``, ``active``, ``allocated_bytes``, ``active_bytes``, ``requested_bytes``
    (blocks handed out, their bytes, and the bytes asked for), ``segment`` and
    ``reserved_bytes`` (driver allocations held, cached ones included), each as
    ``NAME.{all,small_pool,large_pool}.{current,peak,allocated,freed}``, and the events
    ``num_alloc_retries``, ``num_ooms``, ``num_device_alloc``, ``num_device_free``. Every
    value is 0 before the first device buffer (and when a memory manager the user installed
    serves numba instead of the pool).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> stats = anb.cuda.memory_stats()
    >>> stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"] >= 0
    True
    """
    current = _pool if _pool is not None else CachingPool(HostDriver)
    return current.stats()


def empty_cache():
    """Free the pool's cached blocks back to the driver, as ``torch.cuda.empty_cache``
    (memory held by live tensors stays)."""
    if _pool is not None:
        _pool.empty_cache()


def memory_allocated():
    """Bytes of device memory held by live buffers (``torch.cuda.memory_allocated``)."""
    return memory_stats()["allocated_bytes.all.current"]


def memory_reserved():
    """Bytes of device memory the pool holds, cached blocks included
    (``torch.cuda.memory_reserved``)."""
    return memory_stats()["reserved_bytes.all.current"]


def reset_peak_memory_stats():
    """Set the ``peak`` statistics to their current values."""
    if _pool is not None:
        _pool.reset_peak_stats()
