"""Many independent gradients on a Dask cluster: ``map_grad``, ``jacobian``, ``warm_workers``.

Dask schedules; autograd_nb supplies the tasks. Each task is a pure function of what it is sent
(``fn`` and its arguments, pickled): it builds its own leaves, runs ``fn`` forward and backward
on its worker and returns NumPy arrays. Nothing in a task depends on the worker it runs on or
on an earlier task, so Dask may retry a task lost with its worker and get the same result.
With ``client=None`` the same tasks run one after another in this process, with bit-for-bit
the same results: that is also how to debug ``fn``.

The ``distributed`` extra (``pip install 'autograd_nb[distributed]'``) installs Dask; without
it only ``client=None`` works. See ``docs/distributed.rst`` ("Beyond one machine").
"""

import asyncio
import hashlib
import math
import pickle
import threading
import uuid
from collections import namedtuple

import numpy as np

from . import config
from .autograd import enable_grad, grad, no_grad
from .tensor import NOT_A_LEAF_PICKLE, Tensor, tensor

try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # the `distributed` extra is missing: client=None only
    WorkerPlugin = object

__all__ = ["ValueAndGrad", "jacobian", "map_grad", "warm_workers"]

#: One result of :func:`map_grad`: ``fn``'s value, and its gradient with respect to the
#: argument ``wrt`` names (a tuple of gradients when ``wrt`` is a tuple), as NumPy arrays.
ValueAndGrad = namedtuple("ValueAndGrad", ["value", "grad"])

NOT_PICKLABLE = (
    "{what}: cannot pickle fn={fn!r} with cloudpickle ({error}), and Dask must pickle it to "
    "send it to its workers. Fix: define fn at the top level of a module the workers can import "
    "(for a module only this machine has, call cloudpickle.register_pickle_by_value(module)), "
    "and create what it uses that cannot be pickled (locks, open files, connections) inside fn "
    "instead of capturing it; or pass client=None to run serially in this process."
)
NOT_UNPICKLABLE = (
    "{what}: a worker could not unpickle fn ({error!r}). A function defined in a module is "
    "pickled by name, and each worker imports that module: install it on the workers (or put "
    "it on their sys.path), or call cloudpickle.register_pickle_by_value(module) in the client "
    "to send the function by value."
)


def map_grad(fn, inputs, *, wrt=0, client=None, batch_size=None):
    """``fn``'s value and gradient at each of many argument tuples, as Dask tasks.

    Parameters
    ----------
    fn : callable
        Takes the arguments of one element of ``inputs`` and returns a single-element Tensor.
        It must be pure (no in-place change to its arguments, no state kept between calls) and,
        with a ``client``, picklable by cloudpickle.
    inputs : sequence of tuple
        One tuple of arguments per gradient. Arguments may differ in shape from one tuple to
        the next. The arguments ``wrt`` names become new leaf Tensors that require grad
        (from arrays, numbers or Tensors); the others are passed to ``fn`` as they are.
    wrt : int or tuple of int
        The positions of the arguments to differentiate with respect to.
    client : distributed.Client, optional
        Where to run. None runs the same tasks serially in this process.
    batch_size : int, optional
        Inputs per task: several gradients per task amortise the per-task overhead. By
        default, about ``config.MAP_GRAD_TASKS_PER_THREAD`` tasks per worker thread. The
        results do not depend on it.

    Returns
    -------
    list of ValueAndGrad
        ``(value, grad)`` per input, in order, as NumPy arrays; ``grad`` is a tuple of arrays
        when ``wrt`` is a tuple. An argument ``fn``'s value does not depend on gets zeros.

    Examples
    --------
    >>> import numpy as np
    >>> import autograd_nb as anb
    >>> from autograd_nb.distributed import map_grad
    >>> def energy(x, k):
    ...     return anb.sum(k * x * x)
    >>> results = map_grad(energy, [(np.array([1.0, 2.0]), 3.0), (np.array([0.5]), 2.0)])
    >>> results[0]
    ValueAndGrad(value=array(15.), grad=array([ 6., 12.]))
    >>> map_grad(energy, [(np.array([1.0, 2.0]), 3.0)], wrt=(0, 1))[0].grad
    (array([ 6., 12.]), array(5.))
    """
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    inputs = [_argument_tuple(args, i) for i, args in enumerate(inputs)]
    if client is None:
        results = _grad_batch(fn, inputs, wrt)
    else:
        fn = _pickled(fn, "map_grad")
        inputs = [_picklable_arguments(args, wrt) for args in inputs]
        if batch_size is None:
            batch_size = _default_batch_size(len(inputs), client)
        run = _run_name("map_grad")
        futures = [
            client.submit(_grad_batch, fn, inputs[i : i + batch_size], wrt, key=f"{run}-{i}")
            for i in range(0, len(inputs), batch_size)
        ]
        results = [result for batch in client.gather(futures) for result in batch]
    return [
        ValueAndGrad(value, grads if isinstance(wrt, tuple) else grads[0])
        for value, grads in results
    ]


