"""Regrouping categories of key variables (SPEC §3, Kim & Jeong's "grouping"), applied to counts.

A recode maps each category of one key to a group label; the table is then regrouped by summing
counts (:func:`gpurisk.freq.lattice.regroup`), so the records are never read again. Specs, as given
to ``--recode KEY=SPEC``:

- ``bands:WIDTH[:ORIGIN]`` numeric bands ``[ORIGIN + i*WIDTH, ORIGIN + (i+1)*WIDTH)``; integer bands
  are labelled ``20-24``, others ``[20,25)``.
- ``breaks:B1,B2,...`` intervals ``<B1``, ``[B1,B2)``, ..., ``>=Bk``.
- ``map:FILE.csv`` two columns (value, group) with a header row; ``map:FILE.toml`` pairs
  ``"value" = "group"`` in a table named after the key, or at the top level. A value ``*`` gives the
  group of every value not listed; without it an unlisted value is an error.
- ``hierarchy:FILE:LEVEL`` an ARX generalisation hierarchy: ``;``-separated, no header, one row per
  value, column 0 the value and column L its generalisation at level L (level 0 = no change).

Values are matched by their text (``39`` matches the integer 39). A missing value stays missing.
Groups are ordered by their first category in the original (sorted) order.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.xp import to_host
from gpurisk.freq.lattice import CodeMap, regroup
from gpurisk.freq.table import FreqTable

KINDS = ("bands", "breaks", "map", "hierarchy")
#: how a message names the option a recode came from (``--alt`` and ``--hierarchy`` pass their own)
RECODE = "{arg:--recode|recode}"


@dataclass(frozen=True)
class Recode:
    """One key's recode, parsed from ``KEY=SPEC``."""

    key: str
    spec: str
    label: Callable = field(compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.key}={self.spec}"

    def code_map(self, categories: Sequence, counts=None) -> CodeMap:
        """``counts`` (records per category): a value held by one record is withheld from messages."""
        labels = [None if c is None else self._label(c, None if counts is None else counts[i])
                  for i, c in enumerate(categories)]
        groups = list(dict.fromkeys(x for x in labels if x is not None))
        if any(x is None for x in labels):
            groups.append(None)
        pos = {g: i for i, g in enumerate(groups)}
        lut = np.array([pos[x] for x in labels], dtype=np.int64)
        return CodeMap(lut, groups)

    def _label(self, c, count):
        try:
            return self.label(c)
        except BadInput as exc:
            if count is None or count != 1:
                raise
            # the messages quote the value as repr(str(value))
            raise BadInput(str(exc).replace(repr(str(c)), "<withheld: a value of 1 record>")) from None


