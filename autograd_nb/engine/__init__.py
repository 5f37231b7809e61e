"""The backward compiler: tape -> plan -> run."""

from .backward import Plan, make_plan, run_plan

__all__ = ["Plan", "make_plan", "run_plan"]