def jacobian(fn, x, *, client=None, rows_per_task=None):
    """The full Jacobian of ``fn`` at ``x``, its rows computed by batched VJPs in Dask tasks.

    Each task runs ``fn(x)`` forward on its worker and the VJPs of a block of rows as one
    ``grad(..., is_grads_batched=True)`` call against the unit vectors of those rows. The
    blocks are gathered into one NumPy array in this process (never a ``dask.array``).

    Parameters
    ----------
    fn : callable
        Takes one Tensor and returns one Tensor; pure, and with a ``client`` picklable.
    x : array_like or Tensor
        The point; floating point.
    client : distributed.Client, optional
        Where to run. None runs the same blocks serially in this process (one forward pass,
        then the blocks' batched VJPs).
    rows_per_task : int, optional
        Rows (output elements) per task; by default the rows split into
        ``config.JACOBIAN_TASKS`` blocks of at most ``config.JACOBIAN_MAX_ROWS`` rows. The
        same ``rows_per_task`` gives bit for bit the same result with and without a client.

    Returns
    -------
    numpy.ndarray
        Of shape ``fn(x).shape + x.shape`` and ``x``'s dtype: ``J[i..., j...]`` is
        ``d fn(x)[i...] / d x[j...]``.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.distributed import jacobian
    >>> jacobian(lambda x: anb.outer(x, x).sum(axis=0), [1.0, 2.0])
    array([[4., 1.],
           [2., 5.]])
    """
    if rows_per_task is not None and rows_per_task < 1:
        raise ValueError(f"rows_per_task must be at least 1, got {rows_per_task}")
    if isinstance(x, Tensor):
        x = x.detach()  # differentiated from here on, whatever computed it
    if client is None:
        leaf = _leaf(x)
        with enable_grad():
            output = _checked_output(fn(leaf), "jacobian")
        shape = output.shape
        blocks = [
            _vjp_rows(output, leaf, start, stop, retain_graph=True)
            for start, stop in _row_blocks(output.size, rows_per_task)
        ]
    else:
        fn = _pickled(fn, "jacobian")
        run = _run_name("jacobian")
        shape = client.submit(_output_shape, fn, x, key=f"{run}-shape").result()
        futures = [
            client.submit(_jacobian_rows, fn, x, start, stop, key=f"{run}-{start}")
            for start, stop in _row_blocks(math.prod(shape), rows_per_task)
        ]
        blocks = client.gather(futures)
    x_shape = x.shape if isinstance(x, Tensor) else np.shape(x)
    if not blocks:
        return np.zeros(shape + x_shape, dtype=_leaf(x).dtype)
    return np.concatenate(blocks).reshape(shape + x_shape)


