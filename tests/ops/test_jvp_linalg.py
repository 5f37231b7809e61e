"""Forward rules of the ``linalg`` family (``autograd/jvp/linalg.py``), real and complex:
against finite differences, against each op's VJP and to second order (``jvp_checks``), over
batch shapes; and every op of the families that ``autograd/jvp`` covers here has a rule."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import autograd_nb  # noqa: F401 - registers every op
from autograd_nb.autograd.jvp import RULES
from autograd_nb.autograd.jvp import linalg as _linalg_rules  # noqa: F401
from autograd_nb.autograd.jvp import special as _special_rules  # noqa: F401
from autograd_nb.autograd.jvp import spectral as _spectral_rules  # noqa: F401
from autograd_nb.ops.registry import REGISTRY, call
from tests.ops.jvp_checks import Case, check_all, random_like

#: The ops of these families (by module) whose forward rule lives elsewhere, and why.
ELSEWHERE = {
    "_bmm": "matmul's batched product, a contraction: the contraction family's rules",
}
FAMILIES = ("autograd_nb.ops.linalg", "autograd_nb.ops.special", "autograd_nb.ops.fft",
            "autograd_nb.ops.signal", "autograd_nb.ops._lapack", "autograd_nb.scipy")


def family_ops():
    return sorted(name for name, op in REGISTRY.items()
                  if type(op).__module__.startswith(FAMILIES))


def test_every_op_of_the_families_has_a_forward_rule():
    names = family_ops()
    assert len(names) > 60
    missing = [name for name in names if name not in RULES and name not in ELSEWHERE]
    assert not missing, missing


# -- sample matrices --------------------------------------------------------------------------


def rng_for(seed):
    return np.random.default_rng(seed)


def conditioned(rng, shape, dtype=np.float64):
    """Random square matrices far from singular."""
    n = shape[-1]
    a = random_like(rng, np.zeros(shape, dtype))
    return a + 3 * np.eye(n)


def definite(rng, shape, dtype=np.float64):
    """Symmetric (Hermitian) positive-definite matrices."""
    b = random_like(rng, np.zeros(shape, dtype))
    return b @ np.conj(np.swapaxes(b, -1, -2)) + shape[-1] * np.eye(shape[-1])


def distinct_spectrum(rng, shape, dtype=np.float64):
    """Symmetric (Hermitian) matrices with well-separated eigenvalues."""
    n = shape[-1]
    q, _ = np.linalg.qr(random_like(rng, np.zeros(shape, dtype)))
    w = np.arange(1, n + 1, dtype=np.float64) * 1.5
    return q @ (w[:, None] * np.conj(np.swapaxes(q, -1, -2)))


def full_rank(rng, shape, dtype=np.float64):
    """Matrices with well-separated singular values."""
    m, n = shape[-2:]
    k = min(m, n)
    u, _ = np.linalg.qr(random_like(rng, np.zeros(shape[:-2] + (m, k), dtype)))
    v, _ = np.linalg.qr(random_like(rng, np.zeros(shape[:-2] + (n, k), dtype)))
    s = np.arange(1, k + 1, dtype=np.float64) + 0.5
    return (u * s) @ np.conj(np.swapaxes(v, -1, -2))


# -- invariants of outputs defined up to a phase ----------------------------------------------


def _eig_split(packed):
    size = packed.shape[-1]
    n = int(round((-1 + (1 + 4 * size) ** 0.5) / 2))
    return packed[..., :n], packed[..., n:].reshape(packed.shape[:-1] + (n, n))


def eig_invariant(packed):
    """Eigenvalues and each eigenvector's outer product with itself (phase-free)."""
    w, v = _eig_split(packed)
    outer = np.einsum("...ij,...kj->...jik", v, np.conj(v))
    return np.concatenate([w.reshape(w.shape[:-1] + (-1,)),
                           outer.reshape(outer.shape[:-3] + (-1,))], axis=-1)


def eig_project(v, packed):
    """A cotangent whose loss is free of the eigenvectors' phases: ``im diag(V^H gV) = 0``."""
    w, vectors = _eig_split(packed)
    gw, gv = _eig_split(v)
    d = np.einsum("...ij,...ij->...j", np.conj(vectors), gv)
    gv = gv - vectors * (1j * d.imag)[..., None, :] / np.sum(
        np.abs(vectors) ** 2, axis=-2)[..., None, :]
    return np.concatenate([gw, gv.reshape(gv.shape[:-2] + (-1,))], axis=-1).astype(v.dtype)


