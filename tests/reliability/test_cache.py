"""The kernel cache (autograd_nb/cache.py) cannot go stale and cannot break the program.

* Stale: the cache's folders are keyed by the package's sources (and the numba, llvmlite,
  NumPy and Python versions), so editing a function that a cached function of another file
  calls gives new machine code. numba alone keys a function by its own file, and keeps the old.
* Broken: a folder that cannot be written (read-only, full, a file in the way) or damaged
  files (truncated index and data files, garbage in a generated module or its bytecode) give
  one KernelCacheWarning and the right results, compiled in memory; damaged files are
  rewritten. Processes filling one empty cache at once all succeed.

The end-to-end tests run fresh processes, each with its own ``AUTOGRAD_NB_CACHE_DIR``.
"""

import errno
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
import warnings

import numpy as np
import pytest
from numba.core import caching

from autograd_nb import cache, config

PACKAGE = os.path.dirname(os.path.abspath(cache.__file__))
TIMEOUT = 600

# The tanh * sin gradient (eager kernels and the compiled executor's entries), and with
# "more" a function the first run did not use.
SCRIPT = r"""
import dataclasses, errno, json, os, sys, warnings

read_only = os.environ.get("TEST_READ_ONLY")
if read_only:
    # A read-only file system, also for root: refuse every write under the folder.
    WRITES = ("os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.utime",
              "os.chmod", "shutil.rmtree")

    def refuse(event, args):
        if not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        if not os.fsdecode(args[0]).startswith(read_only):
            return
        writing = event in WRITES
        if event == "open":
            mode, flags = args[1], args[2] or 0
            writing = any(c in (mode or "") for c in "wax+") or bool(
                flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if writing:
            raise PermissionError(errno.EROFS, "Read-only file system", os.fsdecode(args[0]))

    sys.addaudithook(refuse)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import numpy as np
    import autograd_nb as anb
    from autograd_nb import cache

    x = anb.tensor(np.linspace(-1.0, 1.0, 5), requires_grad=True)
    for _ in range(3):  # the eager walk, then the compiled executor's template
        x.grad = None
        (anb.tanh(x) * anb.sin(x)).sum().backward()
    xv = x.numpy()
    expected = (1 - np.tanh(xv) ** 2) * np.sin(xv) + np.tanh(xv) * np.cos(xv)
    result = {"grad_ok": bool(np.allclose(x.grad.numpy(), expected, rtol=1e-12, atol=0))}
    if "more" in sys.argv:
        (g,) = anb.grad(anb.cosh(x).sum(), x)
        result["more_ok"] = bool(np.allclose(g.numpy(), np.sinh(xv), rtol=1e-12, atol=0))
result["warnings"] = [str(w.message) for w in caught
                      if issubclass(w.category, cache.KernelCacheWarning)]
result["info"] = dataclasses.asdict(cache.cache_info())
print(json.dumps(result))
"""


def run_script(root, *args, read_only=None, extra_env=None, start=True):
    env = dict(os.environ, AUTOGRAD_NB_CACHE_DIR=str(root))
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("TEST_READ_ONLY", None)
    if read_only:
        env["TEST_READ_ONLY"] = str(read_only)
    env.update(extra_env or {})
    # (Run outside the repository: ``-c`` puts the working folder first on sys.path.)
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, *args], env=env, cwd=tempfile.gettempdir(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return process if not start else finish(process)


def finish(process):
    stdout, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, stderr
    result = json.loads(stdout.splitlines()[-1])
    assert result["grad_ok"] and result.get("more_ok", True), result
    return result


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory):
    """A kernel cache that two processes filled at once, from empty: ``(root, results)``
    (the tests copy it before changing it)."""
    root = tmp_path_factory.mktemp("filled") / "kernels"
    processes = [run_script(root, start=False) for _ in range(2)]
    return root, [finish(p) for p in processes]


