"""A scan's measures that read cells, run in processes beside the one that builds the tables.

Ê and τ̂1 (the scan's ranking and the figure beside it) fit a log-linear model per combination: on
a survey file they are most of a scan's time, and they run in Python code that holds the
interpreter, so threads do not share them out (FARS's 255 tables: 4.7-5.3 s in one thread, 4.6-4.8 s
in two). Processes do. :class:`MeasureProcesses` keeps ``processes`` of them, forked when the
scan starts (before its roll-up threads and its progress bar start), and
hands each combination's table to one:

- what goes to a process: the costly measures (``default = False``, as a model fit declares
  itself; Ê and τ̂1) that read cells and need neither the records nor the sample's columns (as a
  Dask worker runs them on a table it built: ``Placement.on_tables``), each as its class, so a
  measure registered while the program runs goes too;
- what stays here: every other measure (reading summaries, or cheap: it would cost less than its
  table's copy), and every measure of a table of more than :data:`PROCESS_CELLS` cells (a register's large tables: their fit
  already shares its passes among the CPUs, and a copy would cost what it saves);
- each process runs its measures as this process would (:func:`gpurisk.core.evaluate.run_classes`:
  contained, checked, under the time limit) in one thread (:data:`gpurisk.freq.schedule.CPU_LIMIT`),
  and hands back their results and the warnings they raised; the row is made here, in the plan's
  order, so the figures, the warnings and the output are those of a scan without processes (the
  same code on the same counts: every figure equal, bit for bit; tests/test_scan_processes.py);
- where a process ends unexpectedly (killed for memory, say), or gives nothing within
  :attr:`MeasureProcesses.deadline`, the combinations it held and every later one are computed
  here, and the scan's notes say so;
- Ctrl-C ends the scan and its processes (they ignore the signal themselves; this one kills them).

Processes are forked, so they start in milliseconds and hold what this process held (the plugins
registered, the measure classes), and they are used only where forking is safe and cheap: on
Linux, on the pandas backend, in a process that may have children (not a Dask worker's), with at
least :data:`MIN_COMBINATIONS` combinations to compute. ``processes=None`` (the default) takes the
CPUs this process may use, at most :data:`MAX_PROCESSES`, and none on one CPU; 0 runs every
measure in this process.
"""
from __future__ import annotations

import sys
from collections import deque
from typing import Callable, Mapping, Sequence

import numpy as np

#: at most this many measure processes by default (each holds its own fits: ~100-200 MB apiece on
#: a survey's tables)
MAX_PROCESSES = 8
#: a table of more cells than this has its measures computed here
PROCESS_CELLS = 1 << 20
#: Linux's prctl option that sends a signal to a process when its parent ends
PR_SET_PDEATHSIG = 1
#: at most this many cells in the tables waiting for their measures (their memory: ~200 MB)
PENDING_CELLS = 1 << 23
#: fewer combinations to compute than this: no processes (forking them would cost more than
#: they save)
MIN_COMBINATIONS = 8


def process_classes(names: Sequence[str]) -> dict:
    """name -> class of the measures among ``names`` that a measure process runs: those that read
    cells, need neither the records nor the sample's columns, and declare themselves costly
    (``default = False``: "costly measures (a model fit) set False and run when named",
    :class:`gpurisk.measure.Measure`). A cheap measure costs less than its table's copy."""
    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    out = {}
    for m in names:
        cls = reg[m].cls if m in reg else None
        if cls is None or cls.reads in ("summary", "buckets") or cls.default:
            continue
        if {"records", "columns"} & set(cls.needs):
            continue
        out[m] = cls
    return out


def _forks() -> bool:
    """Whether this process may fork measure processes (module docstring)."""
    import multiprocessing
    if not sys.platform.startswith("linux"):
        return False
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    return not multiprocessing.current_process().daemon


def how_many(processes: int | None, combinations: int) -> int:
    """The measure processes a scan of ``combinations`` combinations (to compute) starts, for the
    caller's ``processes`` (checked; None: the default, module docstring)."""
    if processes == 0 or not _forks():
        return 0
    if processes is None:
        from gpurisk.freq.schedule import usable_cpus
        cpus = usable_cpus()
        if cpus < 2 or combinations < MIN_COMBINATIONS:
            return 0
        return min(cpus, MAX_PROCESSES)
    return int(processes)


def _start_process(parent: int) -> None:
    """In each measure process, once: it ends with its parent (``parent``, the scan's process: a
    ``kill -9`` of the scan must not leave it behind), runs its passes in one thread, leaves
    Ctrl-C to the parent and ends quietly at SIGTERM or SIGHUP."""
    import os
    import signal

    from gpurisk.freq import schedule
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):     # pragma: no cover - a libc without prctl
        pass
    if os.getppid() != parent:            # the parent ended before the line above
        os._exit(0)
    schedule.CPU_LIMIT[0] = 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the parent's handlers (the command line's, which turn SIGTERM and SIGHUP into an exception
    # and a line on the shared standard error) are not the process's: the parent ends it by SIGTERM
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _ready(pause: float = 0.0) -> bool:
    if pause:
        import time
        time.sleep(pause)
    return True


def _portable(table) -> tuple:
    """What a process needs to rebuild ``table`` (a numpy :class:`~gpurisk.freq.table.FreqTable`):
    its counts and categories and the summaries already counted (not its records' locator)."""
    known = {k: table._memo[k] for k in ("n", "N", "Z", "pop_cells") if k in table._memo}
    return (table.keys, table.categories, table.cell_id, table.f, table.F, table.w, table.radix,
            table.stored_cell_codes, table.backend, known)


