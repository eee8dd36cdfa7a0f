"""A scan's costly measures in forked processes (gpurisk.scan.processes): every figure as without
them, which measures go, what stays here, a process that dies, and the process state a fork must
not inherit (a measure worker thread that does not exist in the child, the output's lock)."""
from __future__ import annotations

import multiprocessing
import os
import re
import signal
import sys

import pandas as pd
import pytest

import gpurisk
from gpurisk import plugins
from gpurisk.scan import processes as P
from conftest import data_path, run_cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="measure processes are forked on Linux only")

ADULT = data_path("arx/adult.csv")
KEYS = ["sex", "age", "race", "marital-status", "education", "native-country"]


class Pid(gpurisk.Measure):
    """Where it ran: its process (value) and the CPUs that process's passes may use (se)."""
    name = "toy_pid"
    description = "the process it runs in"
    default = False                    # costly, as a model fit declares itself: goes to a process

    def compute(self, table, ctx):
        from gpurisk.freq.schedule import usable_cpus
        return gpurisk.Result(value=float(os.getpid()), se=float(usable_cpus()))


class Cheap(Pid):
    name = "toy_cheap_pid"
    default = True                     # cheap: stays here


PARENT = os.getpid()


class Dies(gpurisk.Measure):
    """Kills the process it runs in, unless that is the test's own (as the kernel kills one for
    memory): the calls that end the process are refused to measures, so the real one is called."""
    name = "toy_dies"
    description = "ends a measure process"
    default = False

    def compute(self, table, ctx):
        if os.getpid() != PARENT:
            getattr(os.kill, "__wrapped__", os.kill)(os.getpid(), signal.SIGKILL)
        return gpurisk.Result(value=float(os.getpid()))


class Refuses(gpurisk.Measure):
    name = "toy_refuses"
    description = "refuses its input"
    default = False

    def compute(self, table, ctx):
        raise gpurisk.BadInput("toy_refuses: cannot run here")


class Raises(gpurisk.Measure):
    name = "toy_raises"
    description = "fails"
    default = False

    def compute(self, table, ctx):
        raise ValueError("boom")


@pytest.fixture
def toys():
    class _P:
        @gpurisk.hookimpl
        def gpurisk_register_measures(self):
            return [Pid, Cheap, Dies, Refuses, Raises]

    plugins.reset()
    plugins.register(_P(), name="toy_processes")
    yield
    plugins.reset()


@pytest.fixture(scope="module")
def adult():
    return pd.read_csv(ADULT, dtype=str, sep=";")


def test_every_column_equal_with_and_without_processes(adult):
    """The default scan (Ê and τ̂1 among its measures) of Adult's 63 combinations of six keys at
    π = 1 %: with two measure processes every column, Ê's and τ̂1's figures, reasons, notes and
    warnings among them, is equal to the scan's in one process, exactly."""
    here = gpurisk.scan(adult, keys=KEYS, fraction=0.01, processes=0, threads=0)
    there = gpurisk.scan(adult, keys=KEYS, fraction=0.01, processes=2)
    assert here.results["matches_ll"].notna().sum() > 50
    pd.testing.assert_frame_equal(here.to_frame(), there.to_frame(), check_exact=True)
    assert here.warnings == there.warnings


def test_costly_measures_go_to_processes_cheap_ones_stay(adult, toys):
    """A measure registered while the program runs goes (its class is handed over), runs there in
    one thread; a cheap one stays in this process."""
    got = gpurisk.scan(adult, keys=KEYS, max_size=2, fraction=0.05, processes=2,
                       measures=["toy_pid", "toy_cheap_pid"])
    pids = set(got.results["toy_pid"].astype(int))
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert set(got.results["toy_pid_se"]) == {1.0}
    assert set(got.results["toy_cheap_pid"].astype(int)) == {os.getpid()}
    inline = gpurisk.scan(adult, keys=KEYS, max_size=2, fraction=0.05, processes=0,
                          measures=["toy_pid"])
    assert set(inline.results["toy_pid"].astype(int)) == {os.getpid()}


def test_large_tables_stay_here(adult, toys, monkeypatch):
    monkeypatch.setattr(P, "PROCESS_CELLS", 10)
    got = gpurisk.scan(adult, keys=KEYS, max_size=2, fraction=0.05, processes=2,
                       measures=["toy_pid"])
    small = got.results["cells"] <= 10
    assert small.any() and (~small).any()
    assert set(got.results.loc[~small, "toy_pid"].astype(int)) == {os.getpid()}
    assert os.getpid() not in set(got.results.loc[small, "toy_pid"].astype(int))


