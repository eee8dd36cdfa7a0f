"""bench/bench_processes.py runs end to end, small: a scan of Adult's 255 combinations and a
validate of 4 replicates a fraction, each with and without processes, its check that every column
is equal (it raises on a difference), and its table."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from conftest import ROOT


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="processes fork on Linux only")
def test_processes_bench_runs_and_checks(capsys):
    spec = importlib.util.spec_from_file_location("bench_processes",
                                                  ROOT / "bench" / "bench_processes.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sys.modules.pop("bench_scan_headline", None)        # imported afresh: its environment change
    before = dict(os.environ)
    rows = bench.main(["--scan", "adult", "--replicates", "4", "--repeat", "1"])
    # the commands later tests run in child processes load their third-party plugins
    assert dict(os.environ) == before
    out = capsys.readouterr().out
    assert [r[0] for r in rows] == ["scan adult", "validate 4 x 3"]
    assert out.count("every column equal with and without the processes, exactly") == 2
    assert all(r[1] > 0 and r[3] > 0 for r in rows) and "speed-up" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="processes fork on Linux only")
def test_breakeven_runs_and_checks(capsys, monkeypatch):
    """--breakeven: each plan's scan in one process, two and the default, checked equal; the
    default's processes are the rule's for the bound printed beside them."""
    spec = importlib.util.spec_from_file_location("bench_processes",
                                                  ROOT / "bench" / "bench_processes.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sys.modules.pop("bench_scan_headline", None)
    monkeypatch.setattr(bench, "BREAKEVEN_PLANS", [(2, 2, 4), (1, 8, 8)])
    from gpurisk.core.forked import MIN_CELLS, how_many
    before = dict(os.environ)
    rows = bench.main(["--breakeven", "adult", "--repeat", "1"])
    assert dict(os.environ) == before
    out = capsys.readouterr().out
    assert out.count("every column equal in one process, two and the default, exactly") == 2
    assert [r[1] for r in rows] == [6, 255]
    assert rows[0][2] < MIN_CELLS <= rows[1][2]
    assert [r[3] for r in rows] == [0, how_many(None, 255)]
