"""Issue 2's workloads, autograd_nb beside PyTorch eager, JAX (jit) and HIPS autograd.

Each benchmark runs one forward and backward pass. ``setup`` builds the inputs and runs the
step once, so compilation (numba kernels, XLA) happens there and is never timed; measure it
with ``compile_latency.py`` instead. An engine that is not installed is skipped
(``NotImplementedError`` in ``setup``).
"""

from .workloads import DESCRIPTIONS, ENGINES, make_step


class _EngineSuite:
    params = [list(ENGINES)]
    param_names = ["engine"]
    # Setup includes the first (compiling) call: a cold numba cache or XLA takes seconds.
    timeout = 300
    workload = None

    def setup(self, engine):
        self.step = make_step(self.workload, engine)
        self.step()

    def time_forward_backward(self, engine):
        self.step()

    def peakmem_forward_backward(self, engine):
        self.step()


class ElementwiseChain(_EngineSuite):
    __doc__ = DESCRIPTIONS["chain_1000x16"]
    workload = "chain_1000x16"


class MatmulTanh(_EngineSuite):
    __doc__ = DESCRIPTIONS["matmul_tanh_256"]
    workload = "matmul_tanh_256"
