"""Forward rules of the ``special`` family (``autograd/jvp/special.py``), from the registry,
and of the FFT and convolution ops (``autograd/jvp/spectral.py``): against finite
differences, against each op's VJP and to second order (``jvp_checks``); a tangent for an
input whose derivative is not implemented raises, as the VJP does."""

import numpy as np
import pytest

import autograd_nb  # noqa: F401 - registers every op
from autograd_nb.autograd.jvp import RULES
from autograd_nb.autograd.jvp import spectral as _spectral_rules  # noqa: F401
from autograd_nb.autograd.jvp.special import SPECIAL_OPS
from autograd_nb.ops.registry import REGISTRY, DerivativeNotImplemented
from tests.ops.jvp_checks import Case, check_all, check_second_order, random_like

#: Values of the inputs that are not differentiated (orders): whole numbers where the
#: function takes them.
ORDERS = {"polygamma": (0, 3), "jn": (0, 4), "yn": (0, 4)}
#: Ops whose derivative in some inputs is made of ops not differentiable in them again (the
#: shape parameters of the incomplete gamma and beta functions): their second order is
#: checked in ``x`` alone, and raises in those inputs.
FIRST_ORDER_ONLY = {"gammainc": (0,), "gammaincc": (0,), "betainc": (0, 1)}


def constant_values(name, rng, shape):
    if name in ORDERS:
        low, high = ORDERS[name]
        return rng.integers(low, high, shape).astype(np.float64)
    low, high = REGISTRY[name].domain
    if name in ("iv", "ive", "jv", "yv", "kv", "kve"):
        low, high = 0.2, 2.5
    return rng.uniform(low, high, shape)


def special_case(name, shapes, seed=0, constant=()):
    """``name`` on inputs of ``shapes``; the inputs in ``constant`` (and those whose
    derivative is not implemented) are held fixed."""
    op = REGISTRY[name]
    rng = np.random.default_rng(seed)
    low, high = op.domain
    if name in ("iv", "ive"):  # (real for x < 0 at whole orders only)
        low = 0.2
    fixed = set(op.not_implemented) | set(constant)
    values = [constant_values(name, rng, shape) if k in fixed else rng.uniform(low, high, shape)
              for k, shape in enumerate(shapes)]
    moving = [k for k in range(op.n_inputs) if k not in fixed]

    def primals(*xs):
        out = list(values)
        for k, x in zip(moving, xs):
            out[k] = x
        return out

    return Case(name, [values[k] for k in moving], primals=primals, positions=moving,
                rtol=1e-5, atol=1e-7)


def special_cases():
    cases = []
    for name in SPECIAL_OPS:
        n = REGISTRY[name].n_inputs
        shapes = [(5,)] * n
        if name in FIRST_ORDER_ONLY:
            case = special_case(name, shapes)
            case.second_order = False
            cases.append(case)
            cases.append(special_case(name, shapes, seed=1, constant=FIRST_ORDER_ONLY[name]))
        else:
            cases.append(special_case(name, shapes))
        if n > 1:  # broadcasting: (3, 1) against (5,)
            cases.append(special_case(name, [(3, 1)] + [(5,)] * (n - 1), seed=2,
                                      constant=FIRST_ORDER_ONLY.get(name, ())))
    return cases


SPECIAL_CASES = special_cases()


@pytest.mark.parametrize("case", SPECIAL_CASES, ids=repr)
def test_special_rule(case):
    check_all(case)


def test_every_special_op_is_checked():
    assert {case.name for case in SPECIAL_CASES} == set(SPECIAL_OPS)
    assert set(SPECIAL_OPS) == {
        name for name, op in REGISTRY.items()
        if type(op).__module__ in ("autograd_nb.ops.special", "autograd_nb.ops.special_bessel")
    }


@pytest.mark.parametrize("name", sorted(FIRST_ORDER_ONLY))
def test_second_order_in_a_shape_parameter_raises(name):
    case = special_case(name, [(5,)] * REGISTRY[name].n_inputs)
    with pytest.raises(DerivativeNotImplemented):
        check_second_order(case, np.random.default_rng(0))


