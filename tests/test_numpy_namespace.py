"""``import autograd_nb.numpy as np``: NumPy's names, recorded on Tensors, NumPy's own results on
anything else, a NotImplementedError naming what it lacks; and the gap list against NumPy's
differentiable functions."""

import importlib
import importlib.util
import warnings

import numpy
import pytest

import autograd_nb as anb
import autograd_nb.numpy as np
from autograd_nb.ops.registry import FUNCTIONS
from tests.checks import check_gradients

RNG = numpy.random.default_rng(0)
X = RNG.uniform(0.1, 0.9, (2, 3))
Y = RNG.uniform(0.1, 0.9, (2, 3))
M = RNG.uniform(0.1, 0.9, (3, 2))


# -- differentiable on Tensors ---------------------------------------------------------------

GRADIENT_CASES = {
    "sin": (lambda x: np.sin(x), [X]),
    "absolute": (lambda x: np.absolute(x - 0.5), [X]),
    "exp tanh": (lambda x: np.tanh(np.exp(x)), [X]),
    "sum axis": (lambda x: np.sum(np.square(x), axis=0), [X]),
    "mean keepdims": (lambda x: np.mean(x * x, axis=1, keepdims=True), [X]),
    "amax": (lambda x: np.amax(x, axis=1), [X]),
    "std": (lambda x: np.std(x, axis=0), [X]),
    "power maximum": (lambda x, y: np.maximum(np.power(x, y), y), [X, Y]),
    "where": (lambda x, y: np.where(x > 0.5, x * y, np.sqrt(y)), [X, Y]),
    "clip": (lambda x: np.clip(x, 0.3, 0.7), [X]),
    "matmul dot": (lambda x, m: np.dot(np.matmul(x, m), np.ones(2)), [X, M]),
    "einsum": (lambda x, m: np.einsum("ij,jk->ik", x, m), [X, M]),
    "reshape transpose": (lambda x: np.transpose(np.reshape(x, (3, 2))) * x, [X]),
    "concatenate stack": (
        lambda x, y: np.stack([np.concatenate([x, y]), np.concatenate([np.log(x + y), x])]),
        [X, Y],
    ),
    "array of tensors": (lambda x, y: np.array([x, y * 2.0]) ** 2, [X, Y]),
    "mean of a list": (lambda x, y: np.mean([x, y * x], axis=0), [X, Y]),
    "asarray keeps": (lambda x: np.asarray(x) * np.copy(x), [X]),
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradients_through_the_namespace(name):
    function, arrays = GRADIENT_CASES[name]
    check_gradients(function, arrays)


# -- NumPy's results on NumPy inputs ---------------------------------------------------------

NUMPY_CASES = [
    ("sin", (X,), {}),
    ("absolute", (X - 0.5,), {}),
    ("add", (X, 2.0), {}),
    ("power", (X, Y), {}),
    ("maximum", (X, 0.5), {}),
    ("sum", (X,), {"axis": 0}),
    ("mean", (X,), {"axis": 1, "keepdims": True}),
    ("var", (X,), {"ddof": 1}),
    ("amax", (X,), {}),
    ("cumsum", (X,), {"axis": 1}),
    ("matmul", (X, M), {}),
    ("einsum", ("ij,jk->ik", X, M), {}),
    ("reshape", (X, (3, 2)), {}),
    ("concatenate", ([X, Y],), {"axis": 1}),
    ("stack", ([X, Y],), {}),
    ("where", (X > 0.5, X, Y), {}),
    ("clip", (X, 0.3, 0.7), {}),
    ("floor", (X * 3,), {}),
    ("argmax", (X,), {"axis": 1}),
    ("nonzero", (X > 0.5,), {}),
    ("where", (X > 0.5,), {}),
    ("isnan", (X,), {}),
    ("greater", (X, Y), {}),
    ("zeros_like", (X,), {}),
    ("linspace", (0.0, 1.0, 5), {}),
    ("shape", (X,), {}),
]


@pytest.mark.parametrize("name, args, kwargs", NUMPY_CASES, ids=[c[0] for c in NUMPY_CASES])
def test_numpy_inputs_give_numpy_results(name, args, kwargs):
    ours = getattr(np, name)(*args, **kwargs)
    theirs = getattr(numpy, name)(*args, **kwargs)
    assert type(ours) is type(theirs)
    if isinstance(theirs, tuple):
        for o, t in zip(ours, theirs, strict=True):
            numpy.testing.assert_array_equal(o, t)
    else:
        numpy.testing.assert_array_equal(ours, theirs)
        assert numpy.asarray(ours).dtype == numpy.asarray(theirs).dtype


def test_numbers_give_numpy_scalars():
    assert np.sin(0.5) == numpy.sin(0.5) and type(np.sin(0.5)) is numpy.float64
    assert np.sum([1.0, 2.0]) == 3.0
    assert type(np.array([1.0, 2.0])) is numpy.ndarray


# -- no gradient -----------------------------------------------------------------------------

CONSTANT_CASES = [
    ("greater", lambda t: np.greater(t, 0.5)),
    ("less_equal", lambda t: np.less_equal(0.5, t)),
    ("equal", lambda t: np.equal(t, t)),
    ("isfinite", lambda t: np.isfinite(t)),
    ("isnan", lambda t: np.isnan(t)),
    ("argmax", lambda t: np.argmax(t, axis=0)),
    ("argsort", lambda t: np.argsort(t)),
    ("any", lambda t: np.any(t > 0.5)),
    ("zeros_like", lambda t: np.zeros_like(t)),
    ("full_like", lambda t: np.full_like(t, 2.0)),
]


@pytest.mark.parametrize("name, call", CONSTANT_CASES, ids=[c[0] for c in CONSTANT_CASES])
def test_no_gradient_functions_give_tensors_without_grad(name, call):
    x = anb.tensor(X, requires_grad=True)
    result = call(x)
    assert isinstance(result, anb.Tensor)
    assert not result.requires_grad
    numpy.testing.assert_array_equal(result.numpy(), call(X))


ROUNDING_CASES = [
    ("floor", lambda t: np.floor(t * 3)),
    ("ceil", lambda t: np.ceil(t * 3)),
    ("round", lambda t: np.round(t, 1)),
    ("trunc", lambda t: np.trunc(t * 3)),
]


@pytest.mark.parametrize("name, call", ROUNDING_CASES, ids=[c[0] for c in ROUNDING_CASES])
def test_roundings_record_with_a_zero_gradient(name, call):
    # Piecewise constant: torch's convention, a recorded op whose gradient is 0.
    x = anb.tensor(X, requires_grad=True)
    result = call(x)
    numpy.testing.assert_array_equal(result.numpy(), call(X))
    (g,) = anb.grad(anb.sum(result * 1.0) + anb.sum(x), x)
    numpy.testing.assert_array_equal(g.numpy(), numpy.ones_like(X))


def test_no_gradient_functions_python_values():
    x = anb.tensor(X, requires_grad=True)
    assert np.shape(x) == (2, 3) and np.ndim(x) == 2 and np.size(x) == 6
    assert np.allclose(x, X) is True
    assert np.result_type(x, 1.0) == numpy.float64
    (rows, cols) = np.nonzero(x > 0.5)
    expected = numpy.nonzero(X > 0.5)
    numpy.testing.assert_array_equal(rows.numpy(), expected[0])
    numpy.testing.assert_array_equal(cols.numpy(), expected[1])
    assert np.where(x > 0.5)[0].dtype == numpy.int64


def test_values_with_a_gradient_are_refused_by_creation_functions():
    w = anb.tensor(2.0, requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.full is not differentiable"):
        np.full(3, w)
    with pytest.raises(TypeError, match=r"numpy\.arange"):
        np.arange(w, 3.0)
    with anb.no_grad():
        numpy.testing.assert_array_equal(np.full(3, w).numpy(), [2.0, 2.0, 2.0])
    assert np.full_like(anb.tensor(X, requires_grad=True), 1.0).shape == (2, 3)


def test_constants_and_dtypes_are_numpys():
    for name in (
        "pi",
        "e",
        "inf",
        "newaxis",
        "float64",
        "float32",
        "int64",
        "bool_",
        "dtype",
        "ndarray",
        "finfo",
        "errstate",
    ):
        assert getattr(np, name) is getattr(numpy, name), name
    assert numpy.isnan(np.nan)
    assert np.linalg.LinAlgError is numpy.linalg.LinAlgError


def test_random_is_numpys_and_refuses_tensors():
    numpy.random.seed(3)
    expected = numpy.random.normal(size=3)
    np.random.seed(3)
    numpy.testing.assert_array_equal(np.random.normal(size=3), expected)
    with pytest.raises(TypeError, match=r"numpy\.random\.normal does not take"):
        np.random.normal(anb.tensor(1.0, requires_grad=True), 1.0)


# -- what is not provided --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["polyfit", "vectorize", "histogram", "polynomial"])
def test_unprovided_numpy_names_raise_not_implemented(name):
    with pytest.raises(NotImplementedError, match=rf"numpy\.{name}\b"):
        getattr(np, name)
    assert not hasattr(np, name)  # also an AttributeError, for hasattr and getattr defaults


def test_unprovided_linalg_name_raises_not_implemented():
    with pytest.raises(NotImplementedError, match=r"numpy\.linalg\.cond\b"):
        np.linalg.cond  # noqa: B018


def test_names_numpy_lacks_are_attribute_errors():
    for name in ("relu", "no_such_name", "__wrapped__"):
        with pytest.raises(AttributeError) as raised:
            getattr(np, name)
        assert not isinstance(raised.value, NotImplementedError)


def test_out_is_refused():
    x = anb.tensor(X, requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.sum with out="):
        np.sum(x, out=numpy.empty(()))
    assert np.sum(x, out=None).requires_grad


# -- open to additions -----------------------------------------------------------------------


def test_a_registered_linalg_function_appears(monkeypatch):
    """A function published under a ``numpy.linalg`` name is in ``anb.linalg`` and
    ``autograd_nb.numpy.linalg``, and NumPy's own ``numpy.linalg`` reaches it on Tensors."""
    name = "matrix_rank"  # not differentiable: no one registers it for real

    def matrix_rank(x):
        return anb.sum(x * 0.0)

    matrix_rank.family = "linalg"
    matrix_rank.is_method = False
    monkeypatch.setitem(FUNCTIONS, name, matrix_rank)
    try:
        assert anb.linalg.matrix_rank is matrix_rank
        assert name in dir(anb.linalg)
        x = anb.tensor(X, requires_grad=True)
        assert np.linalg.matrix_rank(x).requires_grad
        assert numpy.linalg.matrix_rank(x).requires_grad
        assert np.linalg.matrix_rank(X) == numpy.linalg.matrix_rank(X)
    finally:
        vars(np.linalg).pop(name, None)
        np._for_function.pop(numpy.linalg.matrix_rank, None)


def test_an_object_published_to_the_registry_appears_as_it_is():
    # np.r_ and np.c_ are objects with __getitem__, not functions (ops/assembly.py publishes
    # them): the namespace hands them out as they are.
    assert np.r_ is FUNCTIONS["r_"] and np.c_ is FUNCTIONS["c_"]
    x = anb.tensor([1.0, 2.0], requires_grad=True)
    (g,) = anb.grad(anb.sum(np.r_[x, 0.0, x * 3.0]), x)
    numpy.testing.assert_array_equal(g.numpy(), [4.0, 4.0])


# -- the gap list ----------------------------------------------------------------------------

#: NumPy's differentiable functions that autograd_nb.numpy must provide: the contract's
#: (docs: API.md, "Differentiable functions") and issue #21's "Functions" section. ``linalg.``
#: names are looked up in ``autograd_nb.numpy.linalg``, ``special.`` ones (SciPy's) in
#: ``autograd_nb.special``, ``Tensor.`` ones as Tensor methods.
CONTRACT = (
    "add subtract multiply divide power maximum minimum where negative exp expm1 log log1p "
    "sqrt square abs absolute sign sin cos tan arcsin arccos arctan sinh cosh tanh clip "
    "sum mean prod max min var std cumsum matmul dot outer einsum "
    "reshape transpose swapaxes expand_dims squeeze broadcast_to concatenate stack ravel"
).split()
ISSUE_21 = (
    # linear algebra
    "linalg.norm linalg.solve linalg.inv linalg.det linalg.slogdet linalg.cholesky "
    "linalg.eigh linalg.svd linalg.qr linalg.pinv linalg.lstsq linalg.matrix_power "
    "linalg.multi_dot "
    # contractions
    "tensordot inner kron cross trace diag diagonal tril triu "
    # shape and assembly
    "vstack hstack dstack column_stack atleast_1d atleast_2d atleast_3d append split "
    "array_split hsplit vsplit roll repeat tile flip flipud fliplr rot90 moveaxis pad sort take "
    "take_along_axis diff Tensor.flatten r_ c_ "
    # elementwise
    "arctan2 hypot logaddexp logaddexp2 log2 log10 exp2 arcsinh arccosh arctanh reciprocal "
    "sinc fabs mod remainder fmax fmin deg2rad rad2deg nan_to_num floor ceil round trunc "
    "heaviside "
    # reductions
    "cumprod nansum nanmean average ptp amax amin "
    # scipy.special
    "special.erf special.erfc special.erfinv special.gammaln special.digamma "
    "special.polygamma special.logit special.expit special.xlogy special.log_ndtr "
    "special.ndtr special.i0 special.i1"
).split()
DIFFERENTIABLE = CONTRACT + ISSUE_21

#: Names not provided yet. Functions are landing in their op family files: remove a name here
#: when it lands (the test warns about names listed here that are now provided). A name
#: missing from the namespace and not listed here fails the test.
NOT_YET = set()  # every listed function is provided: a new gap fails the test


def _special():
    if importlib.util.find_spec("autograd_nb.special") is None:
        return None
    return importlib.import_module("autograd_nb.special")


def provided(qualified):
    """Whether ``qualified`` (``"sin"``, ``"linalg.solve"``, ``"special.erf"``,
    ``"Tensor.flatten"``) is provided."""
    where, _, name = qualified.rpartition(".")
    namespace = {"": np, "linalg": np.linalg, "special": _special(), "Tensor": anb.Tensor}[where]
    return namespace is not None and hasattr(namespace, name)


def gaps():
    return sorted(name for name in DIFFERENTIABLE if not provided(name))


def test_every_listed_numpy_name_exists_in_numpy():
    for qualified in DIFFERENTIABLE:
        where, _, name = qualified.rpartition(".")
        if where in ("", "linalg"):
            assert hasattr(numpy.linalg if where else numpy, name), qualified


def test_namespace_gaps_are_all_listed_in_not_yet():
    missing = gaps()
    unlisted = sorted(set(missing) - NOT_YET)
    assert not unlisted, (
        f"autograd_nb.numpy lacks {unlisted}: provide them, or list them in NOT_YET "
        f"(all gaps: {missing})"
    )
    landed = sorted(NOT_YET - set(missing))
    if landed:
        warnings.warn(f"provided now, remove from NOT_YET: {landed}", stacklevel=1)
