"""Processes forked beside a command, for the work that holds the interpreter (a model fit per table
or per replicate sample): :class:`Forked`, what a scan's measures (:mod:`gpurisk.scan.processes`)
and validate's replicates (:mod:`gpurisk.workflows.validate`) run in.

- Forked, so they start in milliseconds and hold what this process held when they were made (the
  plugins registered, the measure classes, a population's cells handed over as ``inherit``),
  copied only where written. Made before the command starts a thread of its own, so no lock of
  this process is held in them (the modules that keep per-thread state forget it in a forked child:
  :mod:`gpurisk.core.contain`'s measure thread, :mod:`gpurisk.io.lock`'s descriptors).
- Only where forking is safe and cheap: on Linux, in a process that may have children (not a Dask
  worker's); :func:`how_many` gives how many (``None``: the CPUs this process may use, at most
  :data:`MAX_PROCESSES`, none on one CPU, for fewer than :data:`MIN_ITEMS` items, or for less
  than :data:`MIN_CELLS` cells of work where the caller can bound it; 0: none).
- Each runs its work in one thread (:data:`gpurisk.freq.schedule.CPU_LIMIT`), ends with this process
  (a ``kill -9`` of the command must not leave it behind), ignores Ctrl-C (this process ends it),
  ends quietly at SIGTERM or SIGHUP, and writes (if ever) to the process's own standard streams,
  not to the stand-ins this process had put in front of them (a progress bar's).
- Where one ends unexpectedly (killed for memory, say), or gives nothing in time, :attr:`broken`
  says so and the caller computes what it held, and everything after, itself.
- Python 3.12 on warns (DeprecationWarning) at every fork of a process with a thread besides its
  main one (BLAS's, a caller's), as a fork may copy a lock that thread held. The warning is not
  passed on from here, as the above is this module's answer to it: the process's threads' state
  that a child would read is forgotten in it, and a child stuck on a lock gives nothing in time,
  so its work is done here.
"""
from __future__ import annotations

import sys
import warnings
from collections import deque
from typing import Any, Callable, Iterable

#: at most this many processes by default (each holds its own fits: ~100-200 MB apiece on a
#: survey's tables)
MAX_PROCESSES = 8
#: fewer items (combinations, replicate samples) to compute than this: no processes (forking them
#: would cost more than they save)
MIN_ITEMS = 8
#: a scan whose tables may hold fewer cells than this in all (each bounded before it is built, by
#: the product of its keys' categories and by the cells of the table of every key) runs in one
#: process: forking its processes and copying its tables would cost more than they save.
#: ``python bench/bench_processes.py --breakeven adult,fars`` on 2 CPUs, at π = 1 %: 15
#: combinations (bounds 6.8·10³, 2.0·10⁴) took 1.2-1.4 times as long in two processes as in one;
#: from 35 (bounds 6.9·10⁴ up) two were faster (one/two 1.06-1.40 at 35 combinations, 1.19-2.00
#: from 50; two runs); the threshold sits between, near the middle on a log scale
MIN_CELLS = 1 << 15
#: what Python 3.12 on warns at a fork of a process with threads (module docstring)
FORK_WARNING = r".*is multi-threaded, use of fork\(\) may lead to deadlocks in the child"
#: Linux's prctl option that sends a signal to a process when its parent ends
PR_SET_PDEATHSIG = 1

#: a table of more cells than this is computed in the command's own process (a register's large
#: tables: their fit already shares its passes among the CPUs, and a copy would cost what it saves)
PROCESS_CELLS = 1 << 20
#: at most this many cells in the tables waiting for a process (their memory: ~200 MB)
PENDING_CELLS = 1 << 23

#: in a forked process: what its maker handed over as ``inherit`` (not copied: the fork shares it)
INHERITED: list = [None]


def forks() -> bool:
    """Whether this process may fork its processes (module docstring)."""
    import multiprocessing
    if not sys.platform.startswith("linux"):
        return False
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    return not multiprocessing.current_process().daemon


