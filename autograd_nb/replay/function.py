"""``autograd_nb.compile``: a function recorded once per signature, then replayed from tables.

A call's *signature* is the structure of its arguments (nested tuples, lists and dicts), per
tensor its shape, dtype, device, ``requires_grad`` and contiguity, every other argument by
value, which tensor arguments are the same object, and the grad mode. The first call of a
signature runs fn eagerly while :mod:`.tracer` records it, then replays the program for its
results (the eager results where fn wrote its arguments in place: a replay would write again).
Later calls check the guards of the program (the tensors fn reached from its closure or
globals are still those objects, of the same shape and dtype) and replay it
(:mod:`.program`); a failed guard records the signature again.

A branch on a traced value (``bool(t)``: ``if x.sum() > 0:``) is recorded as a guard
(:mod:`.guards`): the program is one *path* of the signature, and a replay checks, after its
table ran, that each guard saw the outcome recorded. Where one did not, nothing of the call
is kept: the tensors the program writes in place get back the values copied before the run
(only programs with guards and such writes pay that copy), no version moves, no output or
node is made. Then another path recorded for those outcomes replays, or fn is recorded again
along the new path, up to ``config.COMPILE_MAX_PATHS`` paths; past that the signature runs
eagerly, with a warning (as every branch did before guards, and does with ``strict=True``).
"""

import collections
import functools
import sys
import threading
import warnings

import numpy as np

from .. import config, tape
from ..ops import _pointers
from ..tensor import Tensor, dual_level_open
from . import guards as guards_module
from . import program as program_module
from . import tracer
from .tree import flatten, flatten_call, unflatten


class CompileWarning(UserWarning):
    """A compiled function's signature runs eagerly (value-dependent Python, or an op the
    interpreter cannot run); the message says where and why."""


CacheInfo = collections.namedtuple(
    "CacheInfo", "programs eager hits misses traces max_programs"
)


class _Eager:
    """A signature that runs eagerly from now on, and why."""

    __slots__ = ("why",)

    def __init__(self, why):
        self.why = why


