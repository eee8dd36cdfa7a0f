"""Generalisation hierarchies of the keys, for ``protect`` (SPEC §11).

A key's hierarchy is a list of levels: level 0 is the original coding, level L > 0 a recode in the
formats ``compare`` reads (:mod:`gpurisk.freq.recode`). ``--hierarchy KEY=SPEC`` is given once per
level, lowest first, or once for a whole ARX hierarchy file:

- ``KEY=FILE`` or ``KEY=hierarchy:FILE``: every level of an ARX hierarchy (``;``-separated, no
  header, column 0 the value, column L its generalisation at level L);
- ``KEY=bands:W[:ORIGIN]``, ``KEY=breaks:B1,B2,...``, ``KEY=map:FILE``, ``KEY=hierarchy:FILE:L``:
  one more level.

Each level must merge whole groups of the level below (a generalisation lattice: generalising a key
never splits a group), which is checked on the data's categories. A value of the data that a level
does not map is one error; it names the value unless a single record holds it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.freq.lattice import CodeMap
from gpurisk.freq.recode import KINDS, Recode, _category_counts, _read_csv_rows, parse_recode
from gpurisk.freq.table import FreqTable
from gpurisk.xp import to_host

#: how messages name the option a level came from
HIERARCHY = "{arg:--hierarchy|hierarchies}"


@dataclass(frozen=True)
class Hierarchy:
    """One key's levels 1..h as recodes (level 0, the original coding, is implicit)."""

    key: str
    levels: tuple[Recode, ...]
    #: the ``--hierarchy`` texts it was built from, in order (what a plan records)
    specs: tuple[str, ...] = ()

    @property
    def height(self) -> int:
        return len(self.levels)


def _arx_levels(key: str, file: str) -> list[Recode]:
    rows = _read_csv_rows(Path(file))
    if not rows:
        raise bad_input(f"{{arg:--hierarchy|hierarchies}} {key}={file}: the file is empty")
    width = len(rows[0])
    if width < 2:
        raise bad_input(f"{{arg:--hierarchy|hierarchies}} {key}={file}: one column only; an ARX hierarchy has the value "
                       "then one column per level")
    return [parse_recode(f"{key}=hierarchy:{file}:{lev}", HIERARCHY) for lev in range(1, width)]


def parse_hierarchy_items(items: Iterable[str] | Mapping[str, str | Sequence[str]] | None
                          ) -> dict[str, Hierarchy]:
    """``["age=adult_hierarchy_age.csv", "sex=map:sex.csv"]`` (or {key: spec or [specs]}) ->
    {key: Hierarchy}; a key named several times gets one level per item, in order."""
    if not items:
        return {}
    if isinstance(items, str):
        items = [items]
    if isinstance(items, Mapping):
        flat = []
        for k, v in items.items():
            for s in ([v] if isinstance(v, str) else list(v)):
                flat.append(f"{k}={s}")
        items = flat
    levels: dict[str, list[Recode]] = {}
    specs: dict[str, list[str]] = {}
    for text in items:
        text = str(text)
        if "=" not in text:
            raise bad_input(f"{{arg:--hierarchy|hierarchies}} {text!r} is not KEY=FILE or KEY=SPEC "
                           "(e.g. age=adult_hierarchy_age.csv, age=bands:5)")
        key, spec = (s.strip() for s in text.split("=", 1))
        if not key or not spec:
            raise bad_input(f"{{arg:--hierarchy|hierarchies}} {text!r} is not KEY=FILE or KEY=SPEC")
        from gpurisk.io.text import nfc
        key = nfc(key)                     # named as the keys are (NFC)
        kind, _, args = spec.partition(":")
        if kind == "hierarchy" and Path(args).is_file():
            new = _arx_levels(key, args)
        elif kind in KINDS:
            new = [parse_recode(f"{key}={spec}", HIERARCHY)]
        elif Path(spec).is_file():
            new = _arx_levels(key, spec)
        else:
            raise bad_input(f"{{arg:--hierarchy|hierarchies}} {key}={spec}: no such file, and not one of "
                           "bands:W, breaks:B1,B2,..., map:FILE, hierarchy:FILE[:LEVEL]")
        levels.setdefault(key, []).extend(new)
        specs.setdefault(key, []).append(spec)
    return {k: Hierarchy(k, tuple(v), tuple(specs[k])) for k, v in levels.items()}


@dataclass
class KeyLevels:
    """One key's levels on the data: ``luts[L][code]`` = group code at level L of each original
    category code, ``cats[L]`` the group labels (level 0: the original categories)."""

    key: str
    luts: list[np.ndarray]
    cats: list[list]
    #: sample records per original category (numpy)
    counts: np.ndarray
    #: categories held by a record of the sample or the population (the others have no label)
    present: np.ndarray
    specs: tuple[str, ...] = ()
    _between: dict = field(default_factory=dict, repr=False)

    @property
    def height(self) -> int:
        return len(self.luts) - 1

    def between(self, a: int, b: int) -> CodeMap:
        """The regrouping of level-``a`` groups into level-``b`` groups (a <= b)."""
        if (a, b) not in self._between:
            lut = np.zeros(len(self.cats[a]), dtype=np.int64)
            p = self.present
            lut[self.luts[a][p]] = self.luts[b][p]
            self._between[(a, b)] = CodeMap(lut, self.cats[b])
        return self._between[(a, b)]


