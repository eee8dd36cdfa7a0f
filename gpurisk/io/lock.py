"""One writer per output: a run that writes a resumable output (a scan folder, a ``validate --resume``
folder, a ``dis --state`` file) holds an exclusive lock on it for as long as it writes.

Issue 20: a second ``--resume`` started while the first was running added duplicate combinations,
and ``--overwrite`` during another run gave 29-61 duplicates, both with exit code 0. Now the second
run stops at once with one line. The lock is ``fcntl.flock`` on a hidden file beside the output
(``.NAME.lock``): the operating system releases it when the process ends, however it ends (a
``kill -9`` leaves no stale lock), and the file is removed when the run finishes. Where ``fcntl``
is missing (Windows) outputs are not locked.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from gpurisk.errors import BadInput


def lock_path(target) -> Path:
    """The lock file of an output: ``.NAME.lock`` in the same folder."""
    p = Path(target)
    return p.with_name(f".{p.name}.lock")


@contextmanager
def exclusive(target, what: str = "output"):
    """Hold the lock of ``target`` while the block runs; BadInput (one line) when another process
    holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path = lock_path(target)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:   # no such folder, not writable: the command's own check says so
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise BadInput(f"another gpurisk run is writing {what} {str(target)!r}; wait for it to "
                           "finish (or stop it), then run again") from None
        try:   # the file may have been removed (and re-created) by a run that just finished
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:  # pragma: no cover
            pass
        os.close(fd)


def locked(param: str, what: str):
    """Decorator: while the function runs, hold the lock of the output its argument ``param`` names
    (nothing is locked when that argument is None)."""
    import functools
    import inspect

    def deco(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            target = sig.bind_partial(*args, **kwargs).arguments.get(param)
            if target is None:
                return fn(*args, **kwargs)
            with exclusive(target, what):
                return fn(*args, **kwargs)
        return wrapper
    return deco
