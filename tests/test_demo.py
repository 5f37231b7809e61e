"""The tour (``python -m autograd_nb``) and the three facts it shows, checked via the API."""

import ast
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import autograd_nb as anb

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tour_output():
    done = subprocess.run(
        [sys.executable, "-m", "autograd_nb"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _printed_value(output, label):
    """The Python literal printed after ``label = `` on one line of the tour."""
    match = re.search(re.escape(label) + r" = (.+)$", output, flags=re.MULTILINE)
    assert match, f"{label!r} not in the tour's output"
    return ast.literal_eval(match.group(1))


def test_tour_shows_outer_example(tour_output):
    printed = _printed_value(tour_output, "grad(y, x, grad_outputs=ones_like(y))")
    assert printed == [20.0, 20.0, 20.0, 20.0]
    assert _printed_value(tour_output, "2 * sum(x)") == 20.0


def test_tour_shows_matmul_example(tour_output):
    expected = [[10.0, 10.0, 10.0], [26.0, 26.0, 26.0]]
    assert _printed_value(tour_output, "x.grad") == expected
    assert _printed_value(tour_output, "v @ a.T (NumPy)") == expected


def test_tour_shows_two_losses_example(tour_output):
    w = np.array([0.5, -1.0, 2.0])
    closed_form = 2 * w + 2 * (1 - np.tanh(w) ** 2)
    combined = _printed_value(tour_output, "grad(l1 + 2*l2, w)")
    weighted = _printed_value(tour_output, "grad((l1, l2), w, grad_outputs=(ones, 2*ones))")
    np.testing.assert_allclose(combined, closed_form, rtol=1e-12)
    np.testing.assert_allclose(weighted, closed_form, rtol=1e-12)
    assert "equal: True" in tour_output


def test_tour_shows_shape_mismatch_error(tour_output):
    flat = " ".join(tour_output.split())
    assert (
        "Mismatch in shape: grad_output[0] has a shape of (4,) and output[0] has a shape of "
        "(4, 4)." in flat
    )


def test_outer_vjp_is_two_sums():
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = anb.outer(x, x)
    (grad_x,) = anb.grad(y, x, grad_outputs=anb.ones_like(y))
    np.testing.assert_array_equal(grad_x.numpy(), np.full(4, 2 * np.sum(x.numpy())))


def test_outer_vjp_with_any_v():
    rng = np.random.default_rng(0)
    x_values, v = rng.standard_normal(5), rng.standard_normal((5, 5))
    x = anb.tensor(x_values, requires_grad=True)
    (grad_x,) = anb.grad(anb.outer(x, x), x, grad_outputs=v)
    # y[i, j] = x[i] x[j]: dL/dx[k] = sum_j v[k, j] x[j] + sum_i v[i, k] x[i]
    np.testing.assert_allclose(grad_x.numpy(), v @ x_values + v.T @ x_values, rtol=1e-12)


def test_matmul_backward_is_v_times_a_transposed():
    x = anb.ones((2, 3), requires_grad=True)
    a = anb.ones((3, 4))
    v = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    (x @ a).backward(gradient=anb.tensor(v))
    np.testing.assert_array_equal(x.grad.numpy(), [[10.0, 10.0, 10.0], [26.0, 26.0, 26.0]])
    np.testing.assert_array_equal(x.grad.numpy(), v @ np.ones((3, 4)).T)


def test_matmul_backward_with_any_a():
    rng = np.random.default_rng(1)
    a_values, v = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    x = anb.ones((2, 3), requires_grad=True)
    (x @ anb.tensor(a_values)).backward(gradient=v)
    np.testing.assert_allclose(x.grad.numpy(), v @ a_values.T, rtol=1e-12)


def test_weighted_outputs_equal_gradient_of_weighted_sum():
    w_values = np.array([0.5, -1.0, 2.0])
    w = anb.tensor(w_values, requires_grad=True)
    l1 = anb.square(w).sum()
    l2 = anb.tanh(w).sum()
    (combined,) = anb.grad(l1 + 2 * l2, w, retain_graph=True)
    (weighted,) = anb.grad((l1, l2), w, grad_outputs=(anb.ones_like(l1), 2 * anb.ones_like(l2)))
    closed_form = 2 * w_values + 2 * (1 - np.tanh(w_values) ** 2)
    np.testing.assert_allclose(combined.numpy(), closed_form, rtol=1e-12)
    np.testing.assert_allclose(weighted.numpy(), combined.numpy(), rtol=1e-12, atol=0)
