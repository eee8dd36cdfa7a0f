"""From risk to release (issue 19, SPEC §11): search the generalisation lattice of the keys'
hierarchies for the recodes of least information loss that bring every criterion under its bound on
every scenario, and write the protected file with a plan that reproduces it."""
from gpurisk.protect.criteria import Criterion, parse_criterion
from gpurisk.protect.loss import Loss, Node
from gpurisk.protect.search import SearchResult, pareto_front
from gpurisk.protect.steps import NoFeasibleNode, Protection, apply_plan

__all__ = ["protect", "protect_with", "apply_plan", "Protection", "NoFeasibleNode", "SearchResult", "Criterion",
           "parse_criterion", "Loss", "Node", "pareto_front"]


def __getattr__(name):
    """``protect`` and ``protect_with`` (:mod:`gpurisk.workflows.protect`), imported when first asked for: the workflow module imports this package's parts,
    so importing it here, eagerly, would go in a circle when the workflow is imported first."""
    if name in ('protect', 'protect_with'):
        from gpurisk.workflows import protect as workflow
        return getattr(workflow, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
