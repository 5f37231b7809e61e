"""The benchmarked computations, written once per engine.

A workload is a computation with a gradient (``seed_outer``, ``mlp_train_step``, ...) and a
set of parameters (sizes, dtype). For each engine that can express it, a *maker* takes the
engine's module and the parameters, builds the seeded data and returns ``step``: a function
of no arguments that runs one iteration (forward and backward; for ``mlp_train_step`` also the
SGD update) and returns the gradients as NumPy arrays. A workload may have several variants
per engine, named ``engine:how`` (``torch:jacrev``); ``autograd_nb:compile`` runs the forward
part of autograd_nb's step through ``anb.compile`` (:meth:`Workload.eager_and_compiled`), the
rest of the step as the eager one. The asv suite (``bench_engines.py``) and
``compare.py`` both get their work from :func:`make_step`, so they time the same thing.

``make_step`` raises ``NotImplementedError`` when the engine is not installed or cannot
express the workload; that is also how asv skips a benchmark.
"""

import ctypes
import os
import types

import numpy as np

ENGINES = ("autograd_nb", "torch", "jax", "autograd")

WORKLOADS = {}


class Workload:
    """A named computation, its parameters and its makers (one per engine variant).

    Parameters
    ----------
    name : str
        The name used by ``compare.py --workloads`` and in the tables.
    description : str
        One line for the tables and the docs.
    params : dict
        Parameter name -> the values the asv suite sweeps.
    compare : list of dict
        The parameter sets ``compare.py`` runs (the sizes and dtype the issues name).
    dtype : str
        The dtype of the gradients when ``params`` has no ``dtype``.
    tolerance : float, optional
        The largest relative difference the gradient checks accept, where the engines'
        results differ by more than rounding (their ODE solvers); by default ``compare.py``'s
        for the dtype.
    """

    def __init__(self, name, description, params, compare, dtype="float64", tolerance=None):
        self.name = name
        self.tolerance = tolerance
        self.dtype = dtype
        self.description = description
        self.params = params
        self.compare = compare
        self.makers = {}
        self.closed_form = None
        WORKLOADS[name] = self

    def variant(self, name):
        """Decorator: register the maker of engine variant ``name`` (``engine[:how]``)."""

        def register(maker):
            self.makers[name] = maker
            return maker

        return register

    def exact(self, function):
        """Decorator: register the gradient in closed form (NumPy), a check beside torch's."""
        self.closed_form = function
        return function

    def eager_and_compiled(self, maker):
        """Decorator: register ``maker(anb, trace, **params)`` as the ``autograd_nb`` variant,
        with ``trace`` the identity, and as ``autograd_nb:compile``, with ``trace`` being
        ``anb.compile``.

        The maker passes the forward part of its step through ``trace``, so both variants do
        the same work around it (the backward, reading the gradients, an update). A compiled
        step's first call records (eagerly) and its second is the first replay: warm it up
        with at least two calls.
        """
        self.makers["autograd_nb"] = lambda anb, **params: maker(anb, _eager, **params)
        self.makers["autograd_nb:compile"] = lambda anb, **params: maker(anb, anb.compile, **params)
        return maker

    @property
    def variants(self):
        return list(self.makers)


def _eager(forward):
    return forward


def engine_of(variant):
    return variant.split(":", 1)[0]


def make_step(workload, variant, **params):
    """One iteration of ``workload`` on engine ``variant``, as a function of no arguments.

    The first call may compile (numba kernels, XLA); callers warm it up before timing.
    """
    spec = WORKLOADS[workload]
    if variant not in spec.makers:
        raise NotImplementedError(f"{workload} has no {variant} variant")
    module = _import(engine_of(variant))
    return spec.makers[variant](module, **params)


def compiled_first_calls(workload, variant, **params):
    """Seconds taken by the first two calls of a fresh compiled step (``autograd_nb:compile``):
    the first records the program (eagerly), the second is its first replay.

    Call it once a step of the same ops has run, so that the kernels are loaded (issue 19's
    "warm kernel cache"). The backward templates (``autograd_nb/engine/plan_cache.py``) are
    cleared first: that earlier run made the graph's template, and a new function has none.
    """
    import time

    from autograd_nb.engine import plan_cache

    step = make_step(workload, variant, **params)
    plan_cache.clear()
    start = time.perf_counter()
    step()
    middle = time.perf_counter()
    step()
    return middle - start, time.perf_counter() - middle


def median_us(run, rounds, warmup=3):
    """The median of ``rounds`` calls of ``run`` in microseconds, after ``warmup`` untimed
    calls (numba compiling or loading its kernels): the diagnostic scripts' timer
    (``program_rows.py``, ``step_pieces.py``)."""
    import statistics
    import time

    for _ in range(warmup):
        run()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def seeded(shape, seed=0, scale=1.0, dtype="float64"):
    """Reproducible normal data: the same arrays for every engine."""
    data = scale * np.random.default_rng(seed).standard_normal(shape)
    return data.astype(dtype)


def seeded_uniform(shape, low, high, seed=0, dtype="float64"):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def _import(engine):
    try:
        if engine == "autograd_nb":
            import autograd_nb

            return autograd_nb
        if engine == "torch":
            import torch

            return torch
        if engine == "jax":
            import jax

            # float64 workloads stay float64 (JAX would silently compute in float32).
            jax.config.update("jax_enable_x64", True)
            return jax
        if engine == "autograd":
            import autograd

            return autograd
    except ImportError as error:
        raise NotImplementedError(f"{engine} is not installed: {error}") from error
    raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")


def engine_version(engine):
    try:
        module = _import(engine)
    except NotImplementedError:
        return None
    if engine == "autograd":
        from importlib.metadata import version

        return version("autograd")
    return module.__version__


def set_threads(threads):
    """Cap, at run time, the thread pools that can still be resized after import.

    numba's (``prange`` kernels), every loaded OpenBLAS (NumPy's and SciPy's: autograd_nb's
    products call NumPy's where it bundles one, ``autograd_nb.config.BLAS``, and its LAPACK
    SciPy's) and torch's intra-op pool. XLA's pool is fixed
    when jax is imported; ``compare.py --threads`` sets the environment before any import
    instead, which caps everything.
    """
    import sys

    import numba

    numba.set_num_threads(threads)
    for library in _loaded_openblas():
        for symbol in (
            "openblas_set_num_threads",
            "scipy_openblas_set_num_threads64_",
            "scipy_openblas_set_num_threads",
        ):
            setter = getattr(library, symbol, None)
            if setter is not None:
                setter(ctypes.c_int(threads))
                break
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def _loaded_openblas():
    """The OpenBLAS builds mapped into this process (what threadpoolctl finds, without it)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return []
    return [ctypes.CDLL(path) for path in sorted(paths) if os.path.isfile(path)]


# -- seed_outer ---------------------------------------------------------------------------------

seed_outer = Workload(
    "seed_outer",
    "grad(outer(x, x), x, grad_outputs=ones): the VJP of an n x n result",
    params={"n": (100, 2000), "dtype": ("float32", "float64")},
    compare=[{"n": 100, "dtype": "float64"}, {"n": 2000, "dtype": "float64"}],
)


def _outer_data(n, dtype):
    return seeded(n, seed=10, dtype=dtype), np.ones((n, n), dtype=dtype)


@seed_outer.exact
def _(n, dtype):
    x, _ = _outer_data(n, dtype)
    # d/dx_k sum_ij x_i x_j = 2 sum(x)
    return [np.full(n, 2 * x.astype(np.float64).sum())]


@seed_outer.eager_and_compiled
def _(anb, trace, n, dtype):
    data, ones = _outer_data(n, dtype)
    x = anb.tensor(data, requires_grad=True)
    ones = anb.tensor(ones)
    outer = trace(lambda x: anb.outer(x, x))

    def step():
        return [anb.grad(outer(x), x, grad_outputs=ones)[0].numpy()]

    return step


@seed_outer.variant("torch")
def _(torch, n, dtype):
    data, ones = _outer_data(n, dtype)
    x = torch.tensor(data, requires_grad=True)
    ones = torch.tensor(ones)

    def step():
        return [torch.autograd.grad(torch.outer(x, x), x, grad_outputs=ones)[0].numpy()]

    return step


@seed_outer.variant("jax")
def _(jax, n, dtype):
    import jax.numpy as jnp

    data, ones = _outer_data(n, dtype)
    x, ones = jnp.asarray(data), jnp.asarray(ones)

    @jax.jit
    def value_and_vjp(x, ones):
        # Returning y as well: an eager engine computes it, and XLA would otherwise
        # never build the n x n product at all.
        y, vjp = jax.vjp(lambda x: jnp.outer(x, x), x)
        return y, vjp(ones)[0]

    def step():
        _, grad = jax.block_until_ready(value_and_vjp(x, ones))
        return [np.asarray(grad)]

    return step


@seed_outer.variant("autograd")
def _(autograd, n, dtype):
    import autograd.numpy as hnp

    x, ones = _outer_data(n, dtype)

    def step():
        vjp, _ = autograd.make_vjp(lambda x: hnp.outer(x, x))(x)
        return [vjp(ones)]

    return step


# -- outer_xy -----------------------------------------------------------------------------------

outer_xy = Workload(
    "outer_xy",
    "grad(outer(x, y), (x, y), grad_outputs=ones): outer of two tensors, both gradients",
    params={"n": (100, 2000), "dtype": ("float32", "float64")},
    compare=[{"n": 100, "dtype": "float64"}, {"n": 2000, "dtype": "float64"}],
)


def _outer_xy_data(n, dtype):
    return seeded(n, seed=11, dtype=dtype), seeded(n, seed=12, dtype=dtype), np.ones(
        (n, n), dtype=dtype)


@outer_xy.exact
def _(n, dtype):
    x, y, _ = _outer_xy_data(n, dtype)
    # d/dx_i sum_ij x_i y_j = sum(y), d/dy_j = sum(x)
    return [np.full(n, y.astype(np.float64).sum()), np.full(n, x.astype(np.float64).sum())]


@outer_xy.eager_and_compiled
def _(anb, trace, n, dtype):
    x_data, y_data, ones = _outer_xy_data(n, dtype)
    x = anb.tensor(x_data, requires_grad=True)
    y = anb.tensor(y_data, requires_grad=True)
    ones = anb.tensor(ones)
    outer = trace(lambda x, y: anb.outer(x, y))

    def step():
        return [g.numpy() for g in anb.grad(outer(x, y), (x, y), grad_outputs=ones)]

    return step


@outer_xy.variant("torch")
def _(torch, n, dtype):
    x_data, y_data, ones = _outer_xy_data(n, dtype)
    x = torch.tensor(x_data, requires_grad=True)
    y = torch.tensor(y_data, requires_grad=True)
    ones = torch.tensor(ones)

    def step():
        grads = torch.autograd.grad(torch.outer(x, y), (x, y), grad_outputs=ones)
        return [g.numpy() for g in grads]

    return step


@outer_xy.variant("jax")
def _(jax, n, dtype):
    import jax.numpy as jnp

    x_data, y_data, ones = _outer_xy_data(n, dtype)
    x, y, ones = jnp.asarray(x_data), jnp.asarray(y_data), jnp.asarray(ones)

    @jax.jit
    def value_and_vjp(x, y, ones):
        # (the product returned too, as in seed_outer: an eager engine computes it)
        product, vjp = jax.vjp(jnp.outer, x, y)
        return product, vjp(ones)

    def step():
        _, grads = jax.block_until_ready(value_and_vjp(x, y, ones))
        return [np.asarray(g) for g in grads]

    return step


@outer_xy.variant("autograd")
def _(autograd, n, dtype):
    import autograd.numpy as hnp

    x, y, ones = _outer_xy_data(n, dtype)

    def step():
        vjp, _ = autograd.make_vjp(lambda pair: hnp.outer(pair[0], pair[1]))((x, y))
        return list(vjp(ones))

    return step


# -- elementwise_chain --------------------------------------------------------------------------

#: The fixed 20-op chain: (op, constant). Bounded ops only, so no value overflows at any size.
CHAIN_20 = (
    ("sin", None),
    ("multiply", 0.9),
    ("tanh", None),
    ("add", 0.1),
    ("sigmoid", None),
    ("square", None),
    ("cos", None),
    ("multiply", 1.5),
    ("sin", None),
    ("add", -0.2),
    ("tanh", None),
    ("square", None),
    ("sigmoid", None),
    ("cos", None),
    ("multiply", 0.7),
    ("add", 0.3),
    ("sin", None),
    ("tanh", None),
    ("square", None),
    ("sigmoid", None),
)

elementwise_chain = Workload(
    "elementwise_chain",
    "a fixed 20-op elementwise chain (sin, tanh, sigmoid, square, cos, *c, +c), grad of the sum",
    params={"size": (10_000, 1_000_000), "dtype": ("float32", "float64")},
    compare=[{"size": 10_000, "dtype": "float64"}, {"size": 1_000_000, "dtype": "float64"}],
)


def _run_chain(unary, x):
    """CHAIN_20 on ``x``, with the engine's ``unary`` functions by op name."""
    h = x
    for op, constant in CHAIN_20:
        if op == "multiply":
            h = h * constant
        elif op == "add":
            h = h + constant
        else:
            h = unary[op](h)
    return h


