"""Outputs that cannot destroy: every output path is checked before the work.

Refused in one line (:class:`BadInput`), symlinks followed:

* an output that resolves to an input of the run (``assess in.csv -o in.csv``, or a link to it):
  the inputs are those given in ``inputs=`` and every path this process has read or been given
  (:func:`gpurisk.io.paths.input_paths`); :func:`gpurisk.io.atomic.atomic_path` refuses them again
  at the moment of writing, so no path is ever replaced by its own results;
* a character or block device, a socket or a pipe (``-o /dev/null`` would be replaced by a file);
* a path inside another command's result folder (a scan's, holding ``_scan.json``, or a
  ``validate --resume`` folder, holding ``_validate.json``);
* a folder that does not exist or cannot be written (read-only), a name that is a folder, a name
  without one of the command's extensions.

A disk that fills while writing (ENOSPC), or a folder that turns read-only, is one line too
(:func:`disk_error`). Temporary files ``.NAME.PID.tmp`` left beside an output by a killed run (its
process no longer alive) are removed when the next run writes that output (:func:`clean_stale`).
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.io.paths import input_paths, resolved

#: files that mark a folder as another command's results
RESULT_MARKERS = {"_scan.json": "a scan's", "_validate.json": "a validate --resume"}
#: errors of writing that are the disk's or the folder's, not gpurisk's
DISK_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG}


def _resolved(path) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        raise BadInput(f"output {str(path)!r}: cannot resolve the path (a symlink loop?)") from None


def refuse_input(path, inputs=(), what: str = "output") -> None:
    """BadInput when ``path`` (symlinks followed) is one of ``inputs`` or of this run's inputs."""
    target = _resolved(path)
    for i in resolved(inputs or ()) | input_paths():
        if str(target) == i:
            raise bad_input(f"{what} {str(path)!r} is an input of this run; writing it would destroy "
                           "the input: give another name")
        if Path(i) in target.parents and Path(i).is_dir():
            raise bad_input(f"{what} {str(path)!r} is inside {i}, an input of this run (a Parquet "
                           "dataset folder): give a path outside it")


def check_target(path, inputs=(), what: str = "output", folder_ok: bool = False,
                 others: bool = True) -> Path:
    """The checks every output gets (see the module docstring), before any work; ``others=False``
    leaves out the check of another command's result folder (a command's own files inside its
    folder are written through :func:`gpurisk.io.atomic.atomic_path` too)."""
    p = Path(path)
    refuse_input(p, inputs, what)
    real = _resolved(p)
    if real.exists():
        mode = real.stat().st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise bad_input(f"{what} {str(p)!r} is not a regular file (a device, pipe or socket); "
                           "give a file name")
        if stat.S_ISDIR(mode) and not folder_ok:
            raise bad_input(f"{what} {str(p)!r} is a folder")
    parent = real.parent
    for marker, whose in (RESULT_MARKERS.items() if others else ()):
        if (parent / marker).exists():
            raise bad_input(f"{what} {str(p)!r} is inside {whose} result folder ({parent}); "
                           "give a path outside it")
    return p


def check_output_file(path, suffixes=None, what: str = "output", inputs=()) -> Path:
    """An output file that can be written, checked before any work: its folder exists and is
    writable, it is not a folder, not a device, not an input (``inputs`` and this run's), not inside
    another command's result folder, and (with ``suffixes``) its name ends in one of them."""
    p = Path(path)
    if suffixes and not p.name.lower().endswith(tuple(suffixes)):
        raise bad_input(f"{what} {p.name!r}: name it with one of {', '.join(suffixes)}")
    if not p.parent.is_dir():
        raise bad_input(f"{what} folder {str(p.parent)!r} does not exist")
    if p.is_dir():
        raise bad_input(f"{what} {str(p)!r} is a folder")
    check_target(p, inputs, what)
    if not os.access(_resolved(p).parent, os.W_OK):
        raise bad_input(f"{what} folder {str(p.parent)!r} is not writable")
    clean_stale(p)
    return p


#: the files of a Parquet dataset gpurisk writes partition by partition
DATASET_PART = "part.*.parquet"


def check_output_dataset(path, suffixes=None, what: str = "output", inputs=()) -> Path:
    """A Parquet dataset folder to be written partition-wise (a distributed run's per-record rows),
    checked before any work: as :func:`check_output_file`, except that an existing folder is allowed
    when it holds nothing but ``part.*.parquet`` files (an earlier run's dataset, replaced)."""
    p = Path(path)
    if p.is_dir():
        other = [c.name for c in p.iterdir() if not c.match(DATASET_PART)]
        if other:
            raise bad_input(f"{what} {str(p)!r} is a folder holding other files than part.*.parquet "
                           f"(e.g. {other[0]!r}); give a new name")
        check_target(p, inputs, what, folder_ok=True)
        check_output_file(p.parent / (p.name + ".check"), None, what)
        if suffixes and not p.name.lower().endswith(tuple(suffixes)):
            raise bad_input(f"{what} {p.name!r}: name it with one of {', '.join(suffixes)}")
        return p
    return check_output_file(p, suffixes, what, inputs)


def disk_error(path, exc: OSError) -> BadInput | None:
    """One line for an error of the disk or folder while writing ``path`` (full, read-only, no
    permission); None for other errors."""
    if getattr(exc, "errno", None) in DISK_ERRNOS:
        return BadInput(f"cannot write {str(path)!r}: {exc.strerror or exc}; nothing was written "
                        "under that name")
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # another user's live process
        return True
    return True


def clean_stale(path) -> list[Path]:
    """Remove ``.NAME.PID.tmp*`` (and ``.tmpdir``) beside ``path`` whose process is dead (a killed
    run's leftovers); the files of live runs are left alone. Returns the paths removed."""
    import shutil
    p = Path(path)
    removed = []
    try:
        found = list(p.parent.glob(f".{p.name}.*.tmp*"))
    except OSError:
        return removed
    prefix = f".{p.name}."
    for f in found:
        pid_s = f.name[len(prefix):].split(".", 1)[0]
        if not pid_s.isdigit() or int(pid_s) == os.getpid() or _alive(int(pid_s)):
            continue
        try:
            shutil.rmtree(f) if f.is_dir() and not f.is_symlink() else f.unlink()
            removed.append(f)
        except OSError:
            pass
    return removed
