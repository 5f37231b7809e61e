"""``asv_bench/program_rows.py`` (a compiled step's tables timed by kind of instruction) and
``asv_bench/step_pieces.py`` (the pieces it pointed at, eager)."""

import os
import subprocess
import sys

import pytest

#: Fresh processes that build and replay a workload: ``make test-fast`` leaves them out.
pytestmark = pytest.mark.slow

_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "asv_bench", "program_rows.py")


def _run(*arguments):
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    done = subprocess.run([sys.executable, _PATH, *arguments], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _section(output, title):
    lines = output[output.index(title):].splitlines()
    rows = []
    for line in lines[2:]:
        if line.split()[0] == "sum":
            return rows
        count, _, _, driver = line.split(maxsplit=3)
        rows.append((int(count), driver))
    raise AssertionError(f"no sum line after {title!r}")


def test_each_table_is_timed_by_kind_with_every_instruction_counted():
    output = _run("chain_1000x16", "--rounds", "2")
    header = output[output.index("forward:"):].splitlines()[0]
    total = int(header.split(":")[1].split()[0])  # "forward: N instructions, ..."
    rows = _section(output, "forward:")
    assert sum(count for count, _ in rows) == total
    assert any(driver.startswith("fusion.group_driver") or "forward" in driver
               for _, driver in rows)
    backward = _section(output, "backward (of the first output)")
    assert backward and all(count > 0 for count, _ in backward)


def test_rows_alone_lists_every_instruction_in_order():
    output = _run("chain_1000x16", "--rows", "--rounds", "1")
    rows = _section(output, "forward:")
    assert all(count == 1 for count, _ in rows)
    positions = [int(driver.split()[0]) for _, driver in rows]
    assert positions == list(range(len(rows)))


def test_step_pieces_prints_a_median_per_engine_of_each_piece():
    script = os.path.join(os.path.dirname(_PATH), "step_pieces.py")
    done = subprocess.run([sys.executable, script, "--rounds", "2"], capture_output=True,
                          text=True, env=dict(os.environ, NUMBA_NUM_THREADS="1"), timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 5 + 10
    for line in lines[:5]:
        name, cells = line.split(": ", 1)
        assert name and cells.startswith("autograd_nb ")
        for cell in cells.split(", "):
            engine, value, unit = cell.split()
            assert engine in ("autograd_nb", "numpy", "torch") and unit == "us"
            assert float(value) > 0
    for line in lines[5:]:  # a replayed broadcast add: its row gathered, read by the add alone,
        # or read by a group whose blocks are the rows
        name, cells = line.split(": ", 1)
        assert name.startswith("replayed (z + b) * 1.5, z ")
        timed = [cell.rsplit(" ", 2) for cell in cells.split(", ")]
        assert [how for how, _, _ in timed] == ["gathered", "unfused", "rows in place"]
        assert all(float(value) > 0 and unit == "us" for _, value, unit in timed)
