"""The workloads of issues 2, 4, 6, 21 and 44: autograd_nb beside PyTorch eager, JAX (jit) and HIPS
autograd.

Each benchmark times one iteration of a workload from ``workloads.py`` (forward and backward;
for ``mlp_train_step`` also the SGD update). ``setup`` builds the seeded inputs and runs the
iteration until its time settles (``warmup.warm_up``), so compilation (numba kernels, XLA),
autograd_nb's template of the graph and its first use happen there and are never timed;
measure compilation with ``compile_latency.py`` or read the "first call" column of
``compare.py``; ``CompiledFirstCalls`` tracks the first calls of an ``anb.compile`` step
(recording, first replay) once the kernels are loaded. An engine that is not installed, or
cannot express a workload, is skipped (``NotImplementedError`` in ``setup``).
"""

import gc
import os

from .warmup import warm_up
from .workloads import WORKLOADS, compiled_first_calls, make_step, set_threads

# XLA compiles the 1,000-op scalar graph of fastest_autograd for ~30 s, and asv runs each
# benchmark in a fresh process: keep the compiled programs on disk, so it compiles once.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(os.path.expanduser("~"), ".cache", "autograd_nb", "jax"),
)


#: Every workload takes a device; its "cuda" rows skip (with autograd_nb's reason when there is
#: no GPU): issue 5's GPU workloads are ``bench_gpu.py``.
DEVICES = ["cpu", "cuda"]


def require_device(device):
    """Skip (NotImplementedError) the cuda rows, with autograd_nb's reason when it has no GPU
    here."""
    if device == "cpu":
        return
    import autograd_nb as anb

    try:
        anb.zeros(1, device=device)
    except RuntimeError as error:
        raise NotImplementedError(f"device={device!r} unavailable: {error}") from None
    raise NotImplementedError(
        f"this workload is timed on the CPU; the GPU ones (device={device!r}) are bench_gpu.py"
    )


class _WorkloadSuite:
    """Parameters: the workload's own (sizes, dtype), the engine variant, then the device."""

    workload = None
    # Setup includes the first (compiling) call: a cold numba cache or XLA takes seconds.
    timeout = 300

    def setup(self, *values):
        params = dict(zip(self.param_names, values))
        engine = params.pop("engine")
        require_device(params.pop("device"))
        self.step = make_step(self.workload, engine, **params)
        warm_up(self.step)

    def time_forward_backward(self, *values):
        self.step()

    def peakmem_forward_backward(self, *values):
        self.step()


class _WithCollector:
    """Adds ``time_forward_backward_gc_on``: the iteration with Python's cyclic garbage
    collector on. asv, like ``timeit``, turns it off while it times; a program leaves it on,
    and a workload that records thousands of small ops gives it work (full collections, which
    also scan the ~120,000 objects numba holds once the kernels are loaded)."""

    def time_forward_backward_gc_on(self, *values):
        gc.enable()
        try:
            self.step()
        finally:
            gc.disable()


def _params_of(workload):
    spec = WORKLOADS[workload]
    params = [list(values) for values in spec.params.values()] + [spec.variants, DEVICES]
    return params, list(spec.params) + ["engine", "device"]


class SeedOuter(_WorkloadSuite):
    __doc__ = WORKLOADS["seed_outer"].description
    workload = "seed_outer"
    params, param_names = _params_of(workload)


class OuterXY(_WorkloadSuite):
    __doc__ = WORKLOADS["outer_xy"].description
    workload = "outer_xy"
    params, param_names = _params_of(workload)


class ElementwiseChain(_WorkloadSuite):
    __doc__ = WORKLOADS["elementwise_chain"].description
    workload = "elementwise_chain"
    params, param_names = _params_of(workload)


class FastestAutograd(_WithCollector, _WorkloadSuite):
    __doc__ = WORKLOADS["fastest_autograd"].description
    workload = "fastest_autograd"
    params, param_names = _params_of(workload)


class JacobianBatched(_WorkloadSuite):
    """The 128x256 MLP Jacobian by batched VJPs, at 1 and 2 threads.

    ``threads`` caps numba's pool, every OpenBLAS and torch's pool at run time. XLA's pool is
    fixed when jax is imported, so the jax rows run at its default (all cores) and skip at
    ``threads=1``; ``compare.py --threads 1`` caps it too.
    """

    workload = "jacobian_batched"
    params = [WORKLOADS[workload].variants, [1, 2], DEVICES]
    param_names = ["engine", "threads", "device"]

    def setup(self, engine, threads, device):
        import numba

        require_device(device)
        if engine == "jax" and threads == 1:
            raise NotImplementedError("XLA's thread pool is fixed when jax is imported")
        if threads > numba.config.NUMBA_NUM_THREADS:
            raise NotImplementedError(
                f"numba may start at most {numba.config.NUMBA_NUM_THREADS} threads here"
            )
        self.step = make_step(self.workload, engine)
        self.step()
        # After the first call: by then torch is imported and every BLAS library is loaded
        # (numba binds SciPy's on first use), so that all of them can be capped.
        set_threads(threads)
        warm_up(self.step)


