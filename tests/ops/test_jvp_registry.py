"""Every forward-mode rule of the registry (``autograd_nb.autograd.jvp.RULES``), checked three
ways: its tangent against central finite differences, against the op's VJP
(``<jvp(t), v> == <t, vjp(v)>`` for random ``t`` and ``v``), and to second order (forward over
forward, and reverse over forward: the gradient of ``<jvp(t), v>`` against finite differences).

The cases come from :data:`CASES` (by op name) or, for any elementwise op (the special
functions' included), from the op's own test domain; a rule without a case fails
``test_every_rule_has_a_case``, so rules registered later are checked once they have one.

Every rule is also run with a batch of tangents (``jacfwd``-style, a batched dual level)
against the same rule on each tangent in turn, with the gradient of the batched tangents
(reverse over the batched forward), and over hypothesis' shapes, broadcasting and axes.
"""

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb.autograd import forward_ad as fwAD
from autograd_nb.autograd import jvp
from autograd_nb.autograd.jvp import RULES
from autograd_nb.ops.elementwise import ElementwiseOp
from autograd_nb.ops.registry import REGISTRY, call
from tests.checks import elementwise_attrs, elementwise_values, numerical_vjp
from tests.ops.jvp_checks import batched_and_looped, check_batched, close

#: Families whose rules another module writes (:data:`autograd_nb.autograd.jvp.FAMILIES`):
#: an op of one of them may lack a rule only while that module does not exist.
PENDING = {
    "linalg": "linalg", "special": "special", "special-internal": "special",
    "fft": "spectral", "signal": "spectral",
}


def _module_exists(name):
    return importlib.util.find_spec(f"autograd_nb.autograd.jvp.{name}") is not None


def jvp_of(function, arrays, tangents):
    """``(output, tangent)`` of ``function`` at ``arrays`` along ``tangents``, in forward mode."""
    with fwAD.dual_level():
        duals = [fwAD.make_dual(anb.tensor(a), anb.tensor(t)) for a, t in zip(arrays, tangents)]
        primal, tangent = fwAD.unpack_dual(function(*duals))
    return primal.numpy(), None if tangent is None else tangent.numpy()


def numerical_jvp(function, arrays, tangents, eps=1e-6):
    plus = function(*[anb.tensor(a + eps * t) for a, t in zip(arrays, tangents)]).numpy()
    minus = function(*[anb.tensor(a - eps * t) for a, t in zip(arrays, tangents)]).numpy()
    return (plus - minus) / (2 * eps)


# -- cases: op name -> (function of Tensors, input arrays) ---------------------------------------


def _positive(rng, shape):
    return rng.uniform(0.5, 1.5, size=shape)


def _normal(rng, shape):
    return rng.standard_normal(shape)


