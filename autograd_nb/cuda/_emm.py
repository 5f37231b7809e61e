"""The caching pool of :mod:`.memory` as numba-cuda's External Memory Management plugin.

numba-cuda asks its memory manager for every device allocation (``device_array``,
``to_device``, the arrays a kernel launch copies over): installed with
``numba.cuda.set_memory_manager``, :class:`PoolMemoryManager` serves them from the pool, over
``cuMemAlloc``/``cuMemFree`` (:class:`DeviceDriver`). numba reads the manager when it creates
a CUDA context, so :func:`install` runs when autograd_nb first imports ``numba.cuda``.

A manager chosen before (``set_memory_manager`` called by the user or a library such as RMM,
or the ``NUMBA_CUDA_MEMORY_MANAGER`` variable) is kept: :func:`install` changes nothing.

This module imports numba-cuda's driver, which exists only off the simulator.
"""

import contextlib
import weakref

from numba import cuda
from numba.cuda.core import config as numba_config
from numba.cuda.cudadrv import driver as numba_driver

from . import memory


class DeviceDriver:
    """The pool's driver on a GPU: ``cuMemAlloc``/``cuMemFree`` of the current context."""

    @staticmethod
    def allocate(nbytes):
        return numba_driver.driver.cuMemAlloc(nbytes)

    @staticmethod
    def free(handle):
        numba_driver.driver.cuMemFree(handle)

    @staticmethod
    def is_out_of_memory(error):
        out_of_memory = numba_driver.binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY
        return isinstance(error, numba_driver.CudaAPIError) and error.code == out_of_memory


def process_pool():
    """The process's pool, on the device's driver."""
    return memory.pool(DeviceDriver)


class PoolMemoryManager(numba_driver.GetIpcHandleMixin, cuda.HostOnlyCUDAMemoryManager):
    """numba-cuda's EMM plugin interface (version 1) over :func:`process_pool`; pinned and
    mapped host memory stay numba's (``HostOnlyCUDAMemoryManager``)."""

    def initialize(self):
        # (as numba's own manager: the pending host deallocations' capacity)
        deallocations = self.deallocations
        if deallocations.memory_capacity == numba_driver._SizeNotSet:
            deallocations.memory_capacity = self.get_memory_info().total

    def memalloc(self, size):
        pool = process_pool()
        block = pool.allocate(size)
        return cuda.MemoryPointer(weakref.proxy(self.context), block.handle, size,
                                  finalizer=_releaser(pool, block))

    def get_memory_info(self):
        free, total = numba_driver.driver.cuMemGetInfo()
        return cuda.MemoryInfo(free=free, total=total)

    def reset(self):
        super().reset()
        process_pool().reset()

    @contextlib.contextmanager
    def defer_cleanup(self):
        with super().defer_cleanup(), process_pool().defer_releases():
            yield

    @property
    def interface_version(self):
        return 1


def _releaser(pool, block):
    def release():
        pool.release(block)

    return release


def installed():
    """Whether numba-cuda's memory manager is the pool."""
    return numba_driver._memory_manager is PoolMemoryManager


def install():
    """Make the pool numba-cuda's memory manager, unless one was chosen already (numba
    exposes no getter: its module attribute ``_memory_manager`` is set by
    ``set_memory_manager`` and when it makes a context). Returns :func:`installed`."""
    chosen = numba_driver._memory_manager is not None
    if not chosen and numba_config.CUDA_MEMORY_MANAGER == "default":
        cuda.set_memory_manager(PoolMemoryManager)
    return installed()
