"""``python -m autograd_nb warmup``: compile the public functions' kernels into the cache.

Nobody needs it: a kernel compiles the first time it is used, and later processes load it from
the kernel cache (:mod:`autograd_nb.cache`). It moves that time to a moment of your choosing:
a Docker image build, a CI cache step, a cluster's setup.

For each public function and dtype it runs what a program would: the function on sample
Tensors that require grad (from ``op.domain`` for elementwise ops; positive definite matrices
for ``linalg``), at a small and a larger size (the larger one crosses the size from which
backward chains fuse), then

* ``grad`` three times: the compiled executor, the backward template it makes, and the
  template's compiled check (``engine/plan_cache.py``);
* ``grad(..., create_graph=True)``: the eager walk over the differentiable rules;
* ``grad(..., is_grads_batched=True)``: the batched VJP kernels;
* the same function under ``anb.compile``: its replayed forward and backward;

and per dtype a compiled ``a - 0.5 * b``, whose replay runs one loop of its own
(``replay.fusion.scaled_add_driver``).

A function whose arguments are neither arrays alone nor in the short table ``IRREGULAR``
(``r_``, ``dsplit``, ...) is listed as skipped; its kernels compile on first use, as without
warmup.

Tier 0's background worker (:mod:`autograd_nb.tiering`) warms too, with :func:`replay`: it runs
the calls a process made again, and their backwards, so that their kernels compile into the
cache.
"""

import argparse
import inspect
import sys
import time
import warnings

import numpy as np

import autograd_nb as anb

from . import cache, tiering
from .ops.registry import FUNCTIONS, REGISTRY
from .tensor import apply

#: The dtypes warmed by default.
DTYPES = ("float32", "float64")
#: Matrix shapes of the sample calls: a small one, and one past
#: ``config.FUSION_MIN_ELEMENTS`` (linear algebra: square matrices of the first size).
SHAPES = ((2, 3), (64, 96))
SQUARE = (3, 32)


def _uniform(rng, shape, low, high, dtype):
    return rng.uniform(low, high, shape).astype(dtype)


def _positive_definite(rng, n, dtype):
    a = rng.standard_normal((n, n))
    return (a @ a.T / n + np.eye(n)).astype(dtype)


def _one(call):
    """A sample of one array of the shape and a ``call`` with the other arguments."""
    return lambda rng, shape, dtype: ([_uniform(rng, shape, -1, 1, dtype)], call)