def _number(value, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise bad_input(f"{what}: {value!r} is not a number") from None


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _bands(key: str, args: str, flag: str = RECODE):
    parts = args.split(":")
    if not parts[0] or len(parts) > 2:
        raise bad_input(f"{flag} {key}=bands:{args}: expected bands:WIDTH or bands:WIDTH:ORIGIN")
    width = _number(parts[0], f"{flag} {key}=bands: width")
    origin = _number(parts[1], f"{flag} {key}=bands: origin") if len(parts) == 2 else 0.0
    if not width > 0 or not math.isfinite(width):
        raise bad_input(f"{flag} {key}=bands: width must be a positive number, got {parts[0]!r}")
    if not math.isfinite(origin):
        raise bad_input(f"{flag} {key}=bands: origin must be a finite number, got {parts[1]!r}")
    integral = width.is_integer() and origin.is_integer()

    def label(v):
        x = _number(v, f"{flag} {key}=bands:{args}: value of {key!r}")
        lo = origin + math.floor((x - origin) / width) * width
        if integral and float(x).is_integer():
            return f"{_fmt(lo)}-{_fmt(lo + width - 1)}"
        return f"[{_fmt(lo)},{_fmt(lo + width)})"
    return label


def _breaks(key: str, args: str, flag: str = RECODE):
    try:
        cuts = [float(b) for b in args.split(",") if b.strip()]
    except ValueError:
        raise bad_input(f"{flag} {key}=breaks:{args}: breaks must be numbers separated by commas") from None
    if not all(math.isfinite(b) for b in cuts):
        raise bad_input(f"{flag} {key}=breaks:{args}: breaks must be finite numbers (not nan or inf)")
    if not cuts or any(b >= a for a, b in zip(cuts[1:], cuts)):
        raise bad_input(f"{flag} {key}=breaks:{args}: give increasing numbers, e.g. breaks:18,30,65")

    def label(v):
        x = _number(v, f"{flag} {key}=breaks:{args}: value of {key!r}")
        i = int(np.searchsorted(cuts, x, side="right"))
        if i == 0:
            return f"<{_fmt(cuts[0])}"
        if i == len(cuts):
            return f">={_fmt(cuts[-1])}"
        return f"[{_fmt(cuts[i - 1])},{_fmt(cuts[i])})"
    return label


def _read_csv_rows(path: Path, sep: str | None = None) -> list[list[str]]:
    from gpurisk.io import detect_separator
    from gpurisk.io.text import read_errors
    _check_file(path)
    sep = sep or detect_separator(path)
    with read_errors(path), open(path, newline="", encoding="utf-8") as fh:
        return [[c.strip() for c in row] for row in csv.reader(fh, delimiter=sep) if any(c.strip() for c in row)]


def _check_file(path: Path, what: str | None = None) -> None:
    """A recode's file exists and is a file (a folder, a device: one line)."""
    if not path.exists():
        raise bad_input(f"{what or 'file'} {str(path)!r} does not exist")
    if not path.is_file():
        raise bad_input(f"{what or 'file'} {str(path)!r} is not a file (a folder?)")


def _lookup(key: str, spec: str, table: dict[str, str], flag: str = RECODE):
    default = table.get("*")

    def label(v):
        s = str(v)
        if s in table:
            return table[s]
        if default is not None:
            return default
        raise bad_input(f"{flag} {key}={spec}: value {s!r} of {key!r} is not in the mapping "
                       "(add it, or a '*' row for every other value)")
    return label


def _map(key: str, args: str, flag: str = RECODE):
    path = Path(args)
    if not path.exists():
        raise bad_input(f"{flag} {key}=map:{args}: file does not exist")
    _check_file(path, f"{flag} {key}=map:")
    if path.suffix.lower() == ".toml":
        import tomllib
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise bad_input(f"{flag} {key}=map:{args}: not utf-8 text") from None
        except tomllib.TOMLDecodeError as exc:
            raise bad_input(f"{flag} {key}=map:{args}: not valid TOML ({exc})") from None
        table = doc.get(key, doc) if isinstance(doc.get(key), dict) else doc
        bad = [k for k, v in table.items() if isinstance(v, (dict, list))]
        if bad:
            raise bad_input(f"{flag} {key}=map:{args}: entry {bad[0]!r} is not a plain value "
                           f"(write a [{key}] table of \"value\" = \"group\" pairs)")
        mapping = {str(k): str(v) for k, v in table.items()}
    else:
        rows = _read_csv_rows(path)
        if len(rows) < 2:
            raise bad_input(f"{flag} {key}=map:{args}: expected a header row and value,group rows")
        mapping = {}
        for i, row in enumerate(rows[1:], start=2):
            if len(row) != 2:
                raise bad_input(f"{flag} {key}=map:{args}: line {i} has {len(row)} fields, expected 2")
            if row[0] in mapping and mapping[row[0]] != row[1]:
                raise bad_input(f"{flag} {key}=map:{args}: value {row[0]!r} is mapped twice")
            mapping[row[0]] = row[1]
    return _lookup(key, f"map:{args}", mapping, flag)


def _hierarchy(key: str, args: str, flag: str = RECODE):
    if ":" not in args:
        raise bad_input(f"{flag} {key}=hierarchy:{args}: expected hierarchy:FILE:LEVEL")
    file, level_s = args.rsplit(":", 1)
    try:
        level = int(level_s)
    except ValueError:
        raise bad_input(f"{flag} {key}=hierarchy:{args}: level {level_s!r} is not an integer") from None
    path = Path(file)
    if not path.exists():
        raise bad_input(f"{flag} {key}=hierarchy:{args}: file {file!r} does not exist")
    rows = _read_csv_rows(path)
    if not rows:
        raise bad_input(f"{flag} {key}=hierarchy:{args}: the file is empty")
    width = len(rows[0])
    ragged = [i + 1 for i, r in enumerate(rows) if len(r) != width]
    if ragged:
        raise bad_input(f"{flag} {key}=hierarchy:{args}: line {ragged[0]} has a different number of "
                       f"levels than line 1 ({width - 1})")
    if not 0 <= level < width:
        raise bad_input(f"{flag} {key}=hierarchy:{args}: the hierarchy has levels 0..{width - 1}, "
                       f"not {level}")
    mapping = {}
    for r in rows:
        if r[0] in mapping and mapping[r[0]] != r[level]:
            raise bad_input(f"{flag} {key}=hierarchy:{args}: value {r[0]!r} appears twice")
        mapping[r[0]] = r[level]
    return _lookup(key, f"hierarchy:{args}", mapping, flag)


def parse_recode(text: str, flag: str = RECODE) -> Recode:
    """``KEY=KIND:ARGS`` -> :class:`Recode` (files are read now, so errors come early); ``flag``:
    how messages name the option it came from (``{arg:--alt|alternatives}``, ...)."""
    if "=" not in text:
        raise bad_input(f"{flag} {text!r} is not KEY=SPEC (e.g. age=bands:5)")
    key, spec = (s.strip() for s in text.split("=", 1))
    from gpurisk.io.text import nfc
    key = nfc(key)                         # named as the keys are (NFC)
    kind, _, args = spec.partition(":")
    if not key or kind not in KINDS or not args:
        raise bad_input(f"{flag} {text!r}: SPEC must be one of bands:WIDTH, breaks:B1,B2,..., "
                       "map:FILE, hierarchy:FILE:LEVEL")
    make = {"bands": _bands, "breaks": _breaks, "map": _map, "hierarchy": _hierarchy}[kind]
    return Recode(key, spec, make(key, args, flag))


def parse_recodes(items: Iterable[str | Recode] | Mapping[str, str] | None,
                  flag: str = RECODE) -> list[Recode]:
    """Several recodes (strings ``KEY=SPEC``, a {key: spec} mapping, or Recode objects)."""
    if not items:
        return []
    if isinstance(items, Mapping):
        items = [f"{k}={v}" for k, v in items.items()]
    if isinstance(items, (str, Recode)):
        items = [items]
    out = [r if isinstance(r, Recode) else parse_recode(r, flag) for r in items]
    keys = [r.key for r in out]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise bad_input(f"{flag} names key(s) {', '.join(map(repr, dup))} more than once")
    return out


def code_maps(table: FreqTable, recodes: Iterable[Recode], flag: str = RECODE) -> dict[str, CodeMap]:
    out = {}
    for r in recodes:
        if r.key not in table.keys:
            raise bad_input(f"{flag} {r}: {r.key!r} is not one of the key variables "
                           f"({', '.join(table.keys)})")
        v = table.keys.index(r.key)
        out[r.key] = r.code_map(table.categories[v], _category_counts(table, v))
    return out


def _category_counts(table: FreqTable, v: int) -> np.ndarray:
    """Sample records per category of key ``v`` (for withholding a unique's value in messages):
    one ``bincount`` in the table's namespace, brought to the host (one number per category)."""
    xp = table.xp
    codes = table.cell_codes()[v].astype(xp.int64)
    return to_host(xp.bincount(codes, weights=table.f.astype(xp.float64),
                               minlength=len(table.categories[v])))


def apply_recodes(table: FreqTable, recodes) -> FreqTable:
    """``table`` with the recoded keys' categories regrouped (counts summed; records untouched)."""
    recodes = parse_recodes(recodes)
    if not recodes:
        return table
    return regroup(table, table.keys, code_maps(table, recodes))
