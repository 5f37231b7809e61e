"""The forward drivers of compiled programs (``Op.forward_spec``) of the elementwise, special
and reduction families, from the registry: run once through their C entry, as the interpreter
runs them, they give the eager forward's bits, on the recorded values and on new ones."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from autograd_nb.ops._pointers import call_driver
from autograd_nb.ops.registry import REGISTRY
from tests.checks import elementwise_attrs, elementwise_values

ELEMENTWISE = sorted(n for n, op in REGISTRY.items() if op.family in ("elementwise", "special"))
REDUCTION = sorted(n for n, op in REGISTRY.items() if op.family == "reduction")

#: Ops of these families with no forward driver for plain float64 arrays, and why (none).
NO_DRIVER = {}

DTYPES = [np.float32, np.float64]


def run(op, values, attrs):
    """The eager forward: ``(prepared arrays, attrs, output)``."""
    if all(type(v) is np.ndarray for v in values):
        return op._run(values, attrs)
    return op._run_with_constants(values, attrs)


def replay(spec, arrays, output):
    """``spec``'s driver on ``arrays``, into a new buffer of ``output``'s shape and dtype
    that holds garbage first (so a driver must write all of it)."""
    driver, ints, floats = spec
    out = np.empty_like(output)
    out.reshape(-1).view(np.uint8).fill(0xAB)  # not NaN: an unwritten element shows
    call_driver(driver, arrays, out, ints, floats)
    return out


def assert_same_bits(got, expected):
    """Equal values (NaNs equal), dtypes and shapes, and the same bytes (the sign of zero
    and NaN payloads too)."""
    np.testing.assert_array_equal(got, expected, strict=True)
    assert got.tobytes() == expected.tobytes()


def assert_replays(op, values, attrs, new_values):
    """The spec recorded on ``values`` gives the eager bits on them and on ``new_values``."""
    arrays, prepared_attrs, output = run(op, values, attrs)
    spec = op.forward_spec(arrays, prepared_attrs, output)
    assert spec is not None, op.name
    assert_same_bits(replay(spec, arrays, output), output)
    arrays, _, output = run(op, new_values, attrs)
    assert_same_bits(replay(spec, arrays, output), output)


# -- elementwise and special -------------------------------------------------------------------


def with_constant(op, values, position, rng):
    """``values`` with input ``position`` a Python float (a 0-d array once prepared)."""
    low, high = op.domain
    constant = 2.0 if op.name == "polygamma" else float(rng.uniform(low, high))
    return values[:position] + [constant] + values[position + 1 :]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ELEMENTWISE)
@settings(max_examples=10, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_elementwise_driver_gives_the_forward_bits(name, dtype, data, seed):
    op = REGISTRY[name]
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(
            num_shapes=op.n_inputs, min_dims=0, max_dims=4, min_side=0, max_side=4
        )
    ).input_shapes
    rng = np.random.default_rng(seed)
    values = elementwise_values(op, shapes, dtype, rng)
    new_values = elementwise_values(op, shapes, dtype, rng)
    # A Python float among the inputs (``x * 0.5``), never where's condition.
    floats = [k for k, v in enumerate(values) if v.dtype.kind == "f"]
    position = data.draw(st.sampled_from([None] + floats))
    if position is not None:
        values = with_constant(op, values, position, rng)
        new_values = with_constant(op, new_values, position, rng)
    assert_replays(op, values, elementwise_attrs(op, rng), new_values)


#: ``where``'s shapes for each forward layout: flat, each scalar variant (bit k: input k is
#: one element), broadcast.
WHERE_LAYOUTS = {
    "forward_exec": [(2, 3)] * 3,
    **{
        f"forward_s{mask}_exec": [() if mask >> k & 1 else (2, 3) for k in range(3)]
        for mask in range(1, 7)
    },
    "forward_strided_exec": [(2, 1), (3,), (1, 1)],
}


@pytest.mark.parametrize("driver", sorted(WHERE_LAYOUTS))
def test_every_layout_of_a_ternary_op(driver):
    op = REGISTRY["where"]
    rng = np.random.default_rng(4)
    shapes = WHERE_LAYOUTS[driver]
    values, new_values = (elementwise_values(op, shapes, np.float32, rng) for _ in range(2))
    arrays, attrs, output = run(op, values, {})
    assert op.forward_spec(arrays, attrs, output)[0].__name__ == driver
    assert_replays(op, values, {}, new_values)


INTEGER_CASES = [
    ("add", [np.arange(6).reshape(2, 3), np.array([7, -8, 9])], {}),
    ("multiply", [np.arange(6).reshape(2, 3), 3], {}),
    ("remainder", [np.arange(-6, 6).reshape(3, 4), np.array([[5], [-3], [2]])], {}),
    ("power", [np.arange(6), np.array(2)], None),  # the check reads the exponent's values
    ("floor", [np.array([2**60 + 1, -3])], {}),  # a copy: never through float64
    ("floor", [np.array([True, False])], {}),
    ("clip", [np.arange(-4, 4)], {"a_min": -2, "a_max": 2.5}),
    ("where", [np.array([True, False, True]), np.arange(3), np.array([-1])], {}),
    ("add", [np.array([True, False]), np.array([[True], [False]])], {}),
    ("exp", [np.arange(4)], {}),
]


@pytest.mark.parametrize("name, values, attrs", INTEGER_CASES)
def test_integer_and_bool_inputs(name, values, attrs):
    op = REGISTRY[name]
    arrays, prepared_attrs, output = run(op, values, attrs or {})
    spec = op.forward_spec(arrays, prepared_attrs, output)
    if attrs is None:
        assert spec is None
        return
    assert arrays[-1].dtype == output.dtype
    assert_same_bits(replay(spec, arrays, output), output)


# -- reductions --------------------------------------------------------------------------------


@st.composite
def axis_attrs(draw, op, ndim):
    """An axis (None, an int or a tuple of them in any order) and, for reductions, keepdims."""
    choices = [st.none()]
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
        if not op.single_axis:
            choices.append(
                st.permutations(range(ndim)).flatmap(
                    lambda axes: st.integers(1, ndim).map(lambda k: tuple(axes[:k]))
                )
            )
    elif op.single_axis:
        choices.append(st.sampled_from([0, -1]))
    attrs = {"axis": draw(st.one_of(*choices))}
    if not op.single_axis:
        attrs["keepdims"] = draw(st.booleans())
    return attrs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", REDUCTION)
@settings(max_examples=15, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_reduction_driver_gives_the_forward_bits(name, dtype, data, seed):
    op = REGISTRY[name]
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    attrs = data.draw(axis_attrs(op, len(shape)))
    rng = np.random.default_rng(seed)
    x, new_x = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    try:
        op.prepare([x], attrs)
    except (TypeError, ValueError):  # softmax's axis=None; max of an empty axis
        assume(False)
    assert_replays(op, [x], attrs, [new_x])


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "cumsum"])
def test_reduction_of_integers_over_axes_apart(name):
    op = REGISTRY[name]
    x = np.arange(-30, 30).reshape(3, 4, 5)
    attrs = {"axis": 1} if op.single_axis else {"axis": (2, 0), "keepdims": False}
    assert_replays(op, [x], attrs, [x[::-1].copy()])


# -- coverage ----------------------------------------------------------------------------------


def plain_case(op):
    """Plain float64 arguments of ``op``: (values, attrs)."""
    rng = np.random.default_rng(0)
    if op.family == "reduction":
        return [rng.standard_normal((2, 3))], {"axis": -1}
    return elementwise_values(op, [(2, 3)] * op.n_inputs, np.float64, rng), elementwise_attrs(
        op, rng
    )


@pytest.mark.parametrize("name", ELEMENTWISE + REDUCTION)
def test_every_op_of_these_families_has_a_forward_driver(name):
    op = REGISTRY[name]
    values, attrs = plain_case(op)
    arrays, attrs, output = run(op, values, attrs)
    spec = op.forward_spec(arrays, attrs, output)
    assert (spec is None) == (name in NO_DRIVER)
