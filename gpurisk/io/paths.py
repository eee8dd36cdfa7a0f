"""What an input path names: a file, a Parquet folder, a glob, a pipe, or ``example:NAME``; and the
compression a file name announces (any case: ``.csv.gz``, ``.CSV.GZ``, ``.bz2``, ``.xz``, ``.zip``,
``.zst``).

The inputs of the runs in progress are remembered (:func:`remember_inputs`, by
:class:`gpurisk.Inputs`), so that an output which resolves to one is refused before the work
(:mod:`gpurisk.io.outputs`).
"""
from __future__ import annotations

from pathlib import Path

from gpurisk.errors import BadInput

EXAMPLES = {"adult": "adult.csv.gz"}
GLOB_CHARS = "*?["
#: file name endings (lower case) -> pandas' name of the compression
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zip": "zip", ".zst": "zstd"}

#: id -> (weak reference, paths) of the inputs of the runs in progress (live Inputs objects)
_LIVE: dict[int, tuple] = {}


def remember_inputs(owner, paths) -> None:
    """Note ``paths`` as inputs of a run in progress, for as long as ``owner`` (an
    :class:`gpurisk.Inputs`) lives: an output of that run may not resolve to any of them."""
    import weakref
    key = id(owner)
    ref = weakref.ref(owner, lambda _r, key=key: _LIVE.pop(key, None))
    _LIVE[key] = (ref, [str(x) for x in paths if isinstance(x, (str, Path))])


def resolved(paths) -> set[str]:
    """Resolved paths (each file of a glob, symlinks followed) of ``paths``; frames and
    ``example:`` names are left out."""
    import glob
    out: set[str] = set()
    for s in paths:
        if s is None or not isinstance(s, (str, Path)) or str(s).startswith("example:"):
            continue
        s = str(s)
        files = glob.glob(s, recursive=True) if any(ch in s for ch in GLOB_CHARS) and \
            not Path(s).exists() else [s]
        for f in files:
            try:
                out.add(str(Path(f).resolve()))
            except (OSError, RuntimeError):   # a symlink loop: the read says so
                pass
    return out


def input_paths() -> set[str]:
    """Resolved paths of the inputs of the runs in progress (see :func:`resolved`)."""
    return resolved(p for ref, paths in list(_LIVE.values()) if ref() is not None for p in paths)


def compression_of(p) -> str | None:
    """pandas' compression name for a file name ending in .gz/.bz2/.xz/.zip/.zst (any case)."""
    return COMPRESSIONS.get(Path(str(p)).suffix.lower())


def example_path(name: str) -> Path:
    if name not in EXAMPLES:
        raise BadInput(f"unknown example {name!r}; examples: {', '.join(EXAMPLES)}")
    from importlib import resources
    path = Path(str(resources.files("gpurisk") / "data" / EXAMPLES[name]))
    if not path.exists():
        raise BadInput(f"the bundled example {name!r} is missing from this installation ({path})")
    return path


def resolve_path(path) -> Path:
    s = str(path)
    if s.startswith("example:"):
        return example_path(s.split(":", 1)[1])
    p = Path(s)
    if not p.exists():
        raise BadInput(f"file {s!r} does not exist")
    if not p.is_file() and not p.is_dir():
        return _spooled(p)
    return p


#: a named pipe or device already read once in this process -> the regular file holding its bytes
_SPOOLED: dict[str, Path] = {}


def _spooled(p: Path) -> Path:
    """A named pipe (``mkfifo``, ``<(zcat x.gz)``) or a character device (/dev/stdin) as a regular
    file: its bytes are copied once into a private temporary file (removed at exit) with the same
    name, so the readers, which open a file more than once (separator, header, row check, data),
    see all of it. Anything else that is not a file (a socket) is refused in one line."""
    import atexit
    import shutil
    import stat
    import tempfile
    key = str(p)
    if key in _SPOOLED:
        return _SPOOLED[key]
    mode = p.stat().st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        raise BadInput(f"{p}: not a regular file, a folder or a named pipe; gpurisk cannot read it")
    d = Path(tempfile.mkdtemp(prefix="gpurisk-pipe-"))
    atexit.register(shutil.rmtree, d, True)
    tmp_copy = d / (p.name if p.suffix else p.name + ".csv")     # a private copy, not an output
    try:
        with open(p, "rb") as src, open(tmp_copy, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except OSError as exc:
        raise BadInput(f"{p}: cannot read it ({exc.strerror or exc})") from None
    _SPOOLED[key] = tmp_copy
    return tmp_copy


def is_parquet(p: Path) -> bool:
    if p.is_dir():
        return any(p.rglob("*.parquet"))
    return p.suffix.lower() in (".parquet", ".pq")


def expand_input(path) -> list[Path]:
    """The files a SAMPLE names: one file, a Parquet directory, or a glob of files."""
    import glob
    s = str(path)
    if s.startswith("example:"):
        return [example_path(s.split(":", 1)[1])]
    if any(ch in s for ch in GLOB_CHARS) and not Path(s).exists():
        files = sorted(Path(f) for f in glob.glob(s, recursive=True) if Path(f).is_file())
        if not files:
            raise BadInput(f"no file matches {s!r}")
        return files
    return [resolve_path(s)]
