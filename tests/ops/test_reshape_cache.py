"""Reshape's per-layout cache (``Reshape._run``): a hit gives what a miss gives, and reshapes
that differ in the input's layout or the requested shape never share an entry."""

import numpy as np
import pytest

import autograd_nb as anb
from autograd_nb.ops.registry import REGISTRY

RESHAPE = REGISTRY["reshape"]


@pytest.mark.parametrize(
    "shape, new_shape",
    [((4,), (-1, 1)), ((4,), (1, -1)), ((2, 3), (3, 2)), ((2, 3), -1), ((2, 3), 6), ((1,), ())],
)
@pytest.mark.compiled_only
def test_a_cached_reshape_gives_the_values_and_gradient_of_a_fresh_one(shape, new_shape):
    RESHAPE._run_cache.clear()
    data = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    results = []
    for _ in range(3):  # a miss, then hits
        x = anb.tensor(data, requires_grad=True)
        y = anb.reshape(x, new_shape)
        (g,) = anb.grad(anb.sum(y * y), x)
        results.append((y.numpy(), g.numpy()))
    expected = data.reshape(new_shape)
    for values, grad in results:
        np.testing.assert_array_equal(values, expected)
        np.testing.assert_array_equal(grad, 2 * data)
    assert len(RESHAPE._run_cache) == 1


@pytest.mark.compiled_only
def test_layouts_and_shapes_do_not_share_entries():
    RESHAPE._run_cache.clear()
    a = np.arange(6.0).reshape(2, 3)
    outputs = [
        anb.reshape(anb.tensor(a), (3, 2)),
        anb.reshape(anb.tensor(a), (6,)),
        anb.reshape(anb.tensor(a.astype(np.float32)), (3, 2)),
        anb.reshape(anb.tensor(np.arange(6.0).reshape(3, 2)), (3, 2)),
    ]
    assert [o.shape for o in outputs] == [(3, 2), (6,), (3, 2), (3, 2)]
    assert outputs[2].dtype == np.float32
    assert len(RESHAPE._run_cache) == 4
    np.testing.assert_array_equal(anb.reshape(anb.transpose(anb.tensor(a)), (6,)).numpy(),
                                  a.T.reshape(6))


def test_a_bad_shape_still_raises_after_a_hit():
    x = anb.tensor(np.arange(6.0))
    anb.reshape(x, (2, 3))
    anb.reshape(x, (2, 3))
    with pytest.raises(ValueError, match="cannot reshape"):
        anb.reshape(x, (4, 2))
    with pytest.raises(ValueError, match="cannot reshape"):
        anb.reshape(x, (4, 2))
