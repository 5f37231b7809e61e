"""The checks of a forward rule (``autograd_nb.autograd.jvp``), called directly on one op:
its tangent against central finite differences of the op, against the op's VJP
(``<jvp(t), v> == <t, vjp(v)>``), and, to second order, the gradient of ``<jvp(t), v>`` with
respect to the primals against finite differences of that first-order quantity. With a batch
of tangents (a batched dual level), the rule's tangents against the same rule run on each
tangent of the batch in turn, and so is the gradient of the batched tangents (reverse over
the batched forward)."""

import numpy as np

import autograd_nb as anb
from autograd_nb.autograd import forward_ad as fwAD
from autograd_nb.autograd import jvp
from autograd_nb.ops.registry import REGISTRY, call

EPS = 1e-6


def inner(a, b):
    """The real inner product ``re(sum(conj(a) b))`` (torch's complex convention)."""
    return float(np.real(np.sum(np.conj(np.asarray(a)) * np.asarray(b))))


def random_like(rng, x, kind=None):
    """A random array of ``x``'s shape and dtype; ``kind`` "sym"/"herm": its matrices
    symmetric / Hermitian."""
    x = np.asarray(x)
    t = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        t = t + 1j * rng.standard_normal(x.shape)
    t = t.astype(x.dtype)
    if kind in ("sym", "herm"):
        t = 0.5 * (t + np.conj(np.swapaxes(t, -1, -2)))
    return t


class Case:
    """One op on some inputs.

    ``xs``: the arrays the checks perturb; ``primals(*xs)``: the op's inputs made from them
    (Tensors, with constants); ``positions[i]``: which op input ``xs[i]`` is; ``kinds[i]``:
    None, "sym" or "herm" (the tangents and perturbations of ``xs[i]``); ``invariant``: a
    function of the packed output that finite differences compare (for outputs defined up to
    a phase); ``project(v, output)``: a cotangent made to meet the op's phase condition.
    """

    def __init__(self, name, xs, primals=None, positions=None, kwargs=None, kinds=None,
                 invariant=None, project=None, project_second=None, rtol=1e-5, atol=1e-6,
                 eps=EPS, second_order=True):
        self.name, self.xs = name, [np.asarray(x) for x in xs]
        self.make_primals = primals or (lambda *ts: list(ts))
        self.positions = positions or list(range(len(xs)))
        self.kwargs = kwargs or {}
        self.kinds = kinds or [None] * len(xs)
        self.invariant, self.project = invariant, project
        self.project_second = project_second or project
        self.rtol, self.atol, self.eps = rtol, atol, eps
        self.second_order = second_order

    def __repr__(self):
        shapes = "-".join("x".join(map(str, x.shape)) or "0d" for x in self.xs)
        return f"{self.name}[{shapes}]{self.kwargs or ''}"

    @property
    def op(self):
        return REGISTRY[self.name]

    def run(self, arrays, requires_grad=False):
        """``(tensors, primals, output, attrs)`` at ``arrays``."""
        tensors = [anb.tensor(x, requires_grad=requires_grad) for x in arrays]
        primals = self.make_primals(*tensors)
        output = call(self.name, *primals, **self.kwargs)
        values = [p.detach().numpy() if isinstance(p, anb.Tensor) else p for p in primals]
        _, attrs = self.op.prepare(values, dict(self.kwargs))
        return tensors, primals, output, attrs

    def tangents(self, ts):
        out = [None] * len(self.make_primals(*[anb.tensor(x) for x in self.xs]))
        for position, t in zip(self.positions, ts):
            out[position] = anb.tensor(t)
        return out

    def jvp(self, arrays, ts, requires_grad=False):
        """``(tensors, output, tangent)``: the rule's tangent at ``arrays``."""
        tensors, primals, output, attrs = self.run(arrays, requires_grad)
        rule = jvp.RULES[self.name]
        tangent = rule(self.tangents(ts), primals, output, attrs)
        return tensors, output, tangent

    def shifted(self, ts, eps):
        return [x + eps * t for x, t in zip(self.xs, ts)]


def values_of(tangent, output):
    if tangent is None:
        return np.zeros(output.shape, dtype=output.dtype)
    assert tangent.shape == output.shape, (tangent.shape, output.shape)
    return tangent.detach().numpy()


def check_finite_differences(case, rng):
    ts = [random_like(rng, x, kind) for x, kind in zip(case.xs, case.kinds)]
    _, output, tangent = case.jvp(case.xs, ts)
    out, dout = output.numpy(), values_of(tangent, output)
    assert dout.dtype == out.dtype, (dout.dtype, out.dtype)
    g = case.invariant or (lambda y: y)
    eps = case.eps
    plus = np.asarray(case.run(case.shifted(ts, eps))[2].numpy())
    minus = np.asarray(case.run(case.shifted(ts, -eps))[2].numpy())
    numeric = (g(plus) - g(minus)) / (2 * eps)
    if case.invariant is None:
        pushed = dout
    else:  # the rule's tangent pushed through g, by differences of g alone (g is smooth)
        h = 1e-7 * max(1.0, float(np.max(np.abs(out))))
        scale = h / max(float(np.max(np.abs(dout))), 1e-300)
        pushed = (g(out + scale * dout) - g(out - scale * dout)) / (2 * scale)
    np.testing.assert_allclose(pushed, numeric, rtol=case.rtol,
                               atol=case.atol * max(1.0, float(np.max(np.abs(numeric)))))


def _cotangent(case, rng, output, second=False):
    v = random_like(rng, output.numpy())
    project = case.project_second if second else case.project
    return v if project is None else project(v, output.numpy())


