"""asv benchmarks of autograd_nb, with the peer engines (PyTorch eager, JAX jit, HIPS autograd)
side by side on the same computations. The computations themselves live in ``workloads.py``,
shared with ``asv_bench/compare.py``."""
