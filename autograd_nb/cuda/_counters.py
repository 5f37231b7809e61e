"""What the CUDA backend asked of the device since the process started (or the last reset).

Each count is taken at one choke point, so a test can read what a step cost:

* ``launches``: kernel launches (``_kernels.launch_grid``, through which every launch goes);
* ``allocations`` and ``bytes_allocated``: driver allocations (``cudaMalloc``, or under the
  simulator a new host buffer) made by the caching pool of :mod:`.memory`, and their bytes; a
  buffer served from the pool's cache is not one;
* ``frees``: driver frees (the pool's, from :func:`.memory.empty_cache` or an out-of-memory
  retry);
* ``synchronizations``: points where the host waits for the device: device-to-host and
  host-to-device copies (``_device.to_host``, ``_device.to_device``), explicit
  :func:`autograd_nb.cuda.synchronize`, and driver frees (``cudaFree`` synchronises the device).

This module imports nothing from numba: the counts can be read on a machine without
numba-cuda.
"""

import threading

NAMES = ("launches", "allocations", "bytes_allocated", "frees", "synchronizations")

#: The counts, by name (module-level so that the hot paths add with one dict update).
counts = dict.fromkeys(NAMES, 0)
_lock = threading.Lock()


def add(name, amount=1):
    """Add ``amount`` to the count ``name``."""
    with _lock:
        counts[name] += amount


def counters():
    """The counts since the process started or :func:`reset_counters` (a new dict).

    Returns
    -------
    dict
        ``launches``, ``allocations`` (driver allocations), ``bytes_allocated`` (their bytes),
        ``frees`` (driver frees) and ``synchronizations``, each an int.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> anb.cuda.reset_counters()
    >>> sorted(anb.cuda.counters())
    ['allocations', 'bytes_allocated', 'frees', 'launches', 'synchronizations']
    >>> anb.cuda.counters()["launches"]
    0
    """
    with _lock:
        return dict(counts)


def reset_counters():
    """Set every count of :func:`counters` to zero."""
    with _lock:
        for name in NAMES:
            counts[name] = 0
