"""``autograd_nb.numpy.fft``: forward values against NumPy's ``numpy.fft``, gradients against
central differences in float64 (complex inputs perturbed in their real and imaginary parts
separately, complex outputs read through ``Re(conj(v) y)``, as torch's gradcheck does), second
order through the rules, and NumPy's errors."""

import itertools
from functools import partial

import numpy
import pytest

import autograd_nb as anb
import autograd_nb.numpy as np
from autograd_nb.ops import fft as fft_ops
from tests.checks import COVERED, check_gradients, ops_in_graph

ONE_AXIS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
REAL_ONLY = ("rfft", "ihfft", "rfftn", "rfft2")
N_AXES = ("fftn", "ifftn", "fft2", "ifft2", "rfftn", "irfftn", "rfft2", "irfft2")
NORMS = (None, "backward", "ortho", "forward")


def _draw(shape, complex_, seed=0, dtype=numpy.float64):
    rng = numpy.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if complex_:
        x = x + 1j * rng.standard_normal(shape).astype(dtype)
    return x


def _kinds(name):
    return (False,) if name in REAL_ONLY else (False, True)


# -- the VJPs as NumPy functions -----------------------------------------------------------


def _numerical_vjp(f, x, g, eps=1e-6):
    """``dL/dRe x + i dL/dIm x`` of ``L = Re(sum(conj(g) f(x)))`` by central differences."""
    def loss(z):
        return numpy.real(numpy.sum(numpy.conj(g) * f(z)))

    parts = (1, 1j) if numpy.iscomplexobj(x) else (1,)
    out = numpy.zeros(x.shape, complex if numpy.iscomplexobj(x) else float)
    for j in numpy.ndindex(x.shape):
        for part in parts:
            plus, minus = x.copy(), x.copy()
            plus[j] += eps * part
            minus[j] -= eps * part
            out[j] += part * (loss(plus) - loss(minus)) / (2 * eps)
    return out


MATH_CASES = list(itertools.product((1, 2, 5, 8), (1, 3, 4, 7), fft_ops.NORMS, (0, 1)))


@pytest.mark.parametrize("m, n, norm, axis", MATH_CASES)
def test_vjp_functions_against_finite_differences(m, n, norm, axis):
    shape = [2, 3]
    shape[axis] = m
    for complex_ in (False, True):
        x = _draw(shape, complex_)
        for inverse in (False, True):
            g = _draw(fft_ops.c2c(x, n, axis, norm, inverse).shape, True, seed=1)
            got = fft_ops.c2c_vjp(g, m, n, axis, norm, inverse)
            want = _numerical_vjp(
                partial(fft_ops.c2c, n=n, axis=axis, norm=norm, inverse=inverse), x, g)
            numpy.testing.assert_allclose(got if complex_ else got.real, want, atol=1e-7)
        for halve, conj in itertools.product((False, True), repeat=2):
            g = _draw(fft_ops.c2r(x, n, axis, norm, halve, conj).shape, False, seed=2)
            got = fft_ops.c2r_vjp(g, m, n, axis, norm, halve, conj)
            want = _numerical_vjp(
                partial(fft_ops.c2r, n=n, axis=axis, norm=norm, halve=halve, conj=conj), x, g)
            numpy.testing.assert_allclose(got if complex_ else got.real, want, atol=1e-7)
    x = _draw(shape, False)
    for double, conj in itertools.product((False, True), repeat=2):
        g = _draw(fft_ops.r2c(x, n, axis, norm, double, conj).shape, True, seed=3)
        got = fft_ops.r2c_vjp(g, m, n, axis, norm, double, conj)
        want = _numerical_vjp(
            partial(fft_ops.r2c, n=n, axis=axis, norm=norm, double=double, conj=conj), x, g)
        numpy.testing.assert_allclose(got, want, atol=1e-7)


# -- forward values against NumPy ------------------------------------------------------------


ONE_AXIS_CASES = [
    (name, norm, m, n, axis)
    for name in ONE_AXIS
    for norm in NORMS
    for m, n in ((6, None), (5, None), (6, 4), (5, 9), (4, 7))
    for axis in (0, -1)
]


