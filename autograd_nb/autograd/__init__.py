"""The autograd API: grad, backward, grad modes, custom Functions, gradcheck, functional."""

from . import forward_ad, functional
from .api import backward, grad
from .checkpoint import checkpoint
from .custom_op import register_op, unregister_op
from .function import Function, FunctionCtx
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .loops import cond, fori_loop, scan, while_loop

__all__ = [
    "Function",
    "FunctionCtx",
    "GradcheckError",
    "backward",
    "checkpoint",
    "cond",
    "enable_grad",
    "fori_loop",
    "forward_ad",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "is_grad_enabled",
    "no_grad",
    "register_op",
    "scan",
    "set_grad_enabled",
    "unregister_op",
    "while_loop",
]
