"""The GPU workloads of issue 5, for autograd_nb (``device="cuda"``) and PyTorch CUDA.

* ``chain_backward``: the backward alone of the fixed 20-op elementwise chain of
  ``elementwise_chain`` (``workloads.CHAIN_20``) over ``size`` float32 elements (1e7 in the
  issue): the forward runs once in ``make``, each step is one ``grad(..., retain_graph=True)``.
  Its memory traffic is estimated by :func:`chain_backward_bytes`, for the achieved bandwidth.
* ``jacobian``: the full 128x256 Jacobian of ``tanh(W2 @ tanh(W1 @ x + b1) + b2)`` (hidden 512,
  float64) by batched VJPs, forward included, as ``workloads.jacobian_batched`` on the CPU.

:func:`anb_counts_per_step` reads autograd_nb's device counters per step (kernel launches,
driver allocations, synchronizations).

Each ``make_*`` returns ``step``, a function of no arguments that runs one iteration, waits for
the device and returns the gradient as a NumPy array (for the checks), or raises
``NotImplementedError`` with the reason when the engine or a GPU is not there. Both the asv
suite (``bench_gpu.py``) and ``gpu_compare.py`` use them.
"""

import numpy as np

from .workloads import (
    CHAIN_20,
    JACOBIAN_OUT,
    _chain20_data,
    _jacobian_data,
    _mlp2,
    _run_chain,
)

UNARY = ("sin", "cos", "tanh", "sigmoid", "square")


def require_anb_gpu(allow_simulator=False):
    """autograd_nb with a usable CUDA device (the simulator only when asked: it runs one
    Python thread per CUDA thread, far too slow for benchmark sizes)."""
    from numba import config

    import autograd_nb as anb

    if config.ENABLE_CUDASIM and not allow_simulator:
        raise NotImplementedError("numba's CUDA simulator is on: no real GPU to time")
    try:
        anb.zeros(1, device="cuda")
    except RuntimeError as error:
        raise NotImplementedError(f"no CUDA device for autograd_nb: {error}") from None
    return anb


def require_torch_gpu():
    try:
        import torch
    except ImportError as error:
        raise NotImplementedError(f"torch is not installed: {error}") from None
    if not torch.cuda.is_available():
        raise NotImplementedError("torch has no CUDA device (a CPU build, or no GPU)")
    return torch


def _synchronize_anb():
    import autograd_nb as anb

    anb.cuda.synchronize()  # (counted in anb.cuda.counters(), as one synchronization)


def anb_counts_per_step(step, steps=3):
    """autograd_nb's device counters (``anb.cuda.counters()``: launches, driver
    allocations and their bytes, synchronizations) per call of ``step``, averaged over
    ``steps`` calls after two warm-up calls (the pool's cache filled)."""
    import autograd_nb as anb

    step()
    step()
    anb.cuda.reset_counters()
    for _ in range(steps):
        step()
    counts = anb.cuda.counters()
    return {name: value / steps for name, value in counts.items()}


def make_chain_backward(engine, size, allow_simulator=False):
    data = _chain20_data(size, "float32")
    if engine == "autograd_nb":
        anb = require_anb_gpu(allow_simulator)
        x = anb.tensor(data, device="cuda", requires_grad=True)
        y = anb.sum(_run_chain({name: getattr(anb, name) for name in UNARY}, x))

        def step():
            (g,) = anb.grad(y, x, retain_graph=True)
            _synchronize_anb()
            return g

        return lambda: step().cpu().numpy(), step
    if engine == "torch":
        torch = require_torch_gpu()
        x = torch.tensor(data, device="cuda", requires_grad=True)
        y = torch.sum(_run_chain({name: getattr(torch, name) for name in UNARY}, x))

        def step():
            (g,) = torch.autograd.grad(y, x, retain_graph=True)
            torch.cuda.synchronize()
            return g

        return lambda: step().cpu().numpy(), step
    raise NotImplementedError(f"no GPU chain for {engine}")


def chain_backward_bytes(size, itemsize=4):
    """Bytes a fused backward of the chain must move: every saved value read once, the
    incoming gradient read and the input's gradient read and written (the lower bound the
    achieved bandwidth is measured against)."""
    # A product with a constant saves the constant and a sum nothing; each unary op saves its
    # input or its output (one array).
    saved = sum(1 for op, _ in CHAIN_20 if op not in ("add", "multiply"))
    return (saved + 3) * size * itemsize


def make_jacobian(engine, allow_simulator=False):
    data = _jacobian_data()
    if engine == "autograd_nb":
        anb = require_anb_gpu(allow_simulator)
        on_gpu = {name: anb.tensor(value, device="cuda") for name, value in data.items()}
        x = on_gpu.pop("x").detach().requires_grad_()
        identity = anb.eye(JACOBIAN_OUT, dtype="float64", device="cuda")

        def step():
            y = _mlp2(anb.tanh, x, **on_gpu)
            (jac,) = anb.grad(y, x, grad_outputs=identity, is_grads_batched=True)
            _synchronize_anb()
            return jac

        return lambda: step().cpu().numpy(), step
    if engine.startswith("torch"):
        torch = require_torch_gpu()
        on_gpu = {name: torch.tensor(value, device="cuda") for name, value in data.items()}
        x = on_gpu.pop("x").requires_grad_()
        identity = torch.eye(JACOBIAN_OUT, dtype=torch.float64, device="cuda")
        if engine == "torch:jacrev":
            jacrev = torch.func.jacrev(lambda x: _mlp2(torch.tanh, x, **on_gpu))

            def step():
                jac = jacrev(x)
                torch.cuda.synchronize()
                return jac
        else:

            def step():
                y = _mlp2(torch.tanh, x, **on_gpu)
                (jac,) = torch.autograd.grad(y, x, grad_outputs=identity, is_grads_batched=True)
                torch.cuda.synchronize()
                return jac

        # (jacrev of an x that requires grad gives a Jacobian that does too)
        return lambda: step().detach().cpu().numpy(), step
    raise NotImplementedError(f"no GPU Jacobian for {engine}")


def card_bandwidth():
    """The GPU's peak memory bandwidth in bytes/s (from its memory clock and bus width), or
    None where the device does not say (the simulator)."""
    try:
        from numba import cuda

        device = cuda.get_current_device()
        clock_khz = device.MEMORY_CLOCK_RATE
        bus_bits = device.GLOBAL_MEMORY_BUS_WIDTH
    except Exception:  # noqa: BLE001 - any failure means: unknown
        return None
    return 2 * clock_khz * 1e3 * bus_bits / 8


def reference_jacobian():
    d = _jacobian_data()
    h = np.tanh(d["W1"] @ d["x"] + d["b1"])
    y = np.tanh(d["W2"] @ h + d["b2"])
    return ((1 - y**2)[:, None] * d["W2"]) @ ((1 - h**2)[:, None] * d["W1"])
