"""Tunables of autograd_nb, in one place so tests can patch them.

Every value here may be changed at run time (``autograd_nb.config.NAME = ...``); the code reads
the attribute when it needs it.
"""

import logging
import os

#: Folder where generated kernel modules (and, beside them, numba's on-disk cache) are written.
#: Override with the ``AUTOGRAD_NB_CACHE_DIR`` environment variable.
KERNEL_DIR = os.environ.get(
    "AUTOGRAD_NB_CACHE_DIR",
    os.path.join(os.path.expanduser("~"), ".cache", "autograd_nb", "kernels"),
)

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