def _chain20_data(size, dtype):
    return seeded(size, seed=11, dtype=dtype)


@elementwise_chain.eager_and_compiled
def _(anb, trace, size, dtype):
    x = anb.tensor(_chain20_data(size, dtype), requires_grad=True)
    unary = {name: getattr(anb, name) for name in ("sin", "cos", "tanh", "sigmoid", "square")}
    loss = trace(lambda x: anb.sum(_run_chain(unary, x)))

    def step():
        return [anb.grad(loss(x), x)[0].numpy()]

    return step


@elementwise_chain.variant("torch")
def _(torch, size, dtype):
    x = torch.tensor(_chain20_data(size, dtype), requires_grad=True)
    unary = {name: getattr(torch, name) for name in ("sin", "cos", "tanh", "sigmoid", "square")}

    def step():
        return [torch.autograd.grad(torch.sum(_run_chain(unary, x)), x)[0].numpy()]

    return step


@elementwise_chain.variant("jax")
def _(jax, size, dtype):
    import jax.numpy as jnp

    x = jnp.asarray(_chain20_data(size, dtype))
    unary = {name: getattr(jnp, name) for name in ("sin", "cos", "tanh", "square")}
    unary["sigmoid"] = jax.nn.sigmoid
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: jnp.sum(_run_chain(unary, x))))

    def step():
        _, grad = jax.block_until_ready(value_and_grad(x))
        return [np.asarray(grad)]

    return step


@elementwise_chain.variant("autograd")
def _(autograd, size, dtype):
    import autograd.numpy as hnp

    x = _chain20_data(size, dtype)
    unary = {name: getattr(hnp, name) for name in ("sin", "cos", "tanh", "square")}
    # HIPS autograd has no sigmoid; this is the overflow-free form of 1 / (1 + exp(-h)).
    unary["sigmoid"] = lambda h: 0.5 * (hnp.tanh(0.5 * h) + 1.0)
    grad = autograd.grad(lambda x: hnp.sum(_run_chain(unary, x)))

    def step():
        return [grad(x)]

    return step


# -- fastest_autograd ---------------------------------------------------------------------------

FASTEST_INPUTS = 100
FASTEST_OPS = ("softplus", "sum4", "product", "softmax4")
FASTEST_ARITY = {"softplus": 1, "sum4": 4, "product": 2, "softmax4": 4}
#: The first argument of each op is one of the last RECENT variables (a deep graph, like the
#: post's nodes[-10], nodes[-20], nodes[-30:-10:5]); the others are any earlier variable.
RECENT = 30

fastest_autograd = Workload(
    "fastest_autograd",
    'the scalar graph of "Fastest Autograd in the West": 100 scalar inputs, ops cycling '
    "softplus / sum of 4 / product / softmax of 4 over seeded earlier variables; build + "
    "backward",
    params={"n_ops": (1_000, 10_000)},
    compare=[{"n_ops": 1_000}, {"n_ops": 10_000}],
)


def fastest_graph(n_ops, seed=0):
    """The graph as ``[(op, argument indices), ...]``, a function of ``seed`` alone.

    Variables are numbered in creation order: the inputs are 0..99, each op appends one
    variable (softmax of 4 appends four). The loss is the last variable.
    """
    rng = np.random.default_rng(seed)
    graph = []
    n_variables = FASTEST_INPUTS
    for i in range(n_ops):
        op = FASTEST_OPS[i % len(FASTEST_OPS)]
        first = int(rng.integers(max(0, n_variables - RECENT), n_variables))
        others = rng.integers(0, n_variables, size=FASTEST_ARITY[op] - 1)
        graph.append((op, (first, *(int(j) for j in others))))
        n_variables += 4 if op == "softmax4" else 1
    return graph


def _fastest_inputs():
    return seeded_uniform(FASTEST_INPUTS, -1.0, 1.0, seed=12)


def _run_fastest(graph, variables, softplus, softmax4):
    """Build the graph over ``variables`` (a list of scalars); return the last variable.

    ``softmax4(a, b, c, d)`` returns the four results as a sequence of scalars.
    """
    variables = list(variables)
    for op, args in graph:
        a = [variables[j] for j in args]
        if op == "softplus":
            variables.append(softplus(a[0]))
        elif op == "sum4":
            variables.append(a[0] + a[1] + a[2] + a[3])
        elif op == "product":
            variables.append(a[0] * a[1])
        else:
            variables.extend(softmax4(*a))
    return variables[-1]


@fastest_autograd.eager_and_compiled
def _(anb, trace, n_ops):
    graph = fastest_graph(n_ops)
    inputs = [anb.tensor(value, requires_grad=True) for value in _fastest_inputs()]

    def softmax4(*scalars):
        s = anb.softmax(anb.stack(scalars))
        return [s[k] for k in range(4)]

    build = trace(lambda *inputs: _run_fastest(graph, inputs, anb.softplus, softmax4))

    def step():
        for x in inputs:
            x.grad = None
        build(*inputs).backward()
        return [np.array([0.0 if x.grad is None else x.grad.item() for x in inputs])]

    return step


@fastest_autograd.variant("torch")
def _(torch, n_ops):
    graph = fastest_graph(n_ops)
    inputs = [torch.tensor(value, requires_grad=True) for value in _fastest_inputs()]
    softplus = torch.nn.functional.softplus

    def softmax4(*scalars):
        return torch.softmax(torch.stack(scalars), dim=0).unbind()

    def step():
        for x in inputs:
            x.grad = None
        _run_fastest(graph, inputs, softplus, softmax4).backward()
        return [np.array([0.0 if x.grad is None else x.grad.item() for x in inputs])]

    return step