def loads_from(root, results, **kwargs):
    """A run on ``root`` that must load what ``results``' processes compiled (unless the
    package's sources changed meanwhile: another generation, another cache)."""
    result = run_script(root, **kwargs)
    if result["info"]["generation"] != results[0]["info"]["generation"]:
        pytest.skip("the package's sources changed during the test")
    assert result["info"]["loaded"] > 0
    return result


def copy_of(filled, tmp_path):
    root = tmp_path / "kernels"
    shutil.copytree(filled[0], root)
    return root


# -- Stale -------------------------------------------------------------------------------------


def test_the_generation_key_changes_with_any_source_and_the_versions(monkeypatch):
    key = cache.generation_key()
    assert cache.generation_key.__wrapped__() == key
    version = key.rsplit("-", 1)[0]
    assert version == __import__("autograd_nb").__version__
    sources = list(cache._package_sources())
    assert {"__init__.py", "cache.py", "ops/_kernels.py", "ops/_scalar.py"} <= {
        relative for relative, _ in sources
    }
    edited = [(r, d + b"\n# an edit\n" if r == "ops/_scalar.py" else d) for r, d in sources]
    monkeypatch.setattr(cache, "_package_sources", lambda: iter(edited))
    assert cache.generation_key.__wrapped__() != key
    monkeypatch.setattr(cache, "_package_sources", lambda: iter(sources))
    monkeypatch.setattr(cache.numba, "__version__", "0.0.0")
    assert cache.generation_key.__wrapped__() != key


def test_the_source_hash_takes_a_few_milliseconds():
    start = time.perf_counter()
    cache.generation_key.__wrapped__()
    assert time.perf_counter() - start < 0.5  # ~1 ms here (docs/kernel-cache.rst)


def test_an_edit_moves_generated_modules_to_a_new_generation(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "KERNEL_DIR", str(tmp_path))
    key = cache.generation_key()
    source = "from numba import njit\n\n@njit(cache=True)\ndef f(x):\n    return x + 1.0\n"
    name = f"anb_probe_{uuid.uuid4().hex[:16]}"
    first = cache.import_module(name, source)
    assert os.path.dirname(first.__file__) == str(tmp_path / key)
    assert first.f(1.0) == 2.0
    edited = "0.1.0-" + "f" * 16
    monkeypatch.setattr(cache, "generation_key", lambda: edited)
    second = cache.import_module(name + "_2", source.replace("1.0", "2.0"))
    assert os.path.dirname(second.__file__) == str(tmp_path / edited)
    assert second.f(1.0) == 3.0
    # The old generation stays for its grace period, then goes.
    assert cache.prune(str(tmp_path), keep=edited) == []
    removed = cache.prune(str(tmp_path), keep=edited, older_than=0)
    assert removed == [key]
    assert sorted(os.listdir(tmp_path)) == [edited]


def test_prune_removes_old_generations_and_the_old_layout_only(tmp_path):
    old, recent, current = "0.1.0-" + "a" * 16, "0.1.0-" + "b" * 16, "0.2.0-" + "c" * 16
    for name in (old, recent, current):
        os.makedirs(tmp_path / name)
        (tmp_path / name / cache.MARKER).touch()
    for name in ("anb_tanh_0123456789abcdef.py", "notes.txt", "tmpab12.tmp"):
        (tmp_path / name).touch()
    (tmp_path / "mine").mkdir()
    long_ago = time.time() - 10 * config.CACHE_PRUNE_AFTER
    for name in (old, current, "anb_tanh_0123456789abcdef.py", "notes.txt", "tmpab12.tmp"):
        target = tmp_path / name / cache.MARKER if name[0].isdigit() else tmp_path / name
        os.utime(target, (long_ago, long_ago))
    removed = cache.prune(str(tmp_path), keep=current)
    assert sorted(removed) == sorted([old, "anb_tanh_0123456789abcdef.py", "tmpab12.tmp"])
    assert sorted(os.listdir(tmp_path)) == sorted([recent, current, "notes.txt", "mine"])


