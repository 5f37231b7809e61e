"""Bringing a benchmark to its steady state in ``setup``, before asv times it.

``asv run --quick`` runs ``setup`` once and times one call, and asv's full sampling (with a
``setup``, as here) runs ``setup`` again before every timed call: either way the timed call is
the one right after ``setup``, so whatever the first calls pay once must be paid there. For
autograd_nb that is more than the first call's compilation: the second backward of a graph
structure makes its template (``autograd_nb/engine/plan_cache.py``), and the third, the
template's first use, loads its compiled check (``engine/graph_reader.py``): 9 ms on a 50 us
step. The peers have such calls too (torch's first few backwards of a graph). See "Warm-up"
in ``docs/benchmarking.rst`` for the measurements.
"""

import time

#: Settled: the last SETTLED_CALLS calls within a factor SETTLED_SPREAD of each other. Five
#: calls, so a short plateau of slow calls (torch's 2nd to 5th) is not taken for the steady
#: state, and a settled window ends at the 5th call or later: after the template's first use.
SETTLED_CALLS = 5
SETTLED_SPREAD = 1.5
#: Where the times never settle (a loaded machine), stop after MAX_CALLS calls, or after
#: MAX_SECONDS spent past the first (compiling) call once MIN_CALLS calls are made: the
#: compiling one, the one making the template, its first use, and one after it (the first
#: call after the template's first use is still 3x the steady time on seed_outer).
MAX_CALLS = 50
MAX_SECONDS = 1.0
MIN_CALLS = 4


def warm_up(call, timer=time.perf_counter):
    """Call ``call`` (no arguments) until its time per call settles.

    Parameters
    ----------
    call : callable
        One iteration of the benchmark, as its ``time_*`` method runs it.
    timer : callable, optional
        The clock, in seconds.

    Returns
    -------
    list of float
        The seconds each call took, in order.

    Examples
    --------
    >>> times = warm_up(lambda: sum(range(1000)))
    >>> MIN_CALLS <= len(times) <= MAX_CALLS
    True
    """
    times = []
    budget_start = None
    while len(times) < MAX_CALLS:
        start = timer()
        call()
        times.append(timer() - start)
        if budget_start is None:
            budget_start = timer()
        if len(times) < MIN_CALLS:
            continue
        if _settled(times) or timer() - budget_start > MAX_SECONDS:
            break
    return times


def _settled(times):
    window = times[-SETTLED_CALLS:]
    return len(window) == SETTLED_CALLS and max(window) <= SETTLED_SPREAD * min(window)
