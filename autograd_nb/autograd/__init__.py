"""The autograd API: grad, backward, grad modes, custom Functions, gradcheck, functional."""

from .api import backward, grad
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

__all__ = [
    "backward",
    "enable_grad",
    "grad",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
]