class MlpTrainStep(_WorkloadSuite):
    __doc__ = WORKLOADS["mlp_train_step"].description
    workload = "mlp_train_step"
    params, param_names = _params_of(workload)


class OdeRollout(_WithCollector, _WorkloadSuite):
    __doc__ = WORKLOADS["ode_rollout"].description
    workload = "ode_rollout"
    params, param_names = _params_of(workload)


class OdeGuarded(_WorkloadSuite):
    __doc__ = WORKLOADS["ode_guarded"].description
    workload = "ode_guarded"
    params, param_names = _params_of(workload)


class StateBuffer(_WorkloadSuite):
    __doc__ = WORKLOADS["state_buffer"].description
    workload = "state_buffer"
    params, param_names = _params_of(workload)


class Chain1000x16(_WithCollector, _WorkloadSuite):
    __doc__ = WORKLOADS["chain_1000x16"].description
    workload = "chain_1000x16"
    params, param_names = _params_of(workload)


class MatmulTanh(_WorkloadSuite):
    __doc__ = WORKLOADS["matmul_tanh_256"].description
    workload = "matmul_tanh_256"
    params, param_names = _params_of(workload)


class Linalg(_WorkloadSuite):
    __doc__ = WORKLOADS["linalg"].description
    workload = "linalg"
    params, param_names = _params_of(workload)


class GpNll(_WorkloadSuite):
    __doc__ = WORKLOADS["gp_nll"].description
    workload = "gp_nll"
    params, param_names = _params_of(workload)


class BayesLogreg(_WorkloadSuite):
    __doc__ = WORKLOADS["bayes_logreg"].description
    workload = "bayes_logreg"
    params, param_names = _params_of(workload)


class LotkaVolterraFit(_WorkloadSuite):
    __doc__ = WORKLOADS["lotka_volterra_fit"].description
    workload = "lotka_volterra_fit"
    params, param_names = _params_of(workload)


class BurgersSpectral(_WorkloadSuite):
    __doc__ = WORKLOADS["burgers_spectral"].description
    workload = "burgers_spectral"
    params, param_names = _params_of(workload)


def _compiled_cases():
    """Every ``autograd_nb:compile`` variant at the sizes ``compare.py`` runs, by a label."""
    cases = {}
    for workload, spec in WORKLOADS.items():
        for variant in spec.variants:
            if not variant.startswith("autograd_nb:compile"):
                continue
            for params in spec.compare:
                sizes = [f"{name}={value}" for name, value in params.items()]
                cases[" ".join([workload, variant, *sizes])] = (workload, variant, params)
    return cases


COMPILED_CASES = _compiled_cases()


class CompiledFirstCalls:
    """The first two calls of a fresh ``anb.compile`` step, in seconds, once a step of the
    same ops has loaded the kernels: the first records the program (eagerly), the second is
    its first replay (issue 19: at most 50 ms for both on ``fastest_autograd`` with 1,000 ops,
    0.5 s with 10,000)."""

    params = [list(COMPILED_CASES)]
    param_names = ["case"]
    timeout = 300

    def setup(self, case):
        workload, variant, params = COMPILED_CASES[case]
        warm_up(make_step(workload, variant, **params))

    def track_first_call(self, case):
        workload, variant, params = COMPILED_CASES[case]
        return compiled_first_calls(workload, variant, **params)[0]

    track_first_call.unit = "seconds"

    def track_first_replay(self, case):
        workload, variant, params = COMPILED_CASES[case]
        return compiled_first_calls(workload, variant, **params)[1]

    track_first_replay.unit = "seconds"


class TallJacobian(_WorkloadSuite):
    __doc__ = WORKLOADS["tall_jacobian"].description
    workload = "tall_jacobian"
    params, param_names = _params_of(workload)


class MlpHvp(_WorkloadSuite):
    __doc__ = WORKLOADS["mlp_hvp"].description
    workload = "mlp_hvp"
    params, param_names = _params_of(workload)


class PinnLaplacian(_WorkloadSuite):
    __doc__ = WORKLOADS["pinn_laplacian"].description
    workload = "pinn_laplacian"
    params, param_names = _params_of(workload)
