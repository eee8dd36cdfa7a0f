"""Scanning many key-variable combinations (SPEC §7): plan, lattice roll-up, streaming Parquet sink.

``gpurisk.scan(...)`` is :func:`gpurisk.scan.runner.scan`; ``read_scan(path)`` reads a scan's output.
"""
from gpurisk.scan.plan import Combination, build_plan, combo_seed
from gpurisk.scan.runner import ScanResult, scan, top_combinations
from gpurisk.scan.read import read_scan

__all__ = ["scan", "ScanResult", "Combination", "build_plan", "combo_seed", "read_scan",
           "top_combinations"]
