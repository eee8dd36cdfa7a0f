"""Where a command's table of cells is made: on this process (the client), or kept on the workers.

One rule for every command (issue 40: assess, scan and the rest decided it three ways). On a
backend that is not distributed the table is always here. On a distributed one (Dask, dask-cuda)
the finest table stays on the workers, and only summaries (n, N, the frequencies of frequencies,
the sample uniques' sums...) and the bucket measures' small maps come back, unless

- a recode regroups the cells (recodes sum the table here), or
- (a command of one table: ``assess``) a measure that was **named** reads cells
  (``Measure.reads = "cells"``): the table is brought here, even with ``keep=True``, and the log
  says which measure did it, or
- (the same) the command runs its **default** measures and the **headline** reads cells (Ê,
  ``matches_ll``, when the population counts are not known): the headline is never missing, so the
  table comes here — unless the caller asked to keep the cells on the workers (``keep=True``:
  ``--cells-on-workers``), in which case the headline is left out with its reason.

A default measure other than the headline that reads cells is left out where the cells stay on the
workers, with a reason that says how to run it; where the table comes here anyway every default
runs. ``keep=False`` always brings the table here.

A scan (``tables=True``: many small tables, one per combination) keeps the finest table on the
workers whatever its measures read (unless ``keep=False`` or a recode): every measure that reads
cells, named or default, runs on each combination's table, built on one worker from its merged
cells (:func:`gpurisk.freq.subsets.table_measures`; ``Placement.on_tables``), so the headline Ê and
τ̂1 are never missing and the finest table never reaches the client. A combination whose table
could hold more than :data:`gpurisk.freq.subsets.TABLE_CELLS` cells has its own table brought
here for them (``Placement.fetch_large``), or, with ``keep=True``, gets a reason instead.

With population counts (a register) every headline figure (E, τ1, θ, N1) is a summary the workers
reduce, so a register's table stays on the workers by default.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping, Sequence

log = logging.getLogger("gpurisk.backends")


@dataclass(frozen=True)
class Placement:
    """Where the table is made (``on_workers``), and the default measures left out because they
    read cells that stay on the workers (``kept_out``: measure -> why, phrased with placeholders)."""

    on_workers: bool
    kept_out: Mapping[str, str] = field(default_factory=dict)
    #: what brings the table to this process on a distributed backend (empty where nothing does)
    brought_by: tuple[str, ...] = ()
    #: the measures that read cells and run on each (small) table on the workers (a scan)
    on_tables: tuple[str, ...] = ()
    #: a table too large to build on a worker is brought here for them (else: a reason)
    fetch_large: bool = False


def cell_readers(names: Sequence[str], inp, options=None) -> list[str]:
    """The measures among ``names`` that read cells (not summaries, not buckets) and can run on
    these inputs and ``options`` (a measure missing an option it requires reads nothing)."""
    from gpurisk.core.evaluate import can_run
    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    return [m for m in names if m in reg and reg[m].cls.reads not in ("summary", "buckets")
            and can_run(reg[m].cls, inp, dict(options or {}))]


def place(names: Sequence[str], inp, options=None, *, defaults: bool,
          keep: bool | None = None, exact: bool = False, tables: bool = False) -> Placement:
    """Where the table of ``names`` (the measures a command will run on ``inp``, an
    :class:`~gpurisk.inputs.Inputs`) is made, by the rule of the module docstring. ``defaults``:
    the measures are the command's default set (none was named); ``keep``: the caller's
    ``cells_on_workers`` (None: decided here); ``exact``: the population counts are known (so the
    headline is the exact E, a summary); ``tables``: the command reads many small tables (a scan),
    whose measures that read cells can run on the workers."""
    if not inp.distributed:
        return Placement(False)
    if keep is False:
        return Placement(False, brought_by=("cells_on_workers=False",))
    if inp.recode:
        _log_brought(["recodes"])
        return Placement(False, brought_by=("recodes",))
    readers = cell_readers(names, inp, options)
    if not readers:
        return Placement(True)
    if tables:
        return Placement(True, on_tables=tuple(readers), fetch_large=keep is not True)
    if not defaults:
        _log_brought(readers)
        return Placement(False, brought_by=tuple(readers))
    from gpurisk.measures.headline import headline_names
    head = [m for m in readers if m in headline_names(exact)]
    if head and keep is not True:
        _log_brought(head)
        return Placement(False, brought_by=tuple(head))
    return Placement(True, {m: _why(m, inp, keep) for m in readers})


def _why(m: str, inp, keep: bool | None) -> str:
    how = ("with {arg:--cells-on-workers|cells_on_workers=True}" if keep
           else f"on the {inp.backend} backend")
    return (f"it reads every cell, which stay on the workers {how}. Name it "
            f"({{arg:--measures {m},...|measures=['{m}', ...]}}) to bring the table of cells here")


def _log_brought(by: Sequence[str]) -> None:
    log.info("the table of cells is brought to this process for %s; naming only measures that "
             "read summaries or buckets (--measures) keeps the cells on the workers",
             ", ".join(by))
