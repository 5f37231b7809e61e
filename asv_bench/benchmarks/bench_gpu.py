"""Issue 5's GPU benchmarks: autograd_nb on ``device="cuda"`` beside PyTorch CUDA.

Every row skips (``NotImplementedError`` in ``setup``, with the reason) where there is no GPU:
no CUDA device, numba's simulator on, or a CPU build of torch. ``setup`` runs the step until
its time settles (``warmup.warm_up``), so kernel compilation is never timed.
``asv_bench/gpu_compare.py`` prints the same rows as one table, with the ratios and the
achieved memory bandwidth.
"""

from .gpu import anb_counts_per_step, make_chain_backward, make_jacobian
from .warmup import warm_up


class GpuChainBackward:
    """Backward alone of the 20-op elementwise chain over 1e7 float32 elements on the GPU."""

    params = [["autograd_nb", "torch"], [10_000_000]]
    param_names = ["engine", "size"]
    timeout = 300

    def setup(self, engine, size):
        _, self.step = make_chain_backward(engine, size)
        warm_up(self.step)

    def time_backward(self, engine, size):
        self.step()


class GpuCountsPerStep:
    """autograd_nb's device counters per step of the GPU workloads (``anb.cuda.counters()``):
    kernel launches, driver allocations (0 once the caching pool is warm) and
    synchronizations."""

    params = [["chain_backward", "jacobian"]]
    param_names = ["workload"]
    timeout = 300

    def setup(self, workload):
        if workload == "chain_backward":
            _, step = make_chain_backward("autograd_nb", 10_000_000)
        else:
            _, step = make_jacobian("autograd_nb")
        self.counts = anb_counts_per_step(step)

    def track_launches(self, workload):
        return self.counts["launches"]

    def track_allocations(self, workload):
        return self.counts["allocations"]

    def track_synchronizations(self, workload):
        return self.counts["synchronizations"]


class GpuJacobian:
    """The 128x256 MLP Jacobian by batched VJPs on the GPU (forward included)."""

    params = [["autograd_nb", "torch", "torch:jacrev"]]
    param_names = ["engine"]
    timeout = 300

    def setup(self, engine):
        _, self.step = make_jacobian(engine)
        warm_up(self.step)

    def time_jacobian(self, engine):
        self.step()
