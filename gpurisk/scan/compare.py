"""The comparison of recodes under its first path: the workflow is :mod:`gpurisk.workflows.compare`,
its parts (alternatives, the comparison table) :mod:`gpurisk.scan.alternatives`."""
from gpurisk.scan.alternatives import (DEFAULT_MEASURES, Alternative, Comparison,  # noqa: F401
                                       default_measures_text, parse_alternative)
from gpurisk.workflows.compare import compare, compare_with  # noqa: F401

__all__ = ["compare", "compare_with", "Comparison", "Alternative", "parse_alternative",
           "default_measures_text", "DEFAULT_MEASURES"]
