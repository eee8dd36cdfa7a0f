"""Every measure of the plugin passes gpurisk's conformance kit, and the entry point registers them."""
from __future__ import annotations

import json

import pytest

gc = pytest.importorskip("gpurisk_classic")
from gpurisk.testing import check_measure, run_cli  # noqa: E402

from gpurisk_classic.plugin import MEASURES  # noqa: E402


@pytest.mark.parametrize("cls", MEASURES, ids=lambda c: c.name)
def test_conformance(cls):
    report = check_measure(cls)
    assert "pandas" in report.results and report.results["pandas"].value is not None


@pytest.mark.parametrize("cls", [c for c in MEASURES if "method" in c.options], ids=lambda c: c.name)
def test_conformance_exact_method(cls):
    check_measure(cls, options={"method": "exact"})


def test_entry_point_registers_the_measures():
    proc = run_cli("measures", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    for cls in MEASURES:
        assert rows[cls.name]["package"] == "gpurisk-classic"
        assert rows[cls.name]["plugin"] == "classic"
