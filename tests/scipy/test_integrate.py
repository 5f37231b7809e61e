"""autograd_nb.scipy.integrate.odeint against SciPy: values equal scipy.integrate.odeint's,
gradients in y0, t and args against float64 central differences of SciPy's solve, on a
non-stiff problem (Lotka-Volterra, a forced oscillator) and a stiff one (Robertson's
kinetics); SciPy's errors, a TypeError for a func that returns no array, and a clear error
for a second derivative."""

import warnings

import numpy as np
import pytest
import scipy.integrate as si

import autograd_nb as anb
import autograd_nb.numpy as anp
from autograd_nb.scipy.integrate import odeint

TIGHT = {"rtol": 1e-10, "atol": 1e-10}


def lotka_volterra(y, t, a, b, c, d):
    prey, predator = y[0], y[1]
    return anp.array([a * prey - b * prey * predator, -c * predator + d * prey * predator])


def forced_oscillator(y, t, omega, damping):
    """Non-autonomous, so that the gradient of t[0] has a part from df/dt."""
    return anp.stack([y[1], -omega**2 * y[0] - damping * y[1] + anp.sin(2.0 * t)])


def robertson(y, t, k):
    fast = k[2] * y[1] * y[2]
    slow = k[0] * y[0]
    square = k[1] * y[1] ** 2
    return anp.stack([-slow + fast, slow - fast - square, square])


LV_Y0, LV_T, LV_ARGS = np.array([1.0, 0.5]), np.linspace(0.0, 4.0, 5), (1.0, 0.4, 0.8, 0.3)
RB_Y0, RB_T, RB_K = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.5, 2.0]), np.array([0.04, 3e7, 1e4])