def values_only(v, packed, n_values):
    """A cotangent on the eigen/singular values alone."""
    out = np.zeros_like(v)
    out[..., :n_values] = v[..., :n_values]
    return out


def _svd_split(packed, m, n):
    k = min(m, n)
    u = packed[..., :m * k].reshape(packed.shape[:-1] + (m, k))
    s = packed[..., m * k:m * k + k]
    vh = packed[..., m * k + k:].reshape(packed.shape[:-1] + (k, n))
    return u, s, vh


def svd_invariant(m, n):
    def invariant(packed):
        u, s, vh = _svd_split(packed, m, n)
        pairs = np.einsum("...ij,...jk->...jik", u, vh)  # u_j v_j^H
        uu = np.einsum("...ij,...kj->...jik", u, np.conj(u))
        parts = [s, pairs, uu]
        return np.concatenate([p.reshape(packed.shape[:-1] + (-1,)) for p in parts], axis=-1)

    return invariant


def svd_project(m, n):
    def project(v, packed):
        u, s, vh = _svd_split(packed, m, n)
        gu, gs, gvh = _svd_split(v, m, n)
        du = np.einsum("...ij,...ij->...j", np.conj(u), gu)
        gu = gu - u * (1j * du.imag)[..., None, :]
        dv = np.einsum("...ji,...ji->...j", vh, np.conj(gvh))
        gvh = gvh - (-1j * dv.imag)[..., :, None] * vh
        parts = [gu, gs, gvh]
        return np.concatenate([p.reshape(v.shape[:-1] + (-1,)) for p in parts],
                              axis=-1).astype(v.dtype)

    return project


# -- the cases --------------------------------------------------------------------------------


def lu_solve_case(a, b, transpose=False):
    return Case("_lu_solve", [a, b], primals=lambda a, b: [a, call("_lu", a), b],
                positions=[0, 2], kwargs={"transpose": transpose})


def det_case(name, a):
    return Case(name, [a], primals=lambda a: [a, call("_lu", a)])


def real_cases(batch=()):
    rng = rng_for(len(batch))
    b = tuple(batch)
    cases = [
        lu_solve_case(conditioned(rng, b + (3, 3)), rng.standard_normal(b + (3, 2))),
        lu_solve_case(conditioned(rng, b + (3, 3)), rng.standard_normal(b + (3,)), True),
        lu_solve_case(conditioned(rng, b + (3, 3)), rng.standard_normal(b + (3, 3)), True),
        det_case("_slogdet", conditioned(rng, b + (3, 3))),
        det_case("_det", conditioned(rng, b + (3, 3))),
        Case("_cholesky", [definite(rng, b + (3, 3))], kinds=["sym"]),
        Case("_eigh", [distinct_spectrum(rng, b + (3, 3))], kinds=["sym"]),
        Case("_eigh", [distinct_spectrum(rng, b + (3, 3))], kinds=["sym"],
             kwargs={"upper": True}),
        Case("_pinv", [full_rank(rng, b + (4, 3))], kwargs={"rcond": 1e-15}),
        Case("_pinv", [full_rank(rng, b + (2, 3))], kwargs={"rcond": 1e-15}),
        Case("_sqrtm", [definite(rng, b + (3, 3))]),
        Case("_sqrtm", [-definite(rng, b + (2, 2))]),  # a real matrix with a complex root
        Case("_solve_sylvester", [conditioned(rng, b + (3, 3)), conditioned(rng, b + (2, 2)),
                                  rng.standard_normal(b + (3, 2))]),
    ]
    for m, n in ((4, 3), (3, 3), (2, 4)):
        cases.append(Case("_svd", [full_rank(rng, b + (m, n))],
                          kwargs={"full_matrices": False}))
        cases.append(Case("_qr", [full_rank(rng, b + (m, n))]))
    cases.append(Case("_svd", [full_rank(rng, b + (3, 3))], kwargs={"full_matrices": True}))
    eig_a = rng.standard_normal(b + (3, 3))
    cases.append(Case("_eig", [eig_a], invariant=eig_invariant, project=eig_project,
                      project_second=lambda v, p: values_only(v, p, 3)))
    return cases


