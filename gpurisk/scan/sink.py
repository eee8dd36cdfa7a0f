"""Streaming scan rows into a Parquet dataset (a directory), so that a scan can be resumed.

Layout of ``OUT.parquet/``::

    _scan.json                 the scan's settings (checked on --resume) and the row schema
    part-000000.parquet        rows, one file per batch, each written under a temporary name
    part-000001.parquet        (``.part-*.tmp``) and renamed into place: a killed scan leaves only
    ...                        whole files behind

Readers (pyarrow, pandas, DuckDB, Spark) skip names starting with ``.`` or ``_``. The finished
combinations are the ``combo`` values of the part files; a resumed scan skips them.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input

MANIFEST = "_scan.json"
PART_RE = re.compile(r"^part-(\d+)\.parquet$")


def _atomic_write(path: Path, data: bytes) -> None:
    from gpurisk.io import write_bytes_atomic
    write_bytes_atomic(path, data)


def row_schema(measures: list[str]) -> pa.Schema:
    fields = [
        ("order", pa.int64()), ("combo", pa.string()), ("scenario", pa.string()),
        ("keys", pa.list_(pa.string())), ("size", pa.int32()),
        ("n", pa.int64()), ("N", pa.int64()), ("cells", pa.int64()), ("pop_cells", pa.int64()),
        ("n1", pa.int64()), ("n2", pa.int64()), ("n3", pa.int64()), ("N1", pa.int64()),
        ("seed", pa.int64()),
    ]
    from gpurisk.core.levels import NORMAL_INTERVAL
    for m in measures:
        fields += [(m, pa.float64()), (f"{m}_se", pa.float64()), (f"{m}_upper", pa.float64()),
                   (f"{m}_reason", pa.string()), (f"{m}_note", pa.string())]
        if m in NORMAL_INTERVAL:
            fields += [(f"{m}_interval_lower", pa.float64()),
                       (f"{m}_interval_upper", pa.float64())]
    fields.append(("warnings", pa.string()))
    return pa.schema(fields)


def _is_leftover(name: str) -> bool:
    """A temporary file that a killed writer left behind (``.NAME.PID.tmp``, ``.part-*``)."""
    return name.startswith(".") and (".tmp" in name or name.startswith(".part-"))


def _contents(p: Path) -> list[Path]:
    """What a folder holds besides a killed writer's temporary files."""
    return [f for f in p.iterdir() if not _is_leftover(f.name)]


def _load_manifest(man: Path) -> dict:
    try:
        doc = json.loads(man.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad_input(f"{str(man)!r} is not a readable scan manifest ({type(exc).__name__}); "
                       "use {arg:--overwrite|overwrite=True} to start the scan again") from None
    if not isinstance(doc, dict):
        raise bad_input(f"{str(man)!r} is not a scan manifest; use {{arg:--overwrite|overwrite=True}} to start again")
    return doc


#: names that promise a single file of another format, never a Parquet dataset (a folder)
_FILE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".json", ".txt", ".xlsx", ".html")


def check_output_path(path, resume: bool = False, overwrite: bool = False) -> None:
    """What :class:`ParquetSink` will refuse, checked from the path alone before any work: a file
    in the way, a missing parent folder, a name of another format, a folder that is not a scan, a
    scan that is neither resumed nor overwritten."""
    p = Path(path)
    if p.name.lower().endswith(_FILE_SUFFIXES):
        raise bad_input(f"{{arg:--output|output}} {p.name!r}: a scan writes a Parquet dataset (a folder of part "
                       "files); name it e.g. scan.parquet")
    if p.exists() and not p.is_dir():
        raise bad_input(f"{{arg:--output|output}} {str(p)!r} exists and is a file; a scan writes a directory")
    if not p.exists() and not p.parent.is_dir():
        raise BadInput(f"output folder {str(p.parent)!r} does not exist")
    if p.is_dir() and _contents(p):
        if not (p / MANIFEST).exists():
            raise bad_input(f"{{arg:--output|output}} {str(p)!r} is a non-empty directory that is not a scan "
                           "(no _scan.json); choose another path")
        if not (resume or overwrite):
            raise bad_input(f"{{arg:--output|output}} {str(p)!r} already holds a scan; use "
                           "{arg:--resume|resume=True} to finish it "
                           "or {arg:--overwrite|overwrite=True} to start again")


