"""``Op.vjp_numpy`` (tier 0's backward, autograd_nb/tiering.py) against the ops' VJP kernels, bit
for bit: from the registry, both float dtypes, flat, scalar and broadcast layouts, values where
numba's float64 promotion of a float32 operand shows (an int literal, a register sum), repeated
targets in the kernels' order; and the ops that have no twin say so before writing anything.
"""

import numpy as np
import pytest

from autograd_nb.ops.elementwise import ElementwiseOp, _numpy_formula
from autograd_nb.ops.registry import REGISTRY, Op, Saved

ELEMENTWISE = sorted(n for n, op in REGISTRY.items() if isinstance(op, ElementwiseOp))
#: The elementwise VJPs whose formulas call a function NumPy cannot follow (libm's, the
#: special functions) or ``**``: their kernels compile (``vjp_numpy`` says False).
WITHOUT_TWIN = {
    (name, k) for name in ELEMENTWISE for k, formula in REGISTRY[name].vjp_formulas.items()
    if _numpy_formula(formula, name) is None
}

#: (output shape, input shapes): flat, a scalar operand, broadcast rows and columns, a sum
#: over a long row (in a float64 register), a sum over rows (in the target, in turn), a 3-D
#: layout whose collapse depends on the other operand.
LAYOUTS = {
    1: [[(37,)], [(5, 9)], [(1,)], [()]],
    2: [[(6, 7), (6, 7)], [(6, 7), ()], [(), (6, 7)], [(6, 7), (7,)], [(6, 7), (6, 1)],
        [(1, 7), (6, 1)], [(300,), (1,)], [(2, 3, 40), (3, 1)], [(2, 3, 40), (1, 1, 40)],
        [(200, 9), (9,)], [(4, 1, 5), (1, 3, 1)]],
    3: [[(6, 7), (6, 7), (6, 7)], [(6, 1), (6, 7), (7,)], [(6, 7), (), (1, 7)],
        [(2, 3, 40), (3, 1), (40,)]],
}


def node_values(op, shapes, dtype, rng):
    low, high = op.domain
    values = [rng.uniform(low, high, size=s).astype(dtype) for s in shapes]
    attrs = {}
    if op.name == "where":
        values[0] = values[0] > (low + high) / 2
    if op.params:
        attrs = {op.params[0]: low / 2, op.params[1]: high / 2}
    if op.name in ("maximum", "minimum") and values[0].size and values[1].size:
        values[1].flat[::3] = values[0].flat[0]  # ties
        values[0].flat[0] = values[1].flat[0]
    return values, attrs


def run_both(op, k, arrays, attrs, output, grad, start):
    """The kernel's and the twin's accumulation into copies of ``start``."""
    saved = Saved([a if i in op.saves else None for i, a in enumerate(arrays)],
                  output if op.saves_output else None)
    compiled, twin = start.copy(), start.copy()
    op.vjp(k, grad, saved, attrs, compiled)
    ran = op.vjp_numpy(k, grad, saved, attrs, twin)
    return ran, compiled, twin


@pytest.mark.parametrize("name", ELEMENTWISE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_twins_give_the_kernels_bits(name, dtype):
    op = REGISTRY[name]
    rng = np.random.default_rng(ELEMENTWISE.index(name))
    for shapes in LAYOUTS[op.n_inputs]:
        values, attrs = node_values(op, shapes, dtype, rng)
        arrays, prepared = op.prepare(values, attrs)
        output = op.forward(arrays, prepared)
        # A gradient of every magnitude, and a target that already holds values (a second
        # contribution into the same buffer).
        grad = (rng.standard_normal(output.shape) * 10.0 ** rng.integers(-3, 4, output.shape))
        grad = np.asarray(grad, dtype=output.dtype)
        for k in range(op.n_inputs):
            if not op.is_differentiable(k):
                continue
            start = np.asarray(rng.standard_normal(arrays[k].shape) / 3, dtype=arrays[k].dtype)
            ran, compiled, twin = run_both(op, k, arrays, prepared, output, grad, start)
            if (name, k) in WITHOUT_TWIN:
                assert not ran
                np.testing.assert_array_equal(twin, start)  # nothing written
                continue
            assert ran, (name, k, shapes)
            np.testing.assert_array_equal(twin, compiled, err_msg=f"{name} {k} {shapes}")


def test_the_common_elementwise_vjps_have_twins():
    names = {name for name, _ in WITHOUT_TWIN}
    assert ("power", 0) in WITHOUT_TWIN and ("power", 1) not in WITHOUT_TWIN
    assert not names & {"add", "subtract", "multiply", "divide", "tanh", "exp", "log", "sin",
                        "sqrt", "sigmoid", "maximum", "where", "clip", "abs", "arcsin"}


def test_the_default_has_no_twin():
    assert Op.vjp_numpy(None, 0, None, None, None, None) is False
