"""Record-level identification risk with p̂ from the two-way log-linear model. SPEC §5.

:class:`RiskModel` holds what every record's risk needs: p̂ of each cell (IPF fit, cached on the
table), N, n and the search-method parameters. Its :meth:`RiskModel.for_cells` and
:meth:`RiskModel.for_ids` turn cell indices or mixed-radix cell ids of any batch of records into
per-record arrays (f, F, p̂, one risk per method), so a partitioned backend can call them partition by
partition and hand each batch to :class:`~gpurisk.record_writer.RecordRiskWriter`.

:func:`summarize` gives the file-level numbers (over sample-unique records, or every record): the
number of records above each threshold, the sum (expected correct identifications), mean and maximum
of each method's risk, and the sample-unique records with the minimum, median and maximum p̂ (as in
Skinner's Table 3). :func:`record_risk` runs it all on a frame.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from gpurisk.freq.guards import sample_categories
from gpurisk.errors import BadInput, GpuriskWarning
from gpurisk.xp import namespace, to_host
from gpurisk.models.loglinear import MAX_CELLS, MAX_ITER, TOL, LoglinearFit, fit_table
from gpurisk.measures import search_methods as sm

DEFAULT_THRESHOLDS = (0.1, 0.5)
_CACHE_ATTR = "_gpurisk_loglinear_fits"


def cached_fit(table, tol: float = TOL, max_iter: int = MAX_ITER,
               max_cells: float = MAX_CELLS) -> LoglinearFit:
    """The IPF fit of ``table``'s counts, computed once per table and settings (shared by measures)."""
    key = (float(tol), int(max_iter), float(max_cells))
    cache = table.cached(_CACHE_ATTR, dict)
    if key not in cache:
        cache[key] = fit_table(table, tol=tol, max_iter=max_iter, max_cells=max_cells)
    return cache[key]


def resolve_population_size(table, population_size=None, fraction=None) -> tuple[float, str]:
    """N: given, else the population's size, else n/π. BadInput when none is available or N < n."""
    n = table.n
    if population_size is not None:
        try:
            N = float(population_size)
        except (TypeError, ValueError):
            raise BadInput(f"population size {population_size!r} is not a number") from None
        source = "given"
    elif table.N is not None:
        N, source = float(table.N), "population"
    elif fraction is not None:
        N, source = n / float(fraction), "n/pi"
    else:
        raise BadInput("record-level risk needs the population size N: give population_size=, a "
                       "population (population= / sample_flag=) or the sampling fraction fraction=",
                       cli="record-level risk needs the population size N: give --population-size, "
                       "a population (--population / --sample-flag) or the sampling fraction --fraction")
    if not math.isfinite(N):
        raise BadInput(f"population size N = {N:g} is not a finite number")
    if N < n:
        raise BadInput(f"population size N = {N:g} is smaller than the sample size n = {n}")
    return N, source


@dataclass
class RiskModel:
    """p̂ per cell plus N, n and the method parameters: turns records' cells into risks."""

    table: Any
    fit: LoglinearFit
    N: float
    N_source: str
    methods: tuple
    y: float | None = None
    database_size: float | None = None
    p_tilde: float | None = None
    p_cell: Any = field(default=None, repr=False)   # p̂ of each table cell (xp)

    def __post_init__(self):
        for m in self.methods:
            sm.check_params(m, self.N, self.table.n, self.y, self.database_size)
        if self.p_tilde is not None and not 0.0 <= float(self.p_tilde) <= 1.0:
            raise BadInput(f"p_tilde = {self.p_tilde!r} is outside [0, 1]")
        self.p_cell = self.fit.p_hat_codes(self.table.cell_codes())

    @property
    def n(self) -> int:
        return self.table.n

    def risks(self, p, sample_unique=None) -> dict:
        """{method: risk array} for match probabilities ``p``; r1u is NaN where not sample unique."""
        xp = namespace(p)
        out = {}
        for m in self.methods:
            r = sm.risk(m, p, self.N, self.n, self.y, self.database_size, self.p_tilde)
            if m == "r1u" and sample_unique is not None:
                r = xp.where(sample_unique, r, xp.nan)
            out[m] = r
        return out

    def for_cells(self, cells) -> dict:
        """Per-record arrays for records in table cells ``cells``: f, F (if known), p_hat, risks."""
        f = self.table.f[cells]
        p = self.p_cell[cells]
        out = {"f": f}
        if self.table.F is not None:
            out["F"] = self.table.F[cells]
        out["p_hat"] = p
        out.update(self.risks(p, f == 1))
        return out

    def for_ids(self, ids) -> dict:
        """As :meth:`for_cells` for records given by their mixed-radix cell ids (e.g. one partition)."""
        from gpurisk.freq.partial import locate
        return self.for_cells(locate([ids], [self.table.cell_id], complete=True))


