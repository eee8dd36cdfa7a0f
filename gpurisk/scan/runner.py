"""The scan's parts: one finest table, every combination rolled up from it, measures per combination
(the workflow that puts them together is :mod:`gpurisk.workflows.scan`).

The records are read once (``build_table`` over every key any combination uses); recodes regroup that
table's categories; a :class:`~gpurisk.freq.lattice.Lattice` then yields each combination's table,
summed from the smallest table already built. Each combination's row (key names, never key values;
counts; every measure's value, se, upper bound, reason and note) goes to the sink as soon as it is
done.
"""
from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.measure import Context
from gpurisk.scan.distributed import SummaryScan  # noqa: F401  (the workflow calls runner.SummaryScan)
from gpurisk.scan.plan import Combination
from gpurisk.scan.sink import row_schema

#: per-scan defaults of measure options, applied unless the user sets them. theta_hat_dis, the Monte
#: Carlo check of θ̂, costs K random draws per combination (a few ms at its single-assessment default
#: K = 200 000, as much as rolling up a mid-sized combination); a scan runs K = 10 000 and reports
#: the s.e. that goes with it. ``--option theta_hat_dis.K=200000`` restores the default.
SCAN_DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {"theta_hat_dis": {"K": 10_000}}

#: measures used to rank combinations in the closing summary, first available wins: Ê, the
#: expected number of correct matches E = Σ_{f=1} 1/F_j estimated by the log-linear model
#: (``matches_ll``, issue 27: the headline an office acts on; at π = 1 % its top 10 caught 97.8-100 %
#: of the attainable E and 95.8-99.7 % of τ1 on five real populations, bench/validate_trust.py,
#: against 90.8-99.9 % and 84.4-99.6 % for θ̂·n1), then θ̂·n1 (a lower
#: estimate of E; issue 21: ranking by θ̂ alone put combinations with one sample unique and no
#: sample pair on top), then θ̂, Pr(PU), n1
#: With population counts (a register) the exact E (``matches``) comes first: it is counted, not
#: estimated, and a scan of a register runs no estimator unless named (issue 40).
RANK_PREFERENCE = ("matches", "matches_ll", "matches_hat", "theta_hat", "pr_pu", "n1")
#: what each rank column is, for the output's "ranked by ..." line
RANK_MEANING = {
    "matches": "E (matches), the expected number of correct matches E = Σ 1/F over the sample "
               "uniques, counted from the population (exact): an intruder matches each sample "
               "unique to a random population record of its cell",
    "matches_ll": "Ê (matches_ll), the expected number of correct matches E = Σ 1/F over the sample "
                  "uniques, estimated by the log-linear model (Skinner & Shlomo 2008): an intruder "
                  "matches each sample unique to a random population record of its cell",
    "matches_hat": "θ̂·n1 (matches_hat), which orders combinations by their correct unique matches; "
                   "as a count it is a lower estimate of the expected correct matches E",
    "theta_hat": "θ̂, the estimated probability that a unique match is correct",
    "pr_pu": "Pr(PU), the share of population uniques",
    "n1": "n1, the number of sample uniques",
}
#: measures a scan runs by default although they declare ``default = False`` (they run when named in
#: ``assess``): the headline estimate of E, the scan's ranking, and τ̂1 beside it (the same fit). The
#: fit is closed-form from the combination's cells (no K-cell array), made once per combination for
#: both: the held-out tests score every pair of the combination's keys on two halves of its cells
#: (O(pairs × cells)), then the kept forest, the few forests one test away (the s.e.'s choice
#: spread) and each sample unique's prior are closed form. It is the costliest default measure
#: (docs/scan.md, bench/bench_scan_headline.py: 2.25 s of one thread for the 255 combinations of
#: FARS's 8 keys, against 0.52 s with main effects alone and 0.24 s without Ê and τ̂1).
SCAN_HEADLINE = ("matches_ll", "tau1_ll")


def rank_meaning(col: str) -> str:
    """One line saying what a ranking by ``col`` ranks by."""
    return RANK_MEANING.get(col, col)