@pytest.mark.parametrize("name", sorted(name for name in SPECIAL_OPS
                                        if REGISTRY[name].not_implemented))
def test_a_tangent_of_an_input_without_a_derivative_raises(name):
    op = REGISTRY[name]
    case = special_case(name, [(4,)] * op.n_inputs)
    xs = [np.asarray(x) for x in case.make_primals(*case.xs)]
    tensors = [autograd_nb.tensor(x) for x in xs]
    tensors_out = case.run(case.xs)
    tangents = [autograd_nb.tensor(np.ones_like(x)) for x in xs]
    with pytest.raises(DerivativeNotImplemented, match="not implemented"):
        RULES[name](tangents, tensors, tensors_out[2], tensors_out[3])
    # (no tangent there: no error)
    for k in op.not_implemented:
        tangents[k] = None
    RULES[name](tangents, tensors, tensors_out[2], tensors_out[3])


# -- FFT and convolution ----------------------------------------------------------------------


def spectral_cases():
    rng = np.random.default_rng(5)
    z5 = random_like(rng, np.zeros(5, np.complex128))
    z43 = random_like(rng, np.zeros((4, 3), np.complex128))
    x6, x45 = rng.standard_normal(6), rng.standard_normal((4, 5))
    cases = []
    for norm in (None, "ortho", "forward"):
        for inverse in (False, True):
            cases.append(Case("_fft_c2c", [z5], kwargs={"axis": -1, "n": None, "norm": norm,
                                                        "inverse": inverse}))
        cases.append(Case("_fft_r2c", [x6], kwargs={"axis": 0, "n": None, "norm": norm}))
        cases.append(Case("_fft_c2r", [z5], kwargs={"axis": 0, "n": None, "norm": norm}))
    cases += [
        Case("_fft_c2c", [z43], kwargs={"axis": 0, "n": 6, "norm": None, "inverse": False}),
        Case("_fft_c2c", [x45], kwargs={"axis": 1, "n": 3, "norm": None, "inverse": True}),
        Case("_fft_r2c", [x45], kwargs={"axis": 0, "n": 7, "norm": "ortho"}),
        Case("_fft_r2c", [x45], kwargs={"axis": 1, "n": None, "norm": None, "conj": True,
                                        "double": True}),
        Case("_fft_c2r", [z43], kwargs={"axis": 1, "n": 5, "norm": None}),
        Case("_fft_c2r", [z43], kwargs={"axis": 0, "n": None, "norm": None, "halve": True,
                                        "conj": True}),
        Case("_fft_resize", [x45], kwargs={"axis": 1, "n": 7}),
        Case("_fft_resize", [z43], kwargs={"axis": 0, "n": 2}),
    ]
    for mode in ("full", "valid"):
        cases.append(Case("_convolve", [rng.standard_normal(6), rng.standard_normal(3)],
                          kwargs={"mode": mode}))
        cases.append(Case("_convolve", [rng.standard_normal((4, 5)),
                                        rng.standard_normal((2, 3))], kwargs={"mode": mode}))
    return cases


SPECTRAL_CASES = spectral_cases()


@pytest.mark.parametrize("case", SPECTRAL_CASES, ids=repr)
def test_spectral_rule(case):
    check_all(case)


def test_every_spectral_op_is_checked():
    names = {name for name, op in REGISTRY.items()
             if type(op).__module__ in ("autograd_nb.ops.fft", "autograd_nb.ops.signal")}
    assert {case.name for case in SPECTRAL_CASES} == names


@pytest.mark.parametrize("name, number", [("iv", 1.5), ("polygamma", 1), ("jn", 2),
                                          ("xlogy", 0.7), ("gammainc", 1.3)])
def test_special_rule_with_a_python_number_among_the_inputs(name, number):
    x = np.random.default_rng(3).uniform(0.5, 3.0, 4)
    if name == "xlogy":  # (a number in the differentiated position: the other is x)
        case = Case(name, [x], primals=lambda x: [x, number], positions=[0])
    else:
        case = Case(name, [x], primals=lambda x: [number, x], positions=[1])
    check_all(case)
