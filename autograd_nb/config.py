"""Tunables of autograd_nb, in one place so tests can patch them.

Every value here may be changed at run time (``autograd_nb.config.NAME = ...``); the code reads
the attribute when it needs it.
"""

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

# numba's OpenMP threads spin between parallel regions by default (GNU OpenMP: ~3 ms), and on a
# machine with as many cores as threads that steals the cores BLAS (and everything else) needs.
# Measured here (2 cores): the batched 128x256 MLP Jacobian took 8.05 ms with 2 numba threads
# under the default policy, 2.17 ms with PASSIVE (1 thread: 2.16 ms); a loop of that Jacobian, a
# NumPy 256x256 product on NumPy's OpenBLAS threads and a 256x512 @ 512x256 product with its
# gradient took 11.4 to 11.7 ms under the default policy and 3.0 to 4.3 ms under PASSIVE. A
# PASSIVE thread sleeps at once, though, and waking it took 5 to 13 us per parallel region here,
# where a spinning one takes under 1 us. So we keep PASSIVE (for the Intel and LLVM OpenMP
# runtimes) and, for GNU OpenMP, whose GOMP_SPINCOUNT overrides it, a short spin: 3,000 turns (~30
# us by GNU's own estimate; it lasted 40 to 80 us here), enough to bridge the Python between the
# parallel regions of one step. Measured (2 threads against 1, the Jacobian's whole step, three
# alternations in one process each, repeated three times as the machine's load changed): 1.64x,
# 1.35x, 1.36x under PASSIVE alone; 1.73x, 1.48x, 1.52x with the spin; the mixed loop above 3.0,
# 3.8, 4.1 ms against 3.0, 3.7, 4.0 under PASSIVE alone; 10,000 turns made it 4.0 to 4.4 ms.
# Values the user set are kept (an OMP_WAIT_POLICY of the user's own: no spin is added); they only
# take effect if OpenMP was not loaded yet in this process.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ.setdefault("GOMP_SPINCOUNT", "3000")