@dataclass
class ScanResult:
    """What :func:`scan` returns: the rows (sorted by plan order) and how the scan went."""

    results: pd.DataFrame
    path: Path | None
    measures: list[str]
    settings: dict
    timings: dict = field(default_factory=dict)
    rollups: int = 0
    cells_read: int = 0
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)
    cube_elements: int = 0

    @property
    def rank_by(self) -> str:
        return rank_column(self.results)

    # DataFrame-like access to the rows (what callers of ``read_scan`` did with its frame):
    # ``len(r)``, ``r["n1"]``, ``r[r["size"] == 2]``, ``r.columns``, ``r.iterrows()``... go to
    # ``results``; ``to_frame()`` is the rows as a DataFrame of their own.
    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, item):
        return self.results[item]

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "results":
            raise AttributeError(name)
        rows = self.__dict__.get("results")
        if rows is not None and hasattr(pd.DataFrame, name):
            return getattr(rows, name)
        raise AttributeError(f"'ScanResult' object has no attribute {name!r}")

    def to_frame(self) -> pd.DataFrame:
        """The rows (one per combination, plan order) as a DataFrame (a copy)."""
        return self.results.copy()

    def top(self, k: int = 10, by: str | None = None) -> pd.DataFrame:
        """The ``k`` riskiest combinations (key names and numbers only)."""
        return top_combinations(self.results, k, by)

    def _headline(self) -> str:
        r, s = self.results, self.settings
        keys = s.get("keys") or sorted({k for ks in r.get("keys", []) for k in ks})
        head = f"{len(r)} combination(s) of {len(keys)} key(s), n={s.get('n', '?')}"
        return head + (f", N={s['N']}" if s.get("N") is not None else "")

    def __repr__(self) -> str:
        from gpurisk.core.display import fmt
        text = f"<ScanResult {self._headline()}"
        if len(self.results):
            by = self.rank_by
            best = self.top(1).iloc[0]
            text += f"; riskiest: {best['combo']} ({by}={fmt(best[by])})"
        if self.warnings:
            text += f"; {len(self.warnings)} warning(s)"
        return text + (f"; {self.path}>" if self.path is not None else ">")

    def _repr_html_(self) -> str:
        from gpurisk.core.display import html_table
        by = self.rank_by if len(self.results) else "n1"
        top = self.top(10) if len(self.results) else self.results
        rows = [(t["combo"], t["size"], t["cells"], t["n1"], t[by]) for _, t in top.iterrows()]
        return html_table(f"Scan: {self._headline()}; the {len(rows)} riskiest, ranked by {by}",
                          rows, ["combination", "size", "cells", "n1", by],
                          [f"warning: {w}" for w in self.warnings[:5]])


def rank_column(results: pd.DataFrame) -> str:
    for col in RANK_PREFERENCE:
        if col in results.columns and results[col].notna().any():
            return col
    return "n1"


_COUNT_COLUMNS = ("size", "n", "N", "cells", "pop_cells", "n1", "n2", "n3", "N1")