class CompiledFunction:
    """What :func:`compile` returns: call it as fn. See ``docs/compile.rst``."""

    def __init__(self, fn, strict=False, max_programs=None, max_paths=None):
        if not callable(fn):
            raise TypeError(f"autograd_nb.compile expects a callable, not {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.strict = bool(strict)
        if max_programs is None:  # programs kept, least recently used dropped first
            max_programs = config.COMPILE_MAX_PROGRAMS
        self.max_programs = max_programs
        if max_paths is None:  # programs per signature, one per path of its guards
            max_paths = config.COMPILE_MAX_PATHS
        self.max_paths = max_paths
        self._programs = collections.OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._traces = 0

    def __reduce__(self):
        # fn and the options: programs hold this process's addresses, so another process
        # (a pool's, a Dask worker) records its own, once per signature.
        _name_through_wrapper(self)
        return _rebuild, (self.fn, self.strict, self.max_programs)

    def __get__(self, instance, owner):  # a compiled method binds as a function does
        if instance is None:
            return self
        return functools.partial(self, instance)

    def __call__(self, *args, **kwargs):
        if dual_level_open():
            # Tangents are not part of a recorded program: inside a dual level the function
            # runs eagerly, so that its dual tensors get their tangents (docs/compile.rst).
            _warn(self, "a forward-mode dual level is open (dual tensors run eagerly)", None,
                  stacklevel=3)
            return self.fn(*args, **kwargs)
        leaves, structure = flatten_call(args, kwargs)
        key = _signature(leaves, structure)
        entry = self._programs.get(key)
        if entry is not None:
            if type(entry) is _Eager:
                self._hits += 1
                return self.fn(*args, **kwargs)
            if type(entry) is _Paths:
                return self._replay_paths(key, entry, leaves, args, kwargs)
            if entry.guards_hold(leaves):
                self._hits += 1
                results = entry.program.replay(leaves, args, kwargs)
                return unflatten(entry.output_structure, results)
        self._misses += 1
        return self._record(key, leaves, args, kwargs)

    def _replay_paths(self, key, paths, leaves, args, kwargs):
        """A call of a signature whose programs have guards: the path its values take (see
        the module docstring)."""
        observed, tried = (), []
        while True:
            entry = paths.find(observed, tried)
            if entry is None:
                break
            if not entry.guards_hold(leaves):  # (a closure's tensor changed: start again)
                self._misses += 1
                return self._record(key, leaves, args, kwargs, fresh=True)
            tried.append(entry)
            results, observed = _replay_path(entry, leaves, args, kwargs)
            if results is not None:
                self._hits += 1
                paths.promote(entry)
                return unflatten(entry.output_structure, results)
        self._misses += 1
        if len(paths.entries) >= self.max_paths:
            where = tried[-1].path.where[len(observed) - 1] if observed else None
            why = (f"a branch on a traced value took more than {self.max_paths} paths "
                   f"(autograd_nb.config.COMPILE_MAX_PATHS)")
            self._keep(key, _Eager(why))
            _warn(self, why, where)
            return self.fn(*args, **kwargs)
        return self._record(key, leaves, args, kwargs)

    def _record(self, key, leaves, args, kwargs, fresh=False):
        with tracer.gc_paused():
            return self._record_paused(key, leaves, args, kwargs, fresh)

    def _record_paused(self, key, leaves, args, kwargs, fresh):
        tensors = [leaf if isinstance(leaf, Tensor) else None for leaf in leaves]
        why = _untraceable(tensors)
        if why is not None:
            self._keep(key, _Eager(why))
            _warn(self, why, None)
            return self.fn(*args, **kwargs)
        trace = tracer.Trace(tensors, guards=not self.strict)
        with tracer.recording(trace):
            result = self.fn(*args, **kwargs)
        self._traces += 1
        why, where = None, None
        if trace.value_dependent is not None:
            what, filename, line = trace.value_dependent
            why = (f"the traced value reached Python ({what}), so a replay could take another "
                   f"branch")
            where = (filename, line)
            if self.strict:
                raise RuntimeError(
                    f"autograd_nb.compile(strict=True): {why} at {filename}:{line}. Keep "
                    f"tensor values in tensors (anb.where instead of `if`), or compile "
                    f"without strict to run this signature eagerly."
                )
        elif trace.unsupported is not None:
            what, filename, line = trace.unsupported
            why, where = f"the interpreter cannot run {what}", (filename, line)
        outputs, output_structure = flatten(result)
        trace.adopt_outputs(outputs)
        trace.own_outputs(outputs)
        program = None
        flags = [guard.flag for guard in trace.guards]
        if why is None:
            try:
                program = program_module.Program(trace, outputs + flags, self.fn, None,
                                                 n_flags=len(flags))
            except program_module.Unsupported as error:
                why = f"the interpreter cannot run {error}"
        if program is None:
            self._keep(key, _Eager(why))
            _warn(self, why, where)
            return result
        sources = _sources(self.fn, program.externals)
        # An argument that is also a closure's or global's tensor was read through either
        # name as one buffer: a call passing another tensor records again.
        arguments = [(i, place) for i, (t, place) in
                     enumerate(zip(tensors, _sources(self.fn, tensors)))
                     if t is not None and place[0] != "held"]
        path = guards_module.Path.of(trace.guards, program.flag_offsets)
        self._keep_program(key, _Entry(program, output_structure, sources, arguments, path),
                           fresh)
        if program.written:
            return result  # (a replay would write the arguments a second time)
        # The first call's results come from a replay too: their backward is the program's
        # (one compiled call), not a first eager backward that plans the whole graph.
        del trace, outputs, flags
        replayed = program.replay(leaves, args, kwargs,
                                  None if path is None else path.holds)
        if replayed is None:
            return result  # (its own replay branched otherwise: fn is not deterministic)
        del result
        return unflatten(output_structure, replayed)

    def _keep_program(self, key, entry, fresh):
        if entry.path is None:
            self._keep(key, entry)
            return
        # Another path of the signature's (unless the guards of those recorded failed:
        # ``fresh``), also where another thread recorded one meanwhile.
        with self._lock:
            paths = self._programs.get(key)
            if fresh or type(paths) is not _Paths:
                paths = _Paths()
            paths.entries.insert(0, entry)
        self._keep(key, paths)

    def _keep(self, key, entry):
        with self._lock:
            self._programs[key] = entry
            self._programs.move_to_end(key)
            while len(self._programs) > self.max_programs:
                self._programs.popitem(last=False)

    def cache_info(self):
        """``CacheInfo(programs, eager, hits, misses, traces, max_programs)``: the programs
        kept (one per path of a signature with guards), the signatures that run eagerly,
        calls served from a program, calls that recorded (or ran eagerly past the paths'
        bound)."""
        entries = list(self._programs.values())
        eager = sum(type(e) is _Eager for e in entries)
        programs = sum(len(e.entries) if type(e) is _Paths else type(e) is _Entry
                       for e in entries)
        return CacheInfo(programs, eager, self._hits, self._misses, self._traces,
                         self.max_programs)

    def cache_clear(self):
        """Forget every program (the next call of each signature records again)."""
        with self._lock:
            self._programs.clear()


def _name_through_wrapper(compiled):
    """Where ``@anb.compile`` made ``compiled`` the holder of fn's name in its module, name fn
    by the path through ``compiled`` instead (``f.__wrapped__``).

    pickle sends a function as its module and qualified name, and refuses fn where that name
    finds ``compiled``; the path through it is found in any process that imports the module
    (a pool's workers, forked or spawned, which run ``__main__`` again). cloudpickle, which
    Dask uses for what ``__main__`` defines, still sends fn by value.
    """
    fn = compiled.fn
    qualname = getattr(fn, "__qualname__", None)
    if qualname is not None and qualname == getattr(compiled, "__qualname__", None) and (
        _named(getattr(fn, "__module__", None), qualname) is compiled
    ):
        fn.__qualname__ = qualname + ".__wrapped__"


def _rebuild(fn, strict, max_programs):
    """What a pickled compiled function loads as: the one that holds fn's name in its module
    where it is that of fn and these options (one per process, as a decorated function's is),
    else a new one, with no programs."""
    qualname = getattr(fn, "__qualname__", "")
    if qualname.endswith(".__wrapped__"):
        held = _named(getattr(fn, "__module__", None), qualname[: -len(".__wrapped__")])
        if (isinstance(held, CompiledFunction) and held.fn is fn and held.strict == strict
                and held.max_programs == max_programs):
            return held
    return CompiledFunction(fn, strict=strict, max_programs=max_programs)


def _named(module_name, qualname):
    """The object at ``qualname`` in the module ``module_name`` if it is imported, or None."""
    found = sys.modules.get(module_name) if module_name else None
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


class _Entry:
    """A program and what its calls check first; ``path``: its guards' outcomes
    (:class:`.guards.Path`), or None."""

    __slots__ = ("program", "output_structure", "sources", "layouts", "arguments", "path")

    def __init__(self, program, output_structure, sources, arguments, path=None):
        self.program = program
        self.output_structure = output_structure
        self.sources = sources
        self.layouts = program.external_layouts
        self.arguments = arguments
        self.path = path

    def guards_hold(self, leaves):
        for source, t in zip(self.sources, self.program.externals):
            if not _holds(source, t):
                return False
        for i, source in self.arguments:
            if not _holds(source, leaves[i]):
                return False
        for (shape, dtype), t in zip(self.layouts, self.program.externals):
            data = t._data
            if (type(data) is not np.ndarray or data.shape != shape or data.dtype != dtype
                    or not data.flags.c_contiguous):
                return False
        return True


class _Paths:
    """The programs of one signature with guards, one per path, the last that served a call
    first."""

    __slots__ = ("entries",)

    def __init__(self):
        self.entries = []

    def find(self, observed, tried):
        """The first program not among ``tried`` whose path takes the outcomes
        ``observed``, or None."""
        for entry in tuple(self.entries):
            if (entry.path is None or entry.path.continues(observed)) and all(
                    entry is not other for other in tried):
                return entry
        return None

    def promote(self, entry):
        entries = self.entries
        if entries and entries[0] is not entry:
            try:  # (another thread may have moved it meanwhile: an order only)
                entries.remove(entry)
                entries.insert(0, entry)
            except ValueError:
                pass


def _replay_path(entry, leaves, args, kwargs):
    """Replay ``entry``'s program if the call takes its path: ``(results, None)``; else
    ``(None, outcomes)``, the outcomes seen up to the first that differs, with every tensor
    the program writes in place as it was (see the module docstring)."""
    program, path = entry.program, entry.path
    if path is None:
        return program.replay(leaves, args, kwargs), None
    saved = None
    if program.written:
        saved = {}
        for kind, index in program.written:
            t = program._written_tensor(leaves, kind, index)
            saved.setdefault(id(t), (t, t._data.copy()))
    seen = []

    def check(arena):
        if path.holds(arena):
            return True
        seen.append(path.observed(arena))
        return False

    results = program.replay(leaves, args, kwargs, check)
    if results is not None:
        return results, None
    for t, data in (saved or {}).values():
        np.copyto(t._data, data)
    return None, seen[0]


def _holds(source, t):
    """Whether the closure cell or global ``source`` still holds the tensor ``t``."""
    kind, holder, name = source
    if kind == "cell":
        try:
            return holder.cell_contents is t
        except ValueError:
            return False
    if kind == "global":
        return holder.get(name) is t
    return True


def _sources(fn, externals):
    """Where fn finds each outside tensor: ``("cell", cell, None)``, ``("global", globals,
    name)``, or ``("held", None, None)`` (made by fn, or reached through an object: the
    program keeps that tensor and reads it at every call)."""
    places = {}
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None) or ()
    for cell in closure:
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, Tensor):
            places.setdefault(id(value), ("cell", cell, None))
    namespace = getattr(fn, "__globals__", None)
    if code is not None and namespace is not None:
        for name in _global_names(code):
            value = namespace.get(name)
            if isinstance(value, Tensor):
                places.setdefault(id(value), ("global", namespace, name))
    return [places.get(id(t), _HELD) for t in externals]


