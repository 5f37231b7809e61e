"""The operators, one module per family; each op registers itself in :mod:`.registry`."""

import importlib

FAMILIES = ("elementwise", "reduction", "linalg", "shape", "indexing", "special",
            "assembly", "reductions_more", "linalg_lu", "linalg_det", "linalg_cholesky",
            "linalg_eigh", "linalg_svd", "linalg_qr", "linalg_pinv", "linalg_products",
            "linalg_norms", "contractions", "numeric", "signal", "linalg_sylvester",
            "special_bessel", "fft", "linalg_complex")


def load_all():
    """Import every family module, which fills the registry."""
    for family in FAMILIES:
        importlib.import_module(f"{__name__}.{family}")
