"""asv benchmarks of autograd_nb, with the peer engines (PyTorch eager, JAX jit, HIPS autograd)
side by side on the same computations. The computations themselves live in ``workloads.py``,
shared with ``asv_bench/compare.py``."""

import os

# The benchmarks time the compiled steady state, their warm-up outside the timing: tier 0
# (autograd_nb/tiering.py: NumPy while a background process compiles) would serve the first
# timed calls of a process with a cold cache. compile_latency.py measures tier 0 itself.
os.environ.setdefault("AUTOGRAD_NB_TIERED", "0")

