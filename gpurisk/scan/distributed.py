"""The scan on a Dask cluster when every measure reads summaries: no cell reaches this process.

Whether a scan takes this path is decided by :func:`gpurisk.core.placement.place`, the rule of
every command (a Dask backend, no recode, every measure to run reads summaries or buckets).
:class:`SummaryScan` counts the finest table on the workers (:func:`gpurisk.freq.subsets.subset_summaries`), checks it as
:meth:`gpurisk.inputs.Inputs.summarize` does (cardinality guard, f_j <= F_j, π), and yields each
combination's :class:`~gpurisk.freq.summary.SummaryTable`, reduced on the cluster.
"""
from __future__ import annotations

from typing import Iterator, Sequence

from gpurisk.freq.summary import SummaryTable, combine


def bucket_classes(names: Sequence[str]) -> list:
    """The classes of the measures among ``names`` that read buckets."""
    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    return [reg[m].cls for m in names if m in reg and reg[m].cls.reads == "buckets"]


class SummaryScan:
    """The finest table's summaries (``table``, π) and, from :meth:`tables`, each combination's."""

    def __init__(self, inp, frames, keys: Sequence[str], subsets: Sequence[Sequence[str]],
                 bucket_measures=(), context_for=None, table_measures=(), timeout=None,
                 fetch_large: bool = False):
        from gpurisk.freq.guards import check_cardinality
        from gpurisk.freq.subsets import subset_summaries
        from gpurisk.inputs import resolve_fraction
        self.keys = tuple(keys)
        self.subsets = [tuple(s) for s in subsets]
        self.backend = inp.backend
        self.built = 0
        #: combinations not to reduce (finished in a resumed scan): may be filled until tables()
        self.skip: set[int] = set()
        #: bucket measures mapped on each combination's buckets, with ``context_for(i, pi, source)``
        self._bucket = list(bucket_measures or ())
        self._context_for = context_for
        self._maps: dict[int, tuple] = {}
        #: measures that read cells, run on each combination's whole table on a worker
        self._tables = list(table_measures or ())
        self._timeout = timeout
        self._gen = subset_summaries(inp.backend_obj.client, frames.sample, self.keys,
                                     self.subsets, self.skip,
                                     population=frames.population, sample_flag=inp.sample_flag,
                                     weights=inp.weights, missing=inp.missing,
                                     gpu=inp.backend_obj.gpu, sep=inp.sep,
                                     maps_for=self._maps_for if self._bucket else None,
                                     tables_for=self._tables_for if self._tables else None,
                                     fetch_large=fetch_large)
        try:
            _, self.plan, parts, cards = next(self._gen)
            self.cards = dict(zip(self.plan.keys, cards))
            self.table = SummaryTable(self.keys, self.plan.categories,
                                      combine(self.plan, parts, self.backend), tuple(cards),
                                      backend=self.backend)
            check_cardinality(self.table, inp.allow_high_cardinality)
            self.fraction, self.fraction_source, self.notes = resolve_fraction(self.table, inp.fraction)
        except BaseException:
            self.close()
            raise

    def _maps_for(self, i: int):
        """(classes, ctx) of the bucket measures that can run on combination ``i``, or None."""
        from dataclasses import replace

        from gpurisk.measure import missing_needs
        ctx = replace(self._context_for(i, self.fraction, self.fraction_source), columns={})
        todo = [c for c in self._bucket if missing_needs(c, self.table, ctx) is None]
        if not todo:
            return None
        self._maps[i] = ctx
        return todo, ctx

    def _tables_for(self, i: int):
        """(classes, ctx, timeout) of the measures that read cells, for combination ``i``."""
        from dataclasses import replace
        ctx = replace(self._context_for(i, self.fraction, self.fraction_source), columns={})
        return self._tables, ctx, self._timeout

    def _worker_results(self, got) -> dict | None:
        """The table measures' results of one combination (:func:`gpurisk.freq.subsets.table_measures`),
        or, where its table was too large to build on a worker, each one's reason."""
        if got is None:
            return None
        if "cells_at_most" in got:
            from gpurisk.freq.subsets import TABLE_CELLS
            from gpurisk.measure import Result
            why = (f"its table can hold {got['cells_at_most']:,} cells, more than the "
                   f"{TABLE_CELLS:,} a worker builds for a measure that reads cells (the cells "
                   "stay on the workers). Scan without {arg:--cells-on-workers|cells_on_workers=True}"
                   " to bring the table here")
            return {"results": {c.name: Result.not_applicable(why) for c in self._tables},
                    "warnings": []}
        return got

    def tables(self) -> Iterator[tuple[int, SummaryTable]]:
        """``(i, SummaryTable)`` of every combination not skipped, in plan order; the keys of each
        in the finest table's (name) order, as :meth:`gpurisk.freq.lattice.Lattice.tables` gives."""
        pos = {k: j for j, k in enumerate(self.plan.keys)}
        from gpurisk.freq.buckets import collect, context_key
        for i, parts in self._gen:
            keys = sorted(self.subsets[i], key=pos.__getitem__)
            self.built += 1
            maps = done = None
            ctx = self._maps.pop(i, None)
            if isinstance(parts, dict):
                parts, mapped, done = parts["summaries"], parts["maps"], parts["results"]
                if ctx is not None:
                    maps = collect(mapped, context_key(ctx))
            yield i, SummaryTable(tuple(keys), [self.plan.categories[pos[k]] for k in keys],
                                  combine(self.plan, parts, self.backend),
                                  tuple(self.cards[k] for k in keys), backend=self.backend,
                                  bucket_maps=maps, worker_results=self._worker_results(done))

    def close(self) -> None:
        self._gen.close()