@pytest.mark.parametrize("name, norm, m, n, axis", ONE_AXIS_CASES)
def test_one_axis_transforms_match_numpy(name, norm, m, n, axis):
    shape = (m, 3) if axis == 0 else (2, m)
    for complex_ in _kinds(name):
        x = _draw(shape, complex_)
        got = getattr(np.fft, name)(anb.tensor(x), n=n, axis=axis, norm=norm)
        want = getattr(numpy.fft, name)(x, n=n, axis=axis, norm=norm)
        assert got.dtype == want.dtype and got.shape == want.shape
        numpy.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name", ONE_AXIS)
def test_single_precision_stays_single(name):
    for complex_ in _kinds(name):
        x = _draw((2, 5), complex_, dtype=numpy.float32)
        got = getattr(np.fft, name)(anb.tensor(x))
        want = getattr(numpy.fft, name)(x)
        assert got.dtype == want.dtype
        numpy.testing.assert_array_equal(got.numpy(), want)


N_AXES_CASES = [
    ((4, 5), None, None),
    ((4, 5), None, (0,)),
    ((4, 5), None, (-1, 0)),
    ((4, 5, 3), (6, 3), (0, 2)),
    ((4, 5, 3), (3, -1, 5), (0, 1, 2)),
    ((3, 5), (7, 4), (-2, -1)),
    ((4, 3, 5), None, (1, -1)),
]


@pytest.mark.parametrize("name", N_AXES)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("shape, s, axes", N_AXES_CASES)
def test_n_axes_transforms_match_numpy(name, norm, shape, s, axes):
    if name.endswith("2") and (axes is None or len(axes) != 2):
        return  # fft2's default axes are (-2, -1): the 2-axis cases below cover them
    for complex_ in _kinds(name):
        x = _draw(shape, complex_)
        kwargs = {"norm": norm, "s": s}
        if axes is not None:
            kwargs["axes"] = axes
        got = getattr(np.fft, name)(anb.tensor(x), **kwargs)
        want = getattr(numpy.fft, name)(x, **kwargs)
        assert got.dtype == want.dtype and got.shape == want.shape
        numpy.testing.assert_array_equal(got.numpy(), want)


def test_two_axis_defaults_are_the_last_two():
    x = _draw((3, 4, 5), False)
    for name in ("fft2", "ifft2", "rfft2", "irfft2"):
        got = getattr(np.fft, name)(anb.tensor(x))
        numpy.testing.assert_array_equal(got.numpy(), getattr(numpy.fft, name)(x))


def test_s_without_axes_warns_as_numpy_does():
    x = _draw((4, 5), False)
    with pytest.warns(DeprecationWarning, match="`axes` should not be `None`") as caught:
        got = np.fft.fftn(anb.tensor(x), s=(3,))
    assert caught[0].filename == __file__  # (the warning names the caller's line)
    with pytest.warns(DeprecationWarning):
        want = numpy.fft.fftn(x, s=(3,))
    numpy.testing.assert_array_equal(got.numpy(), want)


def test_arrays_and_lists_get_numpy_results():
    x = _draw((6,), False)
    assert type(np.fft.rfft(x)) is numpy.ndarray
    numpy.testing.assert_array_equal(np.fft.rfft(x), numpy.fft.rfft(x))
    numpy.testing.assert_array_equal(np.fft.fft([1.0, 2.0]), numpy.fft.fft([1.0, 2.0]))


def test_numpy_functions_dispatch_on_tensors():
    x = anb.tensor(_draw((6,), False), requires_grad=True)
    y = numpy.fft.rfft(x, norm="ortho")
    assert isinstance(y, anb.Tensor) and y.grad_fn is not None
    numpy.testing.assert_array_equal(y.numpy(), numpy.fft.rfft(x.numpy(), norm="ortho"))
    z = numpy.fft.fftshift(x)
    assert isinstance(z, anb.Tensor) and z.requires_grad


def test_frequencies_are_numpy_and_constant():
    numpy.testing.assert_array_equal(np.fft.fftfreq(7, 0.5), numpy.fft.fftfreq(7, 0.5))
    numpy.testing.assert_array_equal(np.fft.rfftfreq(8), numpy.fft.rfftfreq(8))
    spacing = anb.tensor(0.25)
    freq = np.fft.rfftfreq(6, spacing)
    assert isinstance(freq, anb.Tensor) and not freq.requires_grad
    numpy.testing.assert_array_equal(freq.numpy(), numpy.fft.rfftfreq(6, 0.25))
    with pytest.raises(TypeError, match=r"numpy\.fft\.fftfreq is not differentiable"):
        np.fft.fftfreq(4, anb.tensor(0.5, requires_grad=True))