def check_against_vjp(case, rng):
    ts = [random_like(rng, x, kind) for x, kind in zip(case.xs, case.kinds)]
    tensors, output, tangent = case.jvp(case.xs, ts, requires_grad=True)
    v = _cotangent(case, rng, output)
    grads = anb.grad(output, tensors, grad_outputs=anb.tensor(v), allow_unused=True,
                     materialize_grads=True)
    lhs = inner(v, values_of(tangent, output))
    rhs = sum(inner(g.numpy(), t) for g, t in zip(grads, ts))
    scale = max(1.0, abs(lhs), abs(rhs))
    assert abs(lhs - rhs) <= 1e-6 * scale, (lhs, rhs)


def check_second_order(case, rng):
    """d/dx <jvp(x; t), v> by reverse mode over the rule, against finite differences."""
    ts = [random_like(rng, x, kind) for x, kind in zip(case.xs, case.kinds)]
    ss = [random_like(rng, x, kind) for x, kind in zip(case.xs, case.kinds)]
    tensors, output, tangent = case.jvp(case.xs, ts, requires_grad=True)
    if tangent is None:
        return
    v = _cotangent(case, rng, output, second=True)
    if tangent.requires_grad:
        grads = anb.grad(tangent, tensors, grad_outputs=anb.tensor(v), allow_unused=True,
                         materialize_grads=True)
        analytic = sum(inner(g.numpy(), s) for g, s in zip(grads, ss))
    else:  # a tangent free of the primals (a linear op's): its derivative is 0
        analytic = 0.0

    def first_order(eps):
        _, out, tan = case.jvp(case.shifted(ss, eps), ts)
        return inner(v, values_of(tan, out))

    eps = 1e-5
    numeric = (first_order(eps) - first_order(-eps)) / (2 * eps)
    assert abs(analytic - numeric) <= 1e-4 * max(1.0, abs(numeric)), (analytic, numeric)


#: The tangents per batch in the batched checks.
BATCH = 2


def batched_and_looped(function, arrays, batches, kinds=None, requires_grad=False):
    """``(inputs, batched, looped)``: the tangent of ``function(*tensors)`` (one Tensor out) at
    ``arrays`` for the tangent batches ``batches`` (``(BATCH, *array.shape)`` each), in one
    pass of a batched dual level, and stacked from one pass per tangent (Tensors, None for a
    zero tangent). ``inputs``: the Tensors both differentiate in with ``requires_grad``."""
    inputs = [anb.tensor(a, requires_grad=requires_grad) for a in arrays]
    with fwAD.dual_level(batch_shape=len(batches[0])):
        duals = [fwAD.make_dual(x, anb.tensor(t)) for x, t in zip(inputs, batches)]
        batched = fwAD.unpack_dual(function(*duals)).tangent
    looped = []
    for b in range(len(batches[0])):
        with fwAD.dual_level():
            duals = [fwAD.make_dual(x, anb.tensor(t[b])) for x, t in zip(inputs, batches)]
            looped.append(fwAD.unpack_dual(function(*duals)).tangent)
    return inputs, batched, looped


def close(got, expected):
    """Bit-close: equal but for the order of the sums in a product of another shape."""
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-12)


def check_batched(function, arrays, rng, kinds=None, second_order=True, project=None):
    """The batched tangents of ``function`` against one pass per tangent, and the gradient of
    ``<batched tangents, V>`` against the sum of the per-tangent ones (``project(v,
    output)``: each cotangent made to meet the output's phase condition)."""
    kinds = kinds or [None] * len(arrays)
    batches = [np.stack([random_like(rng, a, kind) for _ in range(BATCH)])
               for a, kind in zip(arrays, kinds)]
    inputs, batched, looped = batched_and_looped(function, arrays, batches,
                                                 requires_grad=second_order)
    if batched is None:
        assert all(t is None for t in looped)
        return
    expected = [np.zeros(batched.shape[1:], batched.dtype) if t is None else t.detach().numpy()
                for t in looped]
    assert batched.shape == (BATCH,) + expected[0].shape, (batched.shape, expected[0].shape)
    close(batched.detach().numpy(), np.stack(expected))
    if not second_order or not batched.requires_grad:
        return
    v = random_like(rng, batched.detach().numpy())
    if project is not None:
        output = function(*[anb.tensor(a) for a in arrays]).numpy()
        v = np.stack([project(each, output) for each in v])
    got = anb.grad(batched, inputs, grad_outputs=anb.tensor(v), allow_unused=True,
                   materialize_grads=True)
    total = [np.zeros(np.shape(a)) for a in arrays]
    for b, tangent in enumerate(looped):
        if tangent is not None and tangent.requires_grad:
            each = anb.grad(tangent, inputs, grad_outputs=anb.tensor(v[b]), allow_unused=True,
                            materialize_grads=True)
            total = [t + e.numpy() for t, e in zip(total, each)]
    for g, t in zip(got, total):
        close(g.numpy(), t)


def check_case_batched(case, rng):
    """:func:`check_batched` for a :class:`Case`: its op on its primals."""

    def function(*tensors):
        return call(case.name, *case.make_primals(*tensors), **case.kwargs)

    check_batched(function, case.xs, rng, case.kinds, case.second_order, case.project_second)


def check_all(case, seed=0):
    rng = np.random.default_rng(seed)
    check_finite_differences(case, rng)
    check_against_vjp(case, rng)
    if case.second_order:
        check_second_order(case, rng)
    check_case_batched(case, rng)
