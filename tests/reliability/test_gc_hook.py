"""The garbage collector's hook (autograd_nb.collector) runs nothing of numba's.

A collection can start at any allocation: while numba compiles, loads a cached function or
imports its own modules. A hook that called into numba's dispatcher there would compile (or
load) inside the compile, and numba, half imported, raised through the hook:
``Exception ignored in: <function _on_collection ...> ImportError: cannot import name
'_make_constant_bytes' from partially initialized module 'numba.cpython.charseq'``.
"""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # fresh processes with empty caches

SCRIPT = r"""
import gc, sys
gc.set_threshold(int(sys.argv[1]), 1000, 1000)  # collections at once, or every n allocations
import numpy as np
import autograd_nb as anb

x = anb.tensor(np.linspace(-1.0, 1.0, 5), requires_grad=True)
(anb.tanh(x) * anb.sin(x)).sum().backward()  # kernels new to this kernel folder
xv = x.numpy()
expected = (1 - np.tanh(xv) ** 2) * np.sin(xv) + np.tanh(xv) * np.cos(xv)
assert np.allclose(x.grad.numpy(), expected, rtol=1e-12, atol=0)
"""


def test_collections_while_numba_compiles_and_loads_print_nothing(tmp_path):
    """In a fresh numba cache, the first process compiles the package's functions, the
    others load them from it; every one compiles the kernels into a fresh kernel folder.
    Collections start at the first allocations, or after every 1,200 to 3,000 (which put the
    first one after the compiled walk's loading began, inside numba's imports)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    failed = {}
    for run, threshold in enumerate([1, 1200, 1800, 2400, 3000]):
        env["AUTOGRAD_NB_CACHE_DIR"] = str(tmp_path / f"kernels{run}")
        # (Run outside the repository: ``-c`` puts the working folder first on sys.path.)
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(threshold)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode or done.stderr:
            failed[threshold] = (done.returncode, done.stderr)
    assert not failed, failed
