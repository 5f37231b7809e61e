"""autograd_nb.distributed (issue 24): many gradients, serially and on a 2-worker LocalCluster.

``MapGradOde`` times 64 gradients of ``workloads.ode_rollout``, each with its own spring
constant; ``JacobianWide`` the Jacobian of a function from 1 number to 4,096; ``TaskOverhead``
64 tasks that do (almost) nothing. The "2 workers" rows run on a
``LocalCluster(n_workers=2, processes=True, threads_per_worker=1)`` started once per asv process
(``setup`` reuses it), its workers warmed with ``warm_workers``; ``distributed_scaling.py``
prints the same measurements as a table. Without the ``distributed`` extra the cluster rows
skip.
"""

import os
import sys

import numpy as np

from .workloads import (
    ANCHOR_K,
    ODE_DT,
    ODE_STEPS,
    SPRING_REST,
    _ode_data,
    _springs,
    seeded,
)

#: The 64 spring constants of the ensemble: one gradient each.
SPRING_CONSTANTS = np.linspace(5.0, 15.0, 64)
#: The wide function's outputs (Jacobian rows) and hidden width.
WIDE_OUTPUTS, WIDE_HIDDEN = 4096, 64

WHERE = ["1 process", "2 workers"]
_cluster = {}


def spring_rollout_energy(positions, spring_k):
    """``workloads.ode_rollout``'s final energy, with the spring constant as an argument."""
    import autograd_nb as anb

    x, v, zero_row = positions, anb.zeros(positions.shape), anb.zeros((1, 2))
    for _ in range(ODE_STEPS):
        d, length = _springs(anb, x)
        tension = spring_k * (length - SPRING_REST) / length * d
        force = (
            anb.concatenate([tension, zero_row])
            - anb.concatenate([zero_row, tension])
            - ANCHOR_K * x
        )
        v = v + ODE_DT * force
        x = x + ODE_DT * v
    _, length = _springs(anb, x)
    return 0.5 * anb.sum(v * v) + 0.5 * spring_k * anb.sum(anb.square(length - SPRING_REST))


def ensemble():
    """The 64 argument tuples of ``MapGradOde``: one chain, other spring constants."""
    positions = _ode_data()[0]
    return [(positions, float(k)) for k in SPRING_CONSTANTS]


#: The weights of ``wide_outputs``, made once per process (each task calls it).
WIDE_WEIGHTS = (
    seeded((WIDE_HIDDEN,), seed=50),
    seeded((WIDE_HIDDEN,), seed=51),
    seeded((WIDE_HIDDEN, WIDE_HIDDEN), seed=52, scale=WIDE_HIDDEN**-0.5),
    seeded((WIDE_OUTPUTS, WIDE_HIDDEN), seed=53, scale=WIDE_HIDDEN**-0.5),
)


def wide_outputs(x):
    """From ``x`` of shape ``(1,)`` to 4,096 outputs: a small tanh network, widened at the
    end (its Jacobian has 4,096 rows, one VJP each)."""
    import autograd_nb as anb

    w_in, b_in, w_hidden, w_out = (anb.as_tensor(w) for w in WIDE_WEIGHTS)
    h = anb.tanh(x * w_in + b_in)
    h = anb.tanh(w_hidden @ h)
    return anb.sin(w_out @ h)


def nothing(x):
    """A gradient that costs (almost) nothing: what is left of a task is its overhead."""
    import autograd_nb as anb

    return anb.sum(x)


def client_for(where):
    """None for "1 process"; a 2-worker LocalCluster's client (started once per process)."""
    if where == "1 process":
        return None
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise NotImplementedError("the distributed extra is not installed") from None
    if "client" not in _cluster:
        # The workers import this module by name (its functions are pickled by name): asv
        # imports it without putting its package's folder on sys.path, which the workers copy.
        folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if folder not in sys.path:
            sys.path.insert(0, folder)
        cluster = LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
        )
        _cluster["client"] = Client(cluster)
    return _cluster["client"]


class MapGradOde:
    """64 ``ode_rollout`` gradients (each with its own spring constant)."""

    params = [WHERE]
    param_names = ["where"]
    timeout = 300

    def setup(self, where):
        from autograd_nb.distributed import map_grad, warm_workers

        self.client = client_for(where)
        self.inputs = ensemble()
        self.map_grad = map_grad
        warm_workers(self.client, spring_rollout_energy, self.inputs[0])
        for _ in range(2):  # past the first calls (plan templates) on every worker
            map_grad(spring_rollout_energy, self.inputs, client=self.client)

    def time_map_grad(self, where):
        self.map_grad(spring_rollout_energy, self.inputs, client=self.client)


class JacobianWide:
    """The 4,096 x 1 Jacobian of ``wide_outputs``: 16 tasks of 256 batched VJPs."""

    params = [WHERE]
    param_names = ["where"]
    timeout = 300

    def setup(self, where):
        from autograd_nb.distributed import jacobian, warm_workers

        self.client = client_for(where)
        self.x = np.array([0.3])
        self.jacobian = jacobian
        warm_workers(self.client, wide_outputs, (self.x,), mode="jacobian")
        for _ in range(2):
            jacobian(wide_outputs, self.x, client=self.client)

    def time_jacobian(self, where):
        self.jacobian(wide_outputs, self.x, client=self.client)


class TaskOverhead:
    """64 tasks of one trivial gradient each (``batch_size=1``): the per-task overhead."""

    params = [WHERE]
    param_names = ["where"]
    timeout = 300

    def setup(self, where):
        from autograd_nb.distributed import map_grad

        self.client = client_for(where)
        self.inputs = [(np.array([float(i)]),) for i in range(64)]
        self.map_grad = map_grad
        for _ in range(2):
            map_grad(nothing, self.inputs, client=self.client, batch_size=1)

    def time_map_grad(self, where):
        self.map_grad(nothing, self.inputs, client=self.client, batch_size=1)