def test_namespace_lists_numpy_names():
    assert set(dir(np.fft)) >= set(numpy.fft.__all__)
    with pytest.raises(AttributeError):
        np.fft.not_a_function  # noqa: B018


# -- gradients -------------------------------------------------------------------------------


def _check_vjp(function, x, seed=0, rtol=1e-6, atol=1e-7):
    """``function``'s VJP at ``x`` (real or complex) for a random ``v``: the backward against
    central differences of ``Re(sum(conj(v) function(x)))``, and the differentiable rules
    (create_graph) against the backward. Returns the leaf, ``v`` and the rules' gradient."""
    leaf = anb.tensor(x, requires_grad=True)
    y = function(leaf)
    v = _draw(y.shape, numpy.dtype(y.dtype).kind == "c", seed=seed + 1)
    (kernel,) = anb.grad(y, leaf, grad_outputs=anb.tensor(v), retain_graph=True)
    (rule,) = anb.grad(y, leaf, grad_outputs=anb.tensor(v), create_graph=True)

    def plain(z):
        with anb.no_grad():
            return function(anb.tensor(z)).numpy()

    numeric = _numerical_vjp(plain, x, v)
    assert kernel.dtype == x.dtype and kernel.shape == x.shape
    numpy.testing.assert_allclose(kernel.numpy(), numeric, rtol=rtol, atol=atol)
    numpy.testing.assert_allclose(rule.numpy(), kernel.numpy(), rtol=1e-12, atol=1e-12)
    COVERED["first"].update(ops_in_graph(y))
    return rule


GRAD_CASES = [
    (name, norm, m, n)
    for name in ONE_AXIS
    for norm in ("backward", "ortho", "forward")
    for m, n in ((6, None), (5, None), (6, 4), (5, 8), (4, 7))
]


@pytest.mark.parametrize("name, norm, m, n", GRAD_CASES)
def test_one_axis_gradients(name, norm, m, n):
    function = getattr(np.fft, name)
    for complex_, axis in itertools.product(_kinds(name), (0, -1)):
        x = _draw((m, 2) if axis == 0 else (2, m), complex_)
        _check_vjp(partial(function, n=n, axis=axis, norm=norm), x)


N_AXES_GRAD_CASES = [
    ((4, 5), None, None),
    ((3, 4, 5), (4, 3), (0, -1)),
    ((3, 5), (5, 6), (-1, -2)),
    ((2, 3, 5), (3, -1, 4), (0, 1, 2)),
]


@pytest.mark.parametrize("name", N_AXES)
@pytest.mark.parametrize("norm", ("backward", "ortho", "forward"))
@pytest.mark.parametrize("shape, s, axes", N_AXES_GRAD_CASES)
def test_n_axes_gradients(name, norm, shape, s, axes):
    if name.endswith("2") and (axes is None or len(axes) != 2):
        return
    function = getattr(np.fft, name)
    for complex_ in _kinds(name):
        x = _draw(shape, complex_)
        _check_vjp(lambda t: function(t, s=s, axes=axes, norm=norm), x)


SECOND_ORDER_CASES = [
    ("fft", {"n": 5}), ("ifft", {"norm": "ortho"}), ("rfft", {"n": 7}),
    ("rfft", {"n": 4, "norm": "forward"}), ("irfft", {"n": 5}), ("irfft", {}),
    ("hfft", {"n": 6}), ("ihfft", {"norm": "ortho"}), ("rfftn", {"axes": (0, 1)}),
    ("irfft2", {"s": (3, 5)}), ("fftn", {"s": (3, 6), "axes": (0, 1)}),
]


@pytest.mark.parametrize("name, kwargs", SECOND_ORDER_CASES)
def test_double_backward_through_the_gradient(name, kwargs):
    """torch's gradgradcheck for a linear map: the gradient ``A^H v`` differentiated in
    ``v`` (its grad_output), against central differences of the first backward."""
    function = getattr(np.fft, name)
    for complex_ in _kinds(name):
        x = _draw((3, 6), complex_)
        leaf = anb.tensor(x, requires_grad=True)
        y = function(leaf, **kwargs)
        v0 = _draw(y.shape, numpy.dtype(y.dtype).kind == "c", seed=4)
        v = anb.tensor(v0, requires_grad=True)
        (g,) = anb.grad(y, leaf, grad_outputs=v, create_graph=True)
        w = _draw(g.shape, complex_, seed=5)
        (second,) = anb.grad(g, v, grad_outputs=anb.tensor(w))

        def first_backward(vz, x=x):
            with anb.enable_grad():
                t = anb.tensor(x, requires_grad=True)
                (gz,) = anb.grad(function(t, **kwargs), t, grad_outputs=anb.tensor(vz))
            return gz.numpy()

        numeric = _numerical_vjp(first_backward, v0, w)
        numpy.testing.assert_allclose(second.numpy(), numeric, rtol=1e-6, atol=1e-7)
        COVERED["second"].update(ops_in_graph(y, g))