def build_model(table, methods: Iterable[str] = sm.DEFAULT_METHODS, population_size=None,
                fraction=None, y=None, database_size=None, p_tilde=None, tol: float = TOL,
                max_iter: int = MAX_ITER, max_cells: float = MAX_CELLS) -> RiskModel:
    methods = tuple(methods)
    if not methods:
        raise BadInput("no search method given (methods=['r1', 'r1u', ...]; methods: "
                       f"{', '.join(sm.METHODS)})",
                       cli=f"no search method given (--methods {','.join(sm.METHODS)})")
    for m in methods:
        if m not in sm.METHODS:
            raise BadInput(f"unknown search method {m!r}; methods: {', '.join(sm.METHODS)}")
    N, source = resolve_population_size(table, population_size, fraction)
    fit = cached_fit(table, tol, max_iter, max_cells)
    return RiskModel(table, fit, N, source, methods, y, database_size, p_tilde)


# --- file level ---------------------------------------------------------------------------------
def method_summary(risk, weight, thresholds) -> dict:
    """Sum, mean, max and counts above thresholds of one method over records (cells × weights)."""
    ok = ~np.isnan(risk)
    r, w = risk[ok], weight[ok]
    records = int(w.sum())
    total = float((r * w).sum())
    return {
        "sum": total,
        "mean": total / records if records else math.nan,
        "max": float(r.max()) if r.size else math.nan,
        "records": records,
        "above": {f"{t:g}": int(w[r > t].sum()) for t in thresholds},
    }


def summarize(model: RiskModel, all_records: bool = False,
              thresholds: Iterable[float] = DEFAULT_THRESHOLDS) -> dict:
    """File-level numbers over sample-unique records (or every record); computed per cell."""
    thresholds = tuple(float(t) for t in thresholds)
    t = model.table
    f = to_host(t.f)
    sel = f > 0 if all_records else f == 1
    cells = np.flatnonzero(sel)
    weight = f[cells].astype(np.int64)
    p = to_host(model.p_cell)[cells]
    risks = {m: to_host(r) for m, r in model.risks(p, f[cells] == 1).items()}
    doc = {
        "records": "every record" if all_records else "sample uniques",
        "n": t.n, "N": model.N, "N_source": model.N_source, "K": model.fit.K,
        "fit_categories": list(model.fit.cards),
        "sample_uniques": int((f == 1).sum()),
        "ipf": {"iterations": model.fit.iterations, "discrepancy": model.fit.discrepancy,
                "converged": model.fit.converged, "tol": model.fit.tol},
        "thresholds": list(thresholds),
        "methods": {m: method_summary(r, weight, thresholds) for m, r in risks.items()},
        "table3": table3_rows(model, np.flatnonzero(f == 1)),
    }
    return doc


