"""Contractions and matrix structure (ops/contractions.py): ``tensordot``, ``inner``, ``kron``,
``cross``, ``trace``, ``diagonal``, ``diag``, ``tril``, ``triu`` and ``numpy.linalg``'s
``trace``, ``diagonal``, ``matrix_transpose`` and ``vecdot``, against NumPy (tests/reference.py)
and finite differences to second order. Each is a composite of other ops."""

import warnings

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.ops import contractions
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY
from tests.checks import check_gradients, ops_in_graph
from tests.reference import REFERENCE

RNG = np.random.default_rng(7)


def normal(*shape):
    return RNG.standard_normal(shape)


#: (public name, inputs, keyword arguments): the function and NumPy's (REFERENCE) on them.
CASES = [
    ("tensordot", [normal(2, 3, 4), normal(3, 4, 5)], {}),
    ("tensordot", [normal(3, 4), normal(2, 3)], {"axes": ([0], [1])}),
    ("tensordot", [normal(2, 3), normal(4)], {"axes": 0}),
    ("inner", [normal(2, 3), normal(4, 3)], {}),
    ("inner", [normal(3), normal(3)], {}),
    ("kron", [normal(2, 3), normal(2, 2)], {}),
    ("kron", [normal(3), normal(2, 2)], {}),
    ("cross", [normal(4, 3), normal(3)], {}),
    ("cross", [normal(3, 2), normal(2, 3)], {"axisa": 0, "axisb": 1, "axisc": 0}),
    ("cross", [normal(4, 2), normal(4, 3)], {}),
    ("trace", [normal(3, 4)], {}),
    ("trace", [normal(2, 3, 4)], {"offset": -1, "axis1": 2, "axis2": 1}),
    ("diagonal", [normal(3, 4)], {"offset": 1}),
    ("diagonal", [normal(2, 3, 4)], {"axis1": 0, "axis2": 2}),
    ("diag", [normal(3)], {"k": -1}),
    ("diag", [normal(3)], {}),
    ("diag", [normal(3, 4)], {"k": 2}),
    ("tril", [normal(2, 3, 4)], {}),
    ("tril", [normal(3, 4)], {"k": -1}),
    ("triu", [normal(4, 3)], {"k": 1}),
    ("triu", [normal(3)], {}),
    ("linalg.trace", [normal(2, 3, 3)], {"offset": 1}),
    ("linalg.diagonal", [normal(2, 3, 4)], {}),
    ("linalg.matrix_transpose", [normal(2, 3, 4)], {}),
    ("linalg.vecdot", [normal(2, 3), normal(3)], {}),
]


def case_id(case):
    name, inputs, kwargs = case
    shapes = "-".join("x".join(map(str, a.shape)) for a in inputs)
    return f"{name}-{shapes}-{'-'.join(f'{k}{v}' for k, v in kwargs.items())}"


def lookup(name):
    return getattr(anb.linalg, name[len("linalg."):]) if name.startswith("linalg.") else \
        getattr(anb, name)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_values_and_gradients(case):
    name, inputs, kwargs = case
    function = lookup(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # cross of 2-vectors
        got = function(*(anb.tensor(a) for a in inputs), **kwargs)
        expected = np.asarray(REFERENCE[name](*inputs, **kwargs))
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
        check_gradients(lambda *ts: function(*ts, **kwargs), inputs)


def test_every_function_has_a_case_and_records_no_op_of_its_own():
    ours = {name for name, fn in FUNCTIONS.items() if fn.__module__ == contractions.__name__}
    ours |= {"linalg.matrix_transpose", "linalg.vecdot"}
    assert ours <= {case[0] for case in CASES}
    assert not any(type(op).__module__ == contractions.__name__ for op in REGISTRY.values())
    for name in ours:
        assert name in REFERENCE and "Examples" in FUNCTIONS[name].__doc__


def test_two_vector_cross_products_warn_as_numpy():
    a, b = normal(3, 2), normal(3, 2)
    with pytest.warns(DeprecationWarning):
        got = anb.cross(anb.tensor(a), anb.tensor(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        np.testing.assert_allclose(got.numpy(), np.cross(a, b), rtol=1e-12)


def test_masks_give_zeros_not_nan_outside_the_triangle():
    x = anb.tensor([[1.0, np.inf], [np.nan, 2.0]], requires_grad=True)
    np.testing.assert_array_equal(anb.tril(x).numpy(), [[1.0, 0.0], [np.nan, 2.0]])
    np.testing.assert_array_equal(anb.diag(anb.tensor([np.inf, 1.0])).numpy(),
                                  [[np.inf, 0.0], [0.0, 1.0]])
    (g,) = anb.grad(anb.triu(x).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [[1.0, 1.0], [0.0, 1.0]])


def test_methods_dtypes_and_one_product_per_contraction():
    x = anb.tensor(normal(3, 3).astype(np.float32), requires_grad=True)
    assert x.trace().dtype == np.float32 and x.diagonal().shape == (3,)
    assert anb.tril(x).dtype == np.float32 and anb.kron(x, x).dtype == np.float32
    y = anb.tensordot(anb.tensor(normal(2, 3, 4), requires_grad=True), normal(3, 4), axes=2)
    assert "_bmm" in ops_in_graph(y)