@fastest_autograd.variant("jax")
def _(jax, n_ops):
    import jax.numpy as jnp

    if n_ops > 1_000:
        # Measured here: XLA compiles the 1,000-op graph in ~35 s and was still compiling
        # the 10,000-op one after 14 minutes.
        raise NotImplementedError("XLA compiles a 10,000-op scalar graph for over 14 minutes")
    graph = fastest_graph(n_ops)

    def softmax4(*scalars):
        s = jax.nn.softmax(jnp.stack(scalars))
        return [s[k] for k in range(4)]

    def loss(x):
        scalars = [x[i] for i in range(FASTEST_INPUTS)]
        return _run_fastest(graph, scalars, jax.nn.softplus, softmax4)

    grad = jax.jit(jax.grad(loss))
    x = jnp.asarray(_fastest_inputs())

    def step():
        return [np.asarray(jax.block_until_ready(grad(x)))]

    return step


@fastest_autograd.variant("autograd")
def _(autograd, n_ops):
    import autograd.numpy as hnp

    graph = fastest_graph(n_ops)

    def softplus(h):
        return hnp.logaddexp(h, 0.0)

    def softmax4(*scalars):
        s = hnp.stack(scalars)
        e = hnp.exp(s - hnp.max(s))
        e = e / hnp.sum(e)
        return [e[k] for k in range(4)]

    def loss(x):
        scalars = [x[i] for i in range(FASTEST_INPUTS)]
        return _run_fastest(graph, scalars, softplus, softmax4)

    grad = autograd.grad(loss)
    x = _fastest_inputs()

    def step():
        return [grad(x)]

    return step


# -- jacobian_batched ---------------------------------------------------------------------------

JACOBIAN_IN, JACOBIAN_HIDDEN, JACOBIAN_OUT = 256, 512, 128

jacobian_batched = Workload(
    "jacobian_batched",
    "the full 128x256 Jacobian of tanh(W2 @ tanh(W1 @ x + b1) + b2), hidden 512, float64, "
    "by batched VJPs (forward included)",
    params={},
    compare=[{}],
)


def _jacobian_data():
    return {
        "x": seeded(JACOBIAN_IN, seed=20),
        "W1": seeded((JACOBIAN_HIDDEN, JACOBIAN_IN), seed=21, scale=JACOBIAN_IN**-0.5),
        "b1": seeded(JACOBIAN_HIDDEN, seed=22, scale=0.1),
        "W2": seeded((JACOBIAN_OUT, JACOBIAN_HIDDEN), seed=23, scale=JACOBIAN_HIDDEN**-0.5),
        "b2": seeded(JACOBIAN_OUT, seed=24, scale=0.1),
    }


def _mlp2(tanh, x, W1, b1, W2, b2, **_):
    return tanh(W2 @ tanh(W1 @ x + b1) + b2)


@jacobian_batched.exact
def _():
    d = _jacobian_data()
    h = np.tanh(d["W1"] @ d["x"] + d["b1"])
    y = np.tanh(d["W2"] @ h + d["b2"])
    return [((1 - y**2)[:, None] * d["W2"]) @ ((1 - h**2)[:, None] * d["W1"])]


@jacobian_batched.eager_and_compiled
def _(anb, trace, **_):
    data = {name: anb.tensor(value) for name, value in _jacobian_data().items()}
    x = anb.tensor(data.pop("x").numpy(), requires_grad=True)
    identity = anb.eye(JACOBIAN_OUT, dtype="float64")
    forward = trace(lambda x: _mlp2(anb.tanh, x, **data))

    def step():
        y = forward(x)
        return [anb.grad(y, x, grad_outputs=identity, is_grads_batched=True)[0].numpy()]

    return step


@jacobian_batched.variant("autograd_nb:jacobian")
def _(anb, **_):
    from autograd_nb.autograd.functional import jacobian

    data = {name: anb.tensor(value) for name, value in _jacobian_data().items()}
    x = data.pop("x")

    def step():
        return [jacobian(lambda x: _mlp2(anb.tanh, x, **data), x, vectorize=True).numpy()]

    return step


@jacobian_batched.variant("torch")
def _(torch, **_):
    data = {name: torch.tensor(value) for name, value in _jacobian_data().items()}
    x = data.pop("x").requires_grad_()
    identity = torch.eye(JACOBIAN_OUT, dtype=torch.float64)

    def step():
        y = _mlp2(torch.tanh, x, **data)
        grad = torch.autograd.grad(y, x, grad_outputs=identity, is_grads_batched=True)[0]
        return [grad.numpy()]

    return step


@jacobian_batched.variant("torch:jacrev")
def _(torch, **_):
    import torch.func

    data = {name: torch.tensor(value) for name, value in _jacobian_data().items()}
    x = data.pop("x")
    jacrev = torch.func.jacrev(lambda x: _mlp2(torch.tanh, x, **data))

    def step():
        return [jacrev(x).numpy()]

    return step


@jacobian_batched.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    data = {name: jnp.asarray(value) for name, value in _jacobian_data().items()}
    x = data.pop("x")
    jacrev = jax.jit(jax.jacrev(lambda x, data: _mlp2(jnp.tanh, x, **data)))

    def step():
        return [np.asarray(jax.block_until_ready(jacrev(x, data)))]

    return step


@jacobian_batched.variant("autograd")
def _(autograd, **_):
    import autograd.numpy as hnp

    data = _jacobian_data()
    x = data.pop("x")
    # HIPS autograd's jacobian: one VJP per output row, over one shared forward pass.
    jacobian = autograd.jacobian(lambda x: _mlp2(hnp.tanh, x, **data))

    def step():
        return [jacobian(x)]

    return step


# -- mlp_train_step -----------------------------------------------------------------------------

MLP_SIZES = (784, 512, 512, 10)
MLP_BATCH = 256
MLP_LEARNING_RATE = 0.01

mlp_train_step = Workload(
    "mlp_train_step",
    "one SGD step of a 784-512-512-10 tanh MLP, softmax cross-entropy (log_softmax + label "
    "gather), batch 256, float32",
    params={},
    compare=[{}],
    dtype="float32",
)


def _mlp_data():
    """Inputs, integer labels and the initial [W1, b1, W2, b2, W3, b3], all float32."""
    rng = np.random.default_rng(30)
    inputs = rng.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32)
    labels = rng.integers(0, MLP_SIZES[-1], size=MLP_BATCH)
    params = []
    for fan_in, fan_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
        params.append((rng.standard_normal((fan_in, fan_out)) * fan_in**-0.5).astype(np.float32))
        params.append(np.zeros(fan_out, dtype=np.float32))
    return inputs, labels, params


