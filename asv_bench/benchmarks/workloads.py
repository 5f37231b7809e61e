"""The benchmarked computations, written once per engine.

``make_step(workload, engine)`` returns a zero-argument function that runs one forward and
backward pass and returns the gradients as NumPy arrays. It raises ``NotImplementedError``
when the engine is not installed, which is also how asv skips a benchmark. The asv suite and
``compare.py`` both build their work from here, so they time the same thing.
"""

import numpy as np

ENGINES = ("autograd_nb", "torch", "jax", "autograd")

#: The elementwise chain cycles through these five ops; ``add_input`` adds the chain's input
#: back in, so the gradient of the input accumulates from every cycle.
CHAIN_CYCLE = ("sin", "scale", "tanh", "add_input", "exp")
CHAIN_OPS = 1000
CHAIN_SIZE = 16
MATMUL_SIZE = 256


def seeded(shape, seed=0, scale=1.0):
    """Reproducible float64 data: the same arrays for every engine."""
    return scale * np.random.default_rng(seed).standard_normal(shape)


def _chain(namespace, x, n_ops):
    """``n_ops`` elementwise ops on x, built from sin, *0.9, tanh, +x and exp; then sum."""
    h = x
    for i in range(n_ops):
        op = CHAIN_CYCLE[i % len(CHAIN_CYCLE)]
        if op == "sin":
            h = namespace.sin(h)
        elif op == "scale":
            h = h * 0.9
        elif op == "tanh":
            h = namespace.tanh(h)
        elif op == "add_input":
            h = h + x
        else:
            h = namespace.exp(h)
    return namespace.sum(h)


def _matmul_tanh(namespace, x, w):
    return namespace.sum(namespace.tanh(x @ w))


def _chain_data(n_ops=CHAIN_OPS, size=CHAIN_SIZE):
    return (seeded(size, seed=1, scale=0.5),), lambda ns, x: _chain(ns, x, n_ops)


def _matmul_data(size=MATMUL_SIZE):
    # Scaled so that tanh(x @ w) stays away from saturation.
    x = seeded((size, size), seed=2, scale=size**-0.5)
    w = seeded((size, size), seed=3)
    return (x, w), _matmul_tanh


WORKLOADS = {
    "chain_1000x16": _chain_data,
    "matmul_tanh_256": _matmul_data,
}

DESCRIPTIONS = {
    "chain_1000x16": "1,000 elementwise ops (sin, *0.9, tanh, +x, exp) on 16 float64, "
    "grad of the sum",
    "matmul_tanh_256": "sum(tanh(x @ w)), 256x256 float64, grads of x and w",
}


def _import(engine):
    try:
        if engine == "autograd_nb":
            import autograd_nb

            return autograd_nb
        if engine == "torch":
            import torch

            return torch
        if engine == "jax":
            import jax

            # Every engine computes in float64; JAX needs to be told so before making arrays.
            jax.config.update("jax_enable_x64", True)
            return jax
        if engine == "autograd":
            import autograd

            return autograd
    except ImportError as error:
        raise NotImplementedError(f"{engine} is not installed: {error}") from error
    raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")


def engine_version(engine):
    try:
        module = _import(engine)
    except NotImplementedError:
        return None
    if engine == "autograd":
        from importlib.metadata import version

        return version("autograd")
    return module.__version__


def make_step(workload, engine):
    """One forward + backward of ``workload`` on ``engine``, as a function of no arguments.

    The first call may compile (numba kernels, XLA); callers warm it up before timing.
    """
    arrays, loss = WORKLOADS[workload]()
    module = _import(engine)
    return _STEP_MAKERS[engine](module, arrays, loss)


def _autograd_nb_step(anb, arrays, loss):
    inputs = [anb.tensor(a, requires_grad=True) for a in arrays]

    def step():
        for t in inputs:
            t.grad = None
        loss(anb, *inputs).backward()
        return [t.grad.numpy() for t in inputs]

    return step


def _torch_step(torch, arrays, loss):
    inputs = [torch.tensor(a, requires_grad=True) for a in arrays]

    def step():
        for t in inputs:
            t.grad = None
        loss(torch, *inputs).backward()
        return [t.grad.numpy() for t in inputs]

    return step


def _jax_step(jax, arrays, loss):
    import jax.numpy as jnp

    inputs = [jnp.asarray(a) for a in arrays]
    grad_fn = jax.jit(jax.grad(lambda *xs: loss(jnp, *xs), argnums=tuple(range(len(inputs)))))

    def step():
        return [np.asarray(g) for g in jax.block_until_ready(grad_fn(*inputs))]

    return step


def _hips_step(autograd, arrays, loss):
    import autograd.numpy as hnp

    grad_fn = autograd.grad(lambda xs: loss(hnp, *xs))
    inputs = tuple(arrays)

    def step():
        return list(grad_fn(inputs))

    return step


_STEP_MAKERS = {
    "autograd_nb": _autograd_nb_step,
    "torch": _torch_step,
    "jax": _jax_step,
    "autograd": _hips_step,
}