def _measures(portable: tuple, classes: Mapping[str, type], ctx, timeout) -> dict:
    """In a measure process: the measures ``classes`` on the table (:func:`_portable`), as
    :func:`gpurisk.core.evaluate.run_classes_caught` gives them."""
    from gpurisk.core.evaluate import run_classes_caught
    from gpurisk.freq.table import FreqTable
    keys, categories, cell_id, f, F, w, radix, codes, backend, known = portable
    table = FreqTable(keys, categories, cell_id, f, F, w, radix, np, codes, None, backend,
                      known=known)
    return run_classes_caught(table, ctx, classes, timeout)


class MeasureProcesses:
    """``processes`` forked processes that run ``classes`` (name -> measure class) on the tables
    handed to them (module docstring). Make it before any thread of the scan starts."""

    def __init__(self, processes: int, classes: Mapping[str, type], timeout: float | None):
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor
        self.classes = dict(classes)
        self.timeout = timeout
        self.processes = int(processes)
        #: set once a process ended unexpectedly: from then on everything is computed here
        self.broken: str | None = None
        self._pool = ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("fork"),
                                         initializer=_start_process,
                                         initargs=(os.getpid(),))
        # every process is forked now, while this is the scan's only thread: at the first
        # submission (Python 3.11 on, for a pool that forks); before 3.11 one a submission while
        # none is idle, so each of these waits a moment
        pause = 0.0 if sys.version_info >= (3, 11) else 0.05
        for f in [self._pool.submit(_ready, pause) for _ in range(self.processes)]:
            f.result()

    @property
    def window(self) -> int:
        """How many tables may wait for their measures at a time: enough that the roll-ups go on
        while the processes work (on a 10⁷-record register's 255 tables, 2 CPUs: 5.8-5.9 s at
        8 a process, 6.1-6.4 s at 2), and at most :data:`PENDING_CELLS` cells among them."""
        return 8 * self.processes

    def submit(self, table, ctx):
        """A future of ``table``'s measures run in a process, or None where they run here (module
        docstring)."""
        if self.broken is not None or table.xp is not np:
            return None
        if int(table.cell_id.shape[0]) > PROCESS_CELLS:
            return None
        from dataclasses import replace
        try:
            return self._pool.submit(_measures, _portable(table), self.classes,
                                     replace(ctx, columns={}), self.timeout)
        except Exception as exc:             # the pool broke since the last submission
            self._broke(exc, "ended unexpectedly")
            return None

    def result(self, future) -> dict | None:
        """What the process gave (:func:`_measures`), or None where it ended unexpectedly, or gave
        nothing within :attr:`deadline` (the measures then run here)."""
        from concurrent.futures import TimeoutError as Late
        from concurrent.futures.process import BrokenProcessPool
        try:
            return future.result(timeout=self.deadline)
        except BrokenProcessPool as exc:
            self._broke(exc, "ended unexpectedly")
            return None
        except Late as exc:
            self._broke(exc, "gave no result in time")
            return None

    @property
    def deadline(self) -> float:
        """Seconds a table's measures may take in a process, counted from when this process asks
        for them: each measure's time limit, and a minute more. A process past it is taken as
        stuck (a lock a thread of this process held when it was forked, say), and everything is
        computed here from then on."""
        from gpurisk.core.evaluate import check_timeout
        return len(self.classes) * check_timeout(self.timeout) + 60.0

    def _broke(self, exc, what: str) -> None:
        if self.broken is None:
            self.broken = (f"a measure process {what} ({type(exc).__name__}); the "
                           "combinations it and the others held, and every later one, were computed "
                           "in the scan's own process")

    def close(self, failed: bool = False) -> None:
        """Shut the processes down; where the scan ``failed`` (an error, Ctrl-C), end them at once."""
        pool = self._pool
        if failed:
            stop = getattr(pool, "kill_workers", None)          # Python 3.14
            if stop is not None:
                stop()
            else:     # the processes before the shutdown forgets them; SIGKILL: they write
                # nothing of their own, and no handler of theirs can keep them (or the exit of
                # this process, which waits for them) going
                kids = list((getattr(pool, "_processes", None) or {}).values())
                pool.shutdown(wait=False, cancel_futures=True)
                for p in kids:
                    p.kill()
        pool.shutdown(wait=True, cancel_futures=True)


def in_order(tables, start: Callable, finish: Callable, procs: MeasureProcesses | None):
    """For each ``(i, table)`` of ``tables``: ``start(i, table)`` gives the combination's context;
    its measures that go to a process are handed to ``procs`` (none: all run in ``finish``); then
    ``finish(i, table, ctx, done)`` makes its row, ``done`` what the process gave (None: nothing
    ran there), in the tables' order, at most ``procs.window`` tables and :data:`PENDING_CELLS`
    cells waiting at a time. Yields each row as it is finished."""
    pending: deque = deque()
    window = procs.window if procs is not None else 0
    cells = [0]
    for i, table in tables:
        ctx = start(i, table)
        fut = procs.submit(table, ctx) if procs is not None else None
        size = int(table.cell_id.shape[0]) if procs is not None else 0
        pending.append((i, table, ctx, fut, size))
        cells[0] += size
        del table
        while pending and (len(pending) > window or cells[0] > PENDING_CELLS
                           or pending[0][3] is None or pending[0][3].done()):
            yield _finish(pending.popleft(), finish, procs, cells)
    while pending:
        yield _finish(pending.popleft(), finish, procs, cells)


def _finish(item, finish: Callable, procs, cells: list):
    i, table, ctx, fut, size = item
    cells[0] -= size
    done = procs.result(fut) if fut is not None else None
    return finish(i, table, ctx, done)
