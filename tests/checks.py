"""Gradient checks shared by the op tests, independent of the library's own gradcheck.

``check_gradients`` holds three things against each other for a function of float64 arrays:
the compiled VJP kernels (``grad``), the differentiable rules (``grad(create_graph=True)``) and
central finite differences of ``sum(v * f(x))``.
"""

import textwrap

import numpy as np

import autograd_nb as anb
from autograd_nb import tape

#: The head of a child process's script that lists, in ``compiles``, every function numba
#: compiles in it (as "module.qualname").
COMPILE_LISTENER = textwrap.dedent(
    """
    from numba.core import event
    compiles = []

    class Listener(event.Listener):
        def on_start(self, ev):
            pass

        def on_end(self, ev):
            function = ev.data["dispatcher"].py_func
            compiles.append(function.__module__ + "." + function.__qualname__)

    event.register("numba:compile", Listener())
    """
)

#: Registered ops seen in graphs whose gradients passed a check, by order ("first",
#: "second"); tests/conftest.py reports it at the end of the run.
COVERED = {"first": set(), "second": set()}


def ops_in_graph(*tensors):
    """Names of the recorded ops reachable from ``tensors``."""
    names, seen = set(), set()
    stack = [t.grad_fn for t in tensors if t is not None and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.op.name)
        stack.extend(e for e in node.edges if isinstance(e, tape.Node))
    return names


def numerical_vjp(function, arrays, v, eps=1e-6):
    """Central differences of ``sum(v * function(*arrays))`` with respect to each array."""
    grads = []
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    for i, array in enumerate(arrays):
        grad = np.zeros_like(array, dtype=np.float64)
        flat = grad.reshape(-1)
        for j in range(array.size):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[i].reshape(-1)[j] += eps
            minus[i].reshape(-1)[j] -= eps
            f_plus = np.asarray(function(*plus), dtype=np.float64)
            f_minus = np.asarray(function(*minus), dtype=np.float64)
            flat[j] = np.sum(v * (f_plus - f_minus)) / (2 * eps)
        grads.append(grad)
    return grads


def check_gradients(function, arrays, rtol=1e-5, atol=1e-6, seed=0, second_order=True):
    """Check ``function`` (Tensors -> Tensor) at ``arrays`` (float64 NumPy arrays).

    Returns the kernel gradients, for further checks by the caller.
    """
    rng = np.random.default_rng(seed)
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    tensors = [anb.tensor(a, requires_grad=True) for a in arrays]
    y = function(*tensors)
    v = rng.standard_normal(y.shape)

    recorded = ops_in_graph(y)
    kernel = anb.grad(y, tensors, grad_outputs=anb.tensor(v), retain_graph=True)
    rules = anb.grad(y, tensors, grad_outputs=anb.tensor(v), create_graph=True)

    def forward(*plain):
        with anb.no_grad():
            return function(*(anb.tensor(p) for p in plain)).numpy()

    numeric = numerical_vjp(forward, arrays, v)
    for i, (k, r, n) in enumerate(zip(kernel, rules, numeric)):
        assert k.shape == arrays[i].shape, (k.shape, arrays[i].shape)
        assert k.dtype == arrays[i].dtype
        np.testing.assert_allclose(k.numpy(), n, rtol=rtol, atol=atol, err_msg=f"kernel vjp {i}")
        np.testing.assert_allclose(r.numpy(), k.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=f"rule vjp {i}")
    COVERED["first"].update(recorded)
    if second_order:
        check_second_order(function, arrays, v, rtol=rtol * 10, atol=atol * 10)
        COVERED["second"].update(recorded)
    return kernel


def check_second_order(function, arrays, v, rtol=1e-4, atol=1e-5, seed=1):
    """Second derivatives: differentiate ``<w, grad(f)·v>`` (built with create_graph) and
    compare with finite differences of the first-order kernel gradients."""
    rng = np.random.default_rng(seed)

    def first_order(*plain):
        tensors = [anb.tensor(p, requires_grad=True) for p in plain]
        y = function(*tensors)
        return anb.grad(y, tensors, grad_outputs=anb.tensor(v), create_graph=True,
                        allow_unused=True), tensors

    grads, tensors = first_order(*arrays)
    ws = [rng.standard_normal(a.shape) for a in arrays]
    total = None
    for g, w in zip(grads, ws):
        if g is None or not g.requires_grad:
            continue
        term = (g * anb.tensor(w)).sum()
        total = term if total is None else total + term
    if total is None:
        return  # linear in every input: the second derivative is zero and not recorded
    second = anb.grad(total, tensors, allow_unused=True, materialize_grads=True)

    def inner(*plain):
        with anb.enable_grad():
            gs, _ = first_order(*plain)
        return sum(
            float(np.sum(g.numpy() * w)) for g, w in zip(gs, ws) if g is not None
        )

    numeric = numerical_vjp(inner, arrays, np.float64(1.0))
    for i, (s, n) in enumerate(zip(second, numeric)):
        np.testing.assert_allclose(s.numpy(), n, rtol=rtol, atol=atol,
                                   err_msg=f"second derivative {i}")


def elementwise_values(op, shapes, dtype, rng):
    """Inputs of the elementwise op ``op`` of ``shapes``, drawn from its test domain (``where``'s
    condition a bool array, an order without a derivative, ``polygamma``'s or a Bessel
    function's, a whole number)."""
    low, high = op.domain
    values = [rng.uniform(low, high, size=s).astype(dtype) for s in shapes]
    if op.name == "where":
        values[0] = values[0] > (low + high) / 2
    for k in op.not_implemented:
        values[k] = np.floor(rng.uniform(0, 4, size=shapes[k])).astype(dtype)
    return values


def elementwise_attrs(op, rng):
    """``op``'s float parameters (``clip``'s bounds): values of its domain, in order."""
    low, high = op.domain
    return dict(zip(op.params, sorted(rng.uniform(low, high, size=len(op.params)).tolist())))


#: The products on the BLAS (``config.GEMM_KERNEL = "blas"``), for the tests of what tier 0
#: serves without compiling. On an AVX-512 CPU whose OpenBLAS runs a kernel set without it
#: (``OPENBLAS_CORETYPE=Haswell`` on an AMD EPYC Zen 4, as on this project's machines),
#: ``"auto"`` takes the own GEMM, which has no NumPy twin (``engine.backward.has_twins``):
#: tier 0 then compiles it at the first product, by design, and those tests would see it.
#: ``tests/test_tiering.py`` has its own tests of tier 0 under the own GEMM.
BLAS_PRODUCTS = {"AUTOGRAD_NB_GEMM": "blas"}
