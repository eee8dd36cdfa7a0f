"""Where measures run: a worker thread, quiet, under a time limit, in the caller's working directory.

:func:`run_contained` runs a list of calls (one combination's measures) one after the other in a
daemon worker thread and waits for each at most ``timeout`` seconds from its start:

- what the worker writes to ``sys.stdout`` / ``sys.stderr`` is dropped (a :class:`_Router` stands
  in front of both while measures run and passes every other thread's writes through), so a
  measure's ``print()`` cannot corrupt ``--json`` output; output that C code writes straight to the
  file descriptors, or that threads the measure starts write, is not caught;
- the working directory is restored after each call (an ``os.chdir`` cannot move a relative ``-o``);
- a call past its limit is reported as not finished; a thread cannot be killed, so the worker is
  abandoned (it finishes that call in the background, a daemon that does not hold the process
  open, and runs nothing more) and the calls after it go to a new worker.

One worker per calling thread, reused: handing a whole list over costs one thread switch, not one
per measure.
"""
from __future__ import annotations

import os
import queue
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Sequence

__all__ = ["run_contained", "same_cwd"]

#: idents of the threads now running a measure: what they write to sys.stdout/sys.stderr is dropped
_QUIET: set[int] = set()
_ROUTER_LOCK = threading.Lock()

#: (finished, value, exception) of one call
Outcome = tuple[bool, Any, "BaseException | None"]


class _Router:
    """``sys.stdout`` / ``sys.stderr`` while measures run: writes from a thread in :data:`_QUIET`
    are dropped, every other thread's pass through to the stream it stands in front of."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        if threading.get_ident() in _QUIET:
            return len(text)
        return self._stream.write(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if threading.get_ident() not in _QUIET:
            self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


#: run_contained calls in progress (in any thread): the routers stay while one runs
_ACTIVE = [0]


def _route_output() -> None:
    with _ROUTER_LOCK:
        _ACTIVE[0] += 1
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, _Router):
                setattr(sys, name, _Router(stream))


def _unroute_output() -> None:
    """Take the routers away again, unless a measure (one past its time limit) still runs."""
    with _ROUTER_LOCK:
        _ACTIVE[0] -= 1
        if _QUIET or _ACTIVE[0] > 0:
            return
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if isinstance(stream, _Router):
                setattr(sys, name, stream._stream)


@contextmanager
def same_cwd():
    """Restore the working directory after a block that changed it."""
    try:
        cwd = os.getcwd()
    except OSError:                     # the directory was removed: nothing to go back to
        cwd = None
    try:
        yield
    finally:
        if cwd is not None:
            try:
                moved = os.getcwd() != cwd
            except OSError:
                moved = True
            if moved:
                os.chdir(cwd)


class _Worker:
    """A daemon thread running lists of calls; ``current`` is (index, start) of the call it runs."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.current: tuple[int, float] | None = None
        self.cancelled = False
        threading.Thread(target=self._loop, daemon=True, name="gpurisk-measure").start()

    def _loop(self):
        ident = threading.get_ident()
        while True:
            job = self.jobs.get(block=True)
            if job is None:
                return
            fns, out, stop, done = job
            _QUIET.add(ident)
            try:
                for i, fn in enumerate(fns):
                    if self.cancelled:
                        break
                    self.current = (i, time.monotonic())
                    try:
                        with same_cwd():
                            out[i] = (True, fn(), None)
                    except BaseException as exc:  # noqa: B036 - handed to the caller
                        out[i] = (True, None, exc)
                        if stop(exc):
                            break
            finally:
                self.current = None
                _QUIET.discard(ident)
                done.set()


_WORKERS = threading.local()


def _worker() -> _Worker:
    w = getattr(_WORKERS, "worker", None)
    if w is None:
        w = _WORKERS.worker = _Worker()
    return w


def _abandon(w: _Worker) -> None:
    w.cancelled = True
    w.jobs.put(None)                    # it ends once the call it runs returns
    if getattr(_WORKERS, "worker", None) is w:
        _WORKERS.worker = None


def run_contained(fns: Sequence[Callable[[], Any]], timeout: float,
                  stop: Callable[[BaseException], bool] = lambda exc: False) -> list[Outcome]:
    """Each call's (finished, value, exception), in order (see the module docstring). A call
    running past ``timeout`` seconds gives (False, None, None). An exception for which ``stop``
    is true ends the list there: the calls after it are not run and are left out."""
    outcomes: list[Outcome] = []
    start = 0
    _route_output()
    try:
        while start < len(fns):
            w = _worker()
            out: dict[int, Outcome] = {}
            done = threading.Event()
            w.current = (0, time.monotonic())
            w.jobs.put((fns[start:], out, stop, done))
            stuck = None
            try:
                while not done.is_set():
                    cur = w.current
                    if cur is None:                     # between its last call and done
                        done.wait(0.05)
                        continue
                    left = cur[1] + timeout - time.monotonic()
                    if left > 0:
                        done.wait(left)
                    elif cur[0] not in out and w.current is cur:
                        stuck = cur[0]
                        break
            except BaseException:                       # interrupted: leave the worker behind
                _abandon(w)
                raise
            if stuck is None:
                outcomes += [out[i] for i in sorted(out)]
                if len(out) < len(fns) - start:        # stopped early
                    break
                start = len(fns)
            else:
                _abandon(w)
                outcomes += [out[i] for i in range(stuck)] + [(False, None, None)]
                start += stuck + 1
    finally:
        _unroute_output()
    return outcomes