def complex_cases(batch=()):
    rng = rng_for(7 + len(batch))
    b, c = tuple(batch), np.complex128
    cases = [
        Case("_csolve", [conditioned(rng, b + (3, 3), c),
                         random_like(rng, np.zeros(b + (3, 2), c))]),
        Case("_clogdet", [conditioned(rng, b + (3, 3), c)]),
        Case("_ccholesky", [definite(rng, b + (3, 3), c)], kinds=["herm"]),
        Case("_ceigh", [distinct_spectrum(rng, b + (3, 3), c)], kinds=["herm"],
             invariant=eig_invariant, project=eig_project,
             project_second=lambda v, p: values_only(v, p, 3)),
        Case("_eig", [conditioned(rng, b + (3, 3), c)], invariant=eig_invariant,
             project=eig_project, project_second=lambda v, p: values_only(v, p, 3)),
        Case("_sqrtm", [definite(rng, b + (3, 3), c)]),
        Case("_cpinv", [full_rank(rng, b + (4, 3), c)], kwargs={"rcond": 1e-15}),
        Case("_cpinv", [full_rank(rng, b + (2, 3), c)], kwargs={"rcond": 1e-15}),
        Case("_solve_sylvester", [conditioned(rng, b + (2, 2), c),
                                  conditioned(rng, b + (2, 2), c),
                                  random_like(rng, np.zeros(b + (2, 2), c))]),
    ]
    for m, n in ((4, 3), (3, 3), (2, 4)):
        k = min(m, n)
        cases.append(Case("_csvd", [full_rank(rng, b + (m, n), c)],
                          invariant=svd_invariant(m, n), project=svd_project(m, n),
                          project_second=lambda v, p, m=m, k=k: _values_part(v, m, k)))
        cases.append(Case("_cqr", [full_rank(rng, b + (m, n), c)]))
    return cases


def _values_part(v, m, k):
    out = np.zeros_like(v)
    out[..., m * k:m * k + k] = v[..., m * k:m * k + k]
    return out


def norm_cases():
    rng = rng_for(3)
    x = rng.standard_normal((3, 4))
    return [Case("_norm2", [x], kwargs={"axis": None}),
            Case("_norm2", [x], kwargs={"axis": 1}),
            Case("_norm2", [x], kwargs={"axis": (0, 1), "keepdims": True})]


CASES = real_cases() + complex_cases() + norm_cases()


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_rule(case):
    check_all(case)


def test_every_linalg_op_is_checked():
    checked = {case.name for case in CASES}
    linalg = {name for name in family_ops()
              if type(REGISTRY[name]).__module__.startswith("autograd_nb.ops.linalg")}
    # (their rules: the next test)
    assert linalg - checked - set(ELSEWHERE) == {"_lu", "_slogdet_sign"}


def test_lu_factors_carry_no_tangent():
    a = conditioned(rng_for(0), (3, 3))
    lu = call("_lu", a)
    assert RULES["_lu"]([call("astype", a, dtype=a.dtype)], [a], lu, {}) is None
    sign = call("_slogdet_sign", lu)
    assert RULES["_slogdet_sign"]([None], [lu], sign, {}) is None


BATCHED_CASES = real_cases((2,)) + complex_cases((2,))


@pytest.mark.parametrize("case", BATCHED_CASES, ids=lambda case: "batched-" + repr(case))
def test_rule_on_a_batch(case):
    check_all(case, seed=1)


@settings(max_examples=6, deadline=None)
@given(batch=st.sampled_from([(1,), (2,), (2, 1), (3,), (1, 2)]),
       index=st.integers(0, 10_000))
def test_rules_over_batch_shapes(batch, index):
    cases = real_cases(batch) + complex_cases(batch)
    check_all(cases[index % len(cases)], seed=index)


def test_full_svd_of_a_wide_matrix_has_no_tangent():
    a = full_rank(rng_for(1), (2, 3))
    case = Case("_svd", [a], kwargs={"full_matrices": True})
    with pytest.raises(RuntimeError, match="full_matrices=False"):
        case.jvp([a], [a])
