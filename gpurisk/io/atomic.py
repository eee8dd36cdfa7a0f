"""Atomic writing: every file gpurisk writes goes through these. A temporary name beside the target,
flushed and renamed over it, so a crash never leaves a half-written file under the final name."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from gpurisk.errors import BadInput


@contextmanager
def atomic_path(path, suffix: str = ""):
    """Yield a temporary path beside ``path``; on success it is flushed and renamed over ``path``.

    A crash (or kill) before the rename leaves only a hidden ``.NAME.*.tmp`` file, never a half-written
    file under the final name; on an exception the temporary file is removed. ``suffix`` is appended
    to the temporary name (writers that choose a format by extension need it, e.g. ``.png``).
    """
    import os
    p = Path(path)
    tmp = temp_path(p, suffix)
    try:
        yield tmp
        if tmp.exists():
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()


def temp_path(path, suffix: str = "") -> Path:
    """The hidden temporary name beside ``path`` that :func:`atomic_path` writes to."""
    import os
    p = Path(path)
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


def check_output_file(path, suffixes=None, what: str = "output") -> Path:
    """An output file that can be written, checked before any work: its folder exists, it is not a
    folder, and (with ``suffixes``) its name ends in one of them. BadInput in one line otherwise."""
    p = Path(path)
    if suffixes and not p.name.lower().endswith(tuple(suffixes)):
        raise BadInput(f"{what} {p.name!r}: name it with one of {', '.join(suffixes)}")
    if not p.parent.is_dir():
        raise BadInput(f"{what} folder {str(p.parent)!r} does not exist")
    if p.is_dir():
        raise BadInput(f"{what} {str(p)!r} is a folder")
    import os
    if not os.access(p.parent, os.W_OK):
        raise BadInput(f"{what} folder {str(p.parent)!r} is not writable")
    return p
