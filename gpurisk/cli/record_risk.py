"""``gpurisk record-risk``: per-record identification risk by search method (SPEC §5)."""
from __future__ import annotations

import click

from gpurisk.errors import BadInput
from gpurisk.models.loglinear import MAX_CELLS, MAX_ITER, TOL
from gpurisk.cli._common import (console, design_options, echo_json, input_options, output_options,
                                 split_list)


def _fmt(v, digits=4):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if (v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5)) else f"{v:.{digits}f}"
    return str(v)


def print_summary(doc: dict) -> None:
    from rich.table import Table

    con = console()
    ipf = doc["ipf"]
    con.print(f"n = {doc['n']}, N = {doc['N']:.10g} ({doc['N_source']}), keys: {', '.join(doc['keys'])}, "
              f"K = {' × '.join(map(str, doc['fit_categories']))} = {doc['K']:,} cells, "
              f"sample uniques: {doc['sample_uniques']}")
    con.print(f"log-linear model (all two-way interactions) by IPF: {ipf['iterations']} iterations, "
              f"final margin discrepancy {ipf['discrepancy']:.3g}"
              + ("" if ipf["converged"] else f" [red](not converged, tol {ipf['tol']:g})[/red]"))
    th = doc["thresholds"]
    t = Table(title=f"risk over {doc['records']}", show_header=True, header_style="bold")
    for col in ["method", "expected correct ids (sum)", "mean", "max", "records"] + [f"> {x:g}" for x in th]:
        t.add_column(col, justify="right" if col != "method" else "left")
    for m, s in doc["methods"].items():
        t.add_row(m, _fmt(s["sum"]), _fmt(s["mean"]), _fmt(s["max"]), str(s["records"]),
                  *[str(s["above"][f"{x:g}"]) for x in th])
    con.print(t)
    rows = doc["table3"]
    if rows:
        methods = list(doc["methods"])
        t3 = Table(title="sample uniques with the minimum, median and maximum p̂ (Skinner's Table 3)",
                   show_header=True, header_style="bold")
        cols = ["p̂", "record"] + (["F"] if rows[0].get("F") is not None else []) + methods
        if any("key" in r for r in rows):
            cols.append("key")
        for c in cols:
            t3.add_column(c, justify="left" if c in ("p̂", "key") else "right", overflow="fold")
        for r in rows:
            cells = [f"{r['p_hat']:.3g} ({r['which']})", str(r["row"])]
            if "F" in cols:
                cells.append(str(r["F"]))
            cells += [_fmt(r[m]) for m in methods]
            if "key" in cols:
                cells.append(", ".join(f"{k}={v}" for k, v in r.get("key", {}).items()))
            t3.add_row(*cells)
        con.print(t3)
    if "output" in doc:
        con.print(f"wrote {doc['output']['rows']} record(s) to {doc['output']['path']}")
    for w in doc.get("warnings", []):
        con.print(f"[yellow]warning:[/yellow] {w}")


def _floats(value, what):
    items = split_list(value) or []
    try:
        return [float(x) for x in items]
    except ValueError:
        raise BadInput(f"{what} {value!r} is not a comma-separated list of numbers") from None