def _distinct(rng, shape):
    """Values without ties, far enough apart for finite differences of max and min."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.5 + rng.uniform(0, 0.1, n)).reshape(shape)


CASES = {
    "reshape": lambda rng: (lambda x: x.reshape(3, 2), [_normal(rng, (2, 3))]),
    "transpose": lambda rng: (lambda x: anb.transpose(x, (2, 0, 1)), [_normal(rng, (2, 3, 4))]),
    "broadcast_to": lambda rng: (lambda x: anb.broadcast_to(x, (4, 2, 3)), [_normal(rng, (2, 1))]),
    "astype": lambda rng: (lambda x: anb.real(x.astype(np.complex128) * (1 - 2j)),
                           [_normal(rng, (3,))]),
    "concatenate": lambda rng: (lambda a, b: anb.concatenate([a, b], axis=1),
                                [_normal(rng, (2, 3)), _normal(rng, (2, 2))]),
    "stack": lambda rng: (lambda a, b: anb.stack([a, b], axis=-1),
                          [_normal(rng, (2, 3)), _normal(rng, (2, 3))]),
    "getitem": lambda rng: (lambda x: x[[0, 2, 2], 1:], [_normal(rng, (3, 4))]),
    "setitem": lambda rng: (lambda x, v: call("setitem", x, v, index=(slice(1, None), 0)),
                            [_normal(rng, (3, 4)), _normal(rng, (2,))]),
    "_index_scatter": lambda rng: (_scatter_into((3, 4), ([0, 2, 0], slice(1, None))),
                                   [_normal(rng, (3, 3))]),
    "sum": lambda rng: (lambda x: anb.sum(x, axis=(0, 2), keepdims=True),
                        [_normal(rng, (2, 3, 2))]),
    "cumsum": lambda rng: (lambda x: anb.cumsum(x, axis=1), [_normal(rng, (2, 3))]),
    "cumprod": lambda rng: (lambda x: anb.cumprod(x, axis=0), [_positive(rng, (3, 2))]),
    "prod": lambda rng: (lambda x: anb.prod(x, axis=1), [_positive(rng, (2, 3))]),
    "max": lambda rng: (lambda x: anb.max(x, axis=0), [_distinct(rng, (3, 4))]),
    "min": lambda rng: (lambda x: anb.min(x, axis=1, keepdims=True), [_distinct(rng, (3, 4))]),
    "logsumexp": lambda rng: (lambda x: anb.logsumexp(x, axis=-1), [_normal(rng, (2, 3))]),
    "softmax": lambda rng: (lambda x: anb.softmax(x, axis=0), [_normal(rng, (3, 2))]),
    "log_softmax": lambda rng: (lambda x: anb.log_softmax(x), [_normal(rng, (2, 3))]),
    "_bmm": lambda rng: (lambda a, b: anb.matmul(a, b),
                         [_normal(rng, (2, 3, 4)), _normal(rng, (4, 2))]),
    "_real": lambda rng: (lambda x: anb.real(x * (1 + 2j)) * x, [_normal(rng, (3,))]),
    "_imag": lambda rng: (lambda x: anb.imag(anb.exp(x * 1j)), [_normal(rng, (3,))]),
    "_conj": lambda rng: (lambda x: anb.real(anb.conj(x * (1 + 2j)) * (x * 1j)),
                          [_normal(rng, (3,))]),
    "_angle": lambda rng: (lambda x: anb.angle(x + (x * x) * 1j), [_positive(rng, (3,))]),
}


def _scatter_into(shape, index):
    """``_index_scatter`` of values into zeros of ``shape`` at ``index`` (repeated rows add
    up), as ``getitem``'s differentiable rule records it."""
    _, source = REGISTRY["getitem"].prepare([np.zeros(shape)], {"index": index})
    return lambda values: call("_index_scatter", values, source=source)


def case_for(name, rng):
    """``(function, arrays)`` for the op ``name``, or None where there is none."""
    if name in CASES:
        return CASES[name](rng)
    op = REGISTRY.get(name)
    if isinstance(op, ElementwiseOp):
        shapes = [(2, 3)] * op.n_inputs
        arrays = elementwise_values(op, shapes, np.float64, rng)
        if name in ("abs", "relu", "maximum", "minimum", "clip", "hypot"):
            arrays = [np.where(np.abs(a) < 0.1, a + 0.3, a) for a in arrays]
        if name in ("maximum", "minimum"):
            arrays[1] = arrays[0] + np.where(rng.uniform(size=(2, 3)) > 0.5, 0.4, -0.4)
        attrs = elementwise_attrs(op, rng)
        if name == "clip":
            attrs = {"a_min": -1.05, "a_max": 1.05}
            arrays = [np.where(np.abs(np.abs(a) - 1.05) < 0.1, a * 0.5, a) for a in arrays]
        if name == "where":
            return (lambda a, b: call("where", arrays[0], a, b),
                    arrays[1:])
        kept = [k for k in range(op.n_inputs) if k not in op.not_implemented]
        fixed = dict(enumerate(arrays))

        def function(*tensors):
            args = dict(fixed)
            args.update(zip(kept, tensors))
            return call(name, *[args[k] for k in range(op.n_inputs)], **attrs)

        return function, [arrays[k] for k in kept]
    return None


#: The copies between devices: tests/cuda/test_forward_ad_cuda.py checks their rules.
DEVICE_RULES = {"to_cuda", "to_cpu"}
#: Rule modules with test files of their own, which know their inputs' domains (conditioned
#: and definite matrices, phase-free outputs, special functions' shape parameters):
#: tests/ops/test_jvp_linalg.py and tests/ops/test_jvp_special_spectral.py.
OWN_TESTS = ("linalg", "special", "spectral")
CHECKED_ELSEWHERE = {
    name for name, rule in RULES.items()
    if rule.__module__.rsplit(".", 1)[-1] in OWN_TESTS
}
RULED = sorted(set(RULES) - DEVICE_RULES - CHECKED_ELSEWHERE)


def test_every_registered_op_has_a_rule_or_is_pending():
    missing = []
    for name, op in REGISTRY.items():
        if name in RULES:
            continue
        module = PENDING.get(op.family)
        if module is None or _module_exists(module):
            missing.append(name)
    assert not missing, f"ops without a forward rule: {missing}"


def test_every_rule_has_a_case():
    rng = np.random.default_rng(0)
    assert [n for n in RULED if case_for(n, rng) is None] == []


