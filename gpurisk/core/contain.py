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
  open, and runs nothing more) and the calls after it go to a new worker;
- the calls that end or signal the process are refused to the worker thread (:func:`guard_exits`):
  ``os._exit``, ``os.abort``, ``os.kill``/``os.killpg`` aimed at this process or its group,
  ``signal.raise_signal``, ``signal.pthread_kill`` of a thread of this process and
  ``_thread.interrupt_main`` raise :class:`MeasureEscape` there instead (the measure's row says
  what it tried); ``sys.exit``/``exit()`` raise ``SystemExit``, which the runner contains like any
  exception. Every other thread calls them as before. Not caught: threads the measure starts
  itself, and C code that exits (``ctypes``, an extension's ``exit()``).

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

__all__ = ["run_contained", "same_cwd", "same_fds", "same_streams", "guard_exits", "MeasureEscape",
           "is_third_party"]

#: idents of the threads now running a measure: what they write to sys.stdout/sys.stderr is dropped
_QUIET: set[int] = set()
_ROUTER_LOCK = threading.Lock()

#: (finished, value, exception) of one call
Outcome = tuple[bool, Any, "BaseException | None"]


class MeasureEscape(Exception):
    """A measure called something that ends or signals the whole process (see :func:`guard_exits`)."""


#: the guarded calls that would take the standard streams from the process (fds 0, 1, 2)
STREAM_CALLS = ("close", "closerange", "dup2", "fdopen")

#: idents of the threads whose calls that end or signal the process raise MeasureEscape
_GUARDED: set[int] = set()
_GUARD_LOCK = threading.Lock()
_GUARD_INSTALLED = [False]


def _own_targets() -> tuple[set[int], set[int]]:
    """(pids that mean this process to os.kill, process groups that hold it)."""
    pids = {0, os.getpid()}
    try:
        pgid = os.getpgid(0)
    except (OSError, AttributeError):
        return pids, set()
    pids.add(-pgid)
    return pids, {0, pgid}


def _install_guard() -> None:
    """Wrap the calls that end or signal the process once (idempotent): in a thread of
    :data:`_GUARDED` they raise :class:`MeasureEscape`, elsewhere they run as before."""
    import _thread
    import signal
    with _GUARD_LOCK:
        if _GUARD_INSTALLED[0]:
            return

        def wrap(mod, name, hits):
            real = getattr(mod, name, None)
            if real is None:
                return

            def guarded(*args, **kwargs):
                if threading.get_ident() in _GUARDED and hits(*args, **kwargs):
                    shown = ", ".join(repr(a) for a in args[:2])
                    what = ("close the process's standard streams" if name in STREAM_CALLS else
                            "end or signal the whole process")
                    raise MeasureEscape(f"called {mod.__name__}.{name}({shown}), which would "
                                        f"{what}; refused while measures run")
                return real(*args, **kwargs)
            guarded.__wrapped__ = real
            guarded.__name__ = name
            guarded.__doc__ = real.__doc__
            setattr(mod, name, guarded)

        always = lambda *a, **k: True                                   # noqa: E731
        wrap(os, "_exit", always)
        wrap(os, "abort", always)
        wrap(os, "kill", lambda pid, *a, **k: pid in _own_targets()[0])
        wrap(os, "killpg", lambda pgid, *a, **k: pgid in _own_targets()[1])
        wrap(signal, "raise_signal", always)
        wrap(signal, "pthread_kill",
             lambda ident, *a, **k: any(t.ident == ident for t in threading.enumerate()))
        wrap(_thread, "interrupt_main", always)
        # the process's standard input, output and error (file descriptors 0, 1, 2)
        wrap(os, "close", lambda fd, *a, **k: fd in (0, 1, 2))
        wrap(os, "closerange", lambda lo, *a, **k: lo <= 2)
        wrap(os, "dup2", lambda fd, fd2, *a, **k: fd2 in (0, 1, 2))
        wrap(os, "fdopen", lambda fd, *a, **k: fd in (0, 1, 2) and k.get("closefd", True))
        _GUARD_INSTALLED[0] = True


@contextmanager
def guard_exits():
    """In this block, this thread's calls that end or signal the process raise
    :class:`MeasureEscape` (see the module docstring); a Dask worker maps bucket measures in one."""
    _install_guard()
    ident = threading.get_ident()
    nested = ident in _GUARDED
    _GUARDED.add(ident)
    try:
        yield
    finally:
        if not nested:
            _GUARDED.discard(ident)


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

    def close(self):
        """A measure's ``sys.stdout.close()`` closes nothing (the command still has to print)."""
        if threading.get_ident() not in _QUIET:
            self._stream.close()

    def detach(self):
        if threading.get_ident() in _QUIET:
            return _Sink()
        return self._stream.detach()

    def read(self, *args):
        if threading.get_ident() in _QUIET:
            return ""
        return self._stream.read(*args)

    def readline(self, *args):
        if threading.get_ident() in _QUIET:
            return ""
        return self._stream.readline(*args)

    def __getattr__(self, name):
        if name == "buffer" and threading.get_ident() in _QUIET:
            return _Sink()               # its bytes are dropped too, and closing it closes nothing
        return getattr(self._stream, name)


class _Sink:
    """What a measure's thread gets for ``sys.stdout.buffer`` (or ``.detach()``): writes dropped,
    ``close`` harmless."""
    closed = False

    def write(self, data):
        return len(data)

    def read(self, *args):
        return b""

    def flush(self):
        pass

    def close(self):
        pass

    def __getattr__(self, name):
        raise OSError(f"sys.stdout.{name} is not available to a measure")


#: the streams a router stands in front of while measures run (``sys.__stdout__`` too: closing
#: it would close the command's own output)
STREAMS = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")

#: run_contained calls in progress (in any thread): the routers stay while one runs
_ACTIVE = [0]


def _route_output() -> None:
    with _ROUTER_LOCK:
        _ACTIVE[0] += 1
        for name in STREAMS:
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, _Router):
                setattr(sys, name, _Router(stream))


