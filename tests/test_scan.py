"""gpurisk scan: plans, equality with per-combination assess, streaming output, resume after kill -9."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.scan import build_plan, combo_seed, read_scan

from conftest import ROOT, data_path, run_cli

ADULT8 = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
          "occupation"]


@pytest.fixture(scope="module")
def adult():
    df = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    df["s"] = np.random.default_rng(0).random(len(df)) < 0.1
    return df


def test_plan_sizes_and_modes(tmp_path):
    assert len(build_plan(ADULT8, 4)) == 8 + 28 + 56 + 70 == 162
    pe = build_plan(["region", "income"], fundamental=["age", "sex"], plus_each_flag=True)
    assert [c.keys for c in pe] == [("age", "sex"), ("age", "sex", "region"), ("age", "sex", "income")]
    assert [c.scenario for c in pe] == ["fundamental", "+region", "+income"]
    f = tmp_path / "s.toml"
    f.write_text('[scenarios]\nneighbour = ["age", "sex", "marital"]\n[scenarios.employer]\nkeys = ["age", "occ"]\n')
    sc = build_plan(scenarios=str(f))
    assert [(c.combo, c.keys) for c in sc] == [("neighbour", ("age", "sex", "marital")),
                                               ("employer", ("age", "occ"))]
    with pytest.raises(gpurisk.BadInput, match="nothing to scan"):
        build_plan()
    with pytest.raises(gpurisk.BadInput, match=r"^fundamental needs plus_each=True"):
        build_plan(["a"], fundamental=["b"])
    bad = tmp_path / "bad.toml"
    bad.write_text("[scenarios]\nx = 3\n")
    with pytest.raises(gpurisk.BadInput, match="list of key names"):
        build_plan(scenarios=str(bad))
    # seeds depend on the key set only, not on the order or the run
    assert combo_seed(5, ["a", "b"]) == combo_seed(5, ["b", "a"]) != combo_seed(6, ["a", "b"])


def test_scan_rows_equal_assess_of_each_combination(adult):
    keys = ["sex", "age", "race", "marital-status", "education"]
    res = gpurisk.scan(adult, keys=keys, max_size=3, sample_flag="s")
    df = res.results
    assert len(df) == 5 + 10 + 10 and list(df["order"]) == list(range(25))
    # a register: the exact E and τ1 lead and no estimator of a counted value runs (issue 40)
    assert res.measures[:2] == ["matches", "tau1"] and "pop_uniques" in res.measures
    assert not {"theta_hat", "theta_hat_dis", "matches_ll", "tau1_hat"} & set(res.measures)
    for i in (0, 4, 7, 13, 20, 24):
        row = df.iloc[i]
        ks = list(row["keys"])
        # scan counts every key set with its keys in name order (one cell order per key set)
        a = gpurisk.assess(adult, sorted(ks), sample_flag="s", seed=combo_seed(0, ks),
                           options={"theta_hat_dis": {"K": 10_000}}).to_dict()
        fof = a["freq_of_freq"]
        assert (row["n1"], row["n2"], row["n3"]) == (fof.get("1", 0), fof.get("2", 0), fof.get("3", 0))
        assert row["cells"] == a["cells"] and row["pop_cells"] == a["population_cells"]
        for m in res.measures:
            r = a["measures"][m]
            assert row[m] == pytest.approx(r["value"], rel=1e-12, nan_ok=True) if r["value"] is not None \
                else pd.isna(row[m]), (ks, m)
            if r["upper"] is not None:
                assert row[f"{m}_upper"] == pytest.approx(r["upper"], rel=1e-12)


def test_combination_results_do_not_depend_on_the_plan(adult):
    """A combination scanned alone (as a scenario, keys reordered) gives the same row values."""
    full = gpurisk.scan(adult, keys=ADULT8[:5], max_size=3, fraction=0.1).results
    from gpurisk.scan import Combination
    alone = gpurisk.scan(adult, scenarios=[Combination(("education", "age", "sex"), "x", "x")],
                         fraction=0.1).results.iloc[0]
    row = full[full["combo"] == "sex,age,education"].iloc[0]
    for m in ("theta_hat", "theta_hat_dis", "theta_hat_dis_se", "n1", "cells", "seed"):
        assert row[m] == alone[m], m


def test_plus_each_and_weights(adult):
    res = gpurisk.scan(adult, keys=["race", "education", "workclass"], fundamental="age,sex",
                       plus_each=True, fraction=0.1, measures=["theta_hat", "sample_uniques"])
    df = res.results
    assert list(df["scenario"]) == ["fundamental", "+race", "+education", "+workclass"]
    assert (df["n1"].iloc[1:] >= df["n1"].iloc[0]).all()    # adding a variable never removes uniques


def test_cli_scan_summary_and_output_hold_no_key_values(tmp_path, adult):
    out = tmp_path / "out.parquet"
    path = data_path("arx/adult.csv")
    p = run_cli("scan", path, "--keys", ",".join(ADULT8[:6]), "--max-size", "2", "--fraction", "0.1",
                "-o", out, "--json", "--top", "5", check=True)
    doc = json.loads(p.stdout)
    # ranked by Ê (matches_ll), the estimate of E, since issue 27 (θ̂·n1 is a lower estimate of E)
    assert doc["combinations"] == 6 + 15 and len(doc["top"]) == 5 and doc["rank_by"] == "matches_ll"
    df = read_scan(out)
    assert len(df) == 21
    values = set()
    for k in ADULT8[:6]:
        values |= {str(v) for v in adult[k].unique() if len(str(v)) > 3}
    text = p.stdout + p.stderr
    strings = pd.concat([df[c].astype(str) for c in df.columns if df[c].dtype == object])
    for v in values:
        assert v not in text, v
        assert not strings.str.contains(v, regex=False).any(), v
    # rerunning onto the same output needs --resume or --overwrite
    with pytest.raises(gpurisk.BadInput, match=r"already holds a scan; use resume=True to finish it or overwrite=True"):
        gpurisk.scan(path, keys=ADULT8[:6], max_size=2, fraction=0.1, output=out)
    other = run_cli("scan", path, "--keys", ",".join(ADULT8[:6]), "--max-size", "2", "--fraction",
                    "0.2", "-o", out, "--resume")
    assert other.returncode == 2 and "different scan" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1


def test_cli_progress_bar_and_bad_input():
    path = data_path("arx/adult.csv")
    p = run_cli("scan", path, "--keys", "sex,age", "--max-size", "2", "--fraction", "0.1",
                "--progress", check=True)
    assert "scanning" in p.stderr and "3/3" in p.stderr
    with pytest.raises(gpurisk.BadInput, match="'nope'"):
        gpurisk.scan(path, keys=["sex", "nope"], max_size=2, fraction=0.1)


def _parts(out):
    return sorted(f for f in os.listdir(out) if f.startswith("part-")) if os.path.isdir(out) else []


def test_resume_after_kill9_gives_the_identical_table(tmp_path):
    """Kill a real scan process with SIGKILL at random points, resume until done, compare."""
    path = str(data_path("arx/adult.csv"))
    keys = ",".join(ADULT8)
    opts = dict(keys=ADULT8, max_size=3, fraction=0.1, options={"theta_hat_dis": {"K": 100_000}})
    ref = gpurisk.scan(path, **opts).results
    out = tmp_path / "killed.parquet"
    args = [sys.executable, "-m", "gpurisk", "scan", path, "--keys", keys, "--max-size", "3",
            "--fraction", "0.1", "--option", "theta_hat_dis.K=100000", "--batch-rows", "4",
            "--no-progress", "-o", str(out), "--resume"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rng = random.Random(int(os.environ.get("GPURISK_TEST_SEED", "20240607")))
    kills, done_after_kill = 0, []
    for attempt in range(8):
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if attempt < 2:
            before = len(_parts(out))
            deadline = time.monotonic() + 60
            while proc.poll() is None and len(_parts(out)) <= before and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.05))     # a random point while parts are being written
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                kills += 1
                done_after_kill.append(len(read_scan(out)) if _parts(out) else 0)
                continue
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        break
    assert kills >= 1
    assert 0 < done_after_kill[0] < len(ref)              # the first kill really cut the scan short
    got = read_scan(out).to_frame()
    assert not [f for f in os.listdir(out) if f.startswith(".")]   # no temp file left behind
    pd.testing.assert_frame_equal(got, ref)


def test_threads_change_nothing_in_the_results(adult):
    """Roll-ups in a pool of threads (summaries computed there) give the same rows as one thread."""
    opts = dict(keys=ADULT8, max_size=3, sample_flag="s", measures=None)
    one = gpurisk.scan(adult, threads=0, **opts).results
    many = gpurisk.scan(adult, threads=3, **opts).results
    pd.testing.assert_frame_equal(one, many)
    with pytest.raises(gpurisk.BadInput, match="threads=-1"):
        gpurisk.scan(adult, threads=-1, **opts)
    p = run_cli("scan", data_path("arx/adult.csv"), "--keys", "sex,age", "--max-size", "1",
                "--fraction", "0.1", "--threads", "-1")
    assert p.returncode == 2 and "--threads -1 must be >= 0" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_interrupted_scan_keeps_finished_rows_and_resumes(tmp_path, adult, monkeypatch):
    """Ctrl-C in the middle of a scan: the rows already finished are on disk, the roll-up threads
    are stopped, and --resume ends with the same table as an uninterrupted run."""
    import threading
    from gpurisk.scan import runner
    opts = dict(keys=ADULT8[:6], max_size=3, sample_flag="s", batch_rows=1000, flush_seconds=1e9)
    full = gpurisk.scan(adult, **opts).results
    real = runner.combination_row
    calls = []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 17:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(runner, "combination_row", interrupted)
    out = tmp_path / "scan.parquet"
    with pytest.raises(KeyboardInterrupt):
        gpurisk.scan(adult, output=out, threads=2, **opts)
    assert not [t for t in threading.enumerate() if t.name.startswith("gpurisk-rollup")]
    assert len(read_scan(out)) == 16          # flushed although no batch was full
    monkeypatch.setattr(runner, "combination_row", real)
    res = gpurisk.scan(adult, output=out, resume=True, **opts)
    assert res.skipped == 16
    pd.testing.assert_frame_equal(res.results, full)


def _halve(out):
    """What a scan killed halfway leaves: its manifest and its first part files."""
    parts = _parts(out)
    for f in parts[len(parts) // 2:]:
        os.remove(os.path.join(out, f))
    return len(read_scan(out)) if _parts(out) else 0


def test_resume_refuses_an_input_file_that_changed(tmp_path, monkeypatch):
    """Issue 30: after the input changed (same path, same n), --resume kept rows computed on the
    old data. Now it refuses in one line before reading, and resumes when the file is unchanged."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a": rng.integers(0, 30, 400), "b": rng.integers(0, 4, 400),
                       "c": rng.integers(0, 5, 400)})
    data, out = tmp_path / "d.csv", tmp_path / "s.parquet"
    df.to_csv(data, index=False)
    args = ["scan", data, "--keys", "a,b,c", "--max-size", "3", "--fraction", "0.1",
            "--batch-rows", "1", "--no-progress", "-o", out]
    run_cli(*args, check=True)
    full = read_scan(out).to_frame()
    assert 0 < _halve(out) < len(full)
    # the same file: the resume finishes with the rows of one uninterrupted run
    run_cli(*args, "--resume", check=True)
    pd.testing.assert_frame_equal(read_scan(out).drop(columns="warnings"),
                                  full.drop(columns="warnings"))
    _halve(out)
    changed = df.copy()
    changed.loc[0, "a"], changed.loc[1, "a"] = changed.loc[1, "a"] + 100, changed.loc[0, "a"] + 100
    changed.to_csv(data, index=False)                  # same path, same n, other records
    kept = _parts(out)
    read = []
    monkeypatch.setattr("gpurisk.inputs.Inputs.read", lambda self: read.append(1))
    p = run_cli(*args, "--resume")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "the data file 'd.csv' changed since the scan" in p.stderr and "--overwrite" in p.stderr
    assert not read and _parts(out) == kept              # refused before reading or writing
    monkeypatch.undo()
    # --overwrite starts again on the new data: the rows of a fresh scan of it
    run_cli(*args, "--overwrite", check=True)
    fresh = gpurisk.scan(changed, keys=["a", "b", "c"], max_size=3, fraction=0.1).results
    assert read_scan(out)["n1"].tolist() == fresh["n1"].tolist() != full["n1"].tolist()


