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