#: Functions whose arguments a generic call cannot guess: shape -> (arrays, call).
IRREGULAR = {
    "where": lambda rng, shape, dtype: (
        [_uniform(rng, shape, -1, 1, dtype), _uniform(rng, shape, -1, 1, dtype)],
        lambda f, x, y: f(x > 0, x, y),
    ),
    "clip": lambda rng, shape, dtype: (
        [_uniform(rng, shape, -1, 1, dtype)], lambda f, x: f(x, -0.5, 0.5)
    ),
    "einsum": lambda rng, shape, dtype: (
        [_uniform(rng, shape, -1, 1, dtype), _uniform(rng, shape[::-1], -1, 1, dtype)],
        lambda f, a, b: f("ij,jk->ik", a, b),
    ),
    "reshape": lambda rng, shape, dtype: (
        [_uniform(rng, shape, -1, 1, dtype)], lambda f, x: f(x, (-1,))
    ),
    "broadcast_to": lambda rng, shape, dtype: (
        [_uniform(rng, shape[-1:], -1, 1, dtype)], lambda f, x: f(x, shape)
    ),
    "take": lambda rng, shape, dtype: (
        [_uniform(rng, shape, -1, 1, dtype)],
        lambda f, x: f(x, np.arange(0, shape[1], 2), axis=1),
    ),
    **{
        name: lambda rng, shape, dtype: (
            [_uniform(rng, shape, -1, 1, dtype), _uniform(rng, shape, -1, 1, dtype)],
            lambda f, a, b: f([a, b]),
        )
        for name in ("concatenate", "stack", "vstack", "row_stack", "hstack", "dstack",
                     "column_stack")
    },
    **{
        name: _one(call)
        for name, call in {
            "expand_dims": lambda f, x: f(x, 0),
            "swapaxes": lambda f, x: f(x, 0, 1),
            "moveaxis": lambda f, x: f(x, 0, 1),
            "roll": lambda f, x: f(x, 1, axis=1),
            "repeat": lambda f, x: f(x, 2, axis=1),
            "tile": lambda f, x: f(x, (2, 1)),
            "pad": lambda f, x: f(x, 1, mode="edge"),
            "split": lambda f, x: f(x, 2, axis=0)[0],
            "array_split": lambda f, x: f(x, 2, axis=0)[0],
            "vsplit": lambda f, x: f(x, 2)[0],
            "hsplit": lambda f, x: f(x, 3)[0],
            "take_along_axis": lambda f, x: f(x, np.argsort(x.numpy(), axis=1), 1),
            "atleast_1d": lambda f, x: f(x),
            "atleast_2d": lambda f, x: f(x),
            "atleast_3d": lambda f, x: f(x),
            # a step along axis 0, uneven coordinates along axis 1
            "gradient": lambda f, x: f(x, 0.5, np.linspace(0.0, 2.0, x.shape[1]) ** 2),
        }.items()
    },
    "special.multigammaln": lambda rng, shape, dtype: (
        [_uniform(rng, shape, 2, 4, dtype)], lambda f, a: f(a, 3)
    ),
    # (an order has no derivative: passed as a number, not as a Tensor that requires grad)
    **{
        "special." + name: lambda rng, shape, dtype, order=order: (
            [_uniform(rng, shape, 0.5, 3, dtype)], lambda f, x: f(order, x)
        )
        for name, order in (("polygamma", 1), ("jn", 2), ("yn", 2), ("iv", 1.5), ("ive", 1.5))
    },
    "linalg.matrix_power": lambda rng, shape, dtype: (
        [_positive_definite(rng, shape[0], dtype)], lambda f, a: f(a, 3)
    ),
    "cross": lambda rng, shape, dtype: (
        [_uniform(rng, (shape[0], 3), -1, 1, dtype) for _ in range(2)],
        lambda f, a, b: f(a, b),
    ),
    "linalg.multi_dot": lambda rng, shape, dtype: (
        [_uniform(rng, (shape[0], shape[0]), -1, 1, dtype) for _ in range(3)],
        lambda f, a, b, c: f([a, b, c]),
    ),
}


def sample_calls(name, dtype, seed=0):
    """The sample calls of the public function ``name`` for ``dtype``, one per size.

    Returns
    -------
    list of (list of ndarray, callable)
        The input arrays, and ``call(function, *tensors)``.

    Raises
    ------
    LookupError
        Where no generic sample call is known (the function takes more than arrays).

    Examples
    --------
    >>> [(arrays[0].shape, arrays[0].dtype.name) for arrays, _ in sample_calls("tanh", "float32")]
    [((2, 3), 'float32'), ((64, 96), 'float32')]
    """
    function = FUNCTIONS[name]
    rng = np.random.default_rng(seed)
    calls = []
    for shape, n in zip(SHAPES, SQUARE):
        if name in IRREGULAR:
            calls.append(IRREGULAR[name](rng, shape, dtype))
            continue
        op = None
        if "." not in name or name.startswith("special."):
            op = REGISTRY.get(name.removeprefix("special."))
        count = _tensor_arguments(function, op)
        if function.family == "linalg":
            arrays = [_positive_definite(rng, n, dtype) for _ in range(count)]
        else:
            low, high = getattr(op, "domain", None) or (0.25, 0.75)
            arrays = [_uniform(rng, shape, low, high, dtype) for _ in range(count)]
        calls.append((arrays, lambda f, *xs: f(*xs)))
    return calls


