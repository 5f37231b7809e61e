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


# -- the roofline column (asv_bench/roofline.py) -------------------------------------------------


def test_the_models_count_the_bytes_and_flops_a_minimal_step_moves(compare):
    import roofline

    model_of = roofline.model_of
    # seed_outer: y written and the grad_outputs read (n x n each), x read and its gradient
    # written (n each).
    outer = model_of("seed_outer", {"n": 2000, "dtype": "float64"})
    assert outer.kind == "bytes" and outer.amount == (2 * 2000**2 + 2 * 2000) * 8
    assert model_of("seed_outer", {"n": 2000, "dtype": "float32"}).amount == outer.amount / 2
    # outer_xy: the same, with two vectors read and two gradients written.
    pair = model_of("outer_xy", {"n": 2000, "dtype": "float64"})
    assert pair.kind == "bytes" and pair.amount == (2 * 2000**2 + 4 * 2000) * 8
    chain = model_of("elementwise_chain", {"size": 1_000_000, "dtype": "float64"})
    assert chain.kind == "bytes" and chain.amount == 2 * 1_000_000 * 8
    matmul = model_of("matmul_tanh_256", {})
    assert matmul.kind == "flops" and matmul.amount == 6 * 256**3
    assert matmul.gemm == (256, 256, 256, "float64")
    mlp = model_of("mlp_train_step", {})
    forward = 2 * 256 * (784 * 512 + 512 * 512 + 512 * 10)
    assert mlp.amount == 2 * forward + 2 * 256 * (512 * 512 + 512 * 10)
    # Cases that fit in the caches, and workloads without a model, have no entry.
    assert model_of("seed_outer", {"n": 100, "dtype": "float64"}) is None
    assert model_of("elementwise_chain", {"size": 10_000, "dtype": "float64"}) is None
    assert model_of("fastest_autograd", {"n_ops": 1000}) is None


class _Ceilings:
    bandwidth, gemm_rate = 20e9, 50e9

    def for_model(self, model):
        return self.bandwidth if model.kind == "bytes" else self.gemm_rate


def test_rows_get_the_rate_and_the_floor_ratio(compare):
    rows = [_row(1, 4e-3, engine="autograd_nb"), _row(1, 8e-3, engine="torch"),
            {"engine": "jax", "skipped": "not installed"}]
    compare.add_roofline(rows, "seed_outer", {"n": 2000, "dtype": "float64"}, _Ceilings())
    amount = (2 * 2000**2 + 2 * 2000) * 8
    ours = rows[0]["roofline"]
    assert ours["achieved"] == pytest.approx(amount / 4e-3)
    assert ours["floor_ratio"] == pytest.approx(4e-3 / (amount / 20e9))
    assert rows[1]["roofline"]["floor_ratio"] == pytest.approx(2 * ours["floor_ratio"])
    assert "roofline" not in rows[2]
    compare.add_roofline(rows[:1], "matmul_tanh_256", {}, _Ceilings())
    assert rows[0]["roofline"]["achieved"] == pytest.approx(6 * 256**3 / 4e-3)


def test_the_table_has_the_roofline_column(compare, capsys):
    rows = [_row(1, 4e-3), _row(1, 1e-3, engine="torch")]
    compare.add_roofline(rows[:1], "seed_outer", {"n": 2000, "dtype": "float64"}, _Ceilings())
    compare.print_table(rows)
    lines = capsys.readouterr().out.splitlines()
    assert "roofline" in lines[0]
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    assert compare.format_row({**rows[0], "skipped": "no"}).count("|") == lines[0].count("|")
    assert lines[2].endswith("64 MB at 16 GB/s: 1.25x the floor |")
    assert lines[3].endswith("|  |")  # (no model entry)


def test_the_ceilings_are_measured_and_printed(compare):
    import roofline

    assert roofline.copy_bandwidth(nbytes=1 << 20, rounds=2) > 1e8
    assert roofline.gemm_rate(32, 32, 32, "float64", rounds=2) > 1e6
    ceilings = roofline.Ceilings()
    ceilings.bandwidth = 20e9
    ceilings.gemm[(256, 256, 256, "float64")] = 50e9
    assert ceilings.lines() == [
        "Copy bandwidth: 20.0 GB/s (NumPy copy of 128 MiB, best of 5, bytes read + written)",
        "BLAS GEMM: 50.0 GFLOP/s (256x256 @ 256x256 float64, NumPy's matmul, best of 5)",
    ]


@pytest.mark.parametrize(
    "intel, core, avx512, own",
    [
        (False, "Zen", False, False),  # AMD Zen 3 (this project's VM: no AVX-512 exposed)
        (False, "Haswell", True, True),  # Zen 4's AVX-512, OpenBLAS on AVX2 kernels
        (False, "Cooperlake", True, False),  # Zen 4 with OpenBLAS's AVX-512 kernels
        (True, "SkylakeX", True, False),  # Intel with AVX-512, and so is its BLAS
        (True, "Haswell", True, True),  # Intel, OPENBLAS_CORETYPE=Haswell
        (True, None, True, False),  # Intel, MKL (not OpenBLAS): MKL's own kernels
    ],
)
def test_the_kernel_choice_line_says_what_was_taken(compare, monkeypatch, intel, core, avx512,
                                                    own):
    from autograd_nb import config
    from autograd_nb.ops import _blas

    monkeypatch.setattr(config, "GEMM_KERNEL", "auto")
    monkeypatch.setattr(_blas, "_AUTO", None)
    monkeypatch.setattr(_blas, "_intel_cpu", lambda: intel)
    monkeypatch.setattr(_blas, "_blas_core", lambda: core)
    monkeypatch.setattr(_blas, "_compiles_for_avx512", lambda: avx512)
    line = compare.kernel_choices()
    taken = "the own AVX-512 GEMM" if own else "BLAS"
    assert line.startswith(f"Kernel choices: products by {taken} (")
    assert f"BLAS core {core or 'not OpenBLAS'}" in line
    assert ("with AVX-512" if avx512 else "without AVX-512") in line
    assert f"CPU vendor {'Intel' if intel else 'not Intel'}" in line


def test_importing_the_script_leaves_numpy_to_limit_threads():
    # ``--threads`` sets the thread caps before NumPy loads OpenBLAS: the script's own
    # imports must not load NumPy (an OpenBLAS of two threads pinned to one CPU ran a 256 x 256
    # product 60 times slower).
    import subprocess
    import sys

    code = (f"import runpy, sys; runpy.run_path({_PATH!r}, run_name='compare_script'); "
            "print('numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
