"""The on-disk kernel cache: one folder per generation of the code, and never in the way.

autograd_nb keeps two kinds of files on disk (``docs/kernel-cache.rst``): the kernel modules it
generates (:mod:`autograd_nb.ops._kernels`) and numba's cache of compiled machine code, of those
modules and of the package's own ``cache=True`` functions.

**Generations.** Both live in a folder named by a *generation key*: the package version and a
hash of everything machine code depends on: every source file of the package, and the numba,
llvmlite, NumPy and Python versions. numba keys a cached function by its own file only, so after
an edit of a function it calls in another file it would link the old machine code (which can
crash the process); an upgrade of the package or of numba would do the same. A new generation starts
from an empty folder instead. Generated kernel modules go to
``<config.KERNEL_DIR>/<generation>/``; numba's cache of autograd_nb's functions to
``<generation folder>/numba/``, or to ``$NUMBA_CACHE_DIR/autograd_nb/<generation>/`` where the
user set ``NUMBA_CACHE_DIR`` (numba's own cache of other code is left as numba places it).
Generations not used for ``config.CACHE_PRUNE_AFTER`` seconds are removed.

**Failures.** A cache folder that cannot be written (read-only, full, removed) or whose files
are damaged (a truncated index or data file, garbage in a generated module or its bytecode)
gives one :class:`KernelCacheWarning` per process, and the code compiles in memory: a kernel
module that cannot be written runs from memory without numba's cache, a numba cache entry
that cannot be read is compiled again (and rewritten where it can be), one that cannot be
written stays in memory. Never a crash, never another result. Every file is written to a
temporary name and renamed into place, so that processes filling one cache at once never read
a partial file, and numba's data files of autograd_nb's functions are named by their key,
so two processes adding different signatures of one function never write the same file;
their index updates (read, add, write) take turns under a file lock, so neither drops the
other's entry.

:func:`install` (run at import) puts this in place in numba: a cache locator for
autograd_nb's files, the guarded cache above, and a listener that counts compilations and logs,
at INFO on the ``autograd_nb`` logger, each one that takes more than
``config.COMPILE_LOG_SECONDS``. :func:`cache_info` (also ``autograd_nb.config.cache_info``)
reports the folders, their size and the counts.
"""

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import linecache
import logging
import os
import pickle
import re
import shutil
import sys
import tempfile
import threading
import time
import types
import uuid
import warnings

try:
    import fcntl
except ImportError:  # Windows: index updates are not serialized (a lost entry compiles again)
    fcntl = None

import llvmlite
import numba
import numpy as np
from numba.core import caching, event

from . import config

LOGGER = logging.getLogger("autograd_nb")

PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
#: A generation folder's name: ``<version>-<16 hex digits>``.
GENERATION_NAME = re.compile(r"^\d[\w.+!]*-[0-9a-f]{16}$")
#: Touched by every process that uses a generation; its age decides pruning.
MARKER = ".last-used"
#: In each folder of numba's cache: the lock of its index files' updates (:func:`_locked`).
INDEX_LOCK = ".index.lock"
#: A kernel module right in ``KERNEL_DIR`` (an older layout, without generations).
_LEGACY_NAME = re.compile(r"^(anb_\w+\.py|tmp\w+\.tmp)$")

_lock = threading.RLock()
_started = set()  # folders whose marker this process touched (and whose siblings it pruned)
_warned = False
_stats = {"compiled": 0, "compile_seconds": 0.0, "loaded": 0, "in_memory": 0}
_problems = []  # (the first MAX_PROBLEMS)
_logged = set()
MAX_PROBLEMS = 100


class KernelCacheWarning(UserWarning):
    """The kernel cache could not be read or written: autograd_nb compiles in memory."""


# -- Where -------------------------------------------------------------------------------------


@functools.cache
def generation_key():
    """The name of this generation's folders: ``<version>-<hash>``, computed once per process.

    The hash covers the package's source files (their paths and bytes: 1 MB, a few ms) and
    the versions of numba, llvmlite, NumPy and Python.

    >>> len(generation_key().rsplit("-", 1)[1])
    16
    """
    digest = hashlib.sha256()
    for part in (numba.__version__, llvmlite.__version__, np.__version__,
                 sys.implementation.cache_tag):
        digest.update(part.encode() + b"\0")
    version = "0"
    for relative, data in _package_sources():
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
        if relative == "__init__.py":
            found = re.search(rb"^__version__ = [\"']([\w.+!]+)[\"']", data, re.MULTILINE)
            version = found.group(1).decode() if found else version
    return f"{version}-{digest.hexdigest()[:16]}"