def warm_workers(client, fn, example_args, *, wrt=0, mode="grad"):
    """Compile ``fn``'s kernels on every worker, now and on each worker that joins later.

    Registers a Dask ``WorkerPlugin`` whose setup runs one task's work on
    ``example_args`` (forward and backward), in a thread, so the worker's event loop keeps
    answering the scheduler while numba compiles (or loads its cache). Returns once the
    current workers are warm; registering the same warm-up again does nothing.

    Parameters
    ----------
    client : distributed.Client or None
        None warms this process (runs the work once, serially).
    fn : callable
        As for :func:`map_grad` (``mode="grad"``) or :func:`jacobian` (``mode="jacobian"``).
    example_args : tuple
        Arguments of the shapes and dtypes the real tasks will use; for ``mode="jacobian"``,
        the one-element tuple ``(x,)``.
    wrt : int or tuple of int
        As for :func:`map_grad`.
    mode : {"grad", "jacobian"}
        Which task to warm: map_grad's gradient, or jacobian's first block of batched VJPs.

    Returns
    -------
    str or None
        The plugin's name, for ``client.unregister_worker_plugin``; None without a client.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> from autograd_nb.distributed import warm_workers
    >>> warm_workers(None, lambda x: anb.sum(anb.sin(x)), ([0.5, 1.0],))
    """
    if mode not in ("grad", "jacobian"):
        raise ValueError(f'mode must be "grad" or "jacobian", got {mode!r}')
    example_args = _argument_tuple(example_args, "example_args")
    if mode == "jacobian" and len(example_args) != 1:
        raise TypeError(f'mode="jacobian" takes example_args=(x,), got {len(example_args)} args')
    if client is None:
        _warm(fn, example_args, wrt, mode)
        return None
    fn = _pickled(fn, "warm_workers")
    example_args = _picklable_arguments(example_args, wrt if mode == "grad" else 0)
    from dask.base import tokenize

    name = f"autograd_nb-warm-{tokenize(fn.payload, example_args, wrt, mode)}"
    client.register_plugin(_WarmUp(fn, example_args, wrt, mode), name=name)
    return name


class _WarmUp(WorkerPlugin):
    """Runs one task's work when a worker starts (``warm_workers``)."""

    idempotent = True  # the name hashes the work: registering it again changes nothing

    def __init__(self, fn, example_args, wrt, mode):
        self.fn, self.example_args, self.wrt, self.mode = fn, example_args, wrt, mode

    async def setup(self, worker):
        # A thread: compiling takes seconds, and the worker must keep its heartbeats going.
        await asyncio.to_thread(_warm, self.fn, self.example_args, self.wrt, self.mode)


# -- the tasks (pure: what they return depends only on their arguments) ------------------------


def _grad_batch(fn, batch, wrt):
    """``(value, grads)`` for each argument tuple of ``batch``."""
    return [_value_and_grad(fn, args, wrt) for args in batch]


def _value_and_grad(fn, args, wrt):
    positions = _positions(wrt, len(args))
    args = list(args)
    for p in positions:
        args[p] = _leaf(args[p])
    leaves = [args[p] for p in positions]
    with enable_grad():
        value = _checked_output(fn(*args), "map_grad")
        if value.requires_grad:
            grads = grad(value, leaves, allow_unused=True, materialize_grads=True)
        else:
            grads = [None] * len(leaves)
    grads = tuple(
        _numpy(g) if g is not None else np.zeros(leaf.shape, dtype=leaf.dtype)
        for g, leaf in zip(grads, leaves)
    )
    return np.array(_numpy(value.detach())), grads


def _output_shape(fn, x):
    with no_grad():
        return _checked_output(fn(_leaf(x)), "jacobian").shape


def _jacobian_rows(fn, x, start, stop):
    """Rows ``start:stop`` of the Jacobian (flattened outputs), shape ``(rows,) + x.shape``."""
    leaf = _leaf(x)
    with enable_grad():
        output = _checked_output(fn(leaf), "jacobian")
    return _vjp_rows(output, leaf, start, stop, retain_graph=False)


def _vjp_rows(output, leaf, start, stop, retain_graph):
    rows = stop - start
    if not output.requires_grad:
        return np.zeros((rows,) + leaf.shape, dtype=leaf.dtype)
    units = np.zeros((rows, output.size), dtype=output.dtype)
    units[np.arange(rows), np.arange(start, stop)] = 1
    units = tensor(units.reshape((rows,) + output.shape), device=output.device)
    (block,) = grad(
        output,
        leaf,
        grad_outputs=units,
        retain_graph=retain_graph,
        is_grads_batched=True,
        allow_unused=True,
        materialize_grads=True,
    )
    return _numpy(block)


def _warm(fn, example_args, wrt, mode):
    if mode == "grad":
        _value_and_grad(fn, example_args, wrt)
    else:
        (x,) = example_args
        leaf = _leaf(x)
        with enable_grad():
            output = _checked_output(fn(leaf), "jacobian")
        for start, stop in _row_blocks(output.size, None)[:1]:
            _vjp_rows(output, leaf, start, stop, retain_graph=False)


# -- helpers -----------------------------------------------------------------------------------


def _leaf(value):
    """A new leaf that requires grad, holding ``value`` (a Tensor's data is shared)."""
    if isinstance(value, Tensor):
        return value.detach().requires_grad_()
    return tensor(value, requires_grad=True)


