"""``asv_bench/steady_steps.py``: one steady-state median per workload step named."""

import os
import subprocess
import sys

import pytest

from asv_bench.steady_steps import parse

#: A fresh process that builds and replays a workload: ``make test-fast`` leaves it out.
pytestmark = pytest.mark.slow

_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "asv_bench", "steady_steps.py")


def test_an_argument_names_a_workload_its_variant_and_its_parameters():
    assert parse("ode_rollout") == ("ode_rollout", "autograd_nb:compile", {})
    assert parse("mlp_train_step:autograd_nb:compile_step") == (
        "mlp_train_step", "autograd_nb:compile_step", {})
    assert parse("fastest_autograd:torch,n_ops=1000") == (
        "fastest_autograd", "torch", {"n_ops": 1000})


def test_each_step_named_prints_one_median():
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, _PATH, "--rounds", "3", "chain_1000x16", "chain_1000x16:autograd_nb"],
        capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()[1:]
    assert [line.split(":")[0] for line in lines] == ["chain_1000x16", "chain_1000x16"]
    for line in lines:
        assert float(line.split()[-2]) > 0 and line.endswith(" us")
