"""``gpurisk.protect`` under its first path: the workflow is :mod:`gpurisk.workflows.protect`, its
steps :mod:`gpurisk.protect.steps`."""
from gpurisk.protect.steps import NoFeasibleNode, Protection, apply_plan  # noqa: F401
from gpurisk.workflows.protect import protect, protect_with  # noqa: F401

__all__ = ["protect", "protect_with", "apply_plan", "Protection", "NoFeasibleNode"]