def _mlp_loss(tanh, log_softmax, inputs, labels, rows, params):
    """Mean softmax cross-entropy; ``rows`` is arange(batch), for the label gather."""
    h = inputs
    for i in range(0, len(params) - 2, 2):
        h = tanh(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    return -log_softmax(logits)[rows, labels].mean()


def _anb_mlp(anb):
    """autograd_nb's inputs, label rows and labels, parameters and loss (of the parameters)."""
    inputs, labels, params = _mlp_data()
    inputs, rows = anb.tensor(inputs), np.arange(MLP_BATCH)
    params = [anb.tensor(p, requires_grad=True) for p in params]

    def log_softmax(logits):
        return anb.log_softmax(logits, axis=-1)

    def loss(*params):
        return _mlp_loss(anb.tanh, log_softmax, inputs, labels, rows, params)

    return params, loss


@mlp_train_step.eager_and_compiled
def _(anb, trace, **_):
    params, loss = _anb_mlp(anb)
    loss = trace(loss)

    def step():
        for p in params:
            p.grad = None
        loss(*params).backward()
        with anb.no_grad():
            for p in params:
                p -= MLP_LEARNING_RATE * p.grad
        return [p.grad.numpy() for p in params]

    return step


@mlp_train_step.variant("autograd_nb:compile_step")
def _(anb, **_):
    params, loss = _anb_mlp(anb)

    @anb.compile
    def train_step(*params):
        # The whole step in one program: forward, gradients, and the in-place update.
        grads = anb.grad(loss(*params), params)
        with anb.no_grad():
            for p, g in zip(params, grads):
                p -= MLP_LEARNING_RATE * g
        return grads

    def step():
        return [g.numpy() for g in train_step(*params)]

    return step


@mlp_train_step.variant("torch")
def _(torch, **_):
    inputs, labels, params = _mlp_data()
    inputs, labels = torch.tensor(inputs), torch.tensor(labels)
    rows = torch.arange(MLP_BATCH)
    params = [torch.tensor(p, requires_grad=True) for p in params]

    def log_softmax(logits):
        return torch.log_softmax(logits, dim=-1)

    def step():
        for p in params:
            p.grad = None
        _mlp_loss(torch.tanh, log_softmax, inputs, labels, rows, params).backward()
        with torch.no_grad():
            for p in params:
                p -= MLP_LEARNING_RATE * p.grad
        return [p.grad.numpy() for p in params]

    return step


@mlp_train_step.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    inputs, labels, params = _mlp_data()
    inputs, labels = jnp.asarray(inputs), jnp.asarray(labels)
    rows = jnp.arange(MLP_BATCH)
    state = {"params": [jnp.asarray(p) for p in params]}

    @jax.jit
    def train_step(params, inputs, labels):
        loss = lambda params: _mlp_loss(  # noqa: E731
            jnp.tanh, jax.nn.log_softmax, inputs, labels, rows, params
        )
        grads = jax.grad(loss)(params)
        return [p - MLP_LEARNING_RATE * g for p, g in zip(params, grads)], grads

    def step():
        state["params"], grads = jax.block_until_ready(train_step(state["params"], inputs, labels))
        return [np.asarray(g) for g in grads]

    return step


@mlp_train_step.variant("autograd")
def _(autograd, **_):
    import autograd.numpy as hnp
    from autograd.scipy.special import logsumexp

    inputs, labels, params = _mlp_data()
    rows = np.arange(MLP_BATCH)
    state = {"params": params}

    def log_softmax(logits):
        return logits - logsumexp(logits, axis=-1, keepdims=True)

    grad = autograd.grad(
        lambda params: _mlp_loss(hnp.tanh, log_softmax, inputs, labels, rows, params)
    )

    def step():
        grads = grad(state["params"])
        state["params"] = [
            (p - MLP_LEARNING_RATE * g).astype(np.float32) for p, g in zip(state["params"], grads)
        ]
        return grads

    return step


# -- ode_rollout --------------------------------------------------------------------------------

ODE_PARTICLES, ODE_STEPS, ODE_DT = 64, 200, 0.01
SPRING_K, SPRING_REST, ANCHOR_K = 10.0, 1.0, 0.01

ode_rollout = Workload(
    "ode_rollout",
    "64 particles in 2-D on a chain of springs with a weak anchor, 200 semi-implicit Euler "
    "steps; gradient of the final energy w.r.t. the initial positions",
    params={},
    compare=[{}],
)


def _ode_data():
    """Initial positions: a stretched, jittered chain along x; initial velocities zero."""
    positions = np.zeros((ODE_PARTICLES, 2))
    positions[:, 0] = 1.1 * np.arange(ODE_PARTICLES)
    positions += seeded((ODE_PARTICLES, 2), seed=40, scale=0.1)
    return positions, np.zeros((ODE_PARTICLES, 2)), np.zeros((1, 2))


def _springs(ns, x):
    """Spring vectors between consecutive particles, and their lengths (as a column)."""
    d = x[1:] - x[:-1]
    return d, ns.sqrt(ns.sum(d * d, axis=1, keepdims=True))


def _ode_step(ns, x, v, zero_row):
    """One semi-implicit Euler step; ``ns`` is the engine's NumPy-like namespace."""
    d, length = _springs(ns, x)
    # Tension of spring i, pulling particle i towards i + 1 and i + 1 towards i.
    tension = SPRING_K * (length - SPRING_REST) / length * d
    force = ns.concatenate([tension, zero_row]) - ns.concatenate([zero_row, tension]) - ANCHOR_K * x
    v = v + ODE_DT * force
    return x + ODE_DT * v, v


def _ode_energy(ns, x, v):
    """Kinetic + spring potential energy (unit masses)."""
    _, length = _springs(ns, x)
    kinetic = 0.5 * ns.sum(v * v)
    return kinetic + 0.5 * SPRING_K * ns.sum(ns.square(length - SPRING_REST))


def _ode_rollout(ns, x, v, zero_row):
    """The energy after ODE_STEPS steps from (x, v), for the eager engines."""
    for _ in range(ODE_STEPS):
        x, v = _ode_step(ns, x, v, zero_row)
    return _ode_energy(ns, x, v)


@ode_rollout.eager_and_compiled
def _(anb, trace, **_):
    positions, velocities, zero_row = _ode_data()
    x = anb.tensor(positions, requires_grad=True)
    v, zero_row = anb.tensor(velocities), anb.tensor(zero_row)
    rollout = trace(lambda x: _ode_rollout(anb, x, v, zero_row))

    def step():
        return [anb.grad(rollout(x), x)[0].numpy()]

    return step


def _ode_scan_variant(compiled):
    """``autograd_nb:scan`` / ``autograd_nb:compile-scan``: the rollout as ``anb.scan``."""

    def maker(anb, **_):
        positions, velocities, zero_row = _ode_data()
        x = anb.tensor(positions, requires_grad=True)
        v, zero_row = anb.tensor(velocities), anb.tensor(zero_row)

        def body(state, _):
            return _ode_step(anb, *state, zero_row), None

        def rollout(x):
            (x_end, v_end), _ = anb.scan(body, (x, v), length=ODE_STEPS)
            return _ode_energy(anb, x_end, v_end)

        if compiled:
            rollout = anb.compile(rollout)

        def step():
            return [anb.grad(rollout(x), x)[0].numpy()]

        return step

    return maker


ode_rollout.variant("autograd_nb:scan")(_ode_scan_variant(False))
ode_rollout.variant("autograd_nb:compile-scan")(_ode_scan_variant(True))


@ode_rollout.variant("torch")
def _(torch, **_):
    positions, velocities, zero_row = _ode_data()
    x = torch.tensor(positions, requires_grad=True)
    v, zero_row = torch.tensor(velocities), torch.tensor(zero_row)

    def step():
        return [torch.autograd.grad(_ode_rollout(torch, x, v, zero_row), x)[0].numpy()]

    return step


@ode_rollout.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    positions, velocities, zero_row = _ode_data()
    x, v, zero_row = jnp.asarray(positions), jnp.asarray(velocities), jnp.asarray(zero_row)

    def rollout(x, v, zero_row):
        # A loop primitive, not 200 unrolled steps: XLA took 80 s to compile those.
        x, v = jax.lax.fori_loop(
            0, ODE_STEPS, lambda _, state: _ode_step(jnp, *state, zero_row), (x, v)
        )
        return _ode_energy(jnp, x, v)

    value_and_grad = jax.jit(jax.value_and_grad(rollout))

    def step():
        _, grad = jax.block_until_ready(value_and_grad(x, v, zero_row))
        return [np.asarray(grad)]

    return step


@ode_rollout.variant("autograd")
def _(autograd, **_):
    import autograd.numpy as hnp

    x, v, zero_row = _ode_data()
    grad = autograd.grad(lambda x: _ode_rollout(hnp, x, v, zero_row))

    def step():
        return [grad(x)]

    return step


# -- ode_guarded: ode_rollout with a branch on a traced value at every step --------------------

#: The limiter's cap on the kinetic energy (twice it, ``sum(v * v)``) and its damping: the
#: unlimited rollout's ``sum(v * v)`` grows from 0.03 to 50, so the branch goes both ways.
GUARD_CAP, GUARD_DAMPING = 10.0, 0.9

ode_guarded = Workload(
    "ode_guarded",
    "ode_rollout with a velocity limiter, `if sum(v * v) > 10: v = 0.9 * v` after each of its "
    "200 steps (a Python branch on a traced value; JAX: lax.cond); gradient of the energy",
    params={},
    compare=[{}],
)


def _guarded_rollout(ns, x, v, zero_row):
    """ode_rollout's steps with the limiter as a Python ``if`` (a guard per step when
    compiled)."""
    for _ in range(ODE_STEPS):
        x, v = _ode_step(ns, x, v, zero_row)
        if ns.sum(v * v) > GUARD_CAP:
            v = GUARD_DAMPING * v
    return _ode_energy(ns, x, v)


@ode_guarded.eager_and_compiled
def _(anb, trace, **_):
    positions, velocities, zero_row = _ode_data()
    x = anb.tensor(positions, requires_grad=True)
    v, zero_row = anb.tensor(velocities), anb.tensor(zero_row)
    rollout = trace(lambda x: _guarded_rollout(anb, x, v, zero_row))

    def step():
        return [anb.grad(rollout(x), x)[0].numpy()]

    return step


@ode_guarded.variant("torch")
def _(torch, **_):
    positions, velocities, zero_row = _ode_data()
    x = torch.tensor(positions, requires_grad=True)
    v, zero_row = torch.tensor(velocities), torch.tensor(zero_row)

    def step():
        return [torch.autograd.grad(_guarded_rollout(torch, x, v, zero_row), x)[0].numpy()]

    return step


@ode_guarded.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    positions, velocities, zero_row = _ode_data()
    x, v, zero_row = jnp.asarray(positions), jnp.asarray(velocities), jnp.asarray(zero_row)

    def body(_, state):
        x, v = _ode_step(jnp, *state, zero_row)
        v = jax.lax.cond(jnp.sum(v * v) > GUARD_CAP, lambda v: GUARD_DAMPING * v,
                         lambda v: v, v)
        return x, v

    def rollout(x, v):
        x, v = jax.lax.fori_loop(0, ODE_STEPS, body, (x, v))
        return _ode_energy(jnp, x, v)

    value_and_grad = jax.jit(jax.value_and_grad(rollout))

    def step():
        _, grad = jax.block_until_ready(value_and_grad(x, v))
        return [np.asarray(grad)]

    return step


@ode_guarded.variant("autograd")
def _(autograd, **_):
    import autograd.numpy as hnp

    x, v, zero_row = _ode_data()
    grad = autograd.grad(lambda x: _guarded_rollout(hnp, x, v, zero_row))

    def step():
        return [grad(x)]

    return step


# -- state_buffer: a time-stepping loop writing each step into a trajectory buffer -----------

BUFFER_CELLS, BUFFER_STEPS, BUFFER_DT = 32, 50, 0.1

state_buffer = Workload(
    "state_buffer",
    "a 1-D reaction-diffusion rod of 32 cells, 50 explicit steps each written into a "
    "trajectory buffer (`u[i + 1] = ...`, a setitem with its gradient); gradient of the sum of "
    "squares of the trajectory w.r.t. the initial state and the diffusivity",
    params={},
    compare=[{}],
)


def _buffer_data():
    return seeded((BUFFER_CELLS,), seed=45, scale=0.5), np.full(BUFFER_CELLS, 0.8)


def _buffer_step(ns, u, k, edge):
    """One explicit step: diffusion with fixed ends (``edge``: a zero of one cell), a cubic
    reaction."""
    laplacian = ns.concatenate([edge, u[2:] - 2.0 * u[1:-1] + u[:-2], edge])
    return u + BUFFER_DT * (k * laplacian - u * u * u)


@state_buffer.eager_and_compiled
def _(anb, trace, **_):
    start, diffusivity = _buffer_data()
    u0 = anb.tensor(start, requires_grad=True)
    k = anb.tensor(diffusivity, requires_grad=True)
    edge = anb.zeros(1)

    def rollout(u0, k):
        u = anb.zeros((BUFFER_STEPS + 1, BUFFER_CELLS))
        u[0] = u0
        for i in range(BUFFER_STEPS):
            u[i + 1] = _buffer_step(anb, u[i], k, edge)
        return anb.sum(u * u)

    rollout = trace(rollout)

    def step():
        return [g.numpy() for g in anb.grad(rollout(u0, k), (u0, k))]

    return step


@state_buffer.variant("torch")
def _(torch, **_):
    start, diffusivity = _buffer_data()
    u0 = torch.tensor(start, requires_grad=True)
    k = torch.tensor(diffusivity, requires_grad=True)
    edge = torch.zeros(1, dtype=torch.float64)

    def step():
        u = torch.zeros((BUFFER_STEPS + 1, BUFFER_CELLS), dtype=torch.float64)
        u[0] = u0
        for i in range(BUFFER_STEPS):
            # (a clone: torch's ``u[i]`` is a view, which the next row's write would change
            # under the values its graph saved; autograd_nb's basic index copies)
            u[i + 1] = _buffer_step(torch, u[i].clone(), k, edge)
        return [g.numpy() for g in torch.autograd.grad(torch.sum(u * u), (u0, k))]

    return step


@state_buffer.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    start, diffusivity = _buffer_data()
    edge = jnp.zeros(1)

    def rollout(u0, k):
        u = jnp.zeros((BUFFER_STEPS + 1, BUFFER_CELLS)).at[0].set(u0)
        u = jax.lax.fori_loop(
            0, BUFFER_STEPS,
            lambda i, u: u.at[i + 1].set(_buffer_step(jnp, u[i], k, edge)), u)
        return jnp.sum(u * u)

    grad = jax.jit(jax.grad(rollout, argnums=(0, 1)))
    u0, k = jnp.asarray(start), jnp.asarray(diffusivity)

    def step():
        return [np.asarray(g) for g in jax.block_until_ready(grad(u0, k))]

    return step


# -- issue 2's workloads: a long chain on a few numbers, and a matmul ---------------------------

#: The long chain cycles through these five ops; ``add_input`` adds the chain's input back in,
#: so the gradient of the input accumulates from every cycle.
CHAIN_CYCLE = ("sin", "scale", "tanh", "add_input", "exp")


def _long_chain(namespace, x, n_ops):
    """``n_ops`` elementwise ops on x, built from sin, *0.9, tanh, +x and exp; then sum."""
    h = x
    for i in range(n_ops):
        op = CHAIN_CYCLE[i % len(CHAIN_CYCLE)]
        if op == "sin":
            h = namespace.sin(h)
        elif op == "scale":
            h = h * 0.9
        elif op == "tanh":
            h = namespace.tanh(h)
        elif op == "add_input":
            h = h + x
        else:
            h = namespace.exp(h)
    return namespace.sum(h)


def _matmul_tanh(namespace, x, w):
    return namespace.sum(namespace.tanh(x @ w))


def _namespace_workload(name, description, make_arrays, loss):
    """A workload whose loss is written once over a NumPy-like namespace."""
    spec = Workload(name, description, params={}, compare=[{}])

    @spec.eager_and_compiled
    def _(anb, trace):
        inputs = [anb.tensor(a, requires_grad=True) for a in make_arrays()]
        forward = trace(lambda *inputs: loss(anb, *inputs))

        def step():
            return [g.numpy() for g in anb.grad(forward(*inputs), inputs)]

        return step

    @spec.variant("torch")
    def _(torch):
        inputs = [torch.tensor(a, requires_grad=True) for a in make_arrays()]

        def step():
            return [g.numpy() for g in torch.autograd.grad(loss(torch, *inputs), inputs)]

        return step

    @spec.variant("jax")
    def _(jax):
        import jax.numpy as jnp

        inputs = [jnp.asarray(a) for a in make_arrays()]
        argnums = tuple(range(len(inputs)))
        value_and_grad = jax.jit(jax.value_and_grad(lambda *xs: loss(jnp, *xs), argnums=argnums))

        def step():
            _, grads = jax.block_until_ready(value_and_grad(*inputs))
            return [np.asarray(g) for g in grads]

        return step

    @spec.variant("autograd")
    def _(autograd):
        import autograd.numpy as hnp

        inputs = tuple(make_arrays())
        grad = autograd.grad(lambda xs: loss(hnp, *xs))

        def step():
            return list(grad(inputs))

        return step

    return spec


_namespace_workload(
    "chain_1000x16",
    "1,000 elementwise ops (sin, *0.9, tanh, +x, exp) on 16 float64, grad of the sum",
    lambda: [seeded(16, seed=1, scale=0.5)],
    lambda ns, x: _long_chain(ns, x, 1000),
)
_namespace_workload(
    "matmul_tanh_256",
    "sum(tanh(x @ w)), 256x256 float64, grads of x and w",
    # x scaled so that tanh(x @ w) stays away from saturation.
    lambda: [seeded((256, 256), seed=2, scale=256**-0.5), seeded((256, 256), seed=3)],
    _matmul_tanh,
)


# -- issue 21's linear algebra: solve, cholesky and slogdet ---------------------------------------

LINALG_OPS = ("solve", "cholesky", "slogdet")

linalg_workload = Workload(
    "linalg",
    "solve(A, b), cholesky(A) or slogdet(A) of an n x n positive-definite A: the forward and "
    "the gradient of the sum (of logabsdet) w.r.t. A (and b)",
    params={"op": LINALG_OPS, "n": (64, 512)},
    compare=[{"op": op, "n": n} for op in LINALG_OPS for n in (64, 512)],
)


def _linalg_data(n):
    x = seeded((n, n), seed=12)
    return x @ x.T / n + np.eye(n), seeded(n, seed=13)


def _linalg_loss(namespace, linalg, op, a, b):
    """The workload's scalar, over a NumPy-like ``namespace`` and its ``linalg``."""
    if op == "solve":
        return namespace.sum(linalg.solve(a, b))
    if op == "cholesky":
        return namespace.sum(linalg.cholesky(a))
    return linalg.slogdet(a)[1]


@linalg_workload.variant("autograd_nb")
def _(anb, op, n):
    a, b = (anb.tensor(x, requires_grad=True) for x in _linalg_data(n))
    inputs = [a, b] if op == "solve" else [a]

    def step():
        loss = _linalg_loss(anb, anb.linalg, op, a, b)
        return [g.numpy() for g in anb.grad(loss, inputs)]

    return step


@linalg_workload.variant("torch")
def _(torch, op, n):
    a, b = (torch.tensor(x, requires_grad=True) for x in _linalg_data(n))
    inputs = [a, b] if op == "solve" else [a]

    def step():
        loss = _linalg_loss(torch, torch.linalg, op, a, b)
        return [g.numpy() for g in torch.autograd.grad(loss, inputs)]

    return step


@linalg_workload.variant("jax")
def _(jax, op, n):
    import jax.numpy as jnp

    a, b = (jnp.asarray(x) for x in _linalg_data(n))
    argnums = (0, 1) if op == "solve" else (0,)
    grad = jax.jit(jax.grad(lambda a, b: _linalg_loss(jnp, jnp.linalg, op, a, b),
                            argnums=argnums))

    def step():
        return [np.asarray(g) for g in jax.block_until_ready(grad(a, b))]

    return step


@linalg_workload.variant("autograd")
def _(autograd, op, n):
    import autograd.numpy as hnp

    a, b = _linalg_data(n)
    argnum = [0, 1] if op == "solve" else [0]
    grad = autograd.grad(lambda a, b: _linalg_loss(hnp, hnp.linalg, op, a, b), argnum)

    def step():
        return list(grad(a, b))

    return step


# -- issue 45's linear algebra inside a compiled function: a Gaussian process likelihood --------

GP_POINTS = 32

gp_nll = Workload(
    "gp_nll",
    "Gaussian-process negative log-likelihood, 32 points: an RBF kernel matrix from 3 log "
    "hyperparameters, its cholesky (log determinant) and a solve; the value and its gradient "
    "in the hyperparameters",
    params={},
    compare=[{}],
)


def _gp_data():
    x = np.linspace(-3.0, 3.0, GP_POINTS)
    y = np.sin(x) + 0.1 * seeded(GP_POINTS, seed=45)
    return np.array([0.2, 0.1, -1.5]), x, y, np.eye(GP_POINTS)


def _gp_nll(namespace, linalg, theta, x, y, eye):
    """``0.5 y^T K^-1 y + log det(L)`` for ``K = s^2 exp(-d^2 / (2 l^2)) + e^2 I``, ``theta =
    (log l, log s, log e)``, over a NumPy-like ``namespace`` and its ``linalg``."""
    d = x[:, None] - x[None, :]
    rbf = namespace.exp(-0.5 * d * d / namespace.exp(2.0 * theta[0]))
    k = namespace.exp(2.0 * theta[1]) * rbf + namespace.exp(2.0 * theta[2]) * eye
    low = linalg.cholesky(k)
    alpha = linalg.solve(k, y)
    return 0.5 * namespace.dot(y, alpha) + namespace.sum(namespace.log(namespace.diagonal(low)))


@gp_nll.eager_and_compiled
def _(anb, trace, **_):
    theta, x, y, eye = _gp_data()
    theta = anb.tensor(theta, requires_grad=True)
    x, y, eye = anb.tensor(x), anb.tensor(y), anb.tensor(eye)
    nll = trace(lambda theta: _gp_nll(anb, anb.linalg, theta, x, y, eye))

    def step():
        return [anb.grad(nll(theta), theta)[0].numpy()]

    return step


@gp_nll.variant("torch")
def _(torch, **_):
    theta, x, y, eye = (torch.tensor(a) for a in _gp_data())
    theta.requires_grad_(True)

    def step():
        loss = _gp_nll(torch, torch.linalg, theta, x, y, eye)
        return [torch.autograd.grad(loss, theta)[0].numpy()]

    return step


@gp_nll.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    theta, x, y, eye = (jnp.asarray(a) for a in _gp_data())
    value_and_grad = jax.jit(jax.value_and_grad(
        lambda theta: _gp_nll(jnp, jnp.linalg, theta, x, y, eye)))

    def step():
        _, grad = jax.block_until_ready(value_and_grad(theta))
        return [np.asarray(grad)]

    return step


@gp_nll.variant("autograd")
def _(autograd, **_):
    import autograd.numpy as hnp

    theta, x, y, eye = _gp_data()
    # (its VJP of ``diagonal`` takes the last two axes only: the diagonal by indexing)
    rows = np.arange(GP_POINTS)
    namespace = types.SimpleNamespace(exp=hnp.exp, sum=hnp.sum, log=hnp.log, dot=hnp.dot,
                                      diagonal=lambda m: m[rows, rows])
    grad = autograd.grad(lambda theta: _gp_nll(namespace, hnp.linalg, theta, x, y, eye))

    def step():
        return [grad(theta)]

    return step

# -- issue 44's workloads: a Bayesian logistic regression and a Lotka-Volterra fit -----------

LOGREG_POINTS, LOGREG_FEATURES, LOGREG_PRIOR_SCALE = 1000, 20, 2.0

bayes_logreg = Workload(
    "bayes_logreg",
    "Bayesian logistic regression, 1,000 points x 20 features: the log posterior (Bernoulli "
    "log-likelihood + norm.logpdf priors on the weights) and its gradient in the weights",
    params={},
    compare=[{}],
)


def _logreg_data():
    inputs = seeded((LOGREG_POINTS, LOGREG_FEATURES), seed=50)
    truth = seeded(LOGREG_FEATURES, seed=51)
    chance = seeded_uniform(LOGREG_POINTS, 0.0, 1.0, seed=52)
    labels = (chance < 1.0 / (1.0 + np.exp(-inputs @ truth))).astype(np.float64)
    return inputs, labels, seeded(LOGREG_FEATURES, seed=53, scale=0.1)


@bayes_logreg.exact
def _():
    inputs, labels, weights = _logreg_data()
    logits = inputs @ weights
    scale = LOGREG_PRIOR_SCALE
    value = np.sum(labels * logits - np.logaddexp(0.0, logits)) + np.sum(
        -0.5 * (weights / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    )
    grad = inputs.T @ (labels - 1.0 / (1.0 + np.exp(-logits))) - weights / scale**2
    return [np.asarray(value), grad]


@bayes_logreg.eager_and_compiled
def _(anb, trace, **_):
    from autograd_nb.scipy.stats import norm

    inputs, labels, weights = _logreg_data()
    inputs, labels = anb.tensor(inputs), anb.tensor(labels)
    w = anb.tensor(weights, requires_grad=True)

    def log_posterior(w):
        logits = inputs @ w
        likelihood = anb.sum(labels * logits - anb.softplus(logits))
        return likelihood + anb.sum(norm.logpdf(w, 0.0, LOGREG_PRIOR_SCALE))

    log_posterior = trace(log_posterior)

    def step():
        value = log_posterior(w)
        return [value.numpy(), anb.grad(value, w)[0].numpy()]

    return step


@bayes_logreg.variant("torch")
def _(torch, **_):
    inputs, labels, weights = (torch.tensor(a) for a in _logreg_data())
    w = weights.requires_grad_(True)
    prior = torch.distributions.Normal(0.0, LOGREG_PRIOR_SCALE)

    def step():
        logits = inputs @ w
        value = torch.sum(labels * logits - torch.nn.functional.softplus(logits))
        value = value + torch.sum(prior.log_prob(w))
        (grad,) = torch.autograd.grad(value, w)
        return [value.detach().numpy(), grad.numpy()]

    return step


@bayes_logreg.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp
    from jax.scipy.stats import norm

    inputs, labels, weights = (jnp.asarray(a) for a in _logreg_data())

    def log_posterior(w):
        logits = inputs @ w
        likelihood = jnp.sum(labels * logits - jax.nn.softplus(logits))
        return likelihood + jnp.sum(norm.logpdf(w, 0.0, LOGREG_PRIOR_SCALE))

    value_and_grad = jax.jit(jax.value_and_grad(log_posterior))

    def step():
        value, grad = jax.block_until_ready(value_and_grad(weights))
        return [np.asarray(value), np.asarray(grad)]

    return step


@bayes_logreg.variant("autograd")
def _(autograd, **_):
    import autograd.numpy as hnp
    from autograd.scipy.stats import norm

    inputs, labels, weights = _logreg_data()

    def log_posterior(w):
        logits = hnp.dot(inputs, w)
        likelihood = hnp.sum(labels * logits - hnp.logaddexp(0.0, logits))
        return likelihood + hnp.sum(norm.logpdf(w, 0.0, LOGREG_PRIOR_SCALE))

    value_and_grad = autograd.value_and_grad(log_posterior)

    def step():
        value, grad = value_and_grad(weights)
        return [np.asarray(value), grad]

    return step


#: Lotka-Volterra: prey x, predator z; dx/dt = a x - b x z, dz/dt = -c z + d x z.
LV_TRUE = np.array([1.0, 0.1, 1.5, 0.075])
LV_START, LV_TIMES = np.array([10.0, 5.0]), np.linspace(0.0, 10.0, 21)
LV_TOLERANCE = 1e-8  # rtol = atol of every engine's solve

lotka_volterra_fit = Workload(
    "lotka_volterra_fit",
    "Lotka-Volterra fit: odeint over 21 time points in [0, 10], gradient of the squared "
    "error against noisy observations w.r.t. the 4 parameters (rtol = atol = 1e-8)",
    params={},
    compare=[{}],
    # The engines' solvers differ (LSODA, JAX's Dopri5), and so do their gradients, at the
    # order of the solve's tolerance.
    tolerance=1e-5,
)


def _lv_rhs(ns, y, theta):
    a, b, c, d = theta[0], theta[1], theta[2], theta[3]
    prey, predator = y[0], y[1]
    return ns.stack([a * prey - b * prey * predator, -c * predator + d * prey * predator])


def _lv_data():
    import scipy.integrate

    clean = scipy.integrate.odeint(
        lambda y, t: _lv_rhs(np, y, LV_TRUE), LV_START, LV_TIMES, rtol=1e-10, atol=1e-10
    )
    observed = clean + seeded(clean.shape, seed=60, scale=0.5)
    return observed, LV_TRUE * np.array([1.1, 0.9, 0.95, 1.05])


@lotka_volterra_fit.exact
def _():
    """Forward sensitivities S = dy/dtheta (dS/dt = J S + df/dtheta), solved tightly."""
    import scipy.integrate

    observed, theta = _lv_data()
    a, b, c, d = theta

    def augmented(state, t):
        (x, z), sens = state[:2], state[2:].reshape(2, 4)
        jac = np.array([[a - b * z, -b * x], [d * z, -c + d * x]])
        dtheta = np.array([[x, -x * z, 0.0, 0.0], [0.0, 0.0, -z, x * z]])
        return np.concatenate([_lv_rhs(np, state[:2], theta), (jac @ sens + dtheta).ravel()])

    start = np.concatenate([LV_START, np.zeros(8)])
    solved = scipy.integrate.odeint(augmented, start, LV_TIMES, rtol=1e-12, atol=1e-12)
    residual = solved[:, :2] - observed
    return [np.einsum("ti,tij->j", 2.0 * residual, solved[:, 2:].reshape(-1, 2, 4))]


@lotka_volterra_fit.variant("autograd_nb")
def _(anb, **_):
    import autograd_nb.numpy as anp
    from autograd_nb.scipy.integrate import odeint

    observed, theta = _lv_data()
    observed = anb.tensor(observed)
    theta = anb.tensor(theta, requires_grad=True)

    def rhs(y, t, theta):
        return _lv_rhs(anp, y, theta)

    def step():
        ys = odeint(rhs, anb.tensor(LV_START), LV_TIMES, args=(theta,),
                    rtol=LV_TOLERANCE, atol=LV_TOLERANCE)
        return [anb.grad(anb.sum(anb.square(ys - observed)), theta)[0].numpy()]

    return step


@lotka_volterra_fit.variant("autograd")
def _(autograd, **_):
    import autograd.numpy as hnp
    from autograd.builtins import tuple as boxed_tuple
    from autograd.scipy.integrate import odeint

    observed, theta = _lv_data()

    def rhs(y, t, theta):
        return _lv_rhs(hnp, y, theta)

    def loss(theta):
        # HIPS's odeint takes its parameters as autograd's own (traced) tuple
        ys = odeint(rhs, LV_START, LV_TIMES, boxed_tuple((theta,)), rtol=LV_TOLERANCE,
                    atol=LV_TOLERANCE)
        return hnp.sum((ys - observed) ** 2)

    grad = autograd.grad(loss)

    def step():
        return [grad(theta)]

    return step


@lotka_volterra_fit.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp
    from jax.experimental.ode import odeint

    observed, theta = (jnp.asarray(a) for a in _lv_data())

    def rhs(y, t, theta):
        return _lv_rhs(jnp, y, theta)

    def loss(theta):
        ys = odeint(rhs, jnp.asarray(LV_START), jnp.asarray(LV_TIMES), theta,
                    rtol=LV_TOLERANCE, atol=LV_TOLERANCE)
        return jnp.sum((ys - observed) ** 2)

    grad = jax.jit(jax.grad(loss))

    def step():
        return [np.asarray(jax.block_until_ready(grad(theta)))]

    return step


# -- issue 43's spectral workload: pseudo-spectral viscous Burgers steps ----------------------

#: Points on [0, 2 pi), explicit Euler steps, viscosity and time step (stable: dt nu k_max^2
#: = 0.84 < 2).
BURGERS_POINTS, BURGERS_STEPS, BURGERS_NU, BURGERS_DT = 4096, 4, 0.02, 1e-5

burgers_spectral = Workload(
    "burgers_spectral",
    "4 explicit pseudo-spectral steps of viscous Burgers u_t = nu u_xx - u u_x on 4,096 points "
    "(rfft, multiply by ik and -nu k^2, irfft): grad of the final sum of squares w.r.t. u0",
    params={},
    compare=[{}],
)


def _burgers_data():
    """The initial state (smooth, with a little seeded noise) and the spectral multipliers."""
    x = np.linspace(0.0, 2 * np.pi, BURGERS_POINTS, endpoint=False)
    u0 = np.sin(x) + 0.5 * np.cos(2 * x) + seeded(BURGERS_POINTS, seed=60, scale=0.01)
    k = np.fft.rfftfreq(BURGERS_POINTS, 1.0 / BURGERS_POINTS)
    return u0, 1j * k, -BURGERS_NU * k**2


def _burgers_loss(ns, u, ik, diffusion):
    """``ns``: a NumPy-like namespace with ``fft.rfft``, ``fft.irfft`` and ``sum``."""
    for _ in range(BURGERS_STEPS):
        spectrum = ns.fft.rfft(u)
        ux = ns.fft.irfft(spectrum * ik, BURGERS_POINTS)
        uxx = ns.fft.irfft(spectrum * diffusion, BURGERS_POINTS)
        u = u + BURGERS_DT * (uxx - u * ux)
    return ns.sum(u * u)


@burgers_spectral.variant("autograd_nb")
def _(anb, **_):
    import autograd_nb.numpy as anp

    u0, ik, diffusion = _burgers_data()
    u = anb.tensor(u0, requires_grad=True)
    ik, diffusion = anb.tensor(ik), anb.tensor(diffusion)

    def step():
        return [anb.grad(_burgers_loss(anp, u, ik, diffusion), u)[0].numpy()]

    return step


@burgers_spectral.variant("torch")
def _(torch, **_):
    u0, ik, diffusion = (torch.tensor(a) for a in _burgers_data())
    u = u0.requires_grad_(True)

    def step():
        (grad,) = torch.autograd.grad(_burgers_loss(torch, u, ik, diffusion), u)
        return [grad.numpy()]

    return step


@burgers_spectral.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    u0, ik, diffusion = (jnp.asarray(a) for a in _burgers_data())
    grad = jax.jit(jax.grad(lambda u: _burgers_loss(jnp, u, ik, diffusion)))

    def step():
        return [np.asarray(jax.block_until_ready(grad(u0)))]

    return step


@burgers_spectral.variant("autograd")
def _(autograd, **_):
    import autograd.numpy as hnp

    u0, ik, diffusion = _burgers_data()
    grad = autograd.grad(lambda u: _burgers_loss(hnp, u, ik, diffusion))

    def step():
        return [grad(u0)]

    return step


# -- issue 43's complex chain: an elementwise chain of complex128 ops, as a compiled program -----

COMPLEX_STEPS = 8

complex_chain = Workload(
    "complex_chain",
    "8 steps of psi = 0.5 sin(psi * phase) + kick * psi over complex128 arrays (4,096 or 65,536 "
    "points), forward and the VJP of ones (torch's convention; JAX's result conjugated)",
    params={"size": (4_096, 65_536)},
    compare=[{"size": 4_096}, {"size": 65_536}],
)


def _complex_data(size):
    def draw(seed):
        return seeded(size, seed=seed, scale=0.3) + 1j * seeded(size, seed=seed + 1, scale=0.3)

    return draw(70), np.exp(1j * seeded(size, seed=72)), 0.1 * draw(73)


def _complex_steps(sin, psi, phase, kick):
    for _ in range(COMPLEX_STEPS):
        psi = 0.5 * sin(psi * phase) + kick * psi  # (bounded: |psi| stays below 1)
    return psi


@complex_chain.eager_and_compiled
def _(anb, trace, size):
    psi0, phase, kick = _complex_data(size)
    psi = anb.tensor(psi0, requires_grad=True)
    phase, kick, ones = anb.tensor(phase), anb.tensor(kick), anb.tensor(np.ones(size, complex))
    forward = trace(lambda psi, phase, kick: _complex_steps(anb.sin, psi, phase, kick))

    def step():
        return [anb.grad(forward(psi, phase, kick), psi, grad_outputs=ones)[0].numpy()]

    return step


@complex_chain.variant("torch")
def _(torch, size):
    psi0, phase, kick = (torch.tensor(a) for a in _complex_data(size))
    psi = psi0.requires_grad_(True)
    ones = torch.ones(size, dtype=torch.complex128)

    def step():
        out = _complex_steps(torch.sin, psi, phase, kick)
        return [torch.autograd.grad(out, psi, grad_outputs=ones)[0].numpy()]

    return step


@complex_chain.variant("jax")
def _(jax, size):
    import jax.numpy as jnp

    psi0, phase, kick = (jnp.asarray(a) for a in _complex_data(size))

    def vjp_of_ones(psi):
        out, pullback = jax.vjp(lambda p: _complex_steps(jnp.sin, p, phase, kick), psi)
        return jnp.conj(pullback(jnp.ones_like(out))[0])  # (torch's convention: conjugated)

    run = jax.jit(vjp_of_ones)

    def step():
        return [np.asarray(jax.block_until_ready(run(psi0)))]

    return step


# -- forward mode (issue 46): a tall Jacobian, an HVP, a PINN Laplacian ------------------------

TALL_IN, TALL_HIDDEN, TALL_OUT = 8, 64, 4096

tall_jacobian = Workload(
    "tall_jacobian",
    "the 4096x8 Jacobian of W2 @ tanh(W1 @ x + b1) + b2 (8 inputs, hidden 64, 4096 outputs), "
    "float64: forward mode (jacfwd) beside reverse",
    params={},
    compare=[{}],
)


def _tall_data():
    return {
        "x": seeded(TALL_IN, seed=60),
        "W1": seeded((TALL_HIDDEN, TALL_IN), seed=61, scale=TALL_IN**-0.5),
        "b1": seeded(TALL_HIDDEN, seed=62, scale=0.1),
        "W2": seeded((TALL_OUT, TALL_HIDDEN), seed=63, scale=TALL_HIDDEN**-0.5),
        "b2": seeded(TALL_OUT, seed=64, scale=0.1),
    }


def _tall(tanh, x, W1, b1, W2, b2):
    return W2 @ tanh(W1 @ x + b1) + b2


@tall_jacobian.exact
def _():
    d = _tall_data()
    h = np.tanh(d["W1"] @ d["x"] + d["b1"])
    return [(d["W2"] * (1 - h**2)) @ d["W1"]]


def _anb_tall(anb, strategy):
    from autograd_nb.autograd import functional
    from autograd_nb.autograd.functional import jacobian

    data = {name: anb.tensor(value) for name, value in _tall_data().items()}
    x = data.pop("x")

    def step():
        function = lambda x: _tall(anb.tanh, x, **data)  # noqa: E731
        if strategy == "per-column":  # the fallback: one unbatched forward pass per column
            columns = functional._forward_columns(function, (x,), [x.size])[2][0]
            return [columns.T]
        return [jacobian(function, x, vectorize=True, strategy=strategy).numpy()]

    return step


@tall_jacobian.variant("autograd_nb")
def _(anb, **_):
    return _anb_tall(anb, "forward-mode")


@tall_jacobian.variant("autograd_nb:per_column")
def _(anb, **_):
    return _anb_tall(anb, "per-column")


@tall_jacobian.variant("autograd_nb:reverse")
def _(anb, **_):
    return _anb_tall(anb, "reverse-mode")


@tall_jacobian.variant("torch")
def _(torch, **_):
    import torch.func

    data = {name: torch.tensor(value) for name, value in _tall_data().items()}
    x = data.pop("x")
    jacfwd = torch.func.jacfwd(lambda x: _tall(torch.tanh, x, **data))

    def step():
        return [jacfwd(x).numpy()]

    return step


@tall_jacobian.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    data = {name: jnp.asarray(value) for name, value in _tall_data().items()}
    x = data.pop("x")
    jacfwd = jax.jit(jax.jacfwd(lambda x, data: _tall(jnp.tanh, x, **data)))

    def step():
        return [np.asarray(jax.block_until_ready(jacfwd(x, data)))]

    return step


mlp_hvp = Workload(
    "mlp_hvp",
    "a Hessian-vector product of mlp_train_step's loss in its six parameters, float32",
    params={},
    compare=[{}],
    dtype="float32",
    tolerance=1e-3,
)


def _hvp_vector():
    _, _, params = _mlp_data()
    return [seeded(p.shape, seed=70 + i, dtype="float32") for i, p in enumerate(params)]


def _anb_hvp(anb, forward_over_reverse):
    from autograd_nb.autograd import functional

    params, loss = _anb_mlp(anb)
    params = tuple(p.detach() for p in params)
    vector = tuple(anb.tensor(v) for v in _hvp_vector())

    def step():
        if forward_over_reverse:
            _, product = functional.hvp(loss, params, vector)
        else:  # the double-VJP trick (two recorded reverse passes), functional.hvp's other way
            _, product = functional._second_order_product(
                loss, params, vector, False, False, "hvp"
            )
        return [p.numpy() for p in product]

    return step


@mlp_hvp.variant("autograd_nb")
def _(anb, **_):
    return _anb_hvp(anb, True)


@mlp_hvp.variant("autograd_nb:double_vjp")
def _(anb, **_):
    return _anb_hvp(anb, False)


def _torch_mlp_loss(torch):
    inputs, labels, params = _mlp_data()
    inputs, labels = torch.tensor(inputs), torch.tensor(labels)
    rows = torch.arange(MLP_BATCH)

    def loss(*params):
        return _mlp_loss(torch.tanh, lambda z: torch.log_softmax(z, dim=-1), inputs, labels,
                         rows, params)

    return tuple(torch.tensor(p) for p in params), loss


@mlp_hvp.variant("torch")
def _(torch, **_):
    import torch.func

    params, loss = _torch_mlp_loss(torch)
    vector = tuple(torch.tensor(v) for v in _hvp_vector())
    gradient = torch.func.grad(loss, argnums=tuple(range(len(params))))

    def step():  # forward over reverse, torch.func's way
        _, product = torch.func.jvp(gradient, params, vector)
        return [p.numpy() for p in product]

    return step


@mlp_hvp.variant("torch:functional")
def _(torch, **_):
    params, loss = _torch_mlp_loss(torch)
    vector = tuple(torch.tensor(v) for v in _hvp_vector())

    def step():  # torch.autograd.functional.hvp: the double-backward trick
        _, product = torch.autograd.functional.hvp(loss, params, vector)
        return [p.numpy() for p in product]

    return step


@mlp_hvp.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    inputs, labels, params = _mlp_data()
    inputs, labels = jnp.asarray(inputs), jnp.asarray(labels)
    rows = jnp.arange(MLP_BATCH)
    params = [jnp.asarray(p) for p in params]
    vector = [jnp.asarray(v) for v in _hvp_vector()]

    def loss(params):
        return _mlp_loss(jnp.tanh, jax.nn.log_softmax, inputs, labels, rows, params)

    hvp = jax.jit(lambda p, v: jax.jvp(jax.grad(loss), (p,), (v,))[1])

    def step():
        return [np.asarray(p) for p in jax.block_until_ready(hvp(params, vector))]

    return step


PINN_SIZES, PINN_POINTS = (2, 64, 64, 1), 1024

pinn_laplacian = Workload(
    "pinn_laplacian",
    "the Laplacian of a 2-64-64-1 tanh MLP's output in its 2-D input at 1024 points, float64",
    params={},
    compare=[{}],
)


def _pinn_data():
    params = []
    for i, (fan_in, fan_out) in enumerate(zip(PINN_SIZES[:-1], PINN_SIZES[1:])):
        params.append(seeded((fan_in, fan_out), seed=80 + 2 * i, scale=fan_in**-0.5))
        params.append(seeded(fan_out, seed=81 + 2 * i, scale=0.1))
    points = seeded_uniform((PINN_POINTS, 2), -1.0, 1.0, seed=90)
    return points, params


def _pinn_u(tanh, points, params):
    h = points
    for i in range(0, len(params) - 2, 2):
        h = tanh(h @ params[i] + params[i + 1])
    return (h @ params[-2] + params[-1])[:, 0]


def _anb_pinn_directions(anb):
    """The unit vectors of the 2-D input at every point, as one batch of tangents
    ``(2, points, 2)``."""
    return anb.tensor(np.stack([np.eye(2)[d] * np.ones((PINN_POINTS, 1)) for d in range(2)]))


@pinn_laplacian.variant("autograd_nb")
def _(anb, **_):
    from autograd_nb.autograd import forward_ad as fwAD

    points, params = _pinn_data()
    params = [anb.tensor(p) for p in params]
    x = anb.tensor(points, requires_grad=True)
    directions = _anb_pinn_directions(anb)

    def step():  # forward over reverse, both coordinates as one batch of tangents
        with fwAD.dual_level(batch_shape=2):
            dual = fwAD.make_dual(x, directions)
            (gradient,) = anb.grad(_pinn_u(anb.tanh, dual, params).sum(), dual,
                                   create_graph=True)
            second = fwAD.unpack_dual(gradient).tangent  # (2, points, 2)
        return [(second[0, :, 0] + second[1, :, 1]).numpy()]

    return step


@pinn_laplacian.variant("autograd_nb:per_coordinate")
def _(anb, **_):
    from autograd_nb.autograd import forward_ad as fwAD

    points, params = _pinn_data()
    params = [anb.tensor(p) for p in params]
    x = anb.tensor(points, requires_grad=True)
    directions = [anb.tensor(np.eye(2)[d] * np.ones((PINN_POINTS, 1))) for d in range(2)]

    def step():  # forward over reverse: one pass per coordinate
        total = 0.0
        with fwAD.dual_level():
            for d in range(2):
                dual = fwAD.make_dual(x, directions[d])
                (gradient,) = anb.grad(_pinn_u(anb.tanh, dual, params).sum(), dual,
                                       create_graph=True)
                total = total + fwAD.unpack_dual(gradient).tangent[:, d]
        return [total.numpy()]

    return step


@pinn_laplacian.variant("autograd_nb:forward_over_forward")
def _(anb, **_):
    from autograd_nb.autograd import forward_ad as fwAD

    points, params = _pinn_data()
    params = [anb.tensor(p) for p in params]
    x = anb.tensor(points)
    directions = _anb_pinn_directions(anb)

    def step():  # two batched levels: the tangents' tangents, (2, 2, points)
        with fwAD.dual_level(batch_shape=2):
            outer = fwAD.make_dual(x, directions)
            with fwAD.dual_level(batch_shape=2):
                inner = fwAD.make_dual(outer, directions)
                first = fwAD.unpack_dual(_pinn_u(anb.tanh, inner, params)).tangent
            second = fwAD.unpack_dual(first).tangent
        return [(second[0, 0] + second[1, 1]).numpy()]

    return step


@pinn_laplacian.variant("autograd_nb:reverse_over_forward")
def _(anb, **_):
    from autograd_nb.autograd import forward_ad as fwAD

    points, params = _pinn_data()
    params = [anb.tensor(p) for p in params]
    x = anb.tensor(points, requires_grad=True)
    directions = [anb.tensor(np.eye(2)[d] * np.ones((PINN_POINTS, 1))) for d in range(2)]

    def step():  # the gradient of each coordinate's tangent (a plain, compiled backward)
        total = 0.0
        with fwAD.dual_level():
            for d in range(2):
                dual = fwAD.make_dual(x, directions[d])
                tangent = fwAD.unpack_dual(_pinn_u(anb.tanh, dual, params)).tangent
                (second,) = anb.grad(tangent.sum(), x)
                total = total + second[:, d]
        return [total.numpy()]

    return step


@pinn_laplacian.variant("autograd_nb:nested")
def _(anb, **_):
    points, params = _pinn_data()
    params = [anb.tensor(p) for p in params]
    x = anb.tensor(points, requires_grad=True)

    def step():  # nested reverse mode
        (gradient,) = anb.grad(_pinn_u(anb.tanh, x, params).sum(), x, create_graph=True)
        total = 0.0
        for d in range(2):
            (second,) = anb.grad(gradient[:, d].sum(), x, retain_graph=True)
            total = total + second[:, d]
        return [total.numpy()]

    return step


@pinn_laplacian.variant("torch")
def _(torch, **_):
    points, params = _pinn_data()
    params = [torch.tensor(p) for p in params]
    x = torch.tensor(points, requires_grad=True)

    def step():  # nested grad, the usual PINN code
        (gradient,) = torch.autograd.grad(_pinn_u(torch.tanh, x, params).sum(), x,
                                          create_graph=True)
        total = 0.0
        for d in range(2):
            (second,) = torch.autograd.grad(gradient[:, d].sum(), x, retain_graph=True)
            total = total + second[:, d]
        return [total.detach().numpy()]

    return step


@pinn_laplacian.variant("jax")
def _(jax, **_):
    import jax.numpy as jnp

    points, params = _pinn_data()
    points, params = jnp.asarray(points), [jnp.asarray(p) for p in params]

    def u(point, params):
        return _pinn_u(jnp.tanh, point[None, :], params)[0]

    hessian = jax.jacfwd(jax.jacrev(u))
    laplacian = jax.jit(jax.vmap(lambda p, params: jnp.trace(hessian(p, params)),
                                 in_axes=(0, None)))

    def step():
        return [np.asarray(jax.block_until_ready(laplacian(points, params)))]

    return step
