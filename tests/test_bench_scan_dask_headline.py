"""bench/bench_scan_dask_headline.py runs end to end on a small synthetic sample: pandas, Dask with
the finest table brought here, Dask with Ê fitted on the workers, each row checked equal to pandas'
(the script exits 1 on a difference)."""
from __future__ import annotations

import importlib.util

import pytest

from conftest import ROOT

pytest.importorskip("distributed")


def test_dask_headline_bench_runs_and_checks_its_rows(capsys):
    spec = importlib.util.spec_from_file_location("bench_scan_dask_headline",
                                                  ROOT / "bench" / "bench_scan_dask_headline.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--synthetic", "5000", "--max-size", "2", "--memory-limit", "1GB"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith(("pandas", "dask"))]
    assert len(lines) == 3 and all(ln.endswith("yes") and "matches_ll" in ln for ln in lines)