def rankable_columns(measures: Sequence[str]) -> list[str]:
    """The columns a scan of ``measures`` can be ranked by: its numeric columns."""
    import pyarrow as pa
    return [f.name for f in row_schema(list(measures))
            if (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
            and f.name not in ("order", "seed")]


def check_rank_by(by: str | None, measures: Sequence[str]) -> None:
    """BadInput unless ``by`` (None: the default ranking) is a numeric column of a scan of
    ``measures``; checked before the scan starts."""
    if by is None:
        return
    cols = rankable_columns(measures)
    if by not in cols:
        counts = [c for c in cols if c in _COUNT_COLUMNS]
        raise BadInput(f"cannot rank by {by!r}: not a numeric column of this scan (rank by a count: "
                       f"{', '.join(counts)}; a measure: {', '.join(measures) or 'none'}; or a "
                       "measure's _se or _upper column)")


def top_combinations(results: pd.DataFrame, k: int = 10, by: str | None = None) -> pd.DataFrame:
    by = by or rank_column(results)
    if by not in results.columns or not pd.api.types.is_numeric_dtype(results[by]):
        raise BadInput(f"cannot rank by {by!r}: not a numeric column of the scan "
                       f"(columns: {', '.join(c for c in results.columns if c not in ('keys', 'combo', 'scenario', 'warnings') and not c.endswith(('_reason', '_note')))})")
    ranked = results.assign(_r=results[by].astype(float).fillna(-math.inf))
    ranked = ranked.sort_values(["_r", "size", "order"], ascending=[False, True, True], kind="stable")
    return ranked.drop(columns="_r").head(k).reset_index(drop=True)


def _num(v):
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    v = float(v)
    return v if math.isfinite(v) else None


def _scan_options(names: Sequence[str], options: Mapping | None) -> dict:
    """The options checked (see :func:`gpurisk.plugins.check_options`), plus the scan's defaults."""
    from gpurisk.plugins import check_options
    opts = copy.deepcopy(check_options(options))
    for m, defaults in SCAN_DEFAULT_OPTIONS.items():
        if m in names:
            mine = dict(opts.get(m, {}))
            for k, v in defaults.items():
                mine.setdefault(k, v)
            opts[m] = mine
    return opts


#: what a measure may need and still run on a combination's counts alone
COUNT_NEEDS = frozenset({"fraction", "population", "weights"})


def _measure_names(measures: Iterable[str] | None, exact: bool = False) -> list[str]:
    """The measures named, or by default the headline estimate of E (:data:`SCAN_HEADLINE`, the
    ranking) and every file-level measure that reads counts only and runs by default
    (``Measure.default``; another model fit that declares ``default = False`` runs when named).
    With population counts (``exact``) the default leads with the exact E and τ1 and leaves out
    the estimators of counted values; a named estimator brings its truth beside it
    (:func:`gpurisk.measures.headline.default_names`, :func:`~gpurisk.measures.headline.with_truths`).

    Measures that need each record's cell or other columns (``records``, ``columns``) cost a pass
    over the records for every combination; a scan runs them only when named.
    """
    from gpurisk.plugins import measure_registry, unknown_measure_hint
    reg = measure_registry()
    from gpurisk.measures.headline import default_names, with_truths
    if measures is None:
        return default_names([n for n in SCAN_HEADLINE if n in reg] + [
            n for n, r in reg.items() if getattr(r.cls, "level", "file") == "file"
            and getattr(r.cls, "default", True) and n not in SCAN_HEADLINE
            and set(r.cls.needs) <= COUNT_NEEDS and not getattr(r.cls, "column_options", ())], exact)
    names = [measures] if isinstance(measures, str) else list(measures)
    unknown = [m for m in names if m not in reg]
    if unknown:
        raise BadInput(f"unknown measure(s) {', '.join(map(repr, unknown))}; registered: {', '.join(reg)}"
                       + unknown_measure_hint())
    return with_truths(names, exact)


def prepare_summaries(table) -> None:
    """Compute the summaries most measures read (kept on the table), where the table is built."""
    table.fof_vector()
    if table.F is not None:
        table.pop_uniques()
        table.unique_stats()


def default_threads() -> int:
    """Roll-up threads: the CPUs this process may use, at most 4 (roll-ups are memory-bound past a
    few), or 0 (everything in the calling thread) on a single CPU."""
    from gpurisk.freq.schedule import usable_cpus
    n = usable_cpus()
    return 0 if n <= 1 else min(4, n)


def _check_threads(threads) -> int:
    from gpurisk.core.settings import THREADS
    return THREADS.check(threads)


def _check_processes(processes) -> int:
    from gpurisk.core.settings import PROCESSES
    return PROCESSES.check(processes)


def _counts_sha(table) -> str:
    """A fingerprint of the finest table's counts (cell ids, f, F): what --resume compares for data
    given as a frame."""
    from gpurisk.io.checkpoint import fingerprint
    from gpurisk.xp import to_host
    arrays = [table.cell_id, table.f] + ([table.F] if table.F is not None else [])
    return fingerprint({"keys": list(table.keys)}, [to_host(a) for a in arrays])[:16]


def _check_batch_rows(batch_rows) -> int:
    from gpurisk.core.settings import Param
    from gpurisk.options import Option
    return Param("batch_rows", "--batch-rows", Option(int, 256, min=1)).check(batch_rows)


def combination_row(i: int, combo: Combination, table, ctx: Context, names: Sequence[str],
                    timeout: float | None = None, done: dict | None = None) -> dict:
    """One result row: counts and every measure of one combination's table. ``done``: what a
    measure process gave for some of them (:mod:`gpurisk.scan.processes`): the rest run here."""
    from gpurisk.core.evaluate import run_measures
    N = table.N          # a SummaryTable (cells kept on the workers) answers N, not F
    row = {"order": i, "combo": combo.combo, "scenario": combo.scenario, "keys": list(combo.keys),
           "size": len(combo.keys), "n": table.n, "N": table.N, "cells": table.sample_cells,
           # with a population every cell has F_j >= 1 (f_j <= F_j is checked when counting)
           "pop_cells": None if N is None else int(table.population_cells),
           "n1": table.n_r(1), "n2": table.n_r(2), "n3": table.n_r(3),
           "N1": None if N is None else table.pop_uniques(), "seed": ctx.seed}
    # the measures that read cells ran on a worker, on this combination's table built there
    done = done or getattr(table, "worker_results", None) or {"results": {}, "warnings": []}
    here = [m for m in names if m not in done["results"]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for text in done["warnings"]:
            warnings.warn(text, stacklevel=2)
        res = {**run_measures(table, ctx, here, timeout=timeout), **done["results"]}
    from gpurisk.core.levels import NORMAL_INTERVAL
    for m in names:
        r = res[m]
        row[m] = _num(r.value)
        row[f"{m}_se"] = _num(r.se)
        row[f"{m}_upper"] = _num(r.upper)
        row[f"{m}_reason"] = r.reason
        extra = r.extra or {}
        # what the measure says about its figure here (e.g. the uniques alone in a category,
        # where Ê's bound holds less often), which the page and the summary show beside it
        note = extra.get("note")
        row[f"{m}_note"] = note if isinstance(note, str) and note else None
        if m in NORMAL_INTERVAL:      # its two-sided interval, which value ± z s.e. need not be
            row[f"{m}_interval_lower"] = _num(extra.get("interval_lower"))
            row[f"{m}_interval_upper"] = _num(extra.get("interval_upper"))
    msgs = list(dict.fromkeys(str(w.message) for w in caught))
    row["warnings"] = "; ".join(msgs) if msgs else None
    return row


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    prog = Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("combinations"), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=Console(stderr=True), transient=False)
    prog.start()
    prog.add_task("scan", total=total)
    return prog
