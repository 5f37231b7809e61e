"""Custom ops inside ``anb.compile``: a ``register_op`` op's ``@njit`` kernels run as rows of
the program's tables (generated drivers around them: ``CustomOp.forward_spec`` and
``exec_spec``), outputs and gradients bit for bit against eager with no CompileWarning; an
``autograd.Function`` replays where its gradient is not taken, and where it is, the
signature runs eagerly with a warning naming it (its backward is Python: docs/compile.rst,
"Fallback")."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import autograd_nb as anb
from autograd_nb.replay import CompileWarning


@njit(cache=True)
def _softsign_forward(x, out):
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    for i in range(flat_x.size):
        flat_out[i] = flat_x[i] / (1.0 + abs(flat_x[i]))


@njit(cache=True)
def _softsign_vjp(grad_output, x, out, grad_x):
    g, flat_x, flat_grad = grad_output.reshape(-1), x.reshape(-1), grad_x.reshape(-1)
    for i in range(flat_x.size):
        flat_grad[i] += g[i] / (1.0 + abs(flat_x[i])) ** 2


@njit(cache=True)
def _take_forward(x, index, out):
    flat = x.reshape(-1)
    for i in range(index.size):
        out[i] = flat[index[i]]


@njit(cache=True)
def _take_vjp(grad_output, x, index, out, grad_x):
    flat = grad_x.reshape(-1)
    for i in range(index.size):
        flat[index[i]] += grad_output[i]


@njit(cache=True)
def _scaled_forward(x, scale, out):
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    for i in range(flat_x.size):
        flat_out[i] = flat_x[i] * scale[()]


@njit(cache=True)
def _scaled_vjp_x(grad_output, x, scale, out, grad_x):
    g, flat = grad_output.reshape(-1), grad_x.reshape(-1)
    for i in range(flat.size):
        flat[i] += g[i] * scale[()]


@njit(cache=True)
def _scaled_vjp_scale(grad_output, x, scale, out, grad_scale):
    g, flat_x = grad_output.reshape(-1), x.reshape(-1)
    for i in range(flat_x.size):
        grad_scale[()] += g[i] * flat_x[i]


@pytest.fixture(scope="module")
def custom():
    """The three ops, registered while this module's tests run (the registry's own tests
    see the built-in ops only)."""
    register = anb.autograd.register_op
    ops = {
        "softsign": register("compile_softsign", _softsign_forward, [_softsign_vjp]),
        "take": register("compile_take", _take_forward, [_take_vjp, None],
                         output_shape=lambda shape, index: index),
        "scaled": register("compile_scaled", _scaled_forward,
                           [_scaled_vjp_x, _scaled_vjp_scale]),
    }
    yield ops
    for name in ("compile_softsign", "compile_take", "compile_scaled"):
        anb.autograd.unregister_op(name)


def _bits(array):
    array = np.ascontiguousarray(array)
    return array.view(np.uint32 if array.dtype == np.float32 else np.uint64)


def _run(fn, x, s, index):
    x = anb.tensor(x, requires_grad=True)
    s = anb.tensor(s, requires_grad=True)
    out = fn(x, s, anb.tensor(index))
    return [out.detach().numpy()] + [g.numpy() for g in anb.grad(out, [x, s])]


@given(shape=st.sampled_from([(), (1,), (3,), (2, 3)]), dtype=st.sampled_from(["f4", "f8"]))
@settings(max_examples=8, deadline=None)
def test_register_op_replays_bit_for_bit(custom, shape, dtype):
    def _program(x, s, index):
        return anb.sum(custom["softsign"](x * 2.0)
                       + custom["take"](x, index)[0] * custom["scaled"](x, s))

    compiled = anb.compile(_program)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for call in range(3):
            rng = np.random.default_rng(call)
            x = rng.standard_normal(shape).astype(dtype)
            s = np.asarray(rng.standard_normal(), dtype=dtype)
            index = rng.integers(0, max(x.size, 1), size=2)
            eager, replayed = _run(_program, x, s, index), _run(compiled, x, s, index)
            for e, r in zip(eager, replayed, strict=True):
                assert e.shape == r.shape and e.dtype == r.dtype
                np.testing.assert_array_equal(_bits(e), _bits(r))
    info = compiled.cache_info()
    assert (info.programs, info.eager, info.hits) == (1, 0, 2)


class _Exp(anb.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = anb.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y


def test_a_function_replays_where_its_gradient_is_not_taken():
    compiled = anb.compile(lambda x: anb.sum(_Exp.apply(x) * 3.0))
    x = anb.tensor([0.5, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        results = [compiled(x) for _ in range(3)]
    assert all(r.numpy().tobytes() == (anb.sum(anb.exp(x) * 3.0)).numpy().tobytes()
               for r in results)
    assert compiled.cache_info().hits == 2


def test_a_function_whose_gradient_is_taken_runs_eagerly():
    # Its backward is Python, which a table's rows cannot call (docs/compile.rst).
    compiled = anb.compile(lambda x: anb.sum(_Exp.apply(x)))
    x = anb.tensor([0.5, -1.0], requires_grad=True)
    with pytest.warns(CompileWarning, match="_Exp's gradient, which has no compiled driver"):
        y = compiled(x)
    assert anb.grad(y, x)[0].numpy().tobytes() == np.exp(x.numpy()).tobytes()
    assert compiled.cache_info().eager == 1