def test_a_process_that_dies_leaves_its_combinations_to_the_scan(adult, toys):
    """Killed (as for memory): every combination still gets its row, computed here, and the scan's
    notes say so."""
    got = gpurisk.scan(adult, keys=KEYS, max_size=2, fraction=0.05, processes=2,
                       measures=["toy_dies", "sample_uniques"])
    assert len(got.results) == 21
    assert set(got.results["toy_dies"].astype(int)) == {os.getpid()}
    assert any("ended unexpectedly" in n for n in got.warnings)


@pytest.mark.parametrize("processes", [0, 2])
def test_a_measure_that_refuses_or_fails_in_a_process_does_as_here(adult, toys, processes):
    """BadInput from a measure stops the scan with its line; another exception is the row's
    reason: the same in a process as here."""
    with pytest.raises(gpurisk.BadInput, match="toy_refuses: cannot run here"):
        gpurisk.scan(adult, keys=KEYS, max_size=2, fraction=0.05, processes=processes,
                     measures=["toy_refuses"])
    got = gpurisk.scan(adult, keys=KEYS, max_size=2, fraction=0.05, processes=processes,
                       measures=["toy_raises"])
    assert got.results["toy_raises"].isna().all()
    assert set(got.results["toy_raises_reason"]) == {"measure raised ValueError: boom"}


def test_how_many(monkeypatch):
    from gpurisk.core import forked
    from gpurisk.freq import schedule
    assert forked.how_many(0, 1000) == 0
    assert forked.how_many(3, 1) == 3
    assert forked.how_many(None, forked.MIN_ITEMS - 1) == 0
    monkeypatch.setattr(schedule, "CPU_LIMIT", [1])
    assert forked.how_many(None, 1000) == 0
    monkeypatch.setattr(schedule, "CPU_LIMIT", [64])
    assert forked.how_many(None, 1000) == forked.MAX_PROCESSES
    monkeypatch.setattr(schedule, "CPU_LIMIT", [3])
    assert forked.how_many(None, 1000) == 3

    class Daemon:
        daemon = True
    monkeypatch.setattr(multiprocessing, "current_process", lambda: Daemon())
    assert forked.how_many(None, 1000) == 0 and forked.how_many(4, 1000) == 0


def test_a_small_scan_runs_in_one_process_by_default(adult, toys, monkeypatch):
    """The default forks processes only for a scan whose tables may hold MIN_CELLS cells in all
    (cells_bound, known before a table is built, bounds each table's cells): Adult's 21 pairs
    and singles of six keys run here, its 63 combinations in processes."""
    from gpurisk.core import forked
    from gpurisk.freq import schedule
    monkeypatch.setattr(schedule, "CPU_LIMIT", [2])
    small = gpurisk.scan(adult, keys=KEYS, max_size=2, fraction=0.05, measures=["toy_pid"])
    assert set(small.results["toy_pid"].astype(int)) == {os.getpid()}
    whole = gpurisk.scan(adult, keys=KEYS, fraction=0.05, measures=["toy_pid"])
    assert os.getpid() not in set(whole.results["toy_pid"].astype(int))
    from gpurisk.freq import build_table
    root = build_table(adult, KEYS)
    bound = {n: P.cells_bound(root, list(got.results["keys"]))
             for n, got in (("small", small), ("whole", whole))}
    assert bound["small"] < forked.MIN_CELLS <= bound["whole"]
    for keys, cells in zip(whole.results["keys"], whole.results["cells"]):
        assert cells <= P.cells_bound(root, [keys])
    assert forked.how_many(None, 1000, forked.MIN_CELLS - 1) == 0
    assert forked.how_many(None, 1000, forked.MIN_CELLS) == 2
    assert forked.how_many(3, 1000, 1) == 3


def test_the_forks_warning_is_not_passed_on(monkeypatch):
    """Python 3.12 on warns at each fork of a process with threads; Forked answers it (a child
    stuck on a lock gives nothing in time) and does not pass it on, nor any other warning's
    handling: a fork that warns as 3.12's does, and another DeprecationWarning after it."""
    import warnings
    from gpurisk.core import forked
    real = os.fork

    def fork():
        warnings.warn(f"This process (pid={os.getpid()}) is multi-threaded, use of fork() may "
                      "lead to deadlocks in the child.", DeprecationWarning, stacklevel=2)
        return real()
    monkeypatch.setattr(os, "fork", fork)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        pool = forked.Forked(2)
        try:
            assert pool.outcome(pool.call(os.getpid), 60) != os.getpid()
        finally:
            pool.close()
        warnings.warn("another", DeprecationWarning)
    assert [str(w.message) for w in seen] == ["another"]
    assert re.match(forked.FORK_WARNING, "This process (pid=7) is multi-threaded, use of "
                        "fork() may lead to deadlocks in the child.")