_HELD = ("held", None, None)


def _global_names(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _global_names(const)
    return names


def _untraceable(tensors):
    """Why a call with these argument ``tensors`` runs eagerly without being traced, or
    None."""
    if not _pointers.SUPPORTED:  # (the interpreter reads arrays by address)
        return "reading arrays by address is off here (autograd_nb.config.capabilities())"
    for t in tensors:
        if t is not None and type(t._data) is not np.ndarray:
            return "CUDA tensors run eagerly for now"
    return None


def _warn(compiled, why, where, stacklevel=4):
    name = getattr(compiled, "__qualname__", None) or repr(compiled.fn)
    at = f" ({where[0]}:{where[1]})" if where else ""
    warnings.warn(f"autograd_nb.compile: {name} runs eagerly for this signature: {why}{at}.",
                  CompileWarning, stacklevel=stacklevel)


# -- signatures and structures ---------------------------------------------------------------


def _signature(leaves, structure):
    parts = [structure, tape._state.enabled]
    seen = {}
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            data = leaf._data
            first = seen.setdefault(id(leaf), i)
            if type(data) is np.ndarray:
                parts.append((data.shape, data.dtype, "cpu", leaf._requires_grad
                              or leaf._node is not None, data.flags.c_contiguous, first))
            else:
                parts.append((tuple(data.shape), np.dtype(data.dtype), leaf.device,
                              leaf.requires_grad, True, first))
            continue
        try:
            hash(leaf)
        except TypeError:
            raise TypeError(
                f"autograd_nb.compile: argument {i} is a {type(leaf).__name__}, which is not "
                f"hashable; non-tensor arguments are part of the signature by value. Pass "
                f"arrays as tensors (anb.tensor(...))."
            ) from None
        if isinstance(leaf, (float, np.floating)):
            # By bits: 0.0 == -0.0 (one key would replay x * 0.0 for x * -0.0, signs lost),
            # and nan != nan (every call would record again).
            parts.append((type(leaf), float(leaf).hex()))
            continue
        parts.append((type(leaf), leaf))
    return tuple(parts)


def compile(fn=None, *, strict=False):  # noqa: A001 (NumPy-style name, as torch.compile)
    """Record ``fn`` once per signature, then replay it from tables: its forward in one
    compiled call, its outputs ordinary Tensors whose backward is one compiled call.

    Use as ``anb.compile(fn)``, ``@anb.compile`` or ``@anb.compile(strict=True)``. See
    ``docs/compile.rst`` for what is frozen, the guards, the fallback and the costs.

    Parameters
    ----------
    fn : callable
        Takes and returns tensors (and other values) in nested tuples, lists and dicts.
    strict : bool
        Raise where a traced value reaches Python (``float(t)``, and also a branch such as
        ``if t > 0:``, which is otherwise recorded as a guard: a program per path taken)
        instead of warning once and running that signature eagerly.

    Examples
    --------
    >>> import autograd_nb as anb
    >>> @anb.compile
    ... def loss(w, x):
    ...     return anb.sum(anb.tanh(x @ w))
    >>> w = anb.ones((3, 2), requires_grad=True)
    >>> x = anb.ones((4, 3))
    >>> first = loss(w, x)  # records (eagerly)
    >>> again = loss(w, x)  # replays
    >>> anb.grad(again, w)[0].shape
    (3, 2)
    >>> loss.cache_info().programs
    1
    """
    if fn is None:
        return lambda f: CompiledFunction(f, strict=strict)
    return CompiledFunction(fn, strict=strict)