def _numpy(t):
    return t.cpu().numpy()


def _checked_output(output, what):
    if not isinstance(output, Tensor):
        raise TypeError(f"{what}: fn must return a Tensor, got {type(output).__name__}")
    return output


def _argument_tuple(args, index):
    if not isinstance(args, (tuple, list)):
        raise TypeError(
            f"inputs[{index}] is a {type(args).__name__}: each element of inputs is a tuple of "
            "fn's arguments (for a function of one argument: [(x,) for x in xs])"
        )
    return tuple(args)


def _picklable_arguments(args, wrt):
    """``args`` with the Tensors to differentiate detached (a computed one cannot be pickled:
    its graph stays here), after checking ``wrt`` against them. Any other computed Tensor is
    refused with torch's message, here rather than deep inside Dask's serialisation."""
    positions = _positions(wrt, len(args))
    args = list(args)
    for p, value in enumerate(args):
        if isinstance(value, Tensor) and not value.is_leaf:
            if p not in positions:
                raise RuntimeError(NOT_A_LEAF_PICKLE)
            args[p] = value.detach()
    return tuple(args)


def _positions(wrt, n_args):
    """``wrt`` as a tuple of non-negative argument positions, checked against ``n_args``."""
    positions = wrt if isinstance(wrt, tuple) else (wrt,)
    for p in positions:
        if not isinstance(p, (int, np.integer)) or isinstance(p, bool):
            raise TypeError(f"wrt must be an int or a tuple of ints, got {wrt!r}")
        if not -n_args <= p < n_args:
            raise IndexError(f"wrt={wrt!r} names argument {p}, but fn gets {n_args} arguments")
    return tuple(int(p) % n_args for p in positions)


def _row_blocks(rows, rows_per_task):
    if rows_per_task is None:
        # The rows alone decide, not the cluster: client=None runs the same blocks and bits.
        blocks = math.ceil(rows / config.JACOBIAN_TASKS)
        rows_per_task = max(1, min(blocks, config.JACOBIAN_MAX_ROWS))
    return [(start, min(start + rows_per_task, rows)) for start in range(0, rows, rows_per_task)]


def _default_batch_size(n_inputs, client):
    threads = max(1, sum(client.nthreads().values()))
    return max(1, math.ceil(n_inputs / (config.MAP_GRAD_TASKS_PER_THREAD * threads)))


def _run_name(what):
    """A fresh key prefix for one call's tasks. Dask's default keys hash every argument
    (~0.2 ms a task here), to share the result of the same call made twice; a call's tasks
    are pure anyway, and are retried under their own keys."""
    return f"autograd_nb-{what}-{uuid.uuid4().hex}"


def _pickled(fn, what):
    """``fn`` pickled here, as Dask would pickle it, or a clear error before submitting."""
    from distributed.protocol.pickle import dumps

    try:
        return _PickledFunction(dumps(fn), what)
    except Exception as error:
        raise TypeError(NOT_PICKLABLE.format(what=what, fn=fn, error=error)) from error


class _PickledFunction:
    """A function as pickled bytes, unpickled where it is first called. On a worker that cannot
    import the function's module, that makes a task fail, and Dask reports the error to the
    client; a function in the task's message itself would fail the worker's reading of the
    message, and the client would wait for ever."""

    def __init__(self, payload, what):
        self.payload, self.what = payload, what
        self._fn = None

    def __reduce__(self):
        return _PickledFunction, (self.payload, self.what)

    def __call__(self, *args):
        if self._fn is None:
            # One unpickled function per worker process for every task of a call (each task
            # carries its own copy of this object): an ``anb.compile`` function then records
            # once per signature on each worker, not once per task.
            key = hashlib.sha1(self.payload).hexdigest()
            self._fn = _unpickled.get(key)
            if self._fn is None:
                try:
                    self._fn = pickle.loads(self.payload)
                except Exception as error:
                    raise RuntimeError(
                        NOT_UNPICKLABLE.format(what=self.what, error=error)
                    ) from error
                with _unpickled_lock:
                    if len(_unpickled) >= _UNPICKLED_KEPT:
                        _unpickled.pop(next(iter(_unpickled)))
                    _unpickled[key] = self._fn
        return self._fn(*args)


#: Functions unpickled in this process, by their payload's digest (the most recent kept).
_unpickled = {}
_unpickled_lock = threading.Lock()
_UNPICKLED_KEPT = 16