def test_how_many_not_on_other_systems(monkeypatch):
    from gpurisk.core import forked
    monkeypatch.setattr(sys, "platform", "darwin")
    assert forked.how_many(4, 1000) == 0


def _busy(folder):
    """A process's long task: says it started (a file named by its process id), then sleeps."""
    import time
    from pathlib import Path
    (Path(folder) / str(os.getpid())).touch()
    time.sleep(120)


def test_a_failed_scan_kills_its_processes_at_once(tmp_path):
    """Where the scan failed (an error, Ctrl-C), its processes are killed, not left to finish what
    they hold (a shutdown would wait two minutes here): both gone within seconds, by SIGKILL."""
    import time

    import psutil
    procs = P.MeasureProcesses(2, {}, None)
    kids = list(procs._pool._processes.values())
    futs = [procs.call(_busy, str(tmp_path)) for _ in kids]
    for _ in range(200):                        # both tasks started
        if len(list(tmp_path.iterdir())) == 2:
            break
        time.sleep(0.05)
    assert len(list(tmp_path.iterdir())) == 2 and not any(f.done() for f in futs)
    t0 = time.perf_counter()
    procs.close(failed=True)
    # the signal is delivered, and the pool's own thread reaps them, a moment later (a join here
    # may find them reaped by that thread): ask the system
    for k in kids:
        for _ in range(200):
            try:
                if psutil.Process(k.pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"measure process {k.pid} still runs 10 s after the scan failed")
    assert time.perf_counter() - t0 < 30
    assert {k.exitcode for k in kids} <= {-signal.SIGKILL, None}


def _child_runs_a_measure(q):
    from gpurisk.core.contain import run_contained
    q.put(run_contained([lambda: os.getpid()], 5.0)[0][1])


def test_a_fork_after_measures_ran_here_runs_measures(adult):
    """This process's measure worker thread (made by the scan below) is not in a forked child: the
    child makes its own, rather than queueing its calls to a thread that is not there."""
    gpurisk.scan(adult, keys=KEYS[:2], fraction=0.05, processes=0)
    from gpurisk.core import contain
    assert getattr(contain._WORKERS, "worker", None) is not None
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_runs_a_measure, args=(q,))
    p.start()
    got = q.get(timeout=30)
    p.join(10)
    assert got == p.pid


def _child_holds(path, q):
    """Whether any descriptor of this process is open on ``path``."""
    want = os.stat(path)
    held = False
    for name in os.listdir("/proc/self/fd"):
        try:
            st = os.fstat(int(name))
        except OSError:
            continue
        held |= (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino)
    q.put(held)


def test_a_forked_child_does_not_hold_the_output_lock(tmp_path):
    """A flock lasts while any copy of its descriptor is open: a measure process outliving a
    ``kill -9`` of its scan would keep the output locked. A child closes its copy."""
    from gpurisk.io import lock
    target = tmp_path / "out"
    ctx = multiprocessing.get_context("fork")
    with lock.exclusive(target):
        q = ctx.Queue()
        _child_holds(lock.lock_path(target), q)
        assert q.get(timeout=30) is True                 # here: held
        p = ctx.Process(target=_child_holds, args=(lock.lock_path(target), q))
        p.start()
        assert q.get(timeout=30) is False                # in a forked child: not
        p.join(10)
    assert not lock._HELD


def test_cli_processes_flag(tmp_path):
    bad = run_cli("scan", str(ADULT), "--keys", "sex,age", "--fraction", "0.05", "--sep", ";",
                  "--processes", "-1")
    assert bad.returncode == 2
    err = bad.stderr.strip().splitlines()
    assert len(err) == 1 and "--processes" in err[0] and "Traceback" not in bad.stderr
    outs = {}
    for n in ("0", "2"):
        out = tmp_path / f"p{n}.parquet"
        run_cli("scan", str(ADULT), "--keys", ",".join(KEYS[:4]), "--fraction", "0.01", "--sep", ";",
                "--processes", n, "--no-progress", "-o", str(out), check=True)
        outs[n] = gpurisk.read_scan(out).to_frame()
    pd.testing.assert_frame_equal(outs["0"], outs["2"], check_exact=True)


