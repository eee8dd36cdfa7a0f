"""``gpurisk validate``: estimators checked against their true values on replicate samples of a real
population (samplers in :mod:`.design`, the replicate runs and the summary in :mod:`.runner`; the workflow in
:mod:`gpurisk.workflows.validate`).

The package is named ``validation`` rather than ``validate`` so that ``gpurisk.validate`` can be the
function without shadowing (or being shadowed by) a subpackage of the same name.
"""
from gpurisk.validation.design import Design, parse_design
from gpurisk.validation.runner import Validation

__all__ = ["validate", "validate_with", "Validation", "Design", "parse_design"]


def __getattr__(name):
    """``validate`` and ``validate_with`` (:mod:`gpurisk.workflows.validate`), imported when first asked for: the workflow module imports this package's parts,
    so importing it here, eagerly, would go in a circle when the workflow is imported first."""
    if name in ('validate', 'validate_with'):
        from gpurisk.workflows import validate as workflow
        return getattr(workflow, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
