"""Scanning many key-variable combinations (SPEC §7): plan, lattice roll-up, streaming Parquet sink.

``gpurisk.scan(...)`` is :func:`gpurisk.workflows.scan.scan` (the workflow on the settings objects:
:func:`gpurisk.workflows.scan.scan_with`); ``read_scan(path)`` reads a scan's output.
"""
from gpurisk.scan.plan import Combination, build_plan, combo_seed
from gpurisk.scan.runner import ScanResult, top_combinations
from gpurisk.scan.read import read_scan

__all__ = ["scan", "scan_with", "ScanResult", "Combination", "build_plan", "combo_seed", "read_scan",
           "top_combinations"]


def __getattr__(name):
    """``scan`` and ``scan_with`` (:mod:`gpurisk.workflows.scan`), imported when first asked for: the workflow module imports this package's parts,
    so importing it here, eagerly, would go in a circle when the workflow is imported first."""
    if name in ('scan', 'scan_with'):
        from gpurisk.workflows import scan as workflow
        return getattr(workflow, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
