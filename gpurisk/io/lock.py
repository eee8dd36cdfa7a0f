"""One writer per output: a run that writes a resumable output (a scan folder, a ``validate --resume``
folder, a ``dis --state`` file) holds an exclusive lock on it for as long as it writes.

Issue 20: a second ``--resume`` started while the first was running added duplicate combinations,
and ``--overwrite`` during another run gave 29-61 duplicates, both with exit code 0. Now the second
run stops at once with one line. The lock is ``fcntl.flock`` on a hidden file beside the output
(``.NAME.lock``): the operating system releases it when the process ends, however it ends (a
``kill -9`` leaves no stale lock), and the file is removed when the run finishes. Where ``fcntl``
is missing (Windows) outputs are not locked.

The lock is taken on the output's resolved path (symlinks followed), so a second run that names the
same output through a link (``link.parquet -> s.parquet``) meets the first run's lock. A folder that
cannot be written (read-only) is one line here, before the work.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from gpurisk.errors import BadInput


#: the lock files' descriptors this process holds now
_HELD: set[int] = set()


def _close_in_child() -> None:
    """In a child forked while a lock is held (:mod:`gpurisk.core.forked`'s processes): close its
    copies of the lock files, so that the lock is the parent's alone and ends with it (a flock
    lasts while any copy of its descriptor is open: a child outliving a ``kill -9`` of its parent
    would hold it)."""
    for fd in list(_HELD):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


def lock_path(target) -> Path:
    """The lock file of an output: ``.NAME.lock`` in the folder of its resolved path."""
    p = Path(target)
    try:
        p = p.resolve()
    except (OSError, RuntimeError):   # a symlink loop: the command's own check says so
        pass
    return p.with_name(f".{p.name}.lock")


@contextmanager
def exclusive(target, what: str = "output", marker: str | None = None):
    """Hold the lock of ``target`` while the block runs; BadInput (one line) when another process
    holds it. ``marker``: the file that marks ``target`` as this command's folder; a folder that
    holds another command's marker is refused (``validate --resume`` into a scan's folder)."""
    if marker is not None:
        from gpurisk.io.outputs import RESULT_MARKERS
        p = Path(target)
        other = [m for m in RESULT_MARKERS if m != marker and (p / m).exists()]
        if other:
            raise BadInput(f"{what} {str(target)!r} is {RESULT_MARKERS[other[0]]} result folder "
                           f"(it holds {other[0]}); give another folder")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path = lock_path(target)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            from gpurisk.io.outputs import disk_error
            err = disk_error(path.parent, exc) if path.parent.is_dir() else None
            if err is not None:      # a read-only folder: one line before the work
                raise BadInput(f"cannot write {what} {str(target)!r}: {exc.strerror or exc}") from None
            yield                    # no such folder: the command's own check says so
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
    _HELD.add(fd)
    try:
        try:     # the PID is for people reading the lock file; a full disk leaves it empty
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass
        yield
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:  # pragma: no cover
            pass
        _HELD.discard(fd)
        os.close(fd)


def locked(param: str, what: str, marker: str | None = None):
    """Decorator: while the function runs, hold the lock of the output its argument ``param`` names
    (nothing is locked when that argument is None); ``marker`` as in :func:`exclusive`."""
    import functools
    import inspect

    def deco(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            target = sig.bind_partial(*args, **kwargs).arguments.get(param)
            if target is None:
                return fn(*args, **kwargs)
            with exclusive(target, what, marker):
                return fn(*args, **kwargs)
        return wrapper
    return deco