def how_many(processes: int | None, items: int, cells: int | None = None) -> int:
    """The processes a command of ``items`` items to compute starts, for the caller's
    ``processes`` (checked; None: the default, module docstring); ``cells``: a bound on the cells
    of those items' tables in all, where the caller knows one."""
    if processes == 0 or not forks():
        return 0
    if processes is None:
        from gpurisk.freq.schedule import usable_cpus
        cpus = usable_cpus()
        if cpus < 2 or items < MIN_ITEMS or (cells is not None and cells < MIN_CELLS):
            return 0
        return min(cpus, MAX_PROCESSES)
    return int(processes)


def _start_process(parent: int, inherit: Any) -> None:
    """In each process, once (module docstring)."""
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
    INHERITED[0] = inherit
    # the parent's stand-ins for its streams (a progress bar's, a test's capture) and their locks,
    # which a thread of the parent may have held at the fork, are not the process's
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the parent's handlers (the command line's, which turn SIGTERM and SIGHUP into an exception
    # and a line on the shared standard error) are not the process's
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _ready(pause: float = 0.0) -> bool:
    if pause:
        import time
        time.sleep(pause)
    return True


class Forked:
    """``processes`` processes, forked now (module docstring); ``inherit``: what each finds in
    :data:`INHERITED` (shared by the fork, not copied); ``what``: the items they compute, for the
    note :attr:`broken` (e.g. "combinations")."""

    def __init__(self, processes: int, inherit: Any = None, what: str = "combinations"):
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor
        self.processes = int(processes)
        self.what = what
        #: set once a process ended unexpectedly: from then on everything is computed here
        self.broken: str | None = None
        self._pool = ProcessPoolExecutor(self.processes,
                                         mp_context=multiprocessing.get_context("fork"),
                                         initializer=_start_process,
                                         initargs=(os.getpid(), inherit))
        # every process is forked now, while this is the command's only thread: at the first
        # submission (Python 3.11 on, for a pool that forks); before 3.11 one a submission while
        # none is idle, so each of these waits a moment
        pause = 0.0 if sys.version_info >= (3, 11) else 0.05
        with warnings.catch_warnings():       # the forks' warning (module docstring)
            warnings.filterwarnings("ignore", FORK_WARNING, DeprecationWarning)
            for f in [self._pool.submit(_ready, pause) for _ in range(self.processes)]:
                f.result()

    def call(self, fn, *args):
        """A future of ``fn(*args)`` in a process, or None where the processes are broken."""
        if self.broken is not None:
            return None
        try:
            return self._pool.submit(fn, *args)
        except Exception as exc:             # the pool broke since the last submission
            self._broke(exc, "ended unexpectedly")
            return None

    def outcome(self, future, deadline: float | None = None):
        """What ``future`` gave, or None where its process ended unexpectedly, or gave nothing
        within ``deadline`` seconds (the caller then computes it itself)."""
        from concurrent.futures import TimeoutError as Late
        from concurrent.futures.process import BrokenProcessPool
        try:
            return future.result(timeout=deadline)
        except BrokenProcessPool as exc:
            self._broke(exc, "ended unexpectedly")
            return None
        except Late as exc:
            self._broke(exc, "gave no result in time")
            return None

    def _broke(self, exc, what: str) -> None:
        if self.broken is None:
            self.broken = (f"a worker process {what} ({type(exc).__name__}); the {self.what} it "
                           f"and the others held, and every later one, were computed in the "
                           "command's own process")

    def close(self, failed: bool = False) -> None:
        """Shut the processes down; where the command ``failed`` (an error, Ctrl-C), kill them at
        once."""
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


def in_turn(items: Iterable, submit: Callable, finish: Callable, window: int,
            size: Callable | None = None, budget: int | None = None):
    """For each item: ``submit(item)`` hands it to a process (a future, or None where it is done
    here); then ``finish(item, future)`` is yielded, in the items' order, with at most ``window``
    items (and, with ``size``, at most ``budget`` of their sizes) handed over and not yet finished.
    An item whose future is None is finished in its turn, without waiting for those after it."""
    pending: deque = deque()
    held = 0
    for item in items:
        weight = size(item) if size is not None else 0
        pending.append((item, submit(item), weight))
        held += weight
        while pending and (len(pending) > window or (budget is not None and held > budget)
                           or pending[0][1] is None or pending[0][1].done()):
            item0, fut, w0 = pending.popleft()
            held -= w0
            yield finish(item0, fut)
    while pending:
        item0, fut, _ = pending.popleft()
        yield finish(item0, fut)
