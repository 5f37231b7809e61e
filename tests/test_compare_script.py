"""``asv_bench/compare.py``'s merging of alternated runs (``--alternate``): medians over the
runs, the worst gradient check, and each turn's own speed-up; and its table of the
``anb.compile`` variants."""

import importlib.util
import os
import statistics
import warnings

import pytest

from autograd_nb.replay import CompileWarning

_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "asv_bench", "compare.py")


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("compare_script", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(threads, median, check=1e-16, check_ok=True, engine="autograd_nb"):
    return {"case": "jacobian_batched", "workload": "jacobian_batched", "engine": engine,
            "threads": threads, "median": median, "median_gc": 2 * median, "ratio": 1.0,
            "first_call": 0.5, "check": check, "check_ok": check_ok,
            "check_against": "closed form"}


def test_alternated_runs_merge_into_medians_and_the_worst_check(compare):
    runs = [
        [_row(1, 400e-6)], [_row(2, 250e-6)],
        [_row(1, 500e-6, check=1e-9, check_ok=False)], [_row(2, 300e-6)],
        [_row(1, 420e-6)], [_row(2, 240e-6)],
    ]
    merged = {row["threads"]: row for row in compare.merge_runs(runs)}
    assert merged[1]["median"] == pytest.approx(420e-6)
    assert merged[1]["median_gc"] == pytest.approx(840e-6)
    assert merged[2]["median"] == pytest.approx(250e-6)
    assert merged[1]["check"] == 1e-9 and not merged[1]["check_ok"]
    assert merged[2]["check_ok"]
    speedups = compare._turn_speedups(runs, ("jacobian_batched", "autograd_nb"), [1, 2])
    assert speedups == ["1.60x", "1.67x", "1.75x"]


def test_a_turn_without_the_engine_says_so(compare):
    runs = [[_row(1, 400e-6)], [_row(2, 200e-6, engine="torch")]]
    assert compare._turn_speedups(runs, ("jacobian_batched", "autograd_nb"), [1, 2]) == ["n/a"]


@pytest.mark.parametrize("argv", [["--alternate", "3"], ["--threads", "2", "--alternate", "3"],
                                  ["--threads", "1,2", "--alternate", "0"]])
def test_alternate_without_a_list_of_thread_counts_is_refused(compare, argv, capsys):
    with pytest.raises(SystemExit) as refused:
        compare.main(argv)
    assert refused.value.code == 2
    assert "--alternate K needs" in capsys.readouterr().err


def test_the_compiled_table_sets_each_compiled_variant_against_its_case(compare, capsys):
    rows = [
        _row("default", 5e-3),
        _row("default", 0.5e-3, engine="autograd_nb:compile")
        | {"trace": 40e-3, "first_replay": 2e-3},
        _row("default", 7e-3, engine="torch"),
        _row("default", 0.25e-3, engine="jax"),
    ]
    compare.print_compiled(rows)
    table = capsys.readouterr().out
    assert (
        "| `jacobian_batched` | autograd_nb:compile | 500 µs | 10 | 14 | 0.5 | 40 ms | 2 ms "
        "| 42 ms |" in table
    )
    assert table.count("| `jacobian_batched` |") == 1


def test_without_compiled_variants_there_is_no_compiled_table(compare, capsys):
    compare.print_compiled([_row("default", 5e-3)])
    assert capsys.readouterr().out == ""


def test_a_compiled_variant_that_ran_eagerly_says_so(compare, capsys):
    row = _row("default", 5e-3, engine="autograd_nb:compile")
    with pytest.warns(UserWarning, match="runs eagerly"):
        with compare.fallbacks_noted(row):
            warnings.warn("fn runs eagerly for this signature", CompileWarning, stacklevel=1)
    compare.print_compiled([row])
    assert "autograd_nb:compile (**ran eagerly**: fn runs eagerly" in capsys.readouterr().out


def test_paired_ratios_are_medians_of_the_ratios_within_rounds(compare):
    baseline = _row("default", 2.0) | {"rounds": [1.0, 2.0, 4.0], "rounds_gc": [1.0, 1.0, 1.0]}
    other = _row("default", 2.5, engine="jax") | {"rounds": [1.5, 2.5, 4.0],
                                                  "rounds_gc": [3.0, 2.0, 1.0]}
    # per round: 1.5, 1.25, 1.0 -> 1.25 (the medians' ratio would say 2.5 / 2 = 1.25 too) ...
    assert compare.paired_ratio(other, baseline) == pytest.approx(1.25)
    # ... and with the collector on: 3, 2, 1 -> 2 (the medians' ratio: 5 / 4)
    assert compare.paired_ratio(other, baseline, "median_gc") == pytest.approx(2.0)
    unpaired = _row("default", 3.0, engine="torch")
    assert compare.paired_ratio(unpaired, baseline) == pytest.approx(1.5)


def test_paired_timing_takes_turns_and_times_each_variant_per_round(compare, monkeypatch):
    calls = []
    now = [0.0]

    def sleeper(name, seconds):
        # a fake clock: a step "takes" its seconds exactly, whatever the machine's load
        def step():
            calls.append(name)
            now[0] += seconds
        return step

    monkeypatch.setattr(compare, "calls_per_round", lambda step, seconds: 1)
    rows = [_row("default", 0.0, engine=name) for name in ("autograd_nb", "jax", "torch")]
    steps = {"autograd_nb": sleeper("a", 2e-3), "jax": sleeper("j", 4e-3),
             "torch": sleeper("t", 2e-3)}
    compare.time_paired(rows, steps, rounds=3, seconds=4e-3, clock=lambda: now[0])
    # each round: every variant with the collector off, then on; the order rotated
    assert "".join(calls) == "aajjtt" "jjttaa" "ttaajj"
    for row in rows:
        assert len(row["rounds"]) == len(row["rounds_gc"]) == 3
        assert row["median"] == statistics.median(row["rounds"])
    assert compare.paired_ratio(rows[1], rows[0]) == pytest.approx(2.0)
    assert compare.paired_ratio(rows[2], rows[0]) == pytest.approx(1.0)


def test_paired_with_a_list_of_thread_counts_is_refused(compare, capsys):
    with pytest.raises(SystemExit) as refused:
        compare.main(["--threads", "1,2", "--paired", "3"])
    assert refused.value.code == 2
    assert "--paired R needs" in capsys.readouterr().err


@pytest.mark.parametrize("workload", ["bayes_logreg", "lotka_volterra_fit"])
def test_issue_44_workloads_match_their_numpy_references(compare, workload):
    """Our engine's steps (the compiled one too) against the NumPy/SciPy reference the
    script checks them with: the closed form of the logistic regression, the forward
    sensitivities of the Lotka-Volterra solve; within the tolerance compare.py applies."""
    from benchmarks.workloads import WORKLOADS, make_step

    spec = WORKLOADS[workload]
    reference = spec.closed_form()
    tolerance = spec.tolerance or compare.TOLERANCE[spec.dtype]
    for variant in [v for v in spec.variants if v.startswith("autograd_nb")]:
        step = make_step(workload, variant)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CompileWarning)
            for _ in range(2):  # a compiled step records, then replays
                assert compare.relative_difference(step(), reference) <= tolerance, variant
