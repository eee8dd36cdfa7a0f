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


#: the files of a Parquet dataset gpurisk writes partition by partition
DATASET_PART = "part.*.parquet"


def check_output_dataset(path, suffixes=None, what: str = "output") -> Path:
    """A Parquet dataset folder to be written partition-wise (a distributed run's per-record rows),
    checked before any work: as :func:`check_output_file`, except that an existing folder is allowed
    when it holds nothing but ``part.*.parquet`` files (an earlier run's dataset, replaced)."""
    p = Path(path)
    if p.is_dir():
        other = [c.name for c in p.iterdir() if not c.match(DATASET_PART)]
        if other:
            raise BadInput(f"{what} {str(p)!r} is a folder holding other files than part.*.parquet "
                           f"(e.g. {other[0]!r}); give a new name")
        check_output_file(p.parent / (p.name + ".check"), None, what)
        if suffixes and not p.name.lower().endswith(tuple(suffixes)):
            raise BadInput(f"{what} {p.name!r}: name it with one of {', '.join(suffixes)}")
        return p
    return check_output_file(p, suffixes, what)


@contextmanager
def atomic_dataset(path):
    """Yield a hidden temporary folder beside ``path``; on success it replaces ``path`` (a file, or
    an earlier dataset folder) by one rename, so readers never see a partial dataset. On an
    exception the temporary folder is removed."""
    import os
    import shutil
    p = Path(path)
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
