"""The identity of a scan's input, written into the scan's manifest when the scan starts and read
by the report: the file's name, size and SHA-256 (a folder or glob: over its files, name and hash
of each, sorted), the UTC time, the gpurisk version and the command line (rebuilt from the options
given on the command line; ``None`` from the Python API). Kept beside the settings, not in them, so
that ``--resume`` does not compare it."""
from __future__ import annotations

import hashlib
import shlex
from datetime import datetime, timezone
from pathlib import Path


def gpurisk_version() -> str:
    """gpurisk's version, without importing the package's ``__init__`` (which imports the scan,
    which records provenance: an import circle)."""
    from gpurisk.plugins import _own_version
    return _own_version()


def sha256_file(path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (protect's plan, the scan's manifest)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_identity(data: str) -> dict | None:
    """``{"name", "sha256", "bytes", "files"}`` of what ``data`` names (None: not a file)."""
    from gpurisk.errors import BadInput
    from gpurisk.io import expand_input
    if not isinstance(data, str) or data.startswith("<"):
        return None
    try:
        files = expand_input(data)
        files = sorted(f for p in files for f in ([p] if p.is_file() else
                                                    [q for q in p.rglob("*") if q.is_file()
                                                     and not q.name.startswith((".", "_"))]))
        if not files:
            return None
        hashes = [sha256_file(f) for f in files]
        size = sum(f.stat().st_size for f in files)
    except (BadInput, OSError):
        return None
    if len(files) == 1:
        digest = hashes[0]
    else:                       # a dataset: the hash of "name hash" lines, one per file
        digest = hashlib.sha256("".join(f"{f.name} {h}\n" for f, h in zip(files, hashes))
                                .encode()).hexdigest()
    name = data if data.startswith("example:") else Path(data).name
    return {"name": name, "sha256": digest, "bytes": int(size), "files": len(files)}


def command_line() -> str | None:
    """The running click command as a shell line of the options given on the command line."""
    try:
        import click
        from click.core import ParameterSource
    except ImportError:        # pragma: no cover - click is a dependency
        return None
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    names, c = [], ctx
    while c.parent is not None:
        names.append(c.info_name)
        c = c.parent
    words = ["gpurisk"] + names[::-1]
    for p in ctx.command.params:
        if ctx.get_parameter_source(p.name) != ParameterSource.COMMANDLINE:
            continue
        v = ctx.params.get(p.name)
        if isinstance(p, click.Argument):
            words += [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
            continue
        opt = max(p.opts, key=len)
        if getattr(p, "is_flag", False):
            if isinstance(v, bool) and p.secondary_opts and not v:
                words.append(max(p.secondary_opts, key=len))
            elif v:
                words.append(opt)
        elif p.multiple:
            for x in v:
                words += [opt, str(x)]
        elif v is not None:
            words += [opt, str(v)]
    return shlex.join(words)


def provenance(settings: dict) -> dict:
    """What the scan's manifest records beside its settings."""
    __version__ = gpurisk_version()
    return {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "gpurisk": __version__, "command": command_line(),
            "file": file_identity(settings.get("data")),
            "records": settings.get("n"), "population": settings.get("N")}
