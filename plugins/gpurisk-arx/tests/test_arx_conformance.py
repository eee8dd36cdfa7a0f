"""Every measure of the plugin passes gpurisk's conformance kit (metadata, awkward tables, the
summaries-only run, every backend including the strict GPU stand-in), and the entry point registers them."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("gpurisk_arx")
from gpurisk.testing import check_measure, run_cli  # noqa: E402

from gpurisk_arx.plugin import MEASURES  # noqa: E402
from gpurisk_arx.population import PopUniqueness  # noqa: E402


@pytest.mark.parametrize("cls", MEASURES, ids=lambda c: c.name)
def test_conformance(cls):
    report = check_measure(cls)
    assert "pandas" in report.results and "strict" in report.results
    assert "strict" in report.compared          # the strict-namespace run was compared with pandas


@pytest.mark.parametrize("model", ["pitman", "zayatz", "snb", "dankar", "loglinear_main", "bethlehem"])
def test_conformance_each_model(model):
    check_measure(PopUniqueness, options={"model": model})


@pytest.mark.parametrize("k", ["shlosser", "arx"])
def test_conformance_k_estimators(k):
    check_measure(PopUniqueness, options={"model": "snb", "k_estimator": k})


def test_entry_point_registers_the_measures():
    proc = run_cli("measures", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    for cls in MEASURES:
        assert rows[cls.name]["package"] == "gpurisk-arx"
        assert rows[cls.name]["plugin"] == "arx"
    # pop_uniqueness's default log-linear model reads each cell's categories (issue 27)
    assert rows["prosecutor"]["reads"] == "summary" and rows["pop_uniqueness"]["reads"] == "cells"
    assert rows["pop_uniqueness"]["estimates"] == "pop_uniques"