def register(cli: click.Group) -> None:
    @cli.command("record-risk")
    @click.argument("data")
    @click.option("--keys", required=True, help="comma-separated key variables")
    @click.option("--population-size", type=float, default=None,
                  help="population size N (default: the population's size, or n/π)")
    @design_options(fraction_help="sampling fraction π (N = n/π)",
                    weights_help="weight column: design or calibrated weights give N = Σw; "
                                 "normalised weights (Σw = n) need --population-size or --fraction")
    @click.option("--methods", default="r1,r1u,r2,b1", show_default=True,
                  help="search methods among r1,r1u,r2,r3,r4,b1")
    @click.option("--y", "y", type=float, default=None, help="r3: non-matches seen before the match")
    @click.option("--database-size", type=float, default=None, help="r4: size of the database searched")
    @click.option("--p-tilde", type=float, default=None, help="b1: match probability p̃ (default p̂)")
    @click.option("--all-records", is_flag=True, help="every record, not only the sample uniques")
    @click.option("--threshold", "threshold", multiple=True, metavar="T[,T...]",
                  help="count records whose risk exceeds T (repeatable or comma-separated; "
                       "default 0.1,0.5)")
    @click.option("--thresholds", "thresholds_legacy", default=None, hidden=True,
                  help="deprecated spelling of --threshold")
    @click.option("--max-cells", type=float, default=MAX_CELLS, show_default=True,
                  help="largest K = Π categories fitted as a dense table")
    @click.option("--tol", type=float, default=TOL, show_default=True,
                  help="IPF stops when every fitted two-way margin is within tol records of the observed")
    @click.option("--max-iter", type=int, default=MAX_ITER, show_default=True, help="IPF iteration limit")
    @click.option("--show-records", is_flag=True,
                  help="print the key values of the minimum/median/maximum p̂ records")
    @output_options(output_metavar="FILE.parquet",
                    output_help="write one row per record with p̂ and risks to FILE.parquet")
    @click.option("--id", "ids", multiple=True, metavar="COL[,COL...]",
                  help="copy these columns of DATA into --output, so the risks can be joined back to "
                       "the file (repeatable or comma-separated)")
    @input_options
    def record_risk(data, keys, population_size, design, methods, y,
                    database_size, p_tilde, all_records, threshold, thresholds_legacy, max_cells,
                    tol, max_iter, show_records, output, ids, as_json, reading):
        """Identification risk of each record of DATA under intruder search methods (Skinner 2007).

        p̂ comes from the log-linear model with all two-way interactions fitted to DATA's counts over
        the keys; risks are reported per sample-unique record (or every record with --all-records).
        """
        from gpurisk.workflows.record_risk import record_risk_with as run
        sep, encoding, backend = reading.sep, reading.encoding, reading.backend

        if thresholds_legacy is not None:
            click.echo("gpurisk: warning: --thresholds is deprecated; use --threshold", err=True)
            threshold = threshold + (thresholds_legacy,)
        thresholds = _floats(",".join(threshold), "--threshold") if threshold else [0.1, 0.5]
        id_cols = [c for v in ids for c in (split_list(v) or [])]
        if id_cols and not output:
            raise BadInput("--id names columns to copy into --output; give -o FILE.parquet too")
        from gpurisk.backends import get_backend, resolve_backend
        distributed = get_backend(resolve_backend(backend, data)).distributed
        if id_cols:
            _check_id_names(id_cols)
        if id_cols and not distributed:     # on Dask the workers carry them into each part file
            from gpurisk.io import check_output_file
            check_output_file(output, (".parquet", ".pq"),
                              "record-level output (the rows are written as Parquet)", (data, design.population))
            id_frame = _id_columns(data, id_cols, sep, encoding)   # before the work, not after
        import warnings
        from gpurisk.errors import GpuriskWarning
        with warnings.catch_warnings(record=True) as caught:   # printed once below, from the doc
            warnings.simplefilter("always", GpuriskWarning)
            doc = run(data, keys, design, reading, population_size=population_size,
                      methods=split_list(methods) or [],
                      y=y, database_size=database_size, p_tilde=p_tilde, all_records=all_records,
                      thresholds=thresholds, output=output, tol=tol,
                      max_iter=max_iter, max_cells=max_cells, show_records=show_records,
                      ids=id_cols if distributed else ()).to_dict()
        for w in caught:        # any other warning of the run, as a line of its own
            if str(w.message) not in doc["warnings"]:
                doc["warnings"].append(str(w.message))
        if id_cols and not distributed:
            from gpurisk.io.record_writer import add_id_columns
            add_id_columns(output, id_frame)
        if id_cols:
            doc["output"]["id_columns"] = id_cols
        if as_json:
            echo_json(_json_safe(doc))
        else:
            print_summary(doc)


def _check_id_names(cols):
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise BadInput(f"--id names {', '.join(map(repr, dup))} more than once")
    clash = [c for c in cols if c in ("row", "f", "F", "p_hat", "r1", "r1u", "r2", "r3", "r4", "b1")]
    if clash:
        raise BadInput(f"--id column(s) {', '.join(map(repr, clash))} have the name of an output "
                       "column; rename them in the file")


def _id_columns(data, cols, sep, encoding):
    """The ``--id`` columns of DATA, in file order (``row`` of the output indexes them)."""
    from gpurisk.io import read_table
    from gpurisk.io.text import nfc
    return read_table(data, sep=sep, columns=cols, encoding=encoding)[[nfc(c) for c in cols]]


def _json_safe(v):
    import math
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if hasattr(v, "item") and getattr(v, "ndim", 0) == 0:
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