def _tensor_arguments(function, op):
    """How many arrays a generic call passes: the op's inputs (for an op's own
    ``function(*tensors)``), or the function's required positional parameters; LookupError
    where the function takes more than arrays."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError) as error:  # ``r_``: an object indexed, not called
        raise LookupError(f"{function.__name__} is not called with arrays") from error
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        if op is None or getattr(op, "params", ()) or not op.n_inputs:
            raise LookupError(f"{function.__name__} takes more than arrays")
        return op.n_inputs
    required = [p for p in parameters if p.default is p.empty]
    if not required or any(
        p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in required
    ):
        raise LookupError(f"{function.__name__} takes more than arrays")
    return len(required)


def _loss(result):
    """The sum of ``result``'s first floating Tensor that requires grad (results may be
    tuples: ``slogdet``, ``eigh``, ``split``), or None."""
    for value in result if isinstance(result, (tuple, list)) else (result,):
        if isinstance(value, anb.Tensor) and value.requires_grad:
            return anb.sum(value)
    return None


def warm_call(function, arrays, call):
    """Run ``call(function, *tensors)`` and its backwards as described in the module's
    docstring, on Tensors made from ``arrays``."""
    tensors = [anb.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    wrt = [t for t in tensors if t.requires_grad]
    loss = _loss(call(function, *tensors))
    if loss is None or not wrt:
        return
    for _ in range(3):
        anb.grad(_loss(call(function, *tensors)), wrt, allow_unused=True)
    anb.grad(_loss(call(function, *tensors)), wrt, allow_unused=True, create_graph=True)
    output = call(function, *tensors)
    first = output[0] if isinstance(output, (tuple, list)) else output
    if getattr(first, "requires_grad", False):
        rows = anb.tensor(np.ones((2, *first.shape), dtype=first.dtype))
        anb.grad(first, wrt, grad_outputs=rows, is_grads_batched=True, allow_unused=True)
    program = getattr(anb, "compile", None)
    if program is not None:
        compiled = program(lambda *ts: _loss(call(function, *ts)))
        for _ in range(2):
            anb.grad(compiled(*tensors), wrt, allow_unused=True)


def warm(names, dtypes, progress=True):
    """Warm the public functions ``names`` for ``dtypes``.

    Returns
    -------
    dict
        ``{"warmed": [...], "skipped": {name: reason}, "failed": {name: error}}``.
    """
    from tqdm import tqdm

    report = {"warmed": [], "skipped": {}, "failed": {}}
    steps = [(name, dtype) for name in names for dtype in dtypes]
    # (compiled, not served by tier 0; the ops that ran are then listed as cached for it)
    with tiering.warming(), tqdm(
        steps, desc="warmup", unit="call", disable=not progress, file=sys.stderr
    ) as bar:
        for name, dtype in bar:
            bar.set_postfix_str(f"{name} {dtype}", refresh=False)
            if name in report["skipped"] or name in report["failed"]:
                continue
            try:
                with warnings.catch_warnings():
                    # Sample values outside a domain, an eager compiled signature: not ours to
                    # report. The kernel cache's own warning still shows.
                    warnings.simplefilter("ignore")
                    warnings.simplefilter("default", cache.KernelCacheWarning)
                    for arrays, call in sample_calls(name, dtype):
                        warm_call(FUNCTIONS[name], arrays, call)
            except (LookupError, TypeError, ValueError, NotImplementedError) as error:
                report["skipped"][name] = f"{type(error).__name__}: {error}"
            except Exception as error:  # a bug to report, not a reason to stop warming
                report["failed"][name] = f"{type(error).__name__}: {error}"
            else:
                if dtype == dtypes[-1]:
                    report["warmed"].append(name)
        for dtype in dtypes:
            warm_scaled_add(dtype)
    return report


def warm_scaled_add(dtype):
    """Compile the replay's one loop for ``a - s * b`` (``replay.fusion.scaled_add_driver``,
    which no single function's program runs) for ``dtype``."""
    rng = np.random.default_rng(0)
    a, b = (anb.tensor(_uniform(rng, SHAPES[-1], -1, 1, dtype), requires_grad=True)
            for _ in range(2))
    compiled = anb.compile(lambda a, b: anb.sum(a - 0.5 * b))
    for _ in range(2):
        anb.grad(compiled(a, b), [a, b])


# -- tier 0's background worker (autograd_nb.tiering) -----------------------------------------


def replay(calls, backwards=()):
    """Run the recorded ``calls`` on Tensors, then the backwards met (``backwards``: the
    positions of their outputs among the calls, and the batch; a gradient of the sum of the
    final results where none could run), three times, as a training loop would (the compiled
    executor, then the backward template made from it and its check on a new graph). A leaf
    takes a gradient where the process's did. Returns the keys of the calls that ran, and
    ``tiering.BACKWARD`` when a backward did."""
    ran, made = set(), {}
    for _ in range(3):
        results, leaves, used = _replay_forward(calls, ran, made)
        if not leaves or not (_replay_backwards(results, leaves, backwards)
                              or _sum_backward(results, leaves, used)):
            break
        ran.add(tiering.BACKWARD)
    return ran


