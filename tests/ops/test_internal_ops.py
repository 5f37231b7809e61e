"""Ops that no public function records directly, checked like every other op."""

import numpy as np

import autograd_nb as anb
from tests.checks import check_gradients, ops_in_graph


def test_astype_gradients():
    x = np.random.default_rng(0).standard_normal((2, 3))
    check_gradients(lambda t: anb.sin(t.astype(np.float64)) * t, [x])


def test_index_scatter_is_the_differentiable_adjoint_of_getitem():
    # getitem's differentiable rule records _index_scatter; differentiating a gradient of an
    # indexing expression checks it (and its own rule, a getitem) to second order.
    index = (np.array([0, 2, 2]), slice(None, None, -1))

    def gradient_of_indexing(t):
        # The finite-difference pass calls this under no_grad on plain tensors.
        with anb.enable_grad():
            leaf = t if t.requires_grad else t.detach().requires_grad_()
            (g,) = anb.grad((leaf[index] ** 3).sum(), leaf, create_graph=True)
        return g

    x = np.random.default_rng(1).standard_normal((3, 4))
    assert "_index_scatter" in ops_in_graph(gradient_of_indexing(anb.tensor(x, requires_grad=True)))
    check_gradients(gradient_of_indexing, [x])