def _identity(name) -> dict | None:
    from gpurisk.io.provenance import file_identity
    return None if name is None else file_identity(str(name))


def check_resume_inputs(path, data: str | None, population: str | None = None) -> None:
    """``--resume``: the input files (``data``, ``population``: paths as the settings name them)
    must be those the scan in ``path`` began on: same size and SHA-256 as its manifest records
    (``provenance.file`` for the data, ``inputs.population``). Finishing the scan on changed data
    would mix rows of the old and the new file. A frame (no file) is not checked here; the settings
    (n, N, ...) still are when the sink opens. Checked before the records are read."""
    man = Path(path) / MANIFEST
    if not man.is_file():
        return
    doc = _load_manifest(man)
    prov = doc.get("provenance") if isinstance(doc.get("provenance"), dict) else {}
    inputs = doc.get("inputs") if isinstance(doc.get("inputs"), dict) else {}
    recorded = {"data": inputs.get("data") or prov.get("file"), "population": inputs.get("population")}
    for role, name in (("data", data), ("population", population)):
        old = recorded[role]
        if not isinstance(old, dict) or name is None:
            continue
        new = _identity(name)
        if new is None:
            continue                    # not a file now: the settings check says what differs
        if (new["sha256"], new["bytes"]) != (old.get("sha256"), old.get("bytes")):
            sizes = (f"{old.get('bytes')} bytes then, {new['bytes']} now"
                     if old.get("bytes") != new["bytes"] else "same size, other content")
            raise bad_input(f"{{arg:--resume|resume=True}}: the {role} file {new['name']!r} changed since the scan in "
                           f"{str(path)!r} began ({sizes}: its sha256 differs); finishing it would "
                           "mix rows of the old and the new data; use {arg:--overwrite|overwrite=True} to start again")