def key_levels(table: FreqTable, hierarchies: Mapping[str, Hierarchy]) -> list[KeyLevels]:
    """Every key of ``table`` with its levels on the data (a key without a hierarchy has level 0
    only); checks that each hierarchy maps every value present and that levels nest."""
    unknown = [k for k in hierarchies if k not in table.keys]
    if unknown:
        raise bad_input(f"{{arg:--hierarchy|hierarchies}} {unknown[0]!r}: not one of the key variables "
                       f"({', '.join(table.keys)})")
    out = []
    for v, key in enumerate(table.keys):
        cats = list(table.categories[v])
        counts = _category_counts(table, v)
        present = counts > 0
        if table.F is not None:
            xp = table.xp
            codes = table.cell_codes()[v].astype(xp.int64)
            present |= to_host(xp.bincount(codes, weights=table.F.astype(xp.float64),
                                           minlength=len(cats))) > 0
        luts = [np.arange(len(cats), dtype=np.int64)]
        labels = [cats]
        h = hierarchies.get(key)
        for lev, rec in enumerate(h.levels if h else (), start=1):
            lut, groups = _level_map(rec, cats, counts, present)
            _check_nested(key, lev, luts[-1], lut, present)
            luts.append(lut)
            labels.append(groups)
        out.append(KeyLevels(key, luts, labels, counts, present, h.specs if h else ()))
    return out


def _level_map(rec: Recode, cats: list, counts: np.ndarray, present: np.ndarray):
    """(lut, groups) of one level over the categories; categories with no record (in the sample or
    population) need no label and go to group 0."""
    labels = []
    for i, c in enumerate(cats):
        if c is None:
            labels.append(None)
        elif present[i]:
            labels.append(rec._label(c, int(counts[i])))
        else:
            try:
                labels.append(rec.label(c))
            except BadInput:
                labels.append(_ABSENT)
    groups = list(dict.fromkeys(x for x in labels if x is not None and x is not _ABSENT))
    if any(x is None for x in labels):
        groups.append(None)
    if not groups:
        groups.append(None)
    pos = {g: i for i, g in enumerate(groups)}
    lut = np.array([0 if x is _ABSENT else pos[x] for x in labels], dtype=np.int64)
    return lut, groups


_ABSENT = object()


def _check_nested(key: str, lev: int, below: np.ndarray, lut: np.ndarray, present: np.ndarray):
    """Each group of the level below must fall in one group of this level."""
    b, a = below[present], lut[present]
    if b.size == 0:
        return
    pairs = np.unique(b.astype(np.int64) * (int(a.max()) + 1) + a)
    if np.unique(pairs // (int(a.max()) + 1)).size != pairs.size:
        raise bad_input(f"{{arg:--hierarchy|hierarchies}} {key}: level {lev} does not generalise level {lev - 1} "
                       f"(a group of level {lev - 1} is split between groups of level {lev}); "
                       "each level must merge whole groups of the level below")


def absolute_spec(spec: str) -> tuple[str, list[str]]:
    """A level spec with its file named by absolute path (what a plan records), and that file."""
    kind, _, args = spec.partition(":")
    if kind == "map":
        f = str(Path(args).resolve())
        return f"map:{f}", [f]
    if kind == "hierarchy":
        if Path(args).is_file():
            f = str(Path(args).resolve())
            return f"hierarchy:{f}", [f]
        file, level = args.rsplit(":", 1)
        f = str(Path(file).resolve())
        return f"hierarchy:{f}:{level}", [f]
    if kind in KINDS:
        return spec, []
    f = str(Path(spec).resolve())
    return f, [f]


def level_names(key: str, specs: list[str]) -> list[str]:
    """The names of a key's levels 0..h: "original", then each spec (an ARX file gives one level
    per column: "FILE, column L")."""
    names = ["original"]
    for s in specs:
        try:
            h = parse_hierarchy_items({key: s})[key]
        except (BadInput, OSError):
            names.append(s)
            continue
        if h.height == 1:
            kind, _, arg = s.partition(":")
            names.append(s if kind in ("bands", "breaks") else f"{kind}:{Path(arg).name}"
                         if arg else Path(s).name)
        else:
            base = Path(s.split(":", 1)[1] if s.startswith("hierarchy:") else s).name
            names += [f"{base}, column {j}" for j in range(1, h.height + 1)]
    return names


def level_name(names: list[str], level: int) -> str:
    """The name of ``level`` among a key's :func:`level_names` ("level L" past the last)."""
    level = int(level)
    return names[level] if 0 <= level < len(names) else f"level {level}"
