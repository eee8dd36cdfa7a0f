"""Atomic writing: every file gpurisk writes goes through these. A temporary name beside the target,
flushed and renamed over it, so a crash never leaves a half-written file under the final name."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pandas as pd



@contextmanager
def atomic_path(path, suffix: str = ""):
    """Yield a temporary path beside ``path``; on success it is flushed and renamed over ``path``.

    A crash (or kill) before the rename leaves only a hidden ``.NAME.*.tmp`` file, never a half-written
    file under the final name; on an exception the temporary file is removed. ``suffix`` is appended
    to the temporary name (writers that choose a format by extension need it, e.g. ``.png``).
    """
    import os

    from gpurisk.io.outputs import check_target, disk_error
    p = Path(path)
    check_target(p, what="output", folder_ok=True, others=False)   # not an input, not a device
    tmp = temp_path(p, suffix)
    try:
        yield tmp
        if tmp.exists():
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as exc:        # a full disk, a folder turned read-only: one line
        err = disk_error(p, exc)
        if err is None:
            raise
        raise err from None
    finally:
        if tmp.exists():
            tmp.unlink()


def temp_path(path, suffix: str = "") -> Path:
    """The hidden temporary name beside ``path`` that :func:`atomic_path` writes to; a killed run's
    temporary files of the same output (their process dead) are removed first."""
    import os

    from gpurisk.io.outputs import clean_stale
    p = Path(path)
    clean_stale(p)
    return p.with_name(f".{p.name}.{os.getpid()}.tmp{suffix}")


def write_text_atomic(path, text: str, encoding: str = "utf-8") -> Path:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding=encoding)
    return Path(path)


def write_bytes_atomic(path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(data)
    return Path(path)


def write_frame_atomic(frame: pd.DataFrame, path, **kwargs) -> Path:
    """A frame as Parquet (``.parquet``/``.pq``) or CSV (anything else, gzip for ``.gz``), atomically."""
    p = Path(path)
    name = p.name.lower()
    with atomic_path(p) as tmp:
        if name.endswith((".parquet", ".pq")):
            frame.to_parquet(tmp, **{"index": False, **kwargs})
        else:
            comp = "gzip" if name.endswith(".gz") else None
            frame.to_csv(tmp, **{"index": False, "compression": comp, **kwargs})
    return p


from gpurisk.io.outputs import (DATASET_PART, check_output_dataset,  # noqa: E402,F401
                                 check_output_file)


@contextmanager
def atomic_dataset(path):
    """Yield a hidden temporary folder beside ``path``; on success it replaces ``path`` (a file, or
    an earlier dataset folder) by one rename, so readers never see a partial dataset. On an
    exception the temporary folder is removed."""
    import os
    import shutil

    from gpurisk.io.outputs import check_target, clean_stale
    p = Path(path)
    check_target(p, what="output", folder_ok=True, others=False)
    clean_stale(p)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmpdir")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
        old = None
        if p.exists() or p.is_symlink():
            old = p.with_name(f".{p.name}.{os.getpid()}.old")
            os.replace(p, old)
        os.replace(tmp, p)
        if old is not None:
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
