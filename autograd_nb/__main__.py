"""A short tour of autograd_nb: what ``grad_outputs`` means.

Run it with ``python -m autograd_nb`` (or ``make demo``). Every number it prints is computed
live by the engine, next to the closed form it should equal. ``python -m autograd_nb warmup``
precompiles kernels instead (:mod:`autograd_nb.warmup`).
"""

import sys
import textwrap

import numpy as np

import autograd_nb as anb


def _say(text, indent="  "):
    # Prose is laid out by hand (no re-wrapping), so formulas never break across lines.
    print(textwrap.indent(textwrap.dedent(text).strip("\n"), indent))


def _show(label, value):
    if isinstance(value, anb.Tensor):
        value = value.tolist()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    print(f"    {label} = {value}")


def intro():
    print("autograd_nb tour: grad_outputs is the v of the vector-Jacobian product vᵀJ")
    print("=" * 78)
    _say(
        """
        For outputs y of inputs x, grad(y, x, grad_outputs=v) returns vᵀ·∂y/∂x, with one
        vector v per output, of that output's shape. Read v as dL/dy: the gradient of whatever
        loss L comes after y. By the chain rule the result is then dL/dx.
        backward(gradient=v) computes the same product and accumulates it into .grad.
        v may be left out only for a single-element output, where it means 1.
        """,
        indent="",
    )


def outer_example():
    print("\n(a) y = outer(x, x), v = ones_like(y)")
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = anb.outer(x, x)
    (grad_x,) = anb.grad(y, x, grad_outputs=anb.ones_like(y))
    _show("x", x)
    _show("grad(y, x, grad_outputs=ones_like(y))", grad_x)
    _say(
        """
        y[i, j] = x[i] * x[j], so x[k] appears in row k and in column k of y.
        With v all ones (that is, L = y.sum()):
        dL/dx[k] = sum_j v[k, j] * x[j] + sum_i v[i, k] * x[i] = 2 * sum(x)
        """
    )
    _show("2 * sum(x)", 2 * float(np.sum(x.numpy())))
    return x, y, grad_x


def matmul_example():
    print("\n(b) out = x @ a, out.backward(gradient=v)")
    x = anb.ones((2, 3), requires_grad=True)
    a = anb.ones((3, 4))
    out = x @ a
    v = anb.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    out.backward(gradient=v)
    _show("v (shape of out, (2, 4))", v)
    _show("x.grad", x.grad)
    _say(
        """
        out[i, j] = sum_k x[i, k] * a[k, j], so dL/dx[i, k] = sum_j v[i, j] * a[k, j],
        which is v @ a.T. With a all ones, every entry of row i of x.grad is the sum of
        row i of v: 1+2+3+4 = 10 and 5+6+7+8 = 26.
        """
    )
    _show("v @ a.T (NumPy)", v.numpy() @ a.numpy().T)
    return x, v, a


def two_losses_example():
    print("\n(c) several outputs: one v per output, and the products are summed")
    w = anb.tensor([0.5, -1.0, 2.0], requires_grad=True)
    l1 = anb.square(w).sum()
    l2 = anb.tanh(w).sum()
    # retain_graph: the second grad() below walks l1's and l2's graph again.
    (combined,) = anb.grad(l1 + 2 * l2, w, retain_graph=True)
    (weighted,) = anb.grad((l1, l2), w, grad_outputs=(anb.ones_like(l1), 2 * anb.ones_like(l2)))
    _show("w", w)
    print("    l1 = sum(w**2), l2 = sum(tanh(w))")
    _show("grad(l1 + 2*l2, w)", combined)
    _show("grad((l1, l2), w, grad_outputs=(ones, 2*ones))", weighted)
    equal = bool(np.allclose(combined.numpy(), weighted.numpy(), rtol=1e-12, atol=0.0))
    print(f"    equal: {equal}")
    _say(
        """
        The v of each output weighs its contribution, and the products are summed:
        v = (1, 2) for (l1, l2) gives the gradient of l1 + 2*l2.
        Closed form: 2*w + 2*(1 - tanh(w)**2)
        """
    )
    w_values = w.numpy()
    _show("closed form", 2 * w_values + 2 * (1 - np.tanh(w_values) ** 2))
    return combined, weighted


def shape_mismatch_example():
    print("\n(d) v must have its output's shape")
    x = anb.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = anb.outer(x, x)
    try:
        anb.grad(y, x, grad_outputs=anb.ones(4))
    except RuntimeError as error:
        print("    grad(outer(x, x), x, grad_outputs=ones(4)) raises RuntimeError:")
        print(textwrap.indent(textwrap.fill(str(error), width=84), "      "))
    else:  # pragma: no cover - the engine should have refused
        print("    (no error was raised: this is a bug)")


def main():
    np.set_printoptions(precision=6, suppress=True)
    intro()
    outer_example()
    matmul_example()
    two_losses_example()
    shape_mismatch_example()


if __name__ == "__main__":
    if len(sys.argv) > 1:  # a command (``warmup``): autograd_nb/warmup.py
        from autograd_nb.warmup import command_line

        sys.exit(command_line(sys.argv[1:]))
    main()