def _unroute_output() -> None:
    """Take the routers away again, unless a measure (one past its time limit) still runs."""
    with _ROUTER_LOCK:
        _ACTIVE[0] -= 1
        if _QUIET or _ACTIVE[0] > 0:
            return
        for name in STREAMS:
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


def is_third_party(cls) -> bool:
    """A measure class defined outside the gpurisk package (its runs get private copies of what
    they read: :func:`gpurisk.core.evaluate.private_table`)."""
    mod = getattr(cls, "__module__", "") or ""
    return not (mod == "gpurisk" or mod.startswith("gpurisk."))


@contextmanager
def same_fds():
    """Put the process's file descriptors 0, 1 and 2 back after a block that closed or replaced
    them (``os.fdopen(1).close()``, C code closing its output): each is duplicated before and,
    where it no longer refers to the same file after, restored from its duplicate."""
    real_dup2 = getattr(os.dup2, "__wrapped__", os.dup2)
    real_close = getattr(os.close, "__wrapped__", os.close)
    saved = {}
    for fd in (0, 1, 2):
        try:
            st = os.fstat(fd)
            saved[fd] = (os.dup(fd), (st.st_dev, st.st_ino))
        except OSError:
            continue
    try:
        yield
    finally:
        for fd, (copy, ident) in saved.items():
            try:
                st = os.fstat(fd)
                same = (st.st_dev, st.st_ino) == ident
            except OSError:
                same = False
            try:
                if not same:
                    real_dup2(copy, fd)
            finally:
                real_close(copy)


@contextmanager
def same_streams(abandoned: Callable[[], bool] = lambda: False):
    """Put back ``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` after a block that replaced them
    (a measure that sets ``sys.stdout = None`` must not take the command's output away). Not when
    ``abandoned()`` says the caller gave up on the block (a measure past its time limit): the
    streams are the process's, and by then the command, or the next one, may have set its own;
    putting back the ones saved before would send that command's output to a stale stream."""
    saved = [getattr(sys, name) for name in STREAMS]
    try:
        yield
    finally:
        if not abandoned():
            for name, stream in zip(STREAMS, saved):
                if getattr(sys, name) is not stream:
                    setattr(sys, name, stream)


class _Worker:
    """A daemon thread running lists of calls; ``current`` is (index, start) of the call it runs."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.current: tuple[int, float] | None = None
        self.cancelled = False
        threading.Thread(target=self._loop, daemon=True, name="gpurisk-measure").start()

    def _loop(self):
        ident = threading.get_ident()
        _install_guard()
        _GUARDED.add(ident)             # for the worker's whole life: it runs only measures
        try:
            self._serve(ident)
        finally:
            _GUARDED.discard(ident)     # a later thread may get the same ident

    def _serve(self, ident):
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
                        with same_cwd(), same_streams(lambda: self.cancelled):
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


def _forget_after_fork() -> None:
    """In a child forked from this process (:mod:`gpurisk.core.forked`'s processes, which run a
    scan's measures and validate's replicates): the parent's worker threads were not copied, so
    their queues would never be served; the child starts with no worker, no thread quiet or
    guarded, and fresh locks (one held by another of the parent's threads at the fork would never
    be released)."""
    global _WORKERS, _ROUTER_LOCK, _GUARD_LOCK
    _WORKERS = threading.local()
    _ROUTER_LOCK, _GUARD_LOCK = threading.Lock(), threading.Lock()
    _QUIET.clear()
    _GUARDED.clear()
    _ACTIVE[0] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


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
    fds = same_fds()
    fds.__enter__()
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
        try:
            fds.__exit__(None, None, None)
        finally:
            _unroute_output()
    return outcomes
