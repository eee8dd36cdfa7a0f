"""bench/bench_cpu_quota.py runs end to end, small: Adult's scan with the CPUs from the affinity
alone and with the quota (here, in the test, a quota of one CPU put in place of the process's),
its check that every column is equal (it raises on a difference), and its table."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from conftest import ROOT


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity here")
def test_cpu_quota_bench_runs_and_checks(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_cpu_quota",
                                                  ROOT / "bench" / "bench_cpu_quota.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sys.modules.pop("bench_scan_headline", None)
    from gpurisk.freq import schedule
    monkeypatch.setattr(schedule, "quota_cpus", lambda: 1)
    monkeypatch.setattr(schedule, "_QUOTA", [])        # what it reads, put back after the test
    before = dict(os.environ)
    rows = bench.main(["--data", "adult", "--repeat", "1"])
    assert dict(os.environ) == before
    out = capsys.readouterr().out
    assert "[adult] every column equal, exactly" in out and "quota 1" in out
    (name, cpus, best), = rows
    assert cpus["with quota"] == 1 and cpus["affinity only"] == len(os.sched_getaffinity(0))
    assert all(best[v][0] > 0 for v in bench.VARIANTS)
