"""The CUDA backend: ``device="cuda"`` tensors on numba-cuda device arrays.

Importing this package does not import ``numba.cuda``; :mod:`._device` does it on first use.
The ops run through :mod:`.dispatch`, which imports the CUDA twin that each op names
(:func:`autograd_nb.ops.registry.cuda_twin`) from its family module here (``elementwise``,
``shape``, ``indexing``, ``reduction``, ``linalg``, ``transfer``) on first use. Device buffers
come from the caching pool of :mod:`.memory`; :func:`counters` says what the backend asked of
the device.

Examples
--------
>>> import autograd_nb as anb
>>> anb.cuda.is_available() in (True, False)
True
"""

from ._counters import counters, reset_counters
from ._device import is_available, unavailable_reason
from .memory import (
    OutOfMemoryError,
    empty_cache,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_peak_memory_stats,
)


def synchronize():
    """Wait for every kernel launched so far (``torch.cuda.synchronize``); counted in
    :func:`counters` as a synchronization."""
    from . import _device

    _device.require()
    _device.synchronize()


__all__ = [
    "OutOfMemoryError",
    "counters",
    "empty_cache",
    "is_available",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_counters",
    "reset_peak_memory_stats",
    "synchronize",
    "unavailable_reason",
]