def test_resume_refuses_a_population_file_that_changed(tmp_path):
    rng = np.random.default_rng(6)
    pop = pd.DataFrame({"a": rng.integers(0, 20, 3000), "b": rng.integers(0, 3, 3000)})
    pop.iloc[:300].to_csv(tmp_path / "s.csv", index=False)
    pop.to_csv(tmp_path / "p.csv", index=False)
    out = tmp_path / "s.parquet"
    args = ["scan", tmp_path / "s.csv", "--keys", "a,b", "--max-size", "2", "--population",
            tmp_path / "p.csv", "--batch-rows", "1", "--no-progress", "-o", out]
    run_cli(*args, check=True)
    _halve(out)
    pop.iloc[::-1].to_csv(tmp_path / "p.csv", index=False)   # the same records, reordered
    p = run_cli(*args, "--resume")
    assert p.returncode == 2 and "the population file 'p.csv' changed" in p.stderr
    assert "same size, other content" in p.stderr


@pytest.mark.parametrize("opt, msg", [
    (["--rank-by", "foo"], "cannot rank by 'foo': not a numeric column of this scan"),
    (["--rank-by", "combo"], "cannot rank by 'combo'"),           # text: was an internal error
    (["--rank-by", "theta_hat_reason"], "cannot rank by 'theta_hat_reason'"),
    (["--top", "-1"], "--top -1 must be >= 1"),                     # was: all rows but the last
    (["--batch-rows", "0"], "--batch-rows 0 must be >= 1"),         # was: silently 1
])
def test_scan_options_are_checked_before_the_work(tmp_path, opt, msg):
    """Issue 28: `scan --rank-by foo -o out` ran the whole scan, wrote it, then exited 2, and the
    rerun was refused ("already holds a scan"). Every option is checked before anything is written."""
    data, out = tmp_path / "d.csv", tmp_path / "s.parquet"
    pd.DataFrame({"a": np.arange(60) % 7, "b": np.arange(60) % 3}).to_csv(data, index=False)
    args = ["scan", data, "--keys", "a,b", "--max-size", "2", "--fraction", "0.1", "--no-progress",
            "-o", out]
    p = run_cli(*args, *opt)
    assert p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()                   # nothing written: the corrected rerun is not refused
    p = run_cli(*args, "--rank-by", "n1", "--top", "2", "--json", check=True)
    doc = json.loads(p.stdout)
    assert doc["rank_by"] == "n1" and len(doc["top"]) == 2


