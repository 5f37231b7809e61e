"""``python -m autograd_nb warmup``: sample calls from the registry, the command line, and a
fresh process that then loads what it compiled."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from autograd_nb import warmup
from autograd_nb.ops.registry import FUNCTIONS, REGISTRY

PUBLIC = sorted(name for name in FUNCTIONS if not name.startswith("_"))


def test_sample_calls_come_from_the_registry():
    (small, large) = warmup.sample_calls("arcsin", "float32")
    arrays, _ = small
    low, high = REGISTRY["arcsin"].domain
    assert arrays[0].dtype == np.float32 and arrays[0].shape == warmup.SHAPES[0]
    assert low <= arrays[0].min() and arrays[0].max() <= high
    assert large[0][0].shape == warmup.SHAPES[1]
    (arrays, _), _ = warmup.sample_calls("linalg.cholesky", "float64")
    assert np.all(np.linalg.eigvalsh(arrays[0]) > 0)  # positive definite
    with pytest.raises(LookupError):
        warmup.sample_calls("r_", "float64")  # indexed, not called


def test_most_public_functions_have_a_sample_call():
    missing = []
    for name in PUBLIC:
        try:
            warmup.sample_calls(name, "float64")
        except LookupError:
            missing.append(name)
    assert len(missing) < len(PUBLIC) // 4, missing


def test_warm_reports_what_it_skipped():
    report = warmup.warm(["negative", "c_"], ("float64",), progress=False)
    assert report["warmed"] == ["negative"]
    assert list(report["skipped"]) == ["c_"] and report["failed"] == {}


def test_the_command_line_refuses_unknown_names_and_dtypes(capsys):
    with pytest.raises(SystemExit) as exit_:
        warmup.command_line(["warmup", "--ops", "tanh,no_such_function"])
    assert exit_.value.code == 2
    assert "no_such_function" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        warmup.command_line(["warmup", "--dtypes", "float16"])
    assert "float16" in capsys.readouterr().err


CHECK = r"""
import json
from numba.core import event
import numpy as np
import autograd_nb as anb

compiled = []

class Compiled(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        dispatcher = ev.data["dispatcher"]
        if type(dispatcher._cache).__name__ != "NullCache":  # (uncached ones compile anyway)
            compiled.append(dispatcher.py_func.__qualname__)

event.register("numba:compile", Compiled())
x = anb.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
for _ in range(3):
    (g,) = anb.grad(anb.tanh(x).sum(), x)
# (warmup's compiled a - 0.5 * b: the replay's scaled-add loop, its multiply, subtract, sum)
a, b = (anb.tensor(np.ones((64, 96), dtype=np.float32), requires_grad=True) for _ in "ab")
descent = anb.compile(lambda a, b: anb.sum(a - 0.5 * b))
for _ in range(3):
    anb.grad(descent(a, b), [a, b])
print(json.dumps({"compiled": compiled, "generation": anb.config.cache_info().generation}))
"""


@pytest.mark.slow  # fresh processes with an empty cache
def test_warmup_fills_the_cache_that_a_fresh_process_then_loads(tmp_path):
    env = dict(os.environ, AUTOGRAD_NB_CACHE_DIR=str(tmp_path / "kernels"))
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "autograd_nb", "warmup", "--ops", "tanh", "--dtypes", "float32"],
        env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "warmup: 100%" in done.stderr  # tqdm's bar
    assert "warmed 1 of 1 functions for float32" in done.stdout
    generation = done.stdout.split("kernel cache: ")[1].split()[0]
    check = subprocess.run([sys.executable, "-c", CHECK], env=env, cwd=tempfile.gettempdir(),
                           capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stderr
    result = json.loads(check.stdout.splitlines()[-1])
    if not generation.endswith(result["generation"]):
        pytest.skip("the package's sources changed during the test")
    assert result["compiled"] == []