class ParquetSink:
    """Rows in, part files out; ``finished()`` lists the combos already on disk."""

    def __init__(self, path, settings: dict[str, Any], measures: list[str], resume: bool = False,
                 overwrite: bool = False, batch_rows: int = 256, flush_seconds: float = 2.0):
        self.path = Path(path)
        self.schema = row_schema(measures)
        self.batch_rows = max(1, int(batch_rows))
        self.flush_seconds = float(flush_seconds)
        self.rows: list[dict] = []
        self._last = time.monotonic()
        self.settings = settings
        self._open(resume, overwrite)

    # --- setup ---------------------------------------------------------------------------------
    def _open(self, resume: bool, overwrite: bool) -> None:
        p = self.path
        if p.exists() and not p.is_dir():
            raise bad_input(f"{{arg:--output|output}} {str(p)!r} exists and is a file; a scan writes a directory")
        # a folder holding only what a killed first run left (temporary files) is a fresh start
        existing = p.is_dir() and bool(_contents(p))
        if p.is_dir() and not existing:
            for f in p.iterdir():
                f.unlink(missing_ok=True)
        if existing and overwrite:
            self._clear()
            existing = False
        if existing:
            man = p / MANIFEST
            if not man.exists():
                raise bad_input(f"{{arg:--output|output}} {str(p)!r} is a non-empty directory that is not a scan "
                               "(no _scan.json); choose another path")
            if not resume:
                raise bad_input(f"{{arg:--output|output}} {str(p)!r} already holds a scan; use "
                           "{arg:--resume|resume=True} to finish it "
                               "or {arg:--overwrite|overwrite=True} to start again")
            old = _load_manifest(man)
            self._check_same(old.get("settings", {}))
            for tmp in p.glob(".part-*"):
                tmp.unlink(missing_ok=True)
        else:
            from gpurisk.io.provenance import provenance   # file, date, version, command
            prov = provenance(self.settings)
            doc = {"format": "gpurisk-scan/1", "settings": self.settings,
                   "columns": self.schema.names, "provenance": prov,
                   # what --resume checks (check_resume_inputs): the data as provenance has it
                   "inputs": {"data": prov.get("file"),
                              "population": _identity(self.settings.get("population"))}}
            data = json.dumps(doc, indent=2, sort_keys=True).encode()
            if p.is_dir():
                _atomic_write(p / MANIFEST, data)
            else:     # the folder appears whole, manifest inside, or not at all (a full disk)
                from gpurisk.io.atomic import atomic_dataset
                from gpurisk.io.outputs import disk_error
                try:
                    with atomic_dataset(p) as tmp:
                        with open(tmp / MANIFEST, "wb") as fh:
                            fh.write(data)
                            fh.flush()
                            os.fsync(fh.fileno())
                except OSError as exc:
                    err = disk_error(p / MANIFEST, exc)
                    if err is None:
                        raise
                    raise err from None
        self._next = 1 + max((int(m.group(1)) for f in p.iterdir()
                              if (m := PART_RE.match(f.name))), default=-1)

    def _clear(self) -> None:
        if not (self.path / MANIFEST).exists():
            raise bad_input(f"{{arg:--overwrite|overwrite=True}}: {str(self.path)!r} is not a scan output (no _scan.json); "
                           "not deleting it")
        for f in self.path.iterdir():
            if PART_RE.match(f.name) or f.name == MANIFEST or _is_leftover(f.name):
                f.unlink()

    def _check_same(self, old: dict) -> None:
        new = json.loads(json.dumps(self.settings, sort_keys=True))
        diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        if diff:
            k = diff[0]
            if k == "counts_sha" and old.get(k) is not None:
                raise bad_input(f"{{arg:--resume|resume=True}}: the data given as a frame differ from those the scan in "
                               f"{str(self.path)!r} began on (their counts differ); finishing it "
                               "would mix rows of the old and the new data; use {arg:--overwrite|overwrite=True}")
            raise bad_input(f"{{arg:--resume|resume=True}}: {str(self.path)!r} was written by a different scan "
                           f"({k}: {old.get(k)!r} there, {new.get(k)!r} now); "
                           "use {arg:--overwrite|overwrite=True} or another {arg:--output|output}")

    def finished(self) -> set[str]:
        files = sorted(f for f in self.path.iterdir() if PART_RE.match(f.name))
        done: set[str] = set()
        for f in files:
            try:
                col = pq.read_table(f, columns=["combo"]).column("combo").to_pylist()
            except (pa.ArrowException, OSError) as exc:
                raise bad_input(f"{f}: unreadable part file ({exc}); delete it and {{arg:--resume|resume=True}}") from None
            done.update(col)
        return done

    # --- writing -------------------------------------------------------------------------------
    def add(self, row: dict) -> None:
        from gpurisk.core.messages import stored          # files keep reasons in their neutral form
        self.rows.append({k: stored(v) if k.endswith("_reason") else v for k, v in row.items()})
        if len(self.rows) >= self.batch_rows or time.monotonic() - self._last >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        table = pa.Table.from_pylist(self.rows, schema=self.schema)
        final = self.path / f"part-{self._next:06d}.parquet"
        from gpurisk.io import atomic_path
        with atomic_path(final) as tmp:
            pq.write_table(table, tmp)
        self._next += 1
        self.rows = []
        self._last = time.monotonic()

    def close(self) -> None:
        self.flush()


def read_rows(path) -> "pd.DataFrame":  # noqa: F821
    """Every row of a scan output directory (or single Parquet file), sorted by plan order, as
    stored (reasons in their stored form: see :mod:`gpurisk.core.messages`)."""
    import pandas as pd
    p = Path(path)
    if not p.exists():
        raise BadInput(f"scan output {str(path)!r} does not exist")
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if PART_RE.match(f.name))
        if not files:
            raise BadInput(f"{p}: no part files (is it a gpurisk scan output?)")
        frame = pa.concat_tables([_read_part(f) for f in files],
                                 promote_options="default").to_pandas()
    else:
        try:
            frame = pq.read_table(p).to_pandas()
        except (pa.ArrowException, OSError) as exc:
            raise BadInput(f"{p}: not a readable Parquet file ({exc})") from None
    if "order" not in frame.columns or "combo" not in frame.columns:
        raise BadInput(f"{p}: not a gpurisk scan output (no 'order'/'combo' columns)")
    frame = frame.sort_values("order", kind="stable").reset_index(drop=True)
    return frame


def _read_part(f: Path):
    try:
        return pq.read_table(f)
    except (pa.ArrowException, OSError) as exc:
        raise BadInput(f"part file {f.name} of {str(f.parent)!r} is not readable Parquet "
                       f"({type(exc).__name__}): the file was damaged after the scan wrote it") from None


def read_manifest(path) -> dict:
    p = Path(path) / MANIFEST
    return _load_manifest(p) if p.exists() else {}