def _package_sources():
    """``(relative path, bytes)`` of every ``.py`` file of the package, in a fixed order."""
    for folder, subfolders, files in os.walk(PACKAGE_DIR):
        subfolders[:] = sorted(s for s in subfolders if s != "__pycache__" and s[0] != ".")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, "rb") as stream:
                    data = stream.read()
                yield os.path.relpath(path, PACKAGE_DIR).replace(os.sep, "/"), data


def generation_folder():
    """This generation's folder of generated kernel modules: ``<config.KERNEL_DIR>/<key>``.

    Its first use in a process marks the generation used and prunes old ones beside it.
    """
    return _started_folder(config.KERNEL_DIR)


def numba_folder():
    """This generation's folder of numba's cache of autograd_nb's functions."""
    user = numba.config.CACHE_DIR
    if user:
        return _started_folder(os.path.join(user, "autograd_nb"))
    return os.path.join(generation_folder(), "numba")


def _started_folder(root):
    folder = os.path.join(root, generation_key())
    if folder not in _started:
        with _lock:
            if folder not in _started:
                _started.add(folder)
                _start(root, folder)
    return folder


def _start(root, folder):
    try:
        os.makedirs(folder, exist_ok=True)
        _touch(folder)
    except OSError as error:  # read-only, say: reported when a write fails
        LOGGER.debug("kernel cache %s not marked: %s", folder, error)
    prune(root, keep=os.path.basename(folder))


def _touch(folder):
    marker = os.path.join(folder, MARKER)
    with open(marker, "a"):
        pass
    os.utime(marker)


# -- Pruning -----------------------------------------------------------------------------------


def prune(root, keep=None, older_than=None):
    """Remove the generations in ``root`` (but ``keep``) unused for ``older_than`` seconds.

    A generation's last use is the time its marker was last touched (each process using it
    touches it at start and when it writes a kernel module). A folder is first renamed away,
    atomically, so no process sees a partly removed generation; one still running on it
    recreates what it needs. Kernel modules of an older layout without generations (``anb_*.py``
    right in ``root``) go the same way. Errors are ignored: another process may be pruning
    too. Returns the names removed.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(root, "0.1.0-0123456789abcdef"))
    >>> prune(root, older_than=0)
    ['0.1.0-0123456789abcdef']
    >>> os.rmdir(root)
    """
    older_than = config.CACHE_PRUNE_AFTER if older_than is None else older_than
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    now = time.time()
    for name in names:
        path = os.path.join(root, name)
        try:
            unused = None if name == keep else _unused_since(name, path)
            if unused is not None and now - unused >= older_than:
                _remove(root, path)
                removed.append(name)
        except OSError as error:
            LOGGER.debug("not pruned: %s (%s)", path, error)
    if "__pycache__" in names:
        _prune_legacy_bytecode(os.path.join(root, "__pycache__"), now - older_than)
    if removed:
        LOGGER.debug("pruned %d old kernel cache entries from %s", len(removed), root)
    return removed


def _unused_since(name, path):
    """When the cache entry ``name`` was last used, or None for what is not the cache's."""
    if name.startswith(".trash-"):
        return float("-inf")  # a prune that was interrupted
    if GENERATION_NAME.match(name):
        marker = os.path.join(path, MARKER)
        return os.stat(marker if os.path.exists(marker) else path).st_mtime
    if _LEGACY_NAME.match(name):
        return os.stat(path).st_mtime
    return None


def _remove(root, path):
    if not os.path.isdir(path):
        os.remove(path)
        return
    trash = os.path.join(root, f".trash-{uuid.uuid4().hex[:12]}")
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _prune_legacy_bytecode(folder, before):
    """numba's and Python's cache of kernel modules of the older layout."""
    try:
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if name.startswith("anb_") and os.stat(path).st_mtime < before:
                os.remove(path)
        os.rmdir(folder)  # only if now empty
    except OSError:
        pass


