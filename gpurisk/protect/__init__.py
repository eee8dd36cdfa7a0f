"""From risk to release (issue 19, SPEC §11): search the generalisation lattice of the keys'
hierarchies for the recodes of least information loss that bring every criterion under its bound on
every scenario, and write the protected file with a plan that reproduces it."""
from gpurisk.protect.criteria import Criterion, parse_criterion
from gpurisk.protect.loss import Loss, Node
from gpurisk.protect.search import SearchResult, pareto_front
from gpurisk.protect.workflow import NoFeasibleNode, Protection, apply_plan, protect

__all__ = ["protect", "apply_plan", "Protection", "NoFeasibleNode", "SearchResult", "Criterion",
           "parse_criterion", "Loss", "Node", "pareto_front"]
