"""``is_grads_batched`` on the GPU: the batch is a grid dimension, one launch per VJP for the
whole batch, never a loop over its rows.

For each case the backward's launches (``autograd_nb.cuda.counters()``) must not depend on
the batch size, and the batched gradients must equal the CPU's. The cases are the shape and
indexing table of test_cuda_ops, broadcasting elementwise ops, the reductions, matmul,
convolutions and a transfer.
"""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.scipy import signal
from tests.cuda.test_cuda_ops import TABLE, Case, sample

# (blocks of 4 threads, 4x4 tiles and a short GIL switch interval for the module)
from tests.cuda.test_cuda_reduction_linalg import small_launches  # noqa: F401


def _rows_case(op, label, function, shapes, seed=0):
    return Case(op, label, function, [sample(s, seed=seed + i) for i, s in enumerate(shapes)])


CASES = [case for case in TABLE if case.op != "astype"] + [
    _rows_case("add", "broadcast", anb.add, [(2, 1), (3,)]),
    _rows_case("tanh-chain", "fused", lambda x: anb.exp(anb.tanh(x) * 0.5), [(2, 3)]),
    _rows_case("sum", "axis0", lambda x: anb.sum(x, axis=0), [(3, 4)]),
    _rows_case("max", "axis1", lambda x: anb.max(x, axis=1), [(3, 4)]),
    _rows_case("softmax", "last", lambda x: anb.softmax(x), [(2, 3)]),
    _rows_case("cumsum", "axis1", lambda x: anb.cumsum(x, axis=1), [(2, 3)]),
    _rows_case("matmul", "2d", anb.matmul, [(2, 3), (3, 2)]),
    _rows_case("convolve", "full", lambda a, b: signal.convolve(a, b, mode="full"),
               [(5,), (3,)]),
    _rows_case("convolve", "valid", lambda a, b: signal.convolve(a, b, mode="valid"),
               [(5,), (3,)]),
    _rows_case("convolve", "valid-2d", lambda a, b: signal.convolve(a, b, mode="valid"),
               [(4, 3), (2, 2)]),
    _rows_case("transfer", "cpu", lambda x: (x.cpu() * 2.0).to(x.device), [(2, 3)]),
]


def batched_grads(case, device, batch, counted=False):
    """The batched VJPs of ``case`` (NumPy arrays) and, with ``counted``, the launches of the
    backward alone."""
    tensors = [anb.tensor(a, requires_grad=True, device=device) for a in case.inputs]
    y = case.function(*tensors)
    rng = np.random.default_rng(batch)
    v = anb.tensor(rng.standard_normal((batch,) + y.shape), device=device)
    anb.cuda.reset_counters()
    grads = anb.grad(y, tensors, grad_outputs=v, is_grads_batched=True)
    launches = anb.cuda.counters()["launches"]
    return [g.cpu().numpy() for g in grads], launches


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_one_launch_per_vjp_for_the_whole_batch(case):
    _, launches_of_two = batched_grads(case, "cuda", 2)
    grads, launches_of_five = batched_grads(case, "cuda", 5)
    assert launches_of_five == launches_of_two
    expected, _ = batched_grads(case, "cpu", 5)
    for got, want in zip(grads, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