def _check_first_order(name, seed):
    rng = np.random.default_rng(seed)
    function, arrays = case_for(name, rng)
    tangents = [rng.standard_normal(np.shape(a)) for a in arrays]
    _, tangent = jvp_of(function, arrays, tangents)
    expected = numerical_jvp(function, arrays, tangents)
    if tangent is None:
        tangent = np.zeros_like(expected)
    np.testing.assert_allclose(tangent, expected, rtol=1e-5, atol=1e-6)
    # <jvp(t), v> == <t, vjp(v)>
    v = rng.standard_normal(np.shape(expected))
    inputs = [anb.tensor(a, requires_grad=True) for a in arrays]
    grads = anb.grad(function(*inputs), inputs, grad_outputs=anb.tensor(v), allow_unused=True,
                     materialize_grads=True)
    left = float(np.sum(tangent * v))
    right = sum(float(np.sum(t * g.numpy())) for t, g in zip(tangents, grads))
    np.testing.assert_allclose(left, right, rtol=1e-9, atol=1e-9)


def _check_second_order(name, seed):
    rng = np.random.default_rng(seed)
    function, arrays = case_for(name, rng)
    tangents = [rng.standard_normal(np.shape(a)) for a in arrays]
    v = rng.standard_normal(np.shape(function(*[anb.tensor(a) for a in arrays]).numpy()))

    def along(*xs):  # <jvp(xs; t), v> as a function of the point
        with fwAD.dual_level():
            duals = [fwAD.make_dual(x, anb.tensor(t)) for x, t in zip(xs, tangents)]
            tangent = fwAD.unpack_dual(function(*duals)).tangent
        if tangent is None:
            return anb.sum(xs[0] * 0.0)
        return anb.sum(tangent * anb.tensor(v))

    # reverse over forward
    inputs = [anb.tensor(a, requires_grad=True) for a in arrays]
    value = along(*inputs)
    got = [np.zeros(np.shape(a)) for a in arrays]
    if value.requires_grad:  # (else a tangent constant in the point: a linear op)
        got = [g.numpy() for g in anb.grad(value, inputs, allow_unused=True,
                                           materialize_grads=True)]
    expected = numerical_vjp(lambda *xs: along(*map(anb.tensor, xs)).numpy(), arrays,
                             np.ones(()))
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    # forward over forward: the outer level's tangent of the inner one's
    outer = [rng.standard_normal(np.shape(a)) for a in arrays]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(anb.tensor(a), anb.tensor(t)) for a, t in zip(arrays, outer)]
        second = fwAD.unpack_dual(along(*duals)).tangent
    numeric = numerical_jvp(along, arrays, outer)
    got = 0.0 if second is None else float(second.numpy())
    np.testing.assert_allclose(got, numeric, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", RULED)
def test_rule_against_finite_differences_and_vjp(name):
    _check_first_order(name, 0)


@pytest.mark.parametrize("name", RULED)
def test_rule_second_order(name):
    _check_second_order(name, 1)


# -- hypothesis: shapes, broadcasting, axes -------------------------------------------------------

BINARY = sorted(
    n for n in RULED
    if isinstance(REGISTRY.get(n), ElementwiseOp) and REGISTRY[n].n_inputs == 2
    and not REGISTRY[n].not_implemented and REGISTRY[n].family == "elementwise"
)
shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(BINARY), shape=shapes, data=st.data())
def test_binary_rules_broadcast(name, shape, data):
    """A binary op's tangent over broadcast operands: each share broadcast to the result."""
    op = REGISTRY[name]
    other = tuple(1 if data.draw(st.booleans()) else n for n in shape)[
        data.draw(st.integers(0, len(shape))):]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    low, high = op.domain
    a, b = rng.uniform(low, high, size=shape), rng.uniform(low, high, size=other)
    if name in ("maximum", "minimum"):
        b = np.where(np.abs(a.mean() - b) < 0.2, b + 0.5, b)
    ta, tb = rng.standard_normal(a.shape), rng.standard_normal(b.shape)
    function = getattr(anb, name)
    _, tangent = jvp_of(function, [a, b], [ta, tb])
    expected = numerical_jvp(function, [a, b], [ta, tb])
    np.testing.assert_allclose(tangent, expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(["sum", "logsumexp", "prod", "max", "min"]),
       shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), data=st.data())
