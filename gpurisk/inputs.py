"""One input path: what the user gave, read, checked and counted in one place.

Every command and public function that counts records builds an :class:`Inputs` from what it was
given — the data (a path, a pandas, Dask or cuDF frame), the keys (a list or ``"a,b,c"``), the design
(population, sample flag, fraction, weights), the missing-value policy, recodes and the backend — and
asks it for the frames (:meth:`Inputs.read`) and the counts (:meth:`Inputs.count`). The checks
therefore run the same way everywhere, before the work: keys named and present, a backend that can
run here, a sampling fraction in (0, 1], no empty sample, no key missing in every record, no key
with the cardinality of an identifier (unless allowed), f_j <= F_j, π resolved (given, or n/N).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.core.weights import NORMALISED_MEAN_WEIGHT, as_design_weights, weight_rule  # noqa: F401
from gpurisk.freq.engine import build_table
from gpurisk.freq.table import FreqTable

__all__ = ["Inputs", "Frames", "Counted", "key_list", "resolve_fraction", "census_table",
           "check_fraction"]

MISSING_POLICIES = ("category", "error")


def key_list(keys, what: str = "keys") -> list[str]:
    """``keys`` as a list of names: a list (or any iterable) of names, or one string ``"a,b,c"``."""
    if keys is None:
        raise bad_input(f"no {what} given: name at least one key variable")
    if isinstance(keys, str):
        items = [k.strip() for k in keys.split(",")]
    else:
        items = [str(k).strip() for k in keys]
    from gpurisk.io.text import nfc
    items = [nfc(k) for k in items if k]      # "Région" typed composed or decomposed: one name
    if not items:
        raise bad_input(f"{what} are empty: name at least one key variable "
                        "(e.g. {arg:--keys age,sex|keys=['age', 'sex']})")
    dup = sorted({k for k in items if items.count(k) > 1})
    if dup:
        raise bad_input(f"{what} name {', '.join(map(repr, dup))} more than once")
    return items


def check_fraction(fraction, what: str = "sampling fraction pi") -> float | None:
    """π as a float in (0, 1], or None; anything else is bad input."""
    if fraction is None:
        return None
    try:
        f = float(fraction)
    except (TypeError, ValueError):
        raise BadInput(f"{what} {fraction!r} is not a number") from None
    if math.isnan(f) or not 0.0 < f <= 1.0:
        raise BadInput(f"{what}={fraction!r} is outside (0, 1]")
    return f


def resolve_fraction(table: FreqTable, fraction) -> tuple[float | None, str | None, list[str]]:
    """π and where it came from: given (checked to lie in (0, 1]), n/N from the population, or
    n/Σw from design weights that sum to the population they stand for (w = 1/π_i, as ESS's and
    sdcMicro's testdata's; sdcMicro takes F from the weights too); warnings if inconsistent.

    Weights with a mean of at most :data:`NORMALISED_MEAN_WEIGHT` are normalised weights (they sum
    to about n) and give no π (:mod:`gpurisk.core.weights`)."""
    notes: list[str] = []
    fraction = check_fraction(fraction)
    if fraction is not None:
        if table.N:
            nN = table.n / table.N
            if abs(fraction - nN) > 0.25 * nN:
                notes.append(f"given pi={fraction:g} differs from n/N={nN:.6g}; the given value is used")
        return fraction, "given", notes
    if table.N:
        return table.n / table.N, "n/N", notes
    total = _weight_total(table)
    if total is not None and weight_rule(table.n, total).kind == "design":
        return table.n / total, "n/Σw", notes
    return None, None, notes


def _weight_total(table) -> float | None:
    """Σw of the sample's design weights (None without weights): from a FreqTable's cells, or the
    total a SummaryTable (cells kept on the Dask workers) brought back."""
    summary = getattr(table, "summary", None)
    if summary is not None and hasattr(summary, "weight_total"):
        return None if summary.weight_total is None else float(summary.weight_total)
    if isinstance(table, FreqTable) and table.w is not None:
        from gpurisk.xp import scalar
        return float(scalar(table.w.sum()))
    return None


def census_table(table: FreqTable, fraction: float | None) -> FreqTable:
    """At π = 1 (a census: every record of the population is in the file) without population
    counts, the table with F = f, so that the population measures run on the file itself instead
    of asking for a population."""
    from dataclasses import replace
    if fraction != 1 or table.N is not None:
        return table
    if isinstance(table, FreqTable):
        return replace(table, F=table.f)
    summary = getattr(table, "summary", None)       # a distributed count's SummaryTable
    if summary is None or not hasattr(summary, "freq_of_freq"):
        return table
    from gpurisk.freq.summary import JOINT_MAX_F
    fof = dict(summary.freq_of_freq)
    return replace(table, summary=replace(
        summary, N=summary.n, population_cells=summary.cells, pop_freq_of_freq=fof,
        joint={(a, a): c for a, c in fof.items() if a <= JOINT_MAX_F}))


@dataclass(frozen=True)
class Frames:
    """The data as frames (pandas, Dask or cuDF): the sample (or register), the population."""

    sample: Any
    population: Any = None


@dataclass(frozen=True)
class Counted:
    """The counts of :meth:`Inputs.count`: the table (recoded, checked) and π."""

    table: FreqTable
    fraction: float | None
    fraction_source: str | None
    notes: list[str] = field(default_factory=list)
    #: seconds spent counting the records and regrouping the recoded keys
    timings: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Inputs:
    """What the user gave; normalised and checked on construction (no file is read until
    :meth:`read`). ``columns`` are further columns of the sample a command reads (measures' column
    options, pairing variables, strata)."""

    data: Any
    keys: Any
    population: Any = None
    sample_flag: str | None = None
    weights: str | None = None
    fraction: float | None = None
    missing: str = "category"
    recode: Any = ()
    backend: str | None = None
    sep: str | None = None
    encoding: str = "utf-8"
    allow_high_cardinality: bool = False
    columns: Iterable[str] = ()
    #: what the data is, in messages: "sample" (or register), or "population" (validate)
    role: str = "sample"

    def __post_init__(self):
        from gpurisk.backends import require, resolve_backend
        from gpurisk.freq.recode import parse_recodes
        set_ = object.__setattr__
        set_(self, "keys", tuple(key_list(self.keys)))
        from gpurisk.io import check_encoding, check_sep, remember_inputs
        set_(self, "encoding", check_encoding(self.encoding))
        set_(self, "sep", check_sep(self.sep))
        remember_inputs(self, [self.data, self.population])   # outputs may not overwrite them
        if self.missing not in MISSING_POLICIES:
            raise BadInput(f"missing={self.missing!r} is not one of {', '.join(MISSING_POLICIES)}")
        if self.population is not None and self.sample_flag is not None:
            raise BadInput("give either a population or a sample flag, not both")
        set_(self, "fraction", check_fraction(self.fraction))
        set_(self, "recode", tuple(parse_recodes(self.recode or None)))   # list, {key: spec} or str
        unused = [r.key for r in self.recode if r.key not in self.keys]
        if unused:
            raise bad_input(f"{{arg:--recode|recode}} {unused[0]!r}: not one of the key variables "
                           f"({', '.join(self.keys)})")
        name = resolve_backend(self.backend, self.data)
        require(name)
        set_(self, "backend", name)
        from gpurisk.io.text import nfc
        set_(self, "columns", tuple(dict.fromkeys(nfc(c) for c in self.columns)))
        for name in ("sample_flag", "weights"):      # named as the keys are (in NFC)
            if isinstance(getattr(self, name), str):
                set_(self, name, nfc(getattr(self, name)))

    # --- what is read --------------------------------------------------------------------------
    @property
    def backend_obj(self):
        """The :class:`gpurisk.backends.Backend` that counts: ask it, never compare its name."""
        from gpurisk.backends import get_backend
        return get_backend(self.backend)

    @property
    def distributed(self) -> bool:
        return self.backend_obj.distributed

    @property
    def sample_columns(self) -> list[str]:
        """Every column of the sample that is read: keys, flag, weights, then the others."""
        cols = list(self.keys) + [c for c in (self.sample_flag, self.weights) if c]
        return list(dict.fromkeys(cols + list(self.columns)))

    @property
    def name(self) -> str:
        """The data's name for settings and fingerprints: a resolved path, or the frame's type."""
        d = self.data
        if isinstance(d, Path) or (isinstance(d, str) and not d.startswith("example:")):
            return str(Path(d).resolve())
        return str(d) if isinstance(d, str) else f"<{type(d).__name__}>"

    def _read(self, source, columns):
        if not isinstance(source, (str, Path)):
            return source
        # in memory, or partition-wise (a Parquet directory or a CSV glob, read by the workers)
        return self.backend_obj.read(source, sep=self.sep, columns=columns, encoding=self.encoding,
                                     text_columns=[self.sample_flag] if self.sample_flag else ())

    def read(self) -> Frames:
        """The sample and population as frames, checked: records present, keys not all missing."""
        from gpurisk.freq.guards import check_key_columns
        sample = self._read(self.data, self.sample_columns)
        population = self._read(self.population, list(self.keys))
        if not self.distributed and len(sample) == 0:   # the Dask engine checks while counting
            raise BadInput(f"the {self.role} has no records")
        check_key_columns(sample, self.keys)
        return Frames(sample, population)

    # --- what is counted -------------------------------------------------------------------------
    def count(self, frames: Frames | None = None, keys=None, *, weights: bool = True,
              guard: bool = True, records: str | None = None, also=()) -> Counted:
        """The table over ``keys`` (default: all), recoded and checked, and π.

        ``weights=False`` leaves the design weights out (commands that do not read them);
        ``guard=False`` skips the cardinality check (for a caller that checks a coarser table);
        ``also``: other columns counted after the keys as if they were keys (a stratum, the
        columns a perturbation reads), which the cardinality check leaves alone;
        ``records="what needs them"``: the command reads each record's cell, so a backend that
        keeps none (Dask) is one clear line instead of a failure later.
        """
        import time

        from gpurisk.freq.guards import check_cardinality
        if records and self.distributed:     # Dask tables never keep them: say so before any work
            raise bad_input(f"{records} needs each record's cell, which the {self.backend} backend "
                            "does not keep: use {backend_pandas} (or cudf)")
        frames = self.read() if frames is None else frames
        keys = list(self.keys) if keys is None else key_list(keys)
        counted = list(dict.fromkeys(keys + [str(c) for c in also]))
        t0 = time.perf_counter()
        table = build_table(frames.sample, counted, population=frames.population,
                            sample_flag=self.sample_flag, weights=self.weights if weights else None,
                            missing=self.missing, backend=self.backend)
        if table.n == 0:
            raise BadInput(f"the sample flag {self.sample_flag!r} marks no record as sampled")
        if records and table.record_locator is None:
            raise bad_input(f"{records} needs each record's cell, which the {table.backend} backend "
                            "does not keep: use {backend_pandas} (or cudf)")
        t1 = time.perf_counter()
        recodes = [r for r in self.recode if r.key in keys]
        if recodes:
            from gpurisk.freq.lattice import regroup
            from gpurisk.freq.recode import code_maps
            table = regroup(table, table.keys, code_maps(table, recodes))
        t2 = time.perf_counter()
        if guard:
            check_cardinality(table, self.allow_high_cardinality,
                              keys=keys if len(counted) > len(keys) else None)
        pi, source, notes = resolve_fraction(table, self.fraction)
        table, weight_notes = as_design_weights(table, pi)
        table = census_table(table, pi)
        return Counted(table, pi, source, notes + weight_notes,
                       {"build_s": t1 - t0, "recode_s": t2 - t1})

    def summarize(self, frames: Frames | None = None, keys=None, *, guard: bool = True,
                  bucket_measures=(), context=None) -> Counted:
        """As :meth:`count` on a distributed backend, when only summaries will be read: the table
        is a :class:`~gpurisk.freq.summary.SummaryTable` (n, N, frequencies of frequencies, the
        joint (f_j, F_j) counts), reduced on the workers, so the client's memory does not grow with
        the number of cells. Recodes need the cells: use :meth:`count`.

        ``bucket_measures``: classes of measures that read buckets (``reads = "buckets"``); those
        whose needs are met run their ``map_bucket`` on the workers on every bucket of cells, with
        ``context`` (a :class:`gpurisk.Context`; its fraction is set to this count's π), and the
        table keeps the small dicts for their ``compute`` (``table.bucket_maps``). When π is known
        before the count (given, or no population) each bucket's summary and maps are computed in
        one pass; when π is n/N the maps run once the summaries are back, the buckets waiting on the
        workers."""
        import time
        from dataclasses import replace
        from types import SimpleNamespace

        from gpurisk.freq.buckets import collect, context_key
        from gpurisk.freq.guards import check_cardinality
        from gpurisk.freq.summary import SummaryTable, combine
        from gpurisk.measure import Context, missing_needs
        if not self.distributed:
            raise ValueError("Inputs.summarize is for the distributed backends; use count()")
        if self.recode:
            raise ValueError("recodes regroup the cells: use Inputs.count()")
        frames = self.read() if frames is None else frames
        keys = list(self.keys) if keys is None else key_list(keys)
        bucket_measures = list(bucket_measures or ())
        box: dict = {}

        with_pop = frames.population is not None or self.sample_flag is not None

        def job(table, pi, source):
            ctx = replace(context or Context(), fraction=pi, fraction_source=source, columns={})
            todo = [c for c in bucket_measures if missing_needs(c, table, ctx) is None]
            box["key"] = context_key(ctx)
            return (todo, ctx) if todo else None

        def then(plan, parts, cards):
            table = SummaryTable(tuple(keys), plan.categories, combine(plan, parts, self.backend),
                                 cards, backend=self.backend)
            if guard:
                check_cardinality(table, self.allow_high_cardinality)
            pi, source, notes = resolve_fraction(table, self.fraction)
            table = census_table(table, pi)
            box.update(table=table, pi=pi, source=source, notes=notes)
            return job(table, pi, source) if maps == "later" else None

        maps = None
        if bucket_measures and (self.fraction is not None or not (with_pop or self.weights)):
            # pi is known before the count (given, or none): each bucket's summary and maps in one pass
            declared = SimpleNamespace(N=0 if with_pop or self.fraction == 1 else None, has_weights=bool(self.weights),
                                       record_locator=None, backend=self.backend)
            maps = job(declared, self.fraction, "given" if self.fraction is not None else None) \
                or ((), None)
        elif bucket_measures:
            maps = "later"       # pi = n/N or n/Σw: the maps wait for the summaries
        t0 = time.perf_counter()
        got = self.backend_obj.summary(frames.sample, keys, population=frames.population,
                                       sample_flag=self.sample_flag, weights=self.weights,
                                       missing=self.missing, sep=self.sep, with_cards=True,
                                       then=then, maps=maps)
        mapped = got[3] if maps is not None else None
        table = box["table"]
        if mapped is not None:
            table = replace(table, bucket_maps=collect(mapped, box["key"]))
        return Counted(table, box["pi"], box["source"], box["notes"],
                       {"build_s": time.perf_counter() - t0, "recode_s": 0.0})

    def column_values(self, frames: Frames, cols: Iterable[str]) -> dict[str, Any]:
        """Each named column of the sample's records (the flagged ones in a register) as a numpy
        array, in record order (what ``ctx.column`` gives a measure)."""
        import pandas as pd
        cols = list(cols)
        frame = frames.sample
        if not cols or not isinstance(frame, pd.DataFrame):
            return {}
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            shown = ", ".join(map(str, list(frame.columns)[:20]))
            raise BadInput(f"column(s) {', '.join(map(repr, missing))} named by a measure option are "
                           f"not in the sample (its columns: {shown})")
        sub = frame[cols]
        if self.sample_flag is not None:
            from gpurisk.freq.engine import sample_flag_mask
            sub = sub[sample_flag_mask(frame, self.sample_flag)]
        return {c: sub[c].to_numpy() for c in cols}

    def record_rows(self, frames: Frames):
        """0-based row numbers (in the data) of the sample's records: all rows, or those flagged."""
        import numpy as np
        if self.sample_flag is None:
            return None
        from gpurisk.freq.engine import sample_flag_mask
        return np.flatnonzero(sample_flag_mask(frames.sample, self.sample_flag))
