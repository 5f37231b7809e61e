"""Whether this process may start a parallel region (a numba ``prange``): the one fork guard.

GNU OpenMP, numba's ``omp`` threading layer (the one it picks on Linux where TBB is not
installed), is not fork-safe: once a process has launched numba's threads, a child it
``fork()``s (``multiprocessing``'s default start method on Linux before Python 3.14) is
terminated as soon as it starts a parallel region ("Terminating: fork() called from a process
already using GNU OpenMP, this is unsafe."), and a ``multiprocessing`` pool of such children
hangs, its workers dying one after another. So every parallel kernel has a serial twin with the
same loop body (the same bits), and its caller asks here which one to run: in such a child,
the twin. numba's ``tbb`` layer is fork-safe (the child starts threads of its own), so a child
of a parent under it keeps its parallel kernels. See docs/batched.md.
"""

import os

import numba

from .. import config

#: numba threading layers after which a forked child may still start parallel regions.
#: (TBB against GNU OpenMP's serial twins, measured: docs/benchmarking.rst.)
FORK_SAFE_LAYERS = ("tbb",)

#: Set in a child forked from a process whose numba threads had started under a layer not in
#: ``FORK_SAFE_LAYERS`` (and inherited by its own children).
_forked_with_threads = False


def threads_started():
    """Whether numba's threads have started in this process (numba starts them for its first
    parallel kernel); False in a child forked after they started under a layer that is not
    fork-safe."""
    return not _forked_with_threads and _layer() is not None


def parallel_allowed():
    """Whether this process may start a parallel region: False only in a child forked after
    its parent's numba threads started under a layer that is not fork-safe."""
    return not _forked_with_threads


def use_threads(elements):
    """Whether a loop over ``elements`` elements runs as a ``prange``: from
    ``config.PARALLEL_MIN_ELEMENTS`` on, where :func:`parallel_allowed`."""
    return elements >= config.PARALLEL_MIN_ELEMENTS and not _forked_with_threads


def _layer():
    try:
        return numba.threading_layer()
    except ValueError:  # numba's threads have not started in this process
        return None


def _after_fork_in_child():
    # The child inherits numba's state, not its threads.
    global _forked_with_threads
    if threads_started() and _layer() not in FORK_SAFE_LAYERS:
        _forked_with_threads = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