def central_differences(loss, x, step):
    """d loss / d x by central differences, a step of ``step * max(|x_j|, 1)`` per entry."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for j in range(x.size):
        h = step * max(abs(x.flat[j]), 1.0)
        plus, minus = x.copy(), x.copy()
        plus.flat[j] += h
        minus.flat[j] -= h
        grad.flat[j] = (loss(plus) - loss(minus)) / (2 * h)
    return grad


def test_values_equal_scipy():
    y0 = anb.tensor(LV_Y0, requires_grad=True)
    args = tuple(anb.tensor(a, requires_grad=True) for a in LV_ARGS)
    ours = odeint(lotka_volterra, y0, anb.tensor(LV_T), args=args)
    reference = si.odeint(lotka_volterra, LV_Y0, LV_T, args=LV_ARGS)
    assert isinstance(ours, anb.Tensor) and ours.requires_grad
    np.testing.assert_array_equal(ours.numpy(), reference)


def test_tfirst_full_output_and_solver_options_are_scipys():
    def rhs(t, y, omega):
        return forced_oscillator(y, t, omega, 0.1)

    options = {"tfirst": True, "full_output": True, "rtol": 1e-7, "atol": [1e-9, 1e-8],
               "mxstep": 2000, "hmax": 0.5}
    omega = anb.tensor(1.3, requires_grad=True)
    ours, info = odeint(rhs, [1.0, 0.0], np.linspace(0, 3, 7), args=(omega,), **options)
    reference, reference_info = si.odeint(rhs, [1.0, 0.0], np.linspace(0, 3, 7), args=(1.3,),
                                          **options)
    np.testing.assert_array_equal(ours.numpy(), reference)
    assert info.keys() == reference_info.keys()
    np.testing.assert_array_equal(info["nst"], reference_info["nst"])
    (g,) = anb.grad(ours.sum(), omega)
    assert np.isfinite(g.item())


def test_without_tensors_it_is_scipys_own():
    ours = odeint(lotka_volterra, LV_Y0, LV_T, args=LV_ARGS)
    assert type(ours) is np.ndarray
    np.testing.assert_array_equal(ours, si.odeint(lotka_volterra, LV_Y0, LV_T, args=LV_ARGS))
    ours, info = odeint(lotka_volterra, LV_Y0, LV_T, args=LV_ARGS, full_output=True)
    assert info["message"] == "Integration successful."


def test_lotka_volterra_gradients_match_central_differences():
    weights = np.random.default_rng(0).standard_normal((len(LV_T), 2))
    y0, t = anb.tensor(LV_Y0, requires_grad=True), anb.tensor(LV_T, requires_grad=True)
    params = anb.tensor(np.array(LV_ARGS), requires_grad=True)
    args = tuple(params[i] for i in range(4))
    loss = anb.sum(weights * odeint(lotka_volterra, y0, t, args=args, **TIGHT))
    grads = anb.grad(loss, [y0, t, params])

    def reference(y0_, t_, params_):
        solution = si.odeint(lotka_volterra, y0_, t_, args=tuple(params_), rtol=1e-13,
                             atol=1e-13)
        return np.sum(weights * solution)

    inputs = [LV_Y0, LV_T, np.array(LV_ARGS)]
    for k, ours in enumerate(grads):
        def moved(x, k=k):
            return reference(*[x if i == k else v for i, v in enumerate(inputs)])

        expected = central_differences(moved, inputs[k], 1e-5)
        np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-6, atol=1e-6)


def test_gradient_of_the_first_time_point_sees_a_time_dependent_func():
    t = anb.tensor([0.3, 1.0, 2.5], requires_grad=True)
    omega = anb.tensor(1.7, requires_grad=True)
    y = odeint(forced_oscillator, anb.tensor([0.5, -0.2]), t, args=(omega, 0.3), **TIGHT)
    g_t, g_omega = anb.grad(anb.sum(y * y), [t, omega])

    def reference(t_, omega_):
        return np.sum(si.odeint(forced_oscillator, [0.5, -0.2], t_, args=(omega_, 0.3),
                                **TIGHT) ** 2)

    np.testing.assert_allclose(
        g_t.numpy(), central_differences(lambda x: reference(x, 1.7), t.numpy(), 1e-5),
        rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        g_omega.item(), central_differences(lambda x: reference(t.numpy(), x[0]), [1.7], 1e-5),
        rtol=1e-6)


def test_stiff_robertson_gradients_match_central_differences():
    # The weights bring y[1] (~1e-5) to the others' scale.
    weights = np.array([[0.0, 0.0, 0.0], [1.0, 3e4, -1.0], [2.0, -1e4, 1.0]])
    y0, t = anb.tensor(RB_Y0, requires_grad=True), anb.tensor(RB_T, requires_grad=True)
    log_k = anb.tensor(np.log(RB_K), requires_grad=True)
    loss = anb.sum(weights * odeint(robertson, y0, t, args=(anb.exp(log_k),), **TIGHT))
    grads = anb.grad(loss, [y0, t, log_k])

    def reference(y0_, t_, log_k_):
        solution = si.odeint(robertson, y0_, t_, args=(np.exp(log_k_),), rtol=1e-12,
                             atol=1e-14)
        return np.sum(weights * solution)

    inputs = [RB_Y0, RB_T, np.log(RB_K)]
    for k, ours in enumerate(grads):
        def moved(x, k=k):
            return reference(*[x if i == k else v for i, v in enumerate(inputs)])

        expected = central_differences(moved, inputs[k], 1e-6)
        np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-4, atol=1e-6,
                                   err_msg=f"input {k}")


def test_a_func_returning_a_list_of_tensors_works():
    def rhs(y, t, k):
        return [-k * y[0], k * y[0]]

    k = anb.tensor(0.7, requires_grad=True)
    y = odeint(rhs, anb.tensor([1.0, 0.0]), [0.0, 1.0], args=(k,), **TIGHT)
    (g,) = anb.grad(y[1, 1], k)
    np.testing.assert_allclose(g.item(), np.exp(-0.7), rtol=1e-7)


@pytest.mark.parametrize("bad", [None, "fast", {"a": 1}])
def test_a_func_returning_no_array_is_a_type_error(bad):
    with pytest.raises(TypeError, match="func must return an array"):
        odeint(lambda y, t: bad, anb.tensor([1.0]), [0.0, 1.0])


def test_bad_shapes_raise_scipys_errors():
    for y0, t in ((np.ones((2, 2)), [0.0, 1.0]), (np.ones(2), [[0.0, 1.0]])):
        with pytest.raises(Exception) as scipy_error:
            si.odeint(lambda y, t: -y, y0, t)
        with pytest.raises(type(scipy_error.value)):
            odeint(lambda y, t: -y, anb.tensor(y0, requires_grad=True), t)


def test_create_graph_gives_the_first_derivative_and_refuses_the_second():
    k = anb.tensor(0.5, requires_grad=True)
    y = odeint(lambda y, t, k: -k * y, anb.tensor([1.0]), [0.0, 2.0], args=(k,), **TIGHT)
    (g,) = anb.grad(y[1, 0], k, create_graph=True)
    np.testing.assert_allclose(g.item(), -2.0 * np.exp(-1.0), rtol=1e-8)
    with pytest.raises(RuntimeError, match="cannot be differentiated again"):
        anb.grad(g, k)


def test_inside_compile_it_runs_eagerly_with_a_warning():
    k = anb.tensor(0.5, requires_grad=True)

    @anb.compile
    def final(k):
        return odeint(lambda y, t, k: -k * y, anb.tensor([1.0]), [0.0, 2.0], args=(k,))[1, 0]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = [final(k) for _ in range(2)]
    assert any(issubclass(w.category, anb.CompileWarning) for w in caught)
    for value in values:
        np.testing.assert_allclose(value.item(), np.exp(-1.0), rtol=1e-7)
        np.testing.assert_allclose(anb.grad(value, k)[0].item(), -2 * np.exp(-1.0), rtol=1e-6)


def robertson_jacobian(y, t, k):
    k = np.asarray(k)
    return np.array([
        [-k[0], k[2] * y[2], k[2] * y[1]],
        [k[0], -k[2] * y[2] - 2 * k[1] * y[1], -k[2] * y[1]],
        [0.0, 2 * k[1] * y[1], 0.0],
    ])


@pytest.mark.parametrize("col_deriv", [0, 1])
def test_dfun_gives_scipys_values_and_the_same_gradients(col_deriv):
    def dfun(y, t, k):
        jacobian = robertson_jacobian(y, t, k)
        return jacobian.T if col_deriv else jacobian

    k = anb.tensor(RB_K, requires_grad=True)
    options = dict(TIGHT, col_deriv=col_deriv)
    with_dfun = odeint(robertson, anb.tensor(RB_Y0), RB_T, args=(k,), Dfun=dfun, **options)
    reference = si.odeint(robertson, RB_Y0, RB_T, args=(RB_K,), Dfun=dfun, **options)
    np.testing.assert_array_equal(with_dfun.numpy(), reference)
    without = odeint(robertson, anb.tensor(RB_Y0), RB_T, args=(k,), **TIGHT)
    weights = np.array([[0.0, 0.0, 0.0], [1.0, 3e4, -1.0], [2.0, -1e4, 1.0]])
    (g_with,) = anb.grad(anb.sum(weights * with_dfun), k)
    (g_without,) = anb.grad(anb.sum(weights * without), k)
    np.testing.assert_allclose(g_with.numpy() * RB_K, g_without.numpy() * RB_K, rtol=1e-5,
                               atol=1e-8)


def test_y0_as_a_list_of_tensors_and_float32_gradients():
    x0 = anb.tensor(1.0, requires_grad=True)
    k = anb.tensor(np.float32(0.5), requires_grad=True)
    y = odeint(lambda y, t, k: -k * y, [x0, 2.0 * x0], [0.0, 1.0], args=(k,), **TIGHT)
    g_x0, g_k = anb.grad(y[1].sum(), [x0, k])
    np.testing.assert_allclose(g_x0.item(), 3 * np.exp(-0.5), rtol=1e-7)
    assert g_k.dtype == np.float32
    np.testing.assert_allclose(g_k.item(), -3 * np.exp(-0.5), rtol=1e-6)


def test_args_that_are_not_a_tuple_raise_scipys_error():
    k = anb.tensor(0.5, requires_grad=True)
    with pytest.raises(Exception) as scipy_error:
        si.odeint(lambda y, t, k: -k * y, [1.0], [0.0, 1.0], args=0.5)
    with pytest.raises(type(scipy_error.value), match="tuple"):
        odeint(lambda y, t, k: -k * y, [1.0], [0.0, 1.0], args=k)


def test_a_func_that_branches_on_values_gets_its_gradient_without_a_warning():
    def switched(y, t, k):
        return -k * y if float(t) < 0.5 else -2.0 * k * y

    k = anb.tensor(0.5, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = odeint(switched, anb.tensor([1.0]), [0.0, 0.5, 1.0], args=(k,), **TIGHT)
        (g,) = anb.grad(y[2, 0], k)
    # y(1) = exp(-0.5 k - k) on the two halves
    np.testing.assert_allclose(g.item(), -1.5 * np.exp(-0.75), rtol=1e-6)


def test_integer_and_array_arguments_reach_func_as_they_are():
    def rhs(y, t, k, order, scales):
        return -k * scales * y[order]

    k = anb.tensor(0.5, requires_grad=True)
    order, scales = np.array([1, 0]), np.array([1.0, 2.0])
    y = odeint(rhs, anb.tensor([1.0, 1.0]), [0.0, 1.0], args=(k, order, scales), **TIGHT)
    reference = si.odeint(rhs, [1.0, 1.0], [0.0, 1.0], args=(0.5, order, scales), **TIGHT)
    np.testing.assert_array_equal(y.numpy(), reference)
    (g,) = anb.grad(y[1].sum(), k)
    h = 1e-6
    moved = [si.odeint(rhs, [1.0, 1.0], [0.0, 1.0], args=(0.5 + s, order, scales), rtol=1e-12,
                       atol=1e-12)[1].sum() for s in (h, -h)]
    np.testing.assert_allclose(g.item(), (moved[0] - moved[1]) / (2 * h), rtol=1e-6)
