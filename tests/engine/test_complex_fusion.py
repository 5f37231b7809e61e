"""Complex backward plans in the compiled executor, and their fused chains
(:mod:`autograd_nb.engine.fusion`): a chain of complex elementwise VJPs (scalars and real
operands of the complex precision among them) runs as one loop and gives the unfused
kernels' bits, in complex64 and complex128, eagerly and inside ``anb.compile``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb import config
from autograd_nb.engine import executor, fusion

DTYPES = [np.complex64, np.complex128]
REAL = {np.complex64: np.float32, np.complex128: np.float64}
#: Over ``config.FUSION_MIN_ELEMENTS``: the chains fuse.
SIZE = 4096


def draw(rng, dtype, size=SIZE, scale=0.3):
    values = scale * rng.standard_normal(size)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * scale * rng.standard_normal(size)
    return values.astype(dtype)


def chain(steps):
    def fn(z, w, x):
        u = z
        for _ in range(steps):
            u = 0.5 * anb.sin(u * w) + anb.exp(u) * x - anb.square(u) / 3.0
        return u

    return fn


def gradients(fn, args, grad_output):
    return anb.grad(fn(*args), args[0], grad_outputs=grad_output)[0].numpy()


@pytest.fixture
def unfused(monkeypatch):
    """Run the body with fusion off (chains shorter than any buffer)."""

    def off():
        monkeypatch.setattr(config, "FUSION_MIN_ELEMENTS", 10**12)

    return off


def arguments(rng, dtype):
    z = anb.tensor(draw(rng, dtype), requires_grad=True)
    return z, anb.tensor(draw(rng, dtype)), anb.tensor(draw(rng, REAL[dtype]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_fused_complex_chain_gives_the_unfused_bits(dtype, unfused):
    rng = np.random.default_rng(1)
    args = arguments(rng, dtype)
    grad_output = anb.tensor(draw(rng, dtype))
    fn = chain(3)
    fused = gradients(fn, args, grad_output)
    unfused()
    expected = gradients(fn, args, grad_output)
    assert fused.dtype == dtype and fused.tobytes() == expected.tobytes()


@pytest.mark.compiled_only
def test_the_complex_chain_is_fused_in_the_executor(monkeypatch):
    made, ran = [], []
    module = fusion.Group.module
    run = executor.run
    monkeypatch.setattr(fusion.Group, "module", lambda g: made.append(len(g.nodes)) or module(g))
    monkeypatch.setattr(executor, "run", lambda *a, **k: ran.append(1) or run(*a, **k))
    rng = np.random.default_rng(2)
    args = arguments(rng, np.complex128)
    gradients(chain(2), args, anb.tensor(draw(rng, np.complex128)))
    assert ran and made and max(made) >= 2


@pytest.mark.compiled_only  # (tier 0's complex VJPs are NumPy's functions: docs/complex.rst)
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compiled_programs_fused_backward_gives_eagers_unfused_bits(dtype, unfused):
    rng = np.random.default_rng(3)
    fn = chain(2)
    compiled = anb.compile(fn)
    calls = [(arguments(rng, dtype), anb.tensor(draw(rng, dtype))) for _ in range(3)]
    got = [gradients(compiled, args, g) for args, g in calls]
    unfused()
    for (args, g), value in zip(calls, got, strict=True):
        assert value.tobytes() == gradients(fn, args, g).tobytes()
    assert compiled.cache_info().programs == 1


@settings(max_examples=5, deadline=None)
@given(steps=st.integers(1, 4), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_chain_lengths(steps, dtype, seed):
    rng = np.random.default_rng(seed)
    args = arguments(rng, dtype)
    grad_output = anb.tensor(draw(rng, dtype))
    fn = chain(steps)
    fused = gradients(fn, args, grad_output)
    previous = config.FUSION_MIN_ELEMENTS
    config.FUSION_MIN_ELEMENTS = 10**12
    try:
        expected = gradients(fn, args, grad_output)
    finally:
        config.FUSION_MIN_ELEMENTS = previous
    assert fused.tobytes() == expected.tobytes()