def clear():
    """Remove every generation (this one too) from both cache roots; for ``make clean-cache``.

    A process still running on one recreates what it needs.
    """
    roots = [config.KERNEL_DIR]
    if numba.config.CACHE_DIR:
        roots.append(os.path.join(numba.config.CACHE_DIR, "autograd_nb"))
    with _lock:
        _started.clear()
    return [name for root in roots for name in prune(root, older_than=float("-inf"))]


# -- Generated kernel modules ------------------------------------------------------------------


def import_module(module_name, source):
    """Execute the generated module ``source`` as ``module_name`` and return it.

    From its file in this generation's folder, written once (to a temporary name, then
    renamed) and checked to hold ``source`` before every use; where that fails (a read-only or
    full folder), from memory, without numba's on-disk cache. The caller holds
    ``ops._kernels._loading``.
    """
    path = _kernel_file(module_name, source)
    if path is None:
        with _lock:
            _stats["in_memory"] += 1
        return _run_in_memory(module_name, source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        code = spec.loader.get_code(module_name)
    except Exception as error:  # a damaged ``__pycache__/*.pyc``: the source is known good
        report(f"cannot load the bytecode of {path} ({error!r})")
        code = compile(source, path, "exec")
    return _execute(module, code)


def _kernel_file(module_name, source):
    """The path of the module's file, holding ``source``; None where it cannot be had."""
    folder = generation_folder()
    path = os.path.join(folder, module_name + ".py")
    expected = source.encode()
    try:
        with open(path, "rb") as stream:
            found = stream.read()
    except FileNotFoundError:
        found = None
    except OSError as error:
        report(f"cannot read {path} ({error})")
        return None
    if found == expected:
        return path
    try:
        write_atomically(path, expected)
        _touch(folder)
    except OSError as error:
        report(f"cannot write {path} ({error})")
        return None
    if found is not None:
        _remove_bytecode(folder, module_name)
        report(f"{path} did not hold the kernel it is named for; rewritten")
    return path


def write_atomically(path, data):
    """Write ``data`` (bytes) to ``path``: to a temporary file beside it, then renamed, so
    that no reader ever sees a partial file. Raises OSError (the temporary file removed)."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), 0o644)  # (mkstemp's 0600 would hide it from others)
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise


def _remove_bytecode(folder, module_name):
    bytecode = os.path.join(folder, "__pycache__")
    try:
        for name in os.listdir(bytecode):
            if name.startswith(module_name + "."):
                os.remove(os.path.join(bytecode, name))
    except OSError:
        pass


def _run_in_memory(module_name, source):
    filename = f"<autograd_nb kernel {module_name}>"
    source = source.replace("cache=True", "cache=False")
    # For tracebacks and ``inspect.getsource`` (an entry module hashes its driver's module).
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    return _execute(module, compile(source, filename, "exec"))


def _execute(module, code):
    name = module.__name__
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:  # (a KeyboardInterrupt too) no half-executed module stays behind
        if sys.modules.get(name) is module:
            del sys.modules[name]
        raise
    return module


# -- Reporting ---------------------------------------------------------------------------------


def report(problem):
    """Note a cache ``problem``: the first in this process as a :class:`KernelCacheWarning`,
    the others at DEBUG level on the ``autograd_nb`` logger."""
    global _warned
    with _lock:
        first = not _warned
        _warned = True
        if len(_problems) < MAX_PROBLEMS:
            _problems.append(problem)
    if not first:
        LOGGER.debug("kernel cache: %s", problem)
        return
    warnings.warn(
        f"autograd_nb's kernel cache: {problem}. Compiling in memory where the cache cannot "
        f"serve (same results, slower start); further problems are logged at DEBUG level on "
        f"the 'autograd_nb' logger. The cache is in {config.KERNEL_DIR} "
        f"(AUTOGRAD_NB_CACHE_DIR); deleting it is safe.",
        KernelCacheWarning,
        stacklevel=2,
    )


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """What :func:`cache_info` reports.

    Attributes
    ----------
    generation : str
        This generation's key (``<version>-<hash>``).
    folder : str
        This generation's folder of generated kernel modules.
    numba_folder : str
        This generation's folder of numba's cache of autograd_nb's functions.
    size_bytes : int
        Bytes in those two folders.
    files : int
        Files in those two folders.
    other_generations : int
        Older generations still beside this one (pruned after ``config.CACHE_PRUNE_AFTER``).
    compiled : int
        autograd_nb's functions numba compiled in this process.
    compile_seconds : float
        Seconds those compilations took (nested ones counted once).
    loaded : int
        autograd_nb's functions loaded from numba's cache in this process.
    in_memory : int
        Kernel modules run from memory because the cache could not hold them.
    problems : tuple of str
        The cache problems met in this process (the first one was a warning).
    """

    generation: str
    folder: str
    numba_folder: str
    size_bytes: int
    files: int
    other_generations: int
    compiled: int
    compile_seconds: float
    loaded: int
    in_memory: int
    problems: tuple


def cache_info():
    """The kernel cache's folders, their size, and what this process compiled and loaded.

    Returns
    -------
    CacheInfo

    Examples
    --------
    >>> info = cache_info()
    >>> info.folder.endswith(info.generation) and info.size_bytes >= 0
    True
    """
    folder, numbers = generation_folder(), numba_folder()
    size = files = 0
    for top in sorted({folder, numbers}):
        if top != folder and top.startswith(folder + os.sep):
            continue  # inside the other one, counted there
        for parent, _, names in os.walk(top):
            for name in names:
                try:
                    size += os.stat(os.path.join(parent, name)).st_size
                    files += 1
                except OSError:
                    pass
    try:
        others = sum(1 for n in os.listdir(config.KERNEL_DIR)
                     if GENERATION_NAME.match(n) and n != generation_key())
    except OSError:
        others = 0
    with _lock:
        return CacheInfo(generation_key(), folder, numbers, size, files, others,
                         _stats["compiled"], round(_stats["compile_seconds"], 3),
                         _stats["loaded"], _stats["in_memory"], tuple(_problems))


# -- numba -------------------------------------------------------------------------------------


def numba_cache_path(py_file):
    """Where numba caches the functions of ``py_file``: a subfolder of :func:`numba_folder`
    for the package's files and the generated kernel modules, None for any other file."""
    path = os.path.realpath(py_file)
    if path.startswith(PACKAGE_DIR + os.sep):
        relative = os.path.relpath(os.path.dirname(path), os.path.dirname(PACKAGE_DIR))
        return os.path.join(numba_folder(), relative)
    folder, name = os.path.split(path)
    if name.startswith("anb_") and os.path.basename(folder) == generation_key():
        return os.path.join(numba_folder(), "kernels")
    return None


class _Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba's cache locator for autograd_nb's files (:func:`numba_cache_path`). Unlike
    numba's, it takes a folder it cannot write: a read-only cache still serves its entries
    (a failed write is reported by :class:`_GuardedCache`)."""

    def __init__(self, py_func, py_file, cache_path):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = cache_path

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        cache_path = numba_cache_path(py_file)
        return None if cache_path is None else cls(py_func, py_file, cache_path)


#: What runs once the process's first compiled function of autograd_nb is loaded or compiled
#: (:func:`after_first_kernel`).
_after_first_kernel = []


def after_first_kernel(callback):
    """Call ``callback()`` once, right after the first of autograd_nb's ``cache=True``
    functions is looked up in numba's cache in this process (found or not, so before it
    compiles where it was not).

    numba loads its typing and target contexts then (0.2-0.3 s, with the import of
    ``numba.np`` and ``scipy.linalg``: docs/benchmarking.rst, "Import time"), so that what
    ``callback`` loads afterwards costs only its own reading. The collector's compiled walk
    loads so, instead of at import (:func:`autograd_nb.collector.watch_tensors`).
    """
    with _lock:
        _after_first_kernel.append(callback)


def _run_after_first_kernel():
    with _lock:
        callbacks = list(_after_first_kernel)
        _after_first_kernel.clear()
    for callback in callbacks:
        callback()


#: ``[(symbol prefix as bytes, register)]``: the external symbols that compiled code calls by
#: name and that are registered with LLVM only once some code needs them (:func:`on_symbols`).
_deferred_symbols = []


def on_symbols(prefix, register):
    """Call ``register()`` (once) before a machine code that names a symbol starting with
    ``prefix`` is read from numba's cache of autograd_nb's functions.

    ``register`` puts those symbols in LLVM's table (``llvmlite.binding.add_symbol``); the code
    that compiles a call to them calls it too. So a module whose compiled functions call a
    library by symbol name (SciPy's Bessel functions) needs not import that library at
    import: it costs its import only in a process that runs such a function.
    """
    with _lock:
        _deferred_symbols.append((prefix.encode(), register))


def _register_symbols_in(data):
    """Run the :func:`on_symbols` registrations whose prefix ``data`` (a data file) holds."""
    for entry in list(_deferred_symbols):
        prefix, register = entry
        if prefix in data:
            register()
            with _lock:
                if entry in _deferred_symbols:
                    _deferred_symbols.remove(entry)


class _KeyedIndex(caching.IndexDataCacheFile):
    """numba's index and data files, with the data file named by its key (numba numbers
    them: two processes adding different signatures at once could both take number 1, and
    the index then name the other signature's machine code), and written before the index
    names it; the symbols a data file names are registered (:func:`on_symbols`) before its
    machine code is read."""

    def __init__(self, cache_path, filename_base, source_stamp):
        super().__init__(cache_path, filename_base, source_stamp)
        self._filename_base = filename_base

    def _load_data(self, name):
        with open(self._data_path(name), "rb") as stream:
            data = stream.read()
        if _deferred_symbols:
            _register_symbols_in(data)
        return pickle.loads(data)

    def save(self, key, data):
        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:20]
        data_name = f"{self._filename_base}.{digest}.nbc"
        self._save_data(data_name, data)
        with _locked(os.path.join(self._cache_path, INDEX_LOCK)):
            overloads = self._load_index()
            if overloads.get(key) != data_name:
                overloads[key] = data_name
                self._save_index(overloads)


@contextlib.contextmanager
def _locked(path):
    """An exclusive lock (``flock``) on the file ``path`` across processes, for an index's
    read-add-write (one lock per folder; the data file is written before, unlocked): two
    processes adding signatures of one function at once (pytest-xdist's workers, a
    cluster's) would otherwise each write the index they read plus their own entry, and the
    last write drop the other's (compiled again by the next process that needs it). Where
    the lock file cannot be had (read-only, no ``fcntl``), unlocked."""
    handle = None
    if fcntl is not None:
        try:
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:
            if handle is not None:
                os.close(handle)
            handle = None
    try:
        yield
    finally:
        if handle is not None:
            os.close(handle)  # (releases the lock)


class _GuardedCache(caching.FunctionCache):
    """numba's per-function cache; for autograd_nb's functions, one whose failures compile
    in memory (:func:`report`) instead of raising, with :class:`_KeyedIndex` files, and
    whose files are located at its first use, not as the function is made: numba's locating
    (paths, the source file's stamp, the signature) cost about 0.3 ms per function, 0.1 s
    of the package's import (docs/benchmarking.rst, "Import time")."""

    def __init__(self, py_func):
        self._py_func = py_func
        self._name = repr(py_func)
        self._function = f"{py_func.__module__}.{py_func.__qualname__}"
        self._enabled = True
        self._located = False
        if not _is_our_function(py_func):  # (numba's errors where it cannot cache: now)
            self._locate()

    def _locate(self):
        with _lock:
            if self._located:
                return
            enabled = self._enabled
            try:
                super().__init__(self._py_func)
            except Exception as error:  # (numba found no folder): the function compiles
                report(f"cannot locate numba's cache of {self._function} ({error!r})")
                self._ours, self._enabled, self._cache_path = False, False, None
                self._located = True
                return
            self._enabled = enabled
            self._ours = isinstance(self._impl.locator, _Locator)
            if self._ours:
                self._cache_file = _KeyedIndex(
                    self._cache_path, self._impl.filename_base, self._cache_file._source_stamp
                )
            self._located = True

    @property
    def cache_path(self):
        self._locate()
        return self._cache_path

    def flush(self):
        self._locate()
        if self._enabled:
            super().flush()

    def load_overload(self, sig, target_context):
        self._locate()
        if not self._ours:
            return super().load_overload(sig, target_context)
        try:
            result = super().load_overload(sig, target_context)
        except Exception as error:  # a truncated or garbled index or data file
            report(f"cannot read numba's cache of {self._function} in {self._cache_path} "
                   f"({error!r}); compiling it again")
            try:  # so that the entry is written anew
                os.remove(self._cache_file._index_path)
            except OSError:
                pass
            return None
        if result is not None:
            with _lock:
                _stats["loaded"] += 1
        if _after_first_kernel:
            _run_after_first_kernel()
        return result

    def save_overload(self, sig, data):
        self._locate()
        if not self._ours:
            return super().save_overload(sig, data)
        try:
            super().save_overload(sig, data)
        except Exception as error:  # read-only, full: the compiled function stays in memory
            report(f"cannot write numba's cache of {self._function} to {self._cache_path} "
                   f"({error!r})")


class _CompileListener(event.Listener):
    """Counts numba's compilations of autograd_nb's functions; logs a slow one at INFO."""

    def __init__(self):
        self._local = threading.local()
        self.registered = False

    def on_start(self, ev):
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append((time.perf_counter(), _is_ours(ev.data)))

    def on_end(self, ev):
        stack = self._local.__dict__.get("stack")
        if not stack:
            return
        start, ours = stack.pop()
        if not ours:
            return
        seconds = time.perf_counter() - start
        outermost = not any(o for _, o in stack)
        with _lock:
            _stats["compiled"] += 1
            if outermost:
                _stats["compile_seconds"] += seconds
        if outermost and seconds > config.COMPILE_LOG_SECONDS:
            _log_slow(ev.data, seconds)

    def notify(self, ev):
        try:
            super().notify(ev)
        except Exception:  # counting must never break a compilation
            LOGGER.debug("compile listener failed", exc_info=True)


def in_cache(function):
    """Whether numba's cache of this generation has an index of ``function`` (one of
    autograd_nb's ``cache=True`` dispatchers): its machine code would load from disk, not
    compile (the index names its signatures)."""
    found = getattr(function, "_cache", None)
    if not isinstance(found, _GuardedCache):
        return False
    found._locate()
    return found._ours and found._enabled and os.path.exists(found._cache_file._index_path)


def _is_ours(data):
    return _is_our_function(getattr(data.get("dispatcher") if data else None, "py_func", None))


def _is_our_function(function):
    module = getattr(function, "__module__", None) or ""
    return module.startswith(("autograd_nb.", "anb_"))


def _log_slow(data, seconds):
    function = data["dispatcher"].py_func
    module = function.__module__
    if module.startswith("anb_"):  # ``anb_<tag>_<digest>``: the tag names the op
        name = f"{module[4:].rsplit('_', 1)[0]}.{function.__name__}"
    else:
        name = f"{module.removeprefix('autograd_nb.')}.{function.__qualname__}"
    dtypes = []
    for arg in data.get("args") or ():
        dtype = str(getattr(arg, "dtype", arg))
        if dtype not in dtypes:
            dtypes.append(dtype)
    key = (name, tuple(dtypes))
    with _lock:
        if key in _logged:
            return
        _logged.add(key)
    LOGGER.info("compiled %s for %s in %.1f s (once: later processes load it from %s)",
                name, ", ".join(dtypes) or "no arguments", seconds, generation_folder())


_LISTENER = _CompileListener()


def _after_fork_in_child():
    global _lock
    _lock = threading.RLock()  # another thread of the parent may have held it


os.register_at_fork(after_in_child=_after_fork_in_child)


def install():
    """Put the locator, the guarded cache and the compile listener in place in numba (once;
    before the package's first ``cache=True`` function is made, which picks its locator)."""
    with _lock:
        impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
        if _Locator not in impl._locator_classes:
            impl._locator_classes.insert(0, _Locator)
        from numba.core import ccallback, dispatcher

        for module in (dispatcher, ccallback):
            if module.FunctionCache is caching.FunctionCache:
                module.FunctionCache = _GuardedCache
        if not _LISTENER.registered:
            event.register("numba:compile", _LISTENER)
            _LISTENER.registered = True


install()
