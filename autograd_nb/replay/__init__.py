"""``autograd_nb.compile``: record a function once, replay it from tables (see
:mod:`.function`, :mod:`.tracer`, :mod:`.program` and :mod:`.interpreter`)."""

from .function import CompiledFunction, CompileWarning, compile

__all__ = ["CompiledFunction", "CompileWarning", "compile"]