def table3_rows(model: RiskModel, su_cells: np.ndarray) -> list[dict]:
    """Sample uniques with the minimum, (lower) median and maximum p̂ (Skinner's Table 3)."""
    if su_cells.size == 0:
        return []
    p_all = to_host(model.p_cell)
    order = np.argsort(p_all[su_cells], kind="stable")
    picks = [("minimum", order[0]), ("median", order[(order.size - 1) // 2]), ("maximum", order[-1])]
    rows = []
    F = None if model.table.F is None else to_host(model.table.F)
    for label, i in picks:
        cell = int(su_cells[i])
        p = np.array([p_all[cell]])
        row = {"which": label, "cell": cell, "p_hat": float(p[0]),
               "F": None if F is None else int(F[cell])}
        for m, r in model.risks(p).items():
            row[m] = float(to_host(r)[0])
        if "r1u" in row:
            row["r4_database_size"] = sm.database_size_for(float(p[0]), row["r1u"], model.N)
        rows.append(row)
    return rows


def selected_records(table, all_records: bool = False):
    """(record positions in the sample, their cell indices): sample uniques, or every record."""
    rc = to_host(table.record_cell())
    if all_records:
        return np.arange(rc.size, dtype=np.int64), rc
    f = to_host(table.f)
    pos = np.flatnonzero(f[rc] == 1)
    return pos, rc[pos]


def write_records(model: RiskModel, path, row_numbers=None, all_records: bool = False,
                  chunk: int = 1 << 20) -> int:
    """Write one row per selected record to Parquet, ``chunk`` records at a time; returns the count."""
    from gpurisk.io.record_writer import RecordRiskWriter
    pos, cells = selected_records(model.table, all_records)
    rows = pos if row_numbers is None else np.asarray(row_numbers)[pos]
    xp = model.table.xp
    with RecordRiskWriter(path, model.methods, population=model.table.F is not None) as w:
        for start in range(0, pos.size, chunk):
            sl = slice(start, start + chunk)
            cols = model.for_cells(xp.asarray(cells[sl]))
            w.write(rows[sl], cols)
        return w.rows


class RecordRisk(Mapping):
    """What :func:`record_risk` returns: the file-level summary as attributes (``n``, ``N``,
    ``methods``: per search method the sum (expected correct identifications), mean, max, records and
    counts above each threshold; ``table3``: Skinner's Table 3 rows; ``ipf``; ``warnings``), and as a
    read-only mapping of the ``--json`` document (``rr["methods"]["r1"]["sum"]``); ``to_dict()`` gives
    that document."""

    __slots__ = ("_doc",)

    def __init__(self, doc: dict):
        self._doc = doc

    def __getitem__(self, key):
        return self._doc[key]

    def __iter__(self):
        return iter(self._doc)

    def __len__(self) -> int:
        return len(self._doc)

    def to_dict(self) -> dict:
        """The summary document (what ``gpurisk record-risk --json`` prints)."""
        return self._doc

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        doc = object.__getattribute__(self, "_doc")
        if name in doc:
            return doc[name]
        raise AttributeError(f"'RecordRisk' has no attribute {name!r}; fields: {', '.join(doc)}")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._doc))

    def expected(self, method: str) -> float:
        """Expected number of correct identifications under ``method`` (the sum of its risks)."""
        return self._doc["methods"][method]["sum"]

    def __repr__(self) -> str:
        from gpurisk.core.display import fmt
        d = self._doc
        ipf = d["ipf"]
        sums = ", ".join(f"{m}={fmt(s['sum'])}" for m, s in d["methods"].items())
        return (f"<RecordRisk n={d['n']}, N={fmt(d['N'])}, keys={d['keys']}: "
                f"{d['sample_uniques']} sample uniques; expected correct ids over {d['records']} "
                f"{sums}; IPF {'converged' if ipf['converged'] else 'NOT converged'} after "
                f"{ipf['iterations']} iterations"
                + (f"; {len(d['warnings'])} warning(s)>" if d.get("warnings") else ">"))

    def _repr_html_(self) -> str:
        from gpurisk.core.display import html_table
        d = self._doc
        th = [f"{t:g}" for t in d["thresholds"]]
        rows = [(m, s["sum"], s["mean"], s["max"], s["records"], *[s["above"][t] for t in th])
                for m, s in d["methods"].items()]
        return html_table(f"Record-level risk of {', '.join(d['keys'])} (n={d['n']}, "
                          f"N={d['N']:.0f}, risk over {d['records']})", rows,
                          ["method", "expected correct ids (sum)", "mean", "max", "records",
                           *[f"> {t}" for t in th]],
                          [f"warning: {w}" for w in d.get("warnings", [])])


def check_thresholds(thresholds) -> tuple[float, ...]:
    """The risk thresholds as floats, each in [0, 1] (a risk is a probability); BadInput otherwise."""
    out = []
    for t in ([thresholds] if isinstance(thresholds, (int, float)) else thresholds):
        try:
            v = float(t)
        except (TypeError, ValueError):
            v = math.nan
        if isinstance(t, bool) or not 0 <= v <= 1:
            raise BadInput(f"thresholds: {t!r} is outside [0, 1] (a risk is a probability)",
                           cli=f"--threshold {t} is outside [0, 1] (a risk is a probability)")
        out.append(v)
    return tuple(out)


def check_max_cells(max_cells) -> float:
    """The log-linear table's cell limit: a finite number > 0 (NaN would switch the guard off)."""
    try:
        v = float(max_cells)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(max_cells, bool) or not math.isfinite(v) or v <= 0:
        raise BadInput(f"max_cells={max_cells!r} must be a finite number > 0",
                       cli=f"--max-cells {max_cells} must be a finite number > 0")
    return v


def record_risk(frame, keys, population_size=None, population=None, sample_flag=None,
                fraction=None, methods: Iterable[str] = sm.DEFAULT_METHODS, y=None,
                database_size=None, p_tilde=None, all_records: bool = False,
                thresholds: Iterable[float] = DEFAULT_THRESHOLDS, output=None, tol: float = TOL,
                max_iter: int = MAX_ITER, max_cells: float = MAX_CELLS, missing: str = "category",
                backend: str | None = None, show_records: bool = False, recode=None,
                allow_high_cardinality: bool = False, sep: str | None = None,
                encoding: str = "utf-8", ids: Iterable[str] = ()) -> RecordRisk:
    """Record-level risk of ``frame`` (a frame or a path) for ``keys``: a :class:`RecordRisk` (the
    summary; ``to_dict()`` is the document of ``--json``); rows to ``output``. A fit stopped before
    converging, or a given N that differs from the population's, is a :class:`~gpurisk.GpuriskWarning`
    (also in ``.warnings``). Read, checked and counted by :class:`gpurisk.inputs.Inputs`, as every command.

    Row numbers in the output are 0-based positions in ``frame`` (the register, with ``sample_flag``).
    ``ids`` names columns of ``frame`` put in front of the rows of ``output`` (``--id``), so the
    risks can be joined back. On a distributed backend ``output`` is a Parquet dataset folder (one
    file per partition, written by the workers, which carry the ids).
    """
    from gpurisk.inputs import Inputs
    thresholds = check_thresholds(thresholds)            # before anything is read
    max_cells = check_max_cells(max_cells)
    inp = Inputs(frame, keys, population=population, sample_flag=sample_flag, fraction=fraction,
                 missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                 allow_high_cardinality=allow_high_cardinality, columns=list(ids))
    if ids and output is None:
        raise BadInput("ids name columns to copy into the output; give an output file too")
    if inp.distributed and inp.recode:
        raise BadInput(f"record-risk with --recode on the {inp.backend} backend: the records' cells "
                       "are found among the counted cells before recoding; recode the data, or use "
                       "--backend pandas (or cudf)")
    if output is not None:      # before the work, not after
        from gpurisk.io.atomic import check_output_dataset, check_output_file
        check = check_output_dataset if inp.distributed else check_output_file
        check(output, (".parquet", ".pq"), "record-level output (the rows are written as Parquet)")
    frames = inp.read()
    table = inp.count(frames, weights=False,
                      records=None if inp.distributed else "record-risk").table
    keys, fraction = list(inp.keys), inp.fraction
    model = build_model(table, methods, population_size, fraction, y, database_size, p_tilde,
                        tol, max_iter, max_cells)
    doc = summarize(model, all_records, thresholds)
    doc["keys"] = keys
    doc["categories"] = dict(zip(table.keys, sample_categories(table)))   # distinct values seen
    notes = []
    if population_size is not None and table.N is not None and abs(float(population_size) - table.N) > 0.5:
        notes.append(f"given N = {float(population_size):g} differs from the population's size "
                     f"{table.N}; the given value is used")
    if not model.fit.converged:
        notes.append(f"IPF stopped after {model.fit.iterations} iterations with margin discrepancy "
                     f"{model.fit.discrepancy:.3g} > tol = {model.fit.tol:g}; raise the iteration "
                     "limit (max_iter, on the command line --max-iter)")
    doc["warnings"] = notes
    for note in notes:
        warnings.warn(note, GpuriskWarning, stacklevel=2)
    if inp.distributed:
        _distributed_rows(doc, model, inp, frames, output, all_records, show_records, ids)
        return RecordRisk(doc)
    pos, cells = selected_records(table, False)
    rownums = inp.record_rows(frames)
    _attach_rows(doc["table3"], pos, cells, table, show_records, rownums)
    if output is not None:
        doc["output"] = {"path": str(output),
                         "rows": write_records(model, output, rownums, all_records)}
        if ids:
            from gpurisk.io.record_writer import add_id_columns
            ids = list(ids)
            add_id_columns(output, frames.sample[ids])
            doc["output"]["id_columns"] = ids
    return RecordRisk(doc)


def write_risk_part(acc: dict, rows, path, carried, methods, population: bool,
                    all_records: bool) -> int:
    """One partition's per-record risks (``acc``: each record's f, F, p̂ and risks) to ``path``:
    every record, or the sample uniques; the columns of :class:`RecordRiskWriter`, after the
    ``carried`` id columns (``--id``) when given."""
    from gpurisk.io.record_writer import RecordRiskWriter, add_id_columns
    if not all_records:
        sel = acc["f"] == 1
        acc, rows = {k: v[sel] for k, v in acc.items()}, rows[sel]
        if carried is not None:
            carried = carried[to_host(sel)]
    with RecordRiskWriter(path, methods, population=population) as w:
        w.write(rows, acc)
    if carried is not None:     # the part's records, in the part file's row order
        add_id_columns(path, carried.reset_index(drop=True), by_row=True)
    return w.rows


def _distributed_rows(doc, model: RiskModel, inp, frames, output, all_records, show_records,
                      ids=()):
    """On Dask: the cells' risks computed here, each record's found on the workers; Table 3's
    records' row numbers, and (``output``) one Parquet file per partition in the folder ``output``
    (a Parquet dataset, replaced as a whole when complete), rows never gathered."""
    import functools

    from gpurisk.freq._dask import record_pass_dask
    from gpurisk.io.atomic import atomic_dataset
    t = model.table
    cols = {k: to_host(v) for k, v in model.for_cells(np.arange(int(t.f.shape[0]))).items()}
    special = [r["cell"] for r in doc["table3"]]
    kw = dict(sample_flag=inp.sample_flag, gpu=inp.backend == "dask-cudf", sep=inp.sep,
              special=special)
    if output is None:
        res = record_pass_dask(frames.sample, t, cols, **kw)
    else:
        write = functools.partial(write_risk_part, methods=model.methods,
                                  population=t.F is not None, all_records=all_records)
        with atomic_dataset(output) as tmp:
            res = record_pass_dask(frames.sample, t, cols, write=write, out_dir=tmp,
                                   carry=list(ids), **kw)
        doc["output"] = {"path": str(output), "rows": res["written"], "files": res["files"],
                         "layout": "Parquet dataset: one part.NNNNN.parquet per partition"}
        if ids:
            doc["output"]["id_columns"] = list(ids)
    for row in doc["table3"]:
        rows = res["special"].get(row["cell"], [])
        row["row"] = int(min(rows)) if rows else None
        if show_records:
            row["key"] = {k: _plain(v) for k, v in t.cell_labels([row["cell"]])[0].items()}
        del row["cell"]


def _attach_rows(rows, pos, cells, table, show_records, row_numbers):
    """Each Table-3 row's record number (and its key values only when asked)."""
    for row in rows:
        p = int(pos[np.flatnonzero(cells == row["cell"])[0]])
        row["row"] = int(row_numbers[p]) if row_numbers is not None else int(p)
        if show_records:
            row["key"] = {k: _plain(v) for k, v in table.cell_labels([row["cell"]])[0].items()}
        del row["cell"]


def _plain(v):
    return v.item() if hasattr(v, "item") else v
