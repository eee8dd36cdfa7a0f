"""Measures that read cells bucket by bucket (``Measure.reads = "buckets"``).

A cell table is cut into buckets of cells; a bucket measure defines

- ``map_bucket(bucket, ctx) -> dict``: a small dictionary (numbers, short arrays) from one
  :class:`CellBucket`, whose arrays ``f``, ``F`` and ``w`` are in the bucket's namespace
  ``bucket.xp`` (numpy, or CuPy on a GPU worker);
- ``reduce_buckets(parts, table, ctx) -> Result``: the measure's answer from the list of those
  dictionaries (in no promised order, possibly from empty buckets) and the table's summaries (n, N,
  frequencies of frequencies: what a :class:`~gpurisk.freq.summary.SummaryTable` answers).

There is one code path. On the in-process backends (pandas, cuDF) the whole table is one bucket and
:meth:`Measure.compute` maps it and reduces, in this process. On the Dask backends the map runs on
the workers, on each bucket of the distributed cell table (next to the bucket summaries, see
:func:`gpurisk.freq._dask.summary_dask`), and only the dictionaries reach the client, where they are
kept with the :class:`SummaryTable` (:class:`BucketMaps`) for ``compute`` to reduce. A map's
dictionary comes back through :func:`hosted`: device arrays and 0-d arrays become numpy arrays and
Python numbers; an array of more than :data:`MAX_ITEMS` elements is refused (a bucket's result must
not grow with its cells).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from gpurisk.xp import namespace, scalar, to_host

__all__ = ["CellBucket", "BucketMaps", "MapFailed", "hosted", "table_bucket", "split_table",
           "map_one", "map_measures", "bucket_parts", "context_key", "MAX_ITEMS"]

#: the most elements an array in a map's dictionary may hold
MAX_ITEMS = 100_000


@dataclass(frozen=True, eq=False)
class CellBucket:
    """One bucket of cells: per cell ``f`` (sample count), ``F`` (population count, or None without a
    population) and ``w`` (sum of the sample's design weights, or None without weights), arrays of
    one namespace ``xp``. Cells of the population the sample misses have ``f = 0``. ``index`` is the
    bucket's number among ``count``; a bucket may hold no cell."""

    f: Any
    F: Any = None
    w: Any = None
    xp: Any = np
    index: int = 0
    count: int = 1

    @property
    def cells(self) -> int:
        """The number of cells in the bucket (``f_j = 0`` included)."""
        return int(self.f.shape[0])


class MapFailed(RuntimeError):
    """A measure's ``map_bucket`` raised on a worker (the message names what it raised)."""


@dataclass(frozen=True)
class BucketMaps:
    """The maps of the bucket measures run on the workers: the context key they ran with
    (:func:`context_key`) and, per measure, the list of per-bucket dictionaries (or the text of what
    its map raised)."""

    key: tuple
    parts: Mapping[str, Any] = field(default_factory=dict)


def context_key(ctx) -> tuple:
    """What of a Context a map may read, comparable: pi, alpha, seed and the options."""
    opts = tuple(sorted((str(m), repr(sorted(dict(o).items(), key=lambda kv: str(kv[0]))))
                        for m, o in dict(ctx.options).items()))
    return (ctx.fraction, ctx.fraction_source, float(ctx.alpha), int(ctx.seed), opts)


def hosted(value: Any, where: str = "map_bucket") -> Any:
    """``value`` with every array on the host: 0-d arrays and numpy scalars as Python numbers, other
    arrays as numpy arrays (at most MAX_ITEMS elements), containers walked."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {k: hosted(v, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(hosted(v, where) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        if len(value.shape) == 0:
            return scalar(value)
        size = int(np.prod(value.shape))
        if size > MAX_ITEMS:
            raise ValueError(f"{where} returned an array of {size} elements (at most {MAX_ITEMS}): "
                             "a bucket's result must be small, not one value per cell")
        return to_host(value)
    return value


def table_bucket(table) -> CellBucket:
    """The whole cell table of a FreqTable as one bucket (the table's own arrays, no copy)."""
    return CellBucket(table.f, table.F, table.w, table.xp, 0, 1)


def part_bucket(part: dict, index: int, count: int) -> CellBucket:
    """A bucket of a distributed count (a partial of :mod:`gpurisk.freq.partial`)."""
    xp = namespace(part["words"][0])
    f = part.get("f")
    if f is None:
        f = xp.zeros(int(part["words"][0].shape[0]), xp.int64)
    return CellBucket(f, part.get("F"), part.get("w"), xp, index, count)


def split_table(table, count: int, seed: int = 0) -> list[CellBucket]:
    """The table's cells dealt at random into ``count`` buckets, plus one empty bucket (what a
    distributed count may give a measure): for tests and the conformance kit."""
    xp = table.xp
    m = int(table.f.shape[0])
    label = np.random.default_rng(seed).integers(0, max(int(count), 1), m)
    out = []
    sel_all = [np.flatnonzero(label == b) for b in range(max(int(count), 1))] + [np.zeros(0, np.int64)]
    for b, sel in enumerate(sel_all):
        idx = xp.asarray(sel) if xp is not np else sel
        out.append(CellBucket(table.f[idx], None if table.F is None else table.F[idx],
                              None if table.w is None else table.w[idx], xp, b, len(sel_all)))
    return out


def map_one(measure, bucket: CellBucket, ctx) -> dict:
    """``measure.map_bucket(bucket, ctx)``, checked to be a dict and brought to the host."""
    got = measure.map_bucket(bucket, ctx)
    if not isinstance(got, dict):
        raise TypeError(f"map_bucket returned {type(got).__name__}, not a dict")
    return hosted(got)


def map_measures(part: dict, classes, ctx, index: int, count: int) -> dict:
    """On a worker: every bucket measure's map of one bucket of cells. A map that raises (or calls
    ``sys.exit``, ``os._exit``, ``os.kill`` of its process...: see
    :func:`gpurisk.core.contain.guard_exits`) gives the text of what it did on that measure's entry
    (the others still run, the worker lives on); BadInput propagates."""
    from gpurisk.errors import BadInput
    bucket = part_bucket(part, index, count)
    if bucket.F is None and getattr(ctx, "fraction", None) == 1:    # a census: F = f, as in-process
        bucket = CellBucket(bucket.f, bucket.f, bucket.w, bucket.xp, bucket.index, bucket.count)
    out: dict = {}
    from gpurisk.core.contain import MeasureEscape, guard_exits
    from gpurisk.core.contain import is_third_party
    for cls in classes:
        try:
            with guard_exits():       # an os._exit in a map must not end the worker
                # a third-party map gets its own copy of the bucket: what it writes there (flags
                # turned writeable included) reaches no other measure's map
                mine = _own_bucket(bucket) if is_third_party(cls) else bucket
                out[cls.name] = map_one(cls(), mine, ctx)
        except BadInput:
            raise
        except MeasureEscape as exc:
            out[cls.name] = MapFailed(f"map_bucket {str(exc).splitlines()[0]}")
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # noqa: BLE001 - its row's
            text = str(exc).splitlines()[0] if str(exc) else ""
            out[cls.name] = MapFailed(f"map_bucket raised {type(exc).__name__}: {text}")
    return out


def _own_bucket(bucket: CellBucket) -> CellBucket:
    from gpurisk.xp import readonly
    own = [None if a is None else readonly(a.copy()) for a in (bucket.f, bucket.F, bucket.w)]
    return CellBucket(*own, bucket.xp, bucket.index, bucket.count)


def collect(per_bucket: list[dict], key: tuple) -> BucketMaps:
    """The per-bucket outputs of :func:`map_measures` as one BucketMaps (by measure)."""
    parts: dict = {}
    for got in per_bucket:
        for name, d in got.items():
            if isinstance(parts.get(name), MapFailed):
                continue
            if isinstance(d, MapFailed):
                parts[name] = d
            else:
                parts.setdefault(name, []).append(d)
    return BucketMaps(key, parts)


def bucket_parts(measure, table, ctx) -> list[dict]:
    """The per-bucket dictionaries of ``measure`` on ``table``: those the workers computed (kept with a
    SummaryTable), or the map of the table as one bucket, here."""
    from gpurisk.freq.summary import CellsNotKept, SummaryTable
    if isinstance(table, SummaryTable):
        maps, name = table.bucket_maps, measure.name
        if maps is None or name not in maps.parts:
            raise CellsNotKept(f"the buckets of {name!r} were not mapped where the cells are "
                               "(this table keeps only summaries)")
        if maps.key != context_key(ctx):
            raise CellsNotKept(f"the buckets of {name!r} were mapped with other options or another "
                               "sampling fraction than this run's")
        got = maps.parts[name]
        if isinstance(got, MapFailed):
            raise got
        return list(got)
    return [map_one(measure, table_bucket(table), ctx)]