def _replay_forward(calls, ran, made):
    """The calls' results (None where a call failed), the leaves that take a gradient and
    the positions of the results a later call read. ``made``: the leaf Tensors by ``id`` of
    their array (kept alive beside them), kept across the replays as a program keeps its
    parameters (backward templates are keyed by them)."""
    results, leaves, used = [], [], set()
    for name, key, specs, attrs in calls:
        args = []
        for spec in specs:
            if spec[0] == "out":
                used.add(spec[1])
                args.append(results[spec[1]])
            elif spec[0] == "leaf":
                _, value, wants = spec
                if id(value) not in made:  # (one Tensor per array, as in the process)
                    wants = bool(wants) and value.dtype.kind == "f"
                    made[id(value)] = (anb.tensor(value, requires_grad=wants), value)
                leaf = made[id(value)][0]
                if leaf.requires_grad and all(leaf is not other for other in leaves):
                    leaves.append(leaf)
                args.append(leaf)
            else:
                args.append(spec[1])
        result = None
        if all(a is not None for a in args):
            try:
                result = apply(REGISTRY[name], args, dict(attrs))
                ran.add(key)
            except Exception:  # (that call compiles in the process instead)
                result = None
        results.append(result)
    return results, leaves, used


def _replay_backwards(results, leaves, backwards):
    """The process's backwards, on the replayed outputs; whether one ran."""
    did = False
    for roots, batch in backwards:
        outputs = [results[i] for i in roots]
        if any(o is None or not o.requires_grad for o in outputs):
            continue
        seeds = None  # (as a loss's backward: ones)
        if batch is not None or any(o.size != 1 for o in outputs):
            lead = () if batch is None else (batch,)
            seeds = [anb.ones(lead + o.shape, dtype=o.dtype) for o in outputs]
        for unused in (False, True):  # (without allow_unused first, as a loss's backward)
            try:
                anb.grad(outputs, leaves, grad_outputs=seeds, allow_unused=unused,
                         is_grads_batched=batch is not None)
            except Exception:
                continue
            did = True
            break
    return did


def _sum_backward(results, leaves, used):
    """A gradient of the sum of the final results (no backward of the process could run);
    whether it ran."""
    finals = [
        r for i, r in enumerate(results)
        if i not in used and r is not None and r.requires_grad and r.dtype.kind == "f"
    ]
    if not finals:
        return False
    try:
        loss = anb.sum(finals[0])
        for r in finals[1:]:
            loss = loss + anb.sum(r).astype(loss.dtype)
        anb.grad(loss, leaves, allow_unused=True)
    except Exception:
        return False
    return True


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m autograd_nb",
        description="With no arguments: a short tour of grad_outputs. Commands:",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    warmup = commands.add_parser(
        "warmup",
        help="compile the public functions' kernels into the kernel cache",
        description="Compile the kernels of autograd_nb's public functions into the kernel "
        "cache, with a progress bar. Nobody needs it: a kernel compiles on first use and is "
        "cached; this moves that time to a moment of your choosing (an image build, a CI step).",
    )
    warmup.add_argument("--dtypes", default=",".join(DTYPES),
                        help="comma-separated dtypes (default: %(default)s)")
    warmup.add_argument("--ops", default=None,
                        help="comma-separated public function names (default: all of them)")
    warmup.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def command_line(argv=None):
    """``python -m autograd_nb <command> ...``; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    public = sorted(name for name in FUNCTIONS if not name.startswith("_"))
    names = public if args.ops is None else [n.strip() for n in args.ops.split(",") if n]
    unknown = [n for n in names if n not in FUNCTIONS]
    if unknown:
        parser.error(f"unknown functions {unknown}; the public functions: {', '.join(public)}")
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    if not set(dtypes) <= set(DTYPES):
        parser.error(f"--dtypes takes {', '.join(DTYPES)}, not {args.dtypes!r}")
    start = time.perf_counter()
    report = warm(names, dtypes, progress=not args.no_progress)
    info = cache.cache_info()
    print(f"warmed {len(report['warmed'])} of {len(names)} functions for {', '.join(dtypes)} "
          f"in {time.perf_counter() - start:.1f} s: {info.compiled} compiled, "
          f"{info.loaded} loaded from the cache")
    print(f"kernel cache: {info.folder} ({info.size_bytes / 2**20:.1f} MiB, {info.files} files)")
    for kind in ("skipped", "failed"):
        for name, reason in report[kind].items():
            print(f"{kind}: {name} ({reason})")
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(command_line())