def _spectral(x):
    """A real, nonlinear function through complex spectra: irfft(rfft(x^2) (k-weights)) * x."""
    spectrum = np.fft.rfft(x * x, n=7)
    return np.fft.irfft(spectrum, n=6) * x + np.fft.hfft(np.fft.ihfft(x), n=6)


def test_second_order_of_a_nonlinear_spectral_function():
    check_gradients(_spectral, [_draw((6,), False)], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("shape, axes", [((5,), None), ((4, 5), None), ((4, 5), 1),
                                          ((3, 4, 5), (0, 2)), ((4, 5), (-1,))])
@pytest.mark.parametrize("name", ("fftshift", "ifftshift"))
def test_shift_gradients(name, shape, axes):
    x = _draw(shape, False)
    got = getattr(np.fft, name)(anb.tensor(x), axes=axes)
    numpy.testing.assert_array_equal(got.numpy(), getattr(numpy.fft, name)(x, axes=axes))
    check_gradients(lambda t: getattr(np.fft, name)(t, axes=axes) * t, [x])


def test_shifts_undo_each_other_in_the_gradient():
    x = anb.tensor(_draw((5, 4), False), requires_grad=True)
    np.fft.ifftshift(np.fft.fftshift(x)).sum().backward()
    numpy.testing.assert_array_equal(x.grad.numpy(), numpy.ones((5, 4)))


def test_rfft_gradient_weighs_two_sided_bins():
    """torch's ``fft_r2c_backward`` written out: the real part of the full inverse transform
    (times n) of the gradient padded with zeros to n bins (not ``irfft`` of it)."""
    x0 = _draw((8,), False)
    x = anb.tensor(x0, requires_grad=True)
    spectrum = np.fft.rfft(x)
    (g,) = anb.grad(spectrum, x, grad_outputs=spectrum.detach())
    want = numpy.real(numpy.fft.ifft(numpy.concatenate([numpy.fft.rfft(x0), numpy.zeros(3)]))) * 8
    numpy.testing.assert_allclose(g.numpy(), want, atol=1e-12)


# -- bad input -------------------------------------------------------------------------------


BAD_CALLS = [
    ("fft", (), {"n": 0}),
    ("rfft", (), {"n": -1}),
    ("irfft", (), {"n": 0}),
    ("ihfft", (), {"n": 0}),
    ("fft", (), {"norm": "bad"}),
    ("hfft", (), {"norm": "bad"}),
    ("rfftn", (), {"norm": "sideways"}),
    ("fftn", (), {"s": (3,), "axes": (0, 1)}),
    ("irfftn", (), {"s": (3, 4, 5), "axes": (0, 1)}),
    ("fft2", (), {"s": (3, 4, 5)}),
    ("ifftn", (), {"s": (4, 0), "axes": (0, 1)}),
]


@pytest.mark.parametrize("name, args, kwargs", BAD_CALLS)
def test_bad_arguments_raise_numpys_errors(name, args, kwargs):
    x = _draw((4, 6), False)
    with pytest.raises(Exception) as theirs:
        getattr(numpy.fft, name)(x, *args, **kwargs)
    leaf = anb.tensor(x, requires_grad=True)
    with pytest.raises(type(theirs.value)) as ours:
        getattr(np.fft, name)(leaf, *args, **kwargs)
    words = str(theirs.value).split(";")[0]
    assert str(ours.value).startswith(words)
    assert leaf.grad is None


def test_bad_axis_and_complex_rfft_raise():
    x = anb.tensor(_draw((4, 6), False))
    with pytest.raises(IndexError):
        np.fft.fft(x, n=4, axis=2)
    with pytest.raises(IndexError):
        np.fft.fftn(x, axes=(0, 3))
    with pytest.raises(TypeError, match="rfft: the input must be real"):
        np.fft.rfft(np.fft.fft(x))
    with pytest.raises(TypeError, match="rfft: the input must be real"):
        np.fft.ihfft(np.fft.fft(x))