def test_reduction_rules_over_axes(name, shape, data):
    axes = data.draw(st.sets(st.integers(0, len(shape) - 1)))
    axis = tuple(sorted(axes)) if axes else None
    keepdims = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = _distinct(rng, shape) * 0.3 + 0.5 if name != "prod" else _positive(rng, shape)
    t = rng.standard_normal(shape)

    def function(x):
        return getattr(anb, name)(x, axis=axis, keepdims=keepdims)

    _, tangent = jvp_of(function, [x], [t])
    np.testing.assert_allclose(tangent, numerical_jvp(function, [x], [t]), rtol=1e-5, atol=1e-6)


# -- batched tangents -----------------------------------------------------------------------------

#: The rules that take a batch of tangents by running once per tangent (``batched=False``):
#: the Sylvester solver's (its unknown mixes columns) and the transposed VJP (``cumprod``).
#: Every other rule takes the batch in its own ops.
LOOPED = {"_solve_sylvester", "_sqrtm", "cumprod"}


def test_which_rules_take_a_batch_in_their_own_ops():
    assert jvp.LOOPED == LOOPED
    native = sorted(set(RULES) - jvp.LOOPED)
    assert "_bmm" in native and "getitem" in native and "_lu_solve" in native


@pytest.mark.parametrize("name", RULED)
def test_rule_on_a_batch_of_tangents(name):
    rng = np.random.default_rng(2)
    function, arrays = case_for(name, rng)
    check_batched(function, arrays, rng)


def _check_batched_function(function, arrays, rng):
    batches = [rng.standard_normal((2,) + np.shape(a)) for a in arrays]
    _, batched, looped = batched_and_looped(function, arrays, batches)
    close(batched.numpy(), np.stack([t.numpy() for t in looped]))
    for b in range(2):  # and each tangent against finite differences
        expected = numerical_jvp(function, arrays, [t[b] for t in batches])
        np.testing.assert_allclose(batched.numpy()[b], expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=8, deadline=None)
@given(name=st.sampled_from(["add", "multiply", "divide", "maximum", "arctan2"]), shape=shapes,
       data=st.data())
def test_batched_binary_rules_broadcast(name, shape, data):
    other = tuple(1 if data.draw(st.booleans()) else n for n in shape)[
        data.draw(st.integers(0, len(shape))):]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    a, b = rng.uniform(0.5, 1.5, size=shape), rng.uniform(-1.5, -0.5, size=other)
    _check_batched_function(getattr(anb, name), [a, b], rng)


@settings(max_examples=8, deadline=None)
@given(name=st.sampled_from(["sum", "logsumexp", "max", "softmax", "cumsum"]),
       shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), data=st.data())
def test_batched_reductions_over_axes(name, shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = _distinct(rng, shape) * 0.3
    if name in ("softmax", "cumsum"):
        axis = data.draw(st.integers(-len(shape), len(shape) - 1))
        function = lambda x: getattr(anb, name)(x, axis=axis)  # noqa: E731
    else:
        axes = data.draw(st.sets(st.integers(0, len(shape) - 1)))
        axis = tuple(sorted(axes)) if axes else None
        keepdims = data.draw(st.booleans())
        function = lambda x: getattr(anb, name)(x, axis=axis, keepdims=keepdims)  # noqa: E731
    _check_batched_function(function, [x], rng)


@settings(max_examples=8, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=2, max_size=3).map(tuple), data=st.data())
def test_batched_shape_and_index_rules(shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    rows = data.draw(st.lists(st.integers(0, shape[-1] - 1), min_size=1, max_size=3))
    joined = data.draw(st.integers(-len(shape), len(shape) - 1))
    advanced = data.draw(st.booleans())

    def function(x, y):
        moved = anb.transpose(x + anb.broadcast_to(y, shape), axes)
        picked = x[..., rows] if advanced else x[:, None, 0]
        flat = anb.concatenate([moved.reshape(-1), picked.reshape(-1)], axis=0)
        return flat * anb.stack([x, x * y], axis=joined).sum()

    _check_batched_function(function, [rng.standard_normal(shape),
                                       rng.standard_normal(shape[-1:])], rng)


def test_batched_products_put_the_batch_where_matmuls_go():
    rng = np.random.default_rng(3)
    cases = [  # (a, b): a single matrix, a stack of them, a vector on either side
        ((3, 4), (4, 2)), ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 5)), ((4,), (4, 3)),
        ((3, 4), (4,)), ((2, 1, 3, 4), (3, 4, 2)),
    ]
    for a_shape, b_shape in cases:
        _check_batched_function(anb.matmul, [rng.standard_normal(a_shape),
                                             rng.standard_normal(b_shape)], rng)
    _check_batched_function(lambda a, b: anb.einsum("ij,jk->ik", a, b),
                            [rng.standard_normal((2, 3)), rng.standard_normal((3, 2))], rng)