def test_rank_by_is_checked_before_reading_in_python(monkeypatch):
    read = []
    monkeypatch.setattr("gpurisk.inputs.Inputs.read", lambda self: read.append(1))
    df = pd.DataFrame({"a": np.arange(60) % 7, "b": np.arange(60) % 3})
    with pytest.raises(gpurisk.BadInput, match="cannot rank by 'keys'"):
        gpurisk.scan(df, keys=["a", "b"], max_size=2, fraction=0.1, rank_by="keys")
    assert not read
    monkeypatch.undo()
    res = gpurisk.scan(df, keys=["a", "b"], max_size=2, fraction=0.1, rank_by="n1")
    with pytest.raises(gpurisk.BadInput, match="cannot rank by 'combo'"):
        res.top(3, by="combo")                   # text: was an internal ValueError
    top = res.top(2, by="cells")
    assert top["cells"].tolist() == sorted(res.results["cells"], reverse=True)[:2]


def test_resume_refuses_a_frame_whose_records_changed(tmp_path):
    """A frame has no file to fingerprint: the scan's manifest keeps a fingerprint of its counts."""
    rng = np.random.default_rng(9)
    df = pd.DataFrame({"a": rng.integers(0, 30, 400), "b": rng.integers(0, 4, 400)})
    out = tmp_path / "f.parquet"
    opts = dict(keys=["a", "b"], max_size=2, fraction=0.1, batch_rows=1)
    full = gpurisk.scan(df, output=out, **opts).results
    _halve(out)
    res = gpurisk.scan(df, output=out, resume=True, **opts)        # the same frame: resumes
    assert res.skipped > 0 and read_scan(out)["n1"].tolist() == full["n1"].tolist()
    _halve(out)
    changed = df.assign(a=np.roll(df["a"].to_numpy(), 1))            # same n, other records
    with pytest.raises(gpurisk.BadInput, match="the data given as a frame differ"):
        gpurisk.scan(changed, output=out, resume=True, **opts)
