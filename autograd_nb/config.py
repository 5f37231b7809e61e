"""Tunables of autograd_nb, in one place so tests can patch them.

Every value here may be changed at run time (``autograd_nb.config.NAME = ...``); the code reads
the attribute when it needs it.
"""

import logging
import os

#: Root of the kernel cache (:mod:`autograd_nb.cache`): each generation of the code (package
#: version and sources, numba, llvmlite, NumPy and Python versions) has its own folder in it,
#: holding the generated kernel modules and numba's cache of autograd_nb's functions (which
#: goes under ``$NUMBA_CACHE_DIR/autograd_nb`` instead where that is set). Override with the
#: ``AUTOGRAD_NB_CACHE_DIR`` environment variable, before the import: numba places the cache
#: of the package's own functions when they are made.
KERNEL_DIR = os.environ.get(
    "AUTOGRAD_NB_CACHE_DIR",
    os.path.join(os.path.expanduser("~"), ".cache", "autograd_nb", "kernels"),
)
#: Generations of the kernel cache that no process used for this many seconds are removed
#: (the current one never): a process of another version may still run on its own.
CACHE_PRUNE_AFTER = 24 * 3600
#: A compilation of one of autograd_nb's functions that takes longer than this many seconds
#: is logged, once per function and dtypes, at INFO on the ``autograd_nb`` logger.
COMPILE_LOG_SECONDS = 1.0

#: Untrack Tensors and recorded nodes from Python's cyclic garbage collector at the start of
#: each collection (:mod:`autograd_nb.collector`): a long graph then no longer makes the
#: collector scan the whole heap again and again during its forward pass.
UNTRACK_GRAPHS = True

#: CUDA threads per block for one-dimensional launches (tests under the simulator patch it
#: smaller: each simulated thread is a Python thread).
CUDA_THREADS_PER_BLOCK = 256
#: Side of the square shared-memory tiles of the CUDA matmul kernel.
CUDA_MATMUL_TILE = 16
#: The GPU backward fuses elementwise VJP chains from this many elements: a fused chain saves
#: kernel launches (several microseconds each) as well as memory traffic, so it pays off on
#: smaller buffers than on the CPU.
CUDA_FUSION_MIN_ELEMENTS = 256

#: The compiled backward fuses chains of elementwise VJPs over buffers of at least this many
#: elements into one generated loop (``engine.fusion``). Smaller buffers run op by op: their
#: cost is the call (~40 ns in the executor), and each distinct chain is a kernel to compile.
FUSION_MIN_ELEMENTS = 4096

#: Which kernel does the CPU's float matrix products (``_bmm``'s forward, its VJPs, batched or
#: not, and the compiled executor's): ``"blas"`` (SciPy's BLAS), ``"own"`` (``ops._gemm``'s
#: register-tiled AVX-512 kernel), or ``"auto"``: own where numba compiles for AVX-512 and
#: SciPy's OpenBLAS runs kernels without it (``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 CPU,
#: say), else BLAS. Products narrower than one tile go to BLAS either way. Read per product,
#: except by a cached backward plan, which keeps the choice it was made with. Override with
#: the ``AUTOGRAD_NB_GEMM`` environment variable.
GEMM_KERNEL = os.environ.get("AUTOGRAD_NB_GEMM", "auto")

#: Batched VJPs with fewer elements than this (batch x elements) run row by row on one thread:
#: starting a parallel region costs more than the work (measured here: ~20 ms per prange
#: launch under OpenMP's spinning wait policy on a loaded 2-core machine).
PARALLEL_MIN_ELEMENTS = 1 << 15

#: Set ``OMP_WAIT_POLICY=PASSIVE`` and ``GOMP_SPINCOUNT=3000`` at import, unless the user set
#: either or turned this off with ``AUTOGRAD_NB_OMP_DEFAULTS=0``: numba's idle OpenMP workers
#: then spin briefly (bridging one step's parallel regions) and sleep instead of holding the
#: cores BLAS needs (docs/benchmarking.rst, "OpenMP wait policy"; docs/batched.md). They take
#: effect only if OpenMP is not loaded yet in this process.
OMP_DEFAULTS = os.environ.get("AUTOGRAD_NB_OMP_DEFAULTS", "1") != "0"
OMP_WAIT_SETTINGS = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "3000"}


def _set_omp_defaults():
    if not OMP_DEFAULTS or "OMP_WAIT_POLICY" in os.environ:
        return  # the user's own policy: no spin is added either
    for name, value in OMP_WAIT_SETTINGS.items():
        if name not in os.environ:
            os.environ[name] = value
            logging.getLogger(__name__).debug("set %s=%s for numba's OpenMP threads", name, value)


_set_omp_defaults()


def cache_info():
    """The kernel cache's folders, their size, and the compilations of this process so far.

    Returns
    -------
    autograd_nb.cache.CacheInfo
        ``generation``, ``folder`` (the generated kernel modules), ``numba_folder``,
        ``size_bytes`` and ``files`` (of both folders), ``other_generations`` (older ones
        not pruned yet), ``compiled`` and ``compile_seconds`` (autograd_nb's functions numba
        compiled in this process), ``loaded`` (those it loaded from its cache),
        ``in_memory`` (kernel modules run from memory because the cache could not hold
        them) and ``problems`` (the cache problems met; the first one was a warning).

    Examples
    --------
    >>> import autograd_nb as anb
    >>> info = anb.config.cache_info()
    >>> info.compiled >= 0 and info.folder.startswith(anb.config.KERNEL_DIR)
    True
    """
    from . import cache

    return cache.cache_info()


# Last: numba must use autograd_nb's cache locator before the package's first ``cache=True``
# function is made, and this module is the package's first import.
from . import cache as _cache  # noqa: E402,F401


def capabilities():
    """Which fast paths that read memory by address run here, and why not where they do not
    (:func:`autograd_nb._cpython.capabilities`)."""
    from . import _cpython

    return _cpython.capabilities()