@pytest.mark.slow  # fresh processes with empty caches
def test_an_edited_callee_in_another_file_is_not_linked_stale(tmp_path):
    """A cached function calls an ``@njit`` function of another file, which is then edited.
    numba alone keeps the caller's machine code, with the old callee in it; in autograd_nb's
    package the edit starts a new generation, and the new callee is used."""
    callee = "from numba import njit\n\n\n@njit(cache=True)\ndef value():\n    return {}\n"
    caller = textwrap.dedent(
        """
        from numba import njit

        from {package}_probe_callee import value


        @njit(cache=True)
        def call():
            return value()
        """
    )
    script = "import {module} as m; print(m.call())"

    def run(folder, module, env):
        done = subprocess.run([sys.executable, "-c", script.format(module=module)],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert done.returncode == 0, done.stderr
        return float(done.stdout.split()[-1])

    # numba alone: two plain modules, cached in NUMBA_CACHE_DIR.
    plain = tmp_path / "plain"
    plain.mkdir()
    env = dict(os.environ, PYTHONPATH=str(plain), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    (plain / "_probe_callee.py").write_text(callee.format("1.0"))
    (plain / "_probe_caller.py").write_text(caller.format(package=""))
    assert run(plain, "_probe_caller", env) == 1.0
    (plain / "_probe_callee.py").write_text(callee.format("2.0"))
    assert run(plain, "_probe_caller", env) == 1.0  # stale: numba's known limitation

    # The same two modules inside a copy of the package.
    copy = tmp_path / "copy"
    package = copy / "autograd_nb"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "_probe_callee.py").write_text(callee.format("1.0"))
    (package / "_probe_caller.py").write_text(caller.format(package="autograd_nb."))
    env = dict(os.environ, PYTHONPATH=str(copy), AUTOGRAD_NB_CACHE_DIR=str(tmp_path / "k"))
    env.pop("NUMBA_CACHE_DIR", None)
    assert run(copy, "autograd_nb._probe_caller", env) == 1.0
    (package / "_probe_callee.py").write_text(callee.format("2.0"))
    assert run(copy, "autograd_nb._probe_caller", env) == 2.0
    assert len(os.listdir(tmp_path / "k")) == 2  # the edit's generation beside the first


# -- Broken ------------------------------------------------------------------------------------


@pytest.fixture()
def fresh_warning(monkeypatch, tmp_path):
    """This process's once-only cache warning, unspent; the kernel folder a tmp one."""
    monkeypatch.setattr(cache, "_warned", False)
    monkeypatch.setattr(cache, "_problems", [])
    monkeypatch.setattr(config, "KERNEL_DIR", str(tmp_path))


PROBE = "from numba import njit\n\n@njit(cache=True)\ndef f(x):\n    return x * 3.0\n"


def test_a_full_folder_runs_the_module_from_memory_with_one_warning(fresh_warning, monkeypatch):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(cache, "write_atomically", full)
    with pytest.warns(cache.KernelCacheWarning, match="No space left") as caught:
        first = cache.import_module(f"anb_probe_{uuid.uuid4().hex[:16]}", PROBE)
        second = cache.import_module(f"anb_probe_{uuid.uuid4().hex[:16]}", PROBE)
    assert len(caught) == 1
    assert first.f(2.0) == second.f(2.0) == 6.0
    assert first.__file__.startswith("<autograd_nb kernel")
    assert not first.f._cache.cache_path  # numba without its disk cache
    assert len(cache.cache_info().problems) == 2


def test_garbage_in_a_generated_module_is_rewritten(fresh_warning, tmp_path):
    name = f"anb_probe_{uuid.uuid4().hex[:16]}"
    folder = tmp_path / cache.generation_key()
    folder.mkdir()
    (folder / f"{name}.py").write_bytes(b"\x00garbage(((")
    with pytest.warns(cache.KernelCacheWarning, match="did not hold"):
        module = cache.import_module(name, PROBE)
    assert module.f(2.0) == 6.0
    assert (folder / f"{name}.py").read_text() == PROBE


def test_damaged_numba_cache_files_are_compiled_again(fresh_warning, tmp_path):
    """Truncated index, garbage data: one warning, a compilation, and the entry rewritten."""
    name = f"anb_probe_{uuid.uuid4().hex[:16]}"
    assert cache.import_module(name, PROBE).f(2.0) == 6.0
    numba_folder = os.path.join(cache.numba_folder(), "kernels")
    index = [n for n in os.listdir(numba_folder) if n.startswith(name) and n.endswith(".nbi")]
    data = [n for n in os.listdir(numba_folder) if n.startswith(name) and n.endswith(".nbc")]
    assert len(index) == len(data) == 1
    for damage in ("index", "data"):
        target = os.path.join(numba_folder, index[0] if damage == "index" else data[0])
        with open(target, "r+b") as stream:
            if damage == "index":
                stream.truncate(os.path.getsize(target) // 2)
            else:
                stream.write(b"garbage" * 20)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = cache.import_module(name, PROBE)
            assert module.f(2.0) == 6.0
        assert module.f.stats.cache_misses  # compiled again
        assert len([w for w in caught if w.category is cache.KernelCacheWarning]) <= 1
    assert any("cannot read numba's cache" in p for p in cache.cache_info().problems)
    with open(os.path.join(numba_folder, index[0]), "rb") as stream:
        pickle.load(stream)  # the index was written anew


def test_keyed_data_files_never_hold_another_signature(tmp_path):
    """Two processes add different signatures of one function at once, both having read the
    index before either wrote it: the second pauses before it writes its data file, the
    first saves, the second goes on. numba numbers data files, so both took number 1, and
    the index names the other signature's machine code; keyed files cannot mix them up."""
    stamp = ("stamp",)

    def race(kind):
        folder = tmp_path / kind.__name__
        folder.mkdir()
        first, second = (kind(str(folder), "f-1.py311", stamp) for _ in range(2))
        first._load_index = second._load_index = lambda: {}
        paused, first_done = threading.Event(), threading.Event()
        save_data = second._save_data

        def pausing(name, data):
            paused.set()
            first_done.wait(TIMEOUT)
            save_data(name, data)

        second._save_data = pausing
        thread = threading.Thread(target=second.save, args=("key 1", "machine code 1"))
        thread.start()
        assert paused.wait(TIMEOUT)
        first.save("key 2", "machine code 2")
        first_done.set()
        thread.join(TIMEOUT)
        reader = kind(str(folder), "f-1.py311", stamp)
        return reader.load("key 1"), reader.load("key 2")

    assert race(caching.IndexDataCacheFile) == (None, "machine code 1")  # key 2: wrong code
    one, two = race(cache._KeyedIndex)  # at worst a miss: compiled again
    assert one in (None, "machine code 1") and two in (None, "machine code 2")


def test_two_processes_adding_signatures_at_once_keep_both_in_the_index(tmp_path):
    """pytest-xdist's workers (``make test``) or a cluster's add signatures of one function
    at once: the second reads the index, then pauses before it writes it, while the first
    adds its own. Without a lock the second's write drops the first's entry; under the
    index's lock the first waits, reads the second's entry and keeps both."""
    stamp = ("stamp",)
    first, second = (cache._KeyedIndex(str(tmp_path), "f-1.py311", stamp) for _ in range(2))
    paused, first_done = threading.Event(), threading.Event()
    load_index = second._load_index

    def pausing():
        overloads = load_index()
        paused.set()
        first_done.wait(1.0)  # (under the lock the first cannot finish: it waits for it)
        return overloads

    second._load_index = pausing

    def save_first():
        first.save("key 1", "machine code 1")
        first_done.set()

    thread = threading.Thread(target=second.save, args=("key 2", "machine code 2"))
    thread.start()
    assert paused.wait(TIMEOUT)
    other = threading.Thread(target=save_first)
    other.start()
    thread.join(TIMEOUT)
    other.join(TIMEOUT)
    reader = cache._KeyedIndex(str(tmp_path), "f-1.py311", stamp)
    assert (reader.load("key 1"), reader.load("key 2")) == ("machine code 1", "machine code 2")


def test_a_slow_compilation_is_logged_once_at_info(fresh_warning, monkeypatch, caplog):
    monkeypatch.setattr(config, "COMPILE_LOG_SECONDS", 0.0)
    module = cache.import_module(f"anb_probe_{uuid.uuid4().hex[:16]}", PROBE)
    before = cache.cache_info()
    with caplog.at_level("INFO", logger="autograd_nb"):
        module.f(np.float32(1.0))
        module.f(np.float32(2.0))  # compiled already
        module.f(1.0)
    logged = [r.getMessage() for r in caplog.records if r.name == "autograd_nb"]
    assert len(logged) == 2, logged
    assert logged[0].startswith("compiled probe.f for float32 in")
    assert logged[1].startswith("compiled probe.f for float64 in")
    after = cache.cache_info()
    assert after.compiled == before.compiled + 2
    assert after.compile_seconds > before.compile_seconds
    assert after.folder == os.path.join(config.KERNEL_DIR, after.generation)
    assert after.size_bytes > 0 and after.files > 0


@pytest.mark.slow  # fresh processes with one empty cache
def test_processes_filling_one_empty_cache_at_once_all_succeed(filled_cache):
    root, results = filled_cache
    assert all(r["warnings"] == [] and r["info"]["problems"] == [] for r in results), results
    leftovers = [n for _, _, names in os.walk(root) for n in names
                 if n.endswith(".tmp") or ".tmp." in n]
    assert leftovers == []
    assert loads_from(root, results)["warnings"] == []


@pytest.mark.slow  # fresh processes
def test_an_unwritable_folder_gives_one_warning_and_right_results(tmp_path):
    (tmp_path / "a file").write_text("in the way of the cache folder")
    result = run_script(tmp_path / "a file" / "kernels")
    assert len(result["warnings"]) == 1, result["warnings"]
    assert "kernel cache" in result["warnings"][0]
    assert result["info"]["in_memory"] > 0


@pytest.mark.slow  # fresh processes
def test_a_read_only_cache_serves_what_it_has_and_warns_once(filled_cache, tmp_path):
    root = copy_of(filled_cache, tmp_path)
    result = loads_from(root, filled_cache[1], read_only=root)
    assert result["warnings"] == []  # everything it needs is there
    result = run_script(root, "more", read_only=root)  # cosh: not in the cache
    assert len(result["warnings"]) == 1, result["warnings"]
    assert "Read-only file system" in result["warnings"][0]


@pytest.mark.slow  # fresh processes
def test_damaged_cache_files_give_one_warning_then_are_rewritten(filled_cache, tmp_path):
    root = copy_of(filled_cache, tmp_path)
    damaged = {"nbi": 0, "nbc": 0, "py": 0, "pyc": 0}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            kind = name.rsplit(".", 1)[-1]
            if kind == "nbi":
                with open(path, "r+b") as stream:
                    stream.truncate(os.path.getsize(path) // 2)
            elif kind == "nbc" and damaged["nbc"] % 2:
                with open(path, "r+b") as stream:
                    stream.truncate(os.path.getsize(path) // 3)
            elif kind == "nbc" or (kind == "py" and "tanh" in name) or kind == "pyc":
                with open(path, "wb") as stream:
                    stream.write(os.urandom(64))
            else:
                continue
            damaged[kind] += 1
    assert damaged["nbi"] and damaged["nbc"] and damaged["py"]
    result = run_script(root)
    if result["info"]["generation"] != filled_cache[1][0]["info"]["generation"]:
        pytest.skip("the package's sources changed during the test")
    assert len(result["warnings"]) == 1, result["warnings"]
    problems = result["info"]["problems"]
    assert any("cannot read numba's cache" in p for p in problems), problems
    assert any("did not hold the kernel" in p for p in problems), problems
    result = loads_from(root, filled_cache[1])  # rewritten
    assert result["warnings"] == [] and result["info"]["problems"] == []
