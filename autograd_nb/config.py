"""Tunables of autograd_nb, in one place so tests can patch them.

Every value here may be changed at run time (``autograd_nb.config.NAME = ...``); the code reads
the attribute when it needs it, except where its comment says *compiled in*: numba freezes those
into machine code and its on-disk cache keeps them, so their modules read them once, at import.
Change those here, in the source: an edit of the package starts a new kernel cache generation.

Each tunable's comment says why, in a line, and names the benchmark that picked it or says that
none did; the measured numbers, with the command that reproduces them, are in
``docs/benchmarking.rst``, "How the tunables were chosen".
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

# -- CUDA ----------------------------------------------------------------------------------------

#: CUDA threads per block for one-dimensional launches (tests under the simulator patch it
#: smaller: each simulated thread is a Python thread).
CUDA_THREADS_PER_BLOCK = 256
#: Side of the square shared-memory tiles of the CUDA matmul kernel.
CUDA_MATMUL_TILE = 16
#: The GPU backward fuses elementwise VJP chains from this many elements: a fused chain saves
#: kernel launches (several microseconds each) as well as memory traffic, so it pays off on
#: smaller buffers than on the CPU.
CUDA_FUSION_MIN_ELEMENTS = 256
#: A CUDA reduction splits each row over several blocks where the rows alone would launch fewer
#: blocks than this: a whole-array sum would run on one multiprocessor (not measured) ...
CUDA_REDUCTION_SPLIT_BELOW_BLOCKS = 1024
#: ... in chunks of at least this many elements per thread of the block (not measured).
CUDA_REDUCTION_ELEMENTS_PER_THREAD = 8
#: A CUDA VJP into a broadcast input splits each input element's sum over threads, added
#: atomically, until about this many threads run (not measured).
CUDA_VJP_REDUCTION_THREADS = 1 << 16

#: The compiled backward fuses chains of elementwise VJPs over buffers of at least this many
#: elements into one generated loop (``engine.fusion``). Smaller buffers run op by op: their
#: cost is the call (``BackwardModes``), and each distinct chain is a kernel to compile.
FUSION_MIN_ELEMENTS = 4096

# -- the backward engine (autograd_nb.engine) ----------------------------------------------------

#: Run backwards in the compiled executor where it can (False: always the Python walk; tests
#: compare the two, and both give the same bits).
COMPILED_BACKWARD = True
#: Keep the executor's tables of a repeated graph structure as templates (False: plan every
#: backward afresh; tests compare the two).
CACHED_PLANS = True
#: Fuse chains of elementwise VJPs in the compiled backward (False: one VJP per instruction;
#: tests compare the two).
FUSE_BACKWARD = True
#: The same on CUDA: a chain is one generated kernel (False: one launch per VJP).
CUDA_FUSE_BACKWARD = True
#: Run the VJPs of a node's inputs that are one tensor (``outer(x, x)``) as one joint VJP
#: where the op has one (``VJPStrategy.joint``): one pass over the gradient instead of one per
#: input (False: one VJP per input; tests compare the two).
JOINT_VJPS = True
#: Replay runs of elementwise ops in ``anb.compile``'s forward as one instruction each
#: (False: one instruction per op; tests compare the two).
FUSE_REPLAY = True
#: Templates kept per key (the outputs' ops, shapes and dtypes and the request's kind), so a
#: loop alternating a few structures under one key still finds its own (a bound, not measured).
PLAN_CACHE_PER_KEY = 4
#: Keys of templates kept, least recently made dropped first.
PLAN_CACHE_MAX_KEYS = 256
#: Uncached runs of a key after which it is no longer remembered: its structure changes every
#: step, and making templates would only cost.
PLAN_CACHE_MAX_MISSES = 8
#: A fused backward chain has at most this many nodes: numba's compile time grows faster than
#: the chain (docs/benchmarking.rst, "How the tunables were chosen").
FUSION_MAX_NODES = 8
#: A batched backward runs in blocks of this many rows (at most ``BATCH_MAX_BLOCKS``, starting at
#: multiples of ``BATCH_BLOCK_ALIGN`` rows), one block per thread: asv ``jacobian_batched``
#: (docs/benchmarking.rst, "How the tunables were chosen"). Compiled in: read when the
#: executor compiles.
BATCH_BLOCK_ROWS = 64
BATCH_MAX_BLOCKS = 64
BATCH_BLOCK_ALIGN = 16

# -- CPU kernels ---------------------------------------------------------------------------------

#: Which BLAS library the CPU's float matrix products call (``_bmm``'s forward and VJPs, batched
#: or not, eager, compiled and tier 0): ``"mkl"`` (Intel MKL: the ``mkl`` extra,
#: ``pip install "autograd_nb[mkl]"``, or a conda environment's), ``"numpy"`` (the OpenBLAS
#: that NumPy's wheel bundles), ``"scipy"`` (SciPy's ``cython_blas``), or ``"auto"``: MKL where
#: it is installed and the CPU is Intel's, else NumPy's OpenBLAS where it bundles one, else
#: SciPy's. On this project's Intel machine MKL ran ``mlp_train_step``'s eight products 6%
#: faster than NumPy's OpenBLAS, which ran them 3% faster than SciPy's (docs/benchmarking.rst,
#: "Intel MKL for the products", "Which BLAS does the products"). LAPACK and numba's
#: ``np.dot`` stay on SciPy's. Read once, at import; override with the ``AUTOGRAD_NB_BLAS``
#: environment variable.
BLAS = os.environ.get("AUTOGRAD_NB_BLAS", "auto")

#: Which kernel does the CPU's float matrix products (``_bmm``'s forward, its VJPs, batched or
#: not, and the compiled executor's): ``"blas"`` (``BLAS``'s GEMM), ``"own"`` (``ops._gemm``'s
#: register-tiled AVX-512 kernel), or ``"auto"``: own where numba compiles for AVX-512 and
#: ``BLAS``'s OpenBLAS runs kernels without it (``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 CPU,
#: say), else BLAS. Products narrower than one tile go to BLAS either way. Read per product,
#: except by a cached backward plan, which keeps the choice it was made with. Override with
#: the ``AUTOGRAD_NB_GEMM`` environment variable.
GEMM_KERNEL = os.environ.get("AUTOGRAD_NB_GEMM", "auto")

#: Batched VJPs with fewer elements than this (batch x elements) run row by row on one thread:
#: starting a parallel region costs more than the work (``BatchedBackward``).
PARALLEL_MIN_ELEMENTS = 1 << 15
#: A strided elementwise VJP over a 2-D layout whose rows have at most ``SHORT_ROW`` elements,
#: ``SHORT_ROW_ELEMENTS`` in all, runs the rows innermost (``compare.py --workloads
#: ode_rollout``). Read when an op's kernels are generated, once per op and process.
SHORT_ROW = 4
SHORT_ROW_ELEMENTS = 65536
#: Forward kernels of at most this many inputs get a loop per pattern of unit and broadcast
#: innermost strides: each input doubles the branches compiled (``ShapeLinalgOps``, ``outer``).
FAST_ROW_INPUTS = 3
#: GEMMs of fewer multiply-adds (m * k * n) run as one call on one OpenBLAS thread: a parallel
#: region costs more than it saves (``compare.py --workloads jacobian_batched``). Compiled in.
GEMM_SPLIT_MIN_WORK = 1 << 21
#: Output columns per block of a split GEMM, at least: each block packs all of ``x`` again
#: (``compare.py --workloads jacobian_batched``). Compiled in.
GEMM_SPLIT_WIDTH = 128
#: Blocks per split GEMM, at most (a bound, not measured). Compiled in.
GEMM_SPLIT_MAX_BLOCKS = 16
#: Inner steps per pass of ``ops._gemm``'s kernel over ``out``: that strip of ``y`` stays near
#: the core (``AUTOGRAD_NB_GEMM=own compare.py --workloads matmul_tanh_256``). Compiled in.
GEMM_DEPTH_BLOCK = 256

# -- linear algebra ------------------------------------------------------------------------------

#: Matrix-vector products of ``MATVEC_SPLIT_MIN`` up to ``MATVEC_SPLIT_MAX`` multiply-adds run
#: in blocks of rows over numba's threads: below, a parallel region costs more than it saves;
#: above, BLAS's kernel wins (``compare.py --workloads jacobian_batched``).
MATVEC_SPLIT_MIN = 1 << 16
MATVEC_SPLIT_MAX = 1 << 19
#: Blocks per such product, at most, one per 32 rows (a bound, not measured). Compiled in.
MATVEC_MAX_BLOCKS = 16
#: Products of at most this many multiply-adds per batch entry run as loops: a BLAS call per
#: entry costs more (a timing of the kernels alone, in docs/benchmarking.rst). Compiled in.
SMALL_PRODUCT = 512
#: Orders at and below which ``_lapack.lu_inverse``'s recursions stop: ``trtri`` below the
#: first, loops below the second (``asv_bench/linalg_kernels.py``, inverse). Compiled in.
LAPACK_LEAVES = (16, 16)
#: Up to this order ``lu_inverse`` forms Cholesky's ``V V^T`` with one ``trmm``, above it with
#: ``lauum``: half the flops, a slower start (``linalg_kernels.py``, spd-inverse). Compiled in.
LAPACK_TRMM_MAX = 64
#: Columns per block of ``cholesky``'s backward, and per block of its diagonal blocks
#: (``linalg_kernels.py``, cholesky-reverse). Compiled in.
CHOLESKY_BLOCKS = (64, 16)

# -- caches of the eager path --------------------------------------------------------------------

#: Entries a per-op cache keeps before it starts over: a program that does not repeat its
#: layouts must not grow it without bound (a bound, not measured).
OP_CACHE_LIMIT = 4096
#: Bytes of identity matrices ``jacobian`` keeps between calls, for the loop that asks for the
#: same one every step (a bound, not measured).
IDENTITY_CACHE_BYTES = 1 << 24
#: Unit vectors per forward pass of ``jacobian(..., strategy="forward-mode")``: torch's
#: ``jacfwd(chunk_size=...)``, a bound on the batched tangents' memory (not measured).
FORWARD_JACOBIAN_CHUNK = 256

# -- tier 0 (autograd_nb.tiering) ----------------------------------------------------------------

#: Tier-0 calls recorded for the worker before it starts without waiting for a backward, and
#: bytes of input arrays kept at most (bounds; ``asv_bench/compile_latency.py`` shows them).
TIER0_RECORD_LIMIT = 50_000
TIER0_RECORD_BYTES = 64 << 20
#: Consecutive calls on cached kernels after which an op leaves tier 0 for good, its check off
#: the hot path (a bound, not measured).
TIER0_LEAVE_AFTER = 256
#: Elements up to which tier 0 runs a formula that calls the C library element by element
#: (``ops/_libm_numpy.py``: ``arcsin``, ``**``, ...; ~0.7 µs an element for float32, through
#: ctypes, ~0.09 µs for float64, through ``math``: docs/benchmarking.rst, "Compile latency"),
#: ~12 ms a call at most; a larger call compiles its forward kernel, or its backward walks
#: the differentiable rules.
TIER0_LIBM_ELEMENTS = {"float32": 16_384, "float64": 131_072}

# -- anb.compile's replay (autograd_nb.replay) ---------------------------------------------------

#: Elements per block of a fused forward group: its registers hold a block each, so a long
#: chain stays in the cache (8 registers of 512 float64: 32 KiB; not measured).
REPLAY_FUSION_BLOCK = 512
#: Groups without a broadcast operand fuse from this many elements: below, a group's step costs
#: more than an instruction (docs/benchmarking.rst, "Fused forward").
REPLAY_FUSION_MIN_ELEMENTS = 64
#: An op that reads a broadcast operand of rows of at least this many elements runs unfused,
#: reading it in place, instead of gathering it into a group's register (on 4,096 elements
#: gathering wins up to rows of 8: ``asv_bench/step_pieces.py``, docs/benchmarking.rst,
#: "Fused forward"); except a row repeated along the leading axes (a bias) of
#: ``REPLAY_ROW_MIN`` to ``REPLAY_ROW_MAX`` elements.
REPLAY_GATHER_ROW = 16
#: A row repeated along the leading axes (strides 0 but a last one of 1: ``h @ W + b``'s
#: ``b``) of at least this many elements fuses: the group's blocks are then its rows, and each
#: block reads the row in place. Below, a block per row costs more calls than it saves
#: (``asv_bench/step_pieces.py --rows-only``, docs/benchmarking.rst, "Fused forward").
REPLAY_ROW_MIN = 128
#: ... and at most this many (a bound on a group's register memory, not measured).
REPLAY_ROW_MAX = 16384
#: Programs a compiled function keeps, least recently used dropped first; read when
#: ``anb.compile`` wraps a function (a bound, not measured).
COMPILE_MAX_PROGRAMS = 64
#: Paths a compiled function records per signature where fn branches on traced values (one
#: program per combination of the guards' outcomes met: docs/compile.rst, "Branches as
#: guards"); a call taking yet another path makes the signature run eagerly, with a warning.
#: Read when ``anb.compile`` wraps a function (a bound, not measured: a ``while`` loop on an
#: error estimate records a path per trip count).
COMPILE_MAX_PATHS = 8

# -- autograd_nb.distributed ---------------------------------------------------------------------

#: ``jacobian``'s default ``rows_per_task`` splits the rows into this many blocks, whatever the
#: cluster, so ``client=None`` gives the same bits.
JACOBIAN_TASKS = 16
#: ... of at most this many rows: a block's batched VJP holds a gradient slot per row for every
#: intermediate (``JacobianWide``; docs/distributed.rst, "Choosing the sizes").
JACOBIAN_MAX_ROWS = 256
#: ``map_grad``'s default ``batch_size`` gives each worker thread about this many tasks: the
#: fast threads can take a slow one's share, and the per-task cost stays small (``TaskOverhead``).
MAP_GRAD_TASKS_PER_THREAD = 4

# -- numba's OpenMP threads ----------------------------------------------------------------------

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


# -- reports -------------------------------------------------------------------------------------
# Both read modules that import this one: the package's root hands them in as it is imported,
# so that this module imports nothing of autograd_nb.
_reports = {}


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
    return _reports["cache_info"]()


def capabilities():
    """Which fast paths that read memory by address run here, and why not where they do not
    (:func:`autograd_nb._capabilities`)."""
    return _reports["capabilities"]()