def test_in_order_keeps_the_plan_order_within_its_window(monkeypatch):
    """Rows come in the tables' order; at most ``window`` tables, and PENDING_CELLS cells, wait
    for a process at a time; a table the processes do not take is finished in its turn."""
    import numpy as np
    from types import SimpleNamespace

    class Later:                        # a process that never finishes before it is asked
        def done(self):
            return False

    class Procs:
        window = 4

        def submit(self, table, ctx):
            return None if table.here else Later()

        def result(self, fut):
            return {"results": {}, "warnings": []}

    waiting, most, processes = [], [0], [True]

    def start(i, table):
        waiting.append(i)
        most[0] = max(most[0], len(waiting))
        return None

    def finish(i, table, ctx, done):
        assert waiting[0] == i and (done is None) == (table.here or not processes[0])
        waiting.pop(0)
        return i

    def tables(n, cells):
        return ((i, SimpleNamespace(cell_id=np.zeros(cells), here=i % 5 == 3)) for i in range(n))

    assert list(P.in_order(tables(40, 10), start, finish, Procs())) == list(range(40))
    assert most[0] == Procs.window + 1              # the one just handed over, then the oldest
    most[0] = 0
    monkeypatch.setattr(P, "PENDING_CELLS", 25)
    assert list(P.in_order(tables(40, 10), start, finish, Procs())) == list(range(40))
    assert most[0] == 3
    most[0], processes[0] = 0, False
    assert list(P.in_order(tables(7, 10), start, finish, None)) == list(range(7))
    assert most[0] == 1


def test_validate_gives_the_same_with_and_without_processes(adult):
    """validate's replicates in two forked processes (each inheriting the population's cells): every
    replicate's row, the summary and the warnings equal to one process's, exactly (records drawn,
    and cells drawn, with a resume folder whose chunks the processes share)."""
    keys = KEYS[:5]
    here = gpurisk.validate(adult, keys, replicates=12, processes=0, seed=3)
    there = gpurisk.validate(adult, keys, replicates=12, processes=2, seed=3)
    assert here.replicates["measure"].eq("matches_ll").any()
    pd.testing.assert_frame_equal(here.replicates, there.replicates, check_exact=True)
    pd.testing.assert_frame_equal(here.summary, there.summary, check_exact=True)
    assert here.warnings == there.warnings


def test_validate_cells_drawn_and_resumed_in_processes(adult, tmp_path):
    keys = KEYS[:4]
    here = gpurisk.validate(adult, keys, replicates=9, processes=0, seed=5, draw="cells",
                            fractions=[0.05])
    there = gpurisk.validate(adult, keys, replicates=9, processes=2, seed=5, draw="cells",
                             fractions=[0.05], resume=tmp_path / "r")
    pd.testing.assert_frame_equal(here.replicates, there.replicates, check_exact=True)
    again = gpurisk.validate(adult, keys, replicates=9, processes=2, seed=5, draw="cells",
                             fractions=[0.05], resume=tmp_path / "r")
    pd.testing.assert_frame_equal(here.replicates, again.replicates, check_exact=True)


def test_validate_replicates_run_in_processes(adult, toys):
    """Where they run: in the processes (a measure's process id), in one thread each."""
    got = gpurisk.validate(adult, KEYS[:3], replicates=10, processes=2, seed=1,
                           measures=["toy_pid"], fractions=[0.05])
    pids = set(got.replicates["value"].astype(int))
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert set(got.replicates["se"]) == {1.0}
    here = gpurisk.validate(adult, KEYS[:3], replicates=10, processes=0, seed=1,
                            measures=["toy_pid"], fractions=[0.05])
    assert set(here.replicates["value"].astype(int)) == {os.getpid()}


def test_validate_survives_a_process_that_dies(adult, toys):
    got = gpurisk.validate(adult, KEYS[:3], replicates=10, processes=2, seed=1,
                           measures=["toy_dies"], fractions=[0.05])
    assert len(got.replicates) == 10
    assert set(got.replicates["value"].astype(int)) == {os.getpid()}
    assert any("ended unexpectedly" in w and "replicate samples" in w for w in got.warnings)


def test_validate_cli_processes_flag():
    bad = run_cli("validate", str(ADULT), "--sep", ";", "--keys", "sex,age", "--processes", "x")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    bad = run_cli("validate", str(ADULT), "--sep", ";", "--keys", "sex,age", "--processes", "-2")
    assert bad.returncode == 2 and "processes" in bad.stderr and "Traceback" not in bad.stderr
    ok = run_cli("validate", str(ADULT), "--sep", ";", "--keys", "sex,age,race",
                 "--replicates", "8", "--fractions", "0.05", "--processes", "2", "--no-progress",
                 "--json")
    assert ok.returncode == 0, ok.stderr
