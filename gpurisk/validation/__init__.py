"""``gpurisk validate``: estimators checked against their true values on replicate samples of a real
population (samplers in :mod:`.design`, the loop and the summary in :mod:`.runner`).

The package is named ``validation`` rather than ``validate`` so that ``gpurisk.validate`` can be the
function without shadowing (or being shadowed by) a subpackage of the same name.
"""
from gpurisk.validation.design import Design, parse_design
from gpurisk.validation.runner import Validation, validate

__all__ = ["validate", "Validation", "Design", "parse_design"]
