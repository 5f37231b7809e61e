"""``anb.linalg`` inside ``anb.compile``: the decompositions record and replay (their forward
drivers, ``Op.forward_spec``; their backward drivers, ``Op.exec_spec``, in the replayed
backward table), outputs and gradients bit for bit against eager, with no CompileWarning;
a replay on a matrix where eager raises (a singular ``solve``, a ``cholesky`` of a matrix
that is not positive definite, an ``eigh`` of a nan) raises eager's error, and the program
still serves the next call."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb as anb
from autograd_nb.replay import CompileWarning

fast = settings(max_examples=8, deadline=None)


def _bits(array):
    array = np.ascontiguousarray(array)
    return array.view(np.uint32 if array.dtype == np.float32 else np.uint64)


def _assert_same_bits(eager, replayed):
    for e, r in zip(eager, replayed, strict=True):
        assert e.shape == r.shape and e.dtype == r.dtype
        np.testing.assert_array_equal(_bits(e), _bits(r))


def _spd(rng, shape, dtype):
    a = rng.standard_normal(shape)
    n = shape[-1]
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def _general(rng, shape, dtype):
    n = shape[-1]
    return (rng.standard_normal(shape) + n * np.eye(shape[-2], n)).astype(dtype)


#: name -> (fn of tensors returning tensors, makes its arguments' arrays from (rng, dtype));
#: the first argument requires grad.
CASES = {
    "solve": (lambda a, b: anb.linalg.solve(a, b),
              lambda rng, d: [_general(rng, (4, 4), d), rng.standard_normal((4, 2)).astype(d)]),
    "solve_vector": (lambda a, b: anb.linalg.solve(a, b),
                     lambda rng, d: [_general(rng, (2, 3, 3), d),
                                     rng.standard_normal(3).astype(d)]),
    "solve_spd": (lambda a, b: anb.linalg.solve(a, b),
                  lambda rng, d: [_spd(rng, (5, 5), d), rng.standard_normal(5).astype(d)]),
    "inv": (lambda a: anb.linalg.inv(a), lambda rng, d: [_general(rng, (2, 3, 3), d)]),
    "det": (lambda a: anb.linalg.det(a), lambda rng, d: [_general(rng, (3, 4, 4), d)]),
    "slogdet": (lambda a: anb.linalg.slogdet(a)[1] * anb.linalg.slogdet(a)[0],
                lambda rng, d: [rng.standard_normal((3, 3, 3)).astype(d)]),
    "cholesky": (lambda a: anb.linalg.cholesky(a), lambda rng, d: [_spd(rng, (2, 4, 4), d)]),
    "cholesky_upper": (lambda a: anb.linalg.cholesky(a, upper=True),
                       lambda rng, d: [_spd(rng, (4, 4), d)]),
    "eigh": (lambda a: anb.linalg.eigh(a)[0] + anb.sum(anb.linalg.eigh(a)[1] ** 2, axis=-1),
             lambda rng, d: [_spd(rng, (2, 4, 4), d)]),
    "eigvalsh_upper": (lambda a: anb.linalg.eigvalsh(a, UPLO="U"),
                       lambda rng, d: [_spd(rng, (3, 3), d)]),
    "svd": (lambda a: anb.sum(anb.linalg.svd(a, full_matrices=False)[0] ** 2, axis=0)
            + anb.linalg.svd(a, full_matrices=False)[1],
            lambda rng, d: [rng.standard_normal((5, 3)).astype(d)]),
    "svdvals": (lambda a: anb.linalg.svdvals(a),
                lambda rng, d: [rng.standard_normal((2, 3, 4)).astype(d)]),
    "qr": (lambda a: anb.linalg.qr(a)[0] @ anb.linalg.qr(a)[1],
           lambda rng, d: [rng.standard_normal((4, 3)).astype(d)]),
    "qr_wide": (lambda a: anb.linalg.qr(a, mode="r"),
                lambda rng, d: [rng.standard_normal((2, 4)).astype(d)]),
    "pinv": (lambda a: anb.linalg.pinv(a), lambda rng, d: [rng.standard_normal((4, 3)).astype(d)]),
    "norm_2": (lambda a: anb.linalg.norm(a, ord=2),
               lambda rng, d: [rng.standard_normal((3, 3)).astype(d)]),
    "norm_nuc": (lambda a: anb.linalg.matrix_norm(a, ord="nuc"),
                 lambda rng, d: [rng.standard_normal((2, 3, 3)).astype(d)]),
    "norm_fro": (lambda a: anb.linalg.norm(a),
                 lambda rng, d: [rng.standard_normal((3, 4)).astype(d)]),
    "matrix_power": (lambda a: anb.linalg.matrix_power(a, -2),
                     lambda rng, d: [_general(rng, (3, 3), d)]),
    "multi_dot": (lambda a, b: anb.linalg.multi_dot([a, b, a]),
                  lambda rng, d: [rng.standard_normal((3, 3)).astype(d),
                                  rng.standard_normal((3, 3)).astype(d)]),
}


def _run(fn, arrays, seed_grad):
    """fn's output, and the gradient of ``sum(out * seed_grad)`` in every argument."""
    tensors = [anb.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    grads = anb.grad(out, tensors, grad_outputs=anb.tensor(seed_grad.astype(out.dtype)),
                     allow_unused=True, materialize_grads=True)
    return [out.detach().numpy()] + [g.numpy() for g in grads]


def _replays_as_eager(fn, make, dtype, calls=3, seed=0):
    """fn compiled, called on ``calls`` sets of new values of one signature (the first
    records), each call's output and gradients bit for bit eager's, no CompileWarning."""
    compiled = anb.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for call in range(calls):
            rng = np.random.default_rng(seed + call)
            arrays = make(rng, dtype)
            shape = np.shape(fn(*[anb.tensor(a) for a in arrays]))
            seed_grad = rng.standard_normal(shape)
            eager = _run(fn, arrays, seed_grad)
            _assert_same_bits(eager, _run(compiled, arrays, seed_grad))
    info = compiled.cache_info()
    assert (info.programs, info.eager, info.traces, info.hits) == (1, 0, 1, calls - 1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_replays_bit_for_bit(name, dtype):
    fn, make = CASES[name]
    _replays_as_eager(fn, make, dtype)


def test_gaussian_process_negative_log_likelihood():
    # As the benchmark's workload (asv_bench/benchmarks/workloads.py, gp_nll), smaller: a
    # kernel matrix, its Cholesky factor (the log determinant) and a solve, forward and
    # gradient in the kernel's parameters.
    def nll(log_scale, log_noise, x, y):
        d = x[:, None] - x[None, :]
        k = anb.exp(-0.5 * d * d / anb.exp(2.0 * log_scale)) + anb.exp(log_noise) * anb.eye(8)
        low = anb.linalg.cholesky(k)
        alpha = anb.linalg.solve(k, y)
        return 0.5 * anb.dot(y, alpha) + anb.sum(anb.log(anb.diagonal(low)))

    def make(rng, dtype):
        return [np.asarray(rng.standard_normal() * 0.1, dtype=dtype),
                np.asarray(-1.0 + rng.standard_normal() * 0.1, dtype=dtype),
                rng.standard_normal(8).astype(dtype), rng.standard_normal(8).astype(dtype)]

    _replays_as_eager(nll, make, np.float64)


@given(batch=st.sampled_from([(), (1,), (2,), (2, 1)]), n=st.integers(1, 5),
       columns=st.sampled_from([None, 1, 3]), spd=st.booleans())
@fast
def test_solve_det_cholesky_over_shapes(batch, n, columns, spd):
    def fn(a, b):
        x = anb.linalg.solve(a, b)
        out = anb.sum(x) + anb.sum(anb.linalg.det(a)) + anb.sum(anb.linalg.slogdet(a)[1])
        if spd:
            out = out + anb.sum(anb.linalg.cholesky(a))
        return out

    def make(rng, dtype):
        a = (_spd if spd else _general)(rng, batch + (n, n), dtype)
        b = rng.standard_normal((n,) if columns is None else batch + (n, columns))
        return [a, b.astype(dtype)]

    _replays_as_eager(fn, make, np.float64, calls=2)


@given(shape=st.sampled_from([(1, 1), (3, 2), (2, 3), (2, 2, 2), (4, 4)]))
@fast
def test_svd_qr_pinv_over_shapes(shape):
    def fn(a):
        s = anb.linalg.svdvals(a)
        r = anb.linalg.qr(a, mode="r")
        return anb.sum(s) + anb.sum(r * r) + anb.sum(anb.linalg.pinv(a))

    _replays_as_eager(fn, lambda rng, d: [rng.standard_normal(shape).astype(d)], np.float64,
                      calls=2)


# -- where eager raises ------------------------------------------------------------------------


FAILURES = {
    "solve": (lambda a: anb.linalg.solve(a, anb.ones(3)), "Singular matrix"),
    "inv": (lambda a: anb.linalg.inv(a), "Singular matrix"),
    "cholesky": (lambda a: anb.linalg.cholesky(a), "not positive definite"),
    "eigh": (lambda a: anb.linalg.eigh(a)[0], "infs or NaNs"),
    "svd": (lambda a: anb.linalg.svdvals(a), "infs or NaNs"),
    "qr": (lambda a: anb.linalg.qr(a, mode="r"), "infs or NaNs"),
    "pinv": (lambda a: anb.linalg.pinv(a), "infs or NaNs"),
}


def _bad(name):
    if name in ("solve", "inv"):
        return np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]])
    if name == "cholesky":
        return np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    bad = np.eye(3)
    bad[1, 2] = np.nan
    return bad


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("name", sorted(FAILURES))
def test_a_replay_where_eager_raises_raises(name, requires_grad):
    fn, message = FAILURES[name]
    compiled = anb.compile(fn)
    good = anb.tensor(np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]]),
                      requires_grad=requires_grad)
    bad = anb.tensor(_bad(name), requires_grad=requires_grad)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        first = compiled(good)
        with pytest.raises(np.linalg.LinAlgError, match=message):
            fn(bad)
        with pytest.raises(np.linalg.LinAlgError, match=message):
            compiled(bad)
        again = compiled(good)
    _assert_same_bits([fn(good).detach().numpy()], [again.detach().numpy()])
    _assert_same_bits([first.detach().numpy()], [again.detach().numpy()])
    info = compiled.cache_info()
    assert (info.programs, info.eager) == (1, 0)


def test_strict_compiles_linalg():
    # A failure flag is no value read: strict=True records it too.
    compiled = anb.compile(lambda a: anb.linalg.solve(a, anb.ones(2)), strict=True)
    a = anb.tensor([[2.0, 1.0], [1.0, 3.0]])
    compiled(a)
    compiled(a)
    assert compiled.cache_info().hits == 1
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        compiled(anb.tensor([[1.0, 1.0], [1.0, 1.0]]))
