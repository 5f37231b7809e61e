"""The gradient of a long rollout through ``anb.scan``, with each checkpoint schedule: peak
memory (``peakmem_*``, the process's maximum resident size) and time.

The body is the ``ode_rollout`` workload's step on 4 particles; ``asv_bench/
checkpoint_memory.py`` prints the same comparison with ``tracemalloc``'s peak, in one run.
"""

import numpy as np

from .workloads import _ode_energy, _ode_step


class CheckpointedRollout:
    params = ([10_000], ["none", "sqrt", "binomial"])
    param_names = ["steps", "checkpoint"]
    timeout = 600

    def setup(self, steps, checkpoint):
        import autograd_nb as anb

        self.anb = anb
        rng = np.random.default_rng(40)
        positions = np.zeros((4, 2))
        positions[:, 0] = 1.1 * np.arange(4)
        positions += 0.1 * rng.standard_normal(positions.shape)
        self.x0 = anb.tensor(positions, requires_grad=True)
        self.v0, self.zero_row = anb.zeros((4, 2)), anb.zeros((1, 2))
        self.schedule = {"none": None, "sqrt": round(steps**0.5), "binomial": "binomial"}[
            checkpoint
        ]
        self.steps = steps
        self.gradient(8)  # warm the kernels

    def gradient(self, steps=None):
        anb = self.anb

        def body(carry, _):
            return _ode_step(anb, *carry, self.zero_row), None

        (x, v), _ = anb.scan(
            body, (self.x0, self.v0), length=steps or self.steps, checkpoint=self.schedule
        )
        return anb.grad(_ode_energy(anb, x, v), self.x0)[0]

    def time_gradient(self, steps, checkpoint):
        self.gradient()

    def peakmem_gradient(self, steps, checkpoint):
        self.gradient()
