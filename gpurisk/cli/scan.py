"""``gpurisk scan``: many key combinations in one pass; rows stream to a Parquet dataset."""
from __future__ import annotations

import math
import sys

import click

from gpurisk.cli._common import (console, design_options, echo_json, input_options,
                                 output_options, run_options)


def _fmt(v, digits=4):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _check_top(top) -> int:
    from gpurisk.core.settings import Param
    from gpurisk.options import Option
    return Param("top", "--top", Option(int, 10, min=1)).check(top)


def summary_doc(res, k: int, by: str | None) -> dict:
    """The closing summary as JSON-able data: key NAMES and numbers only, never key values."""
    from gpurisk.scan.runner import rank_meaning
    from gpurisk.core.levels import level_fields
    top = res.top(k, by)
    by = by or res.rank_by
    cols = ["combo", "scenario", "size", "cells", "n1", "n2", "N1", by]
    if f"{by}_upper" in top.columns:
        cols.append(f"{by}_upper")
    if f"{by}_note" in top.columns:        # what the ranking's measure says about its figure
        cols.append(f"{by}_note")
    if by == "matches_ll" and "matches_hat" in top.columns:  # the lower estimate of E beside Ê
        cols.append("matches_hat")
    if by != "theta_hat" and "theta_hat" in top.columns:    # θ̂ beside the ranking
        cols += ["theta_hat", "theta_hat_upper"]
    rows = []
    for _, r in top.iterrows():
        d = {c: _py(r.get(c)) for c in dict.fromkeys(cols) if c in top.columns}
        d["keys"] = list(r["keys"])
        rows.append(d)
    s = res.settings
    return {"n": s.get("n"), "N": s.get("N"), "fraction": s.get("fraction"),
            "combinations": int(len(res.results)), "skipped": res.skipped,
            "rollups": res.rollups, "output": str(res.path) if res.path else None,
            "rank_by": by, "ranked_by": rank_meaning(by), "top": rows, "timings": res.timings, "warnings": res.warnings,
            "levels": level_fields(s.get("alpha", 0.01))}


def _py(v):
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _combo_name(r: dict) -> str:
    name = ", ".join(r["keys"])
    return f"{r['scenario']}: {name}" if r.get("scenario") else name


def _summary_columns(by: str, top: list) -> list:
    """(header, row -> shown text) for the table's columns after ``#`` and the combination: each
    once (ranked by ``n1``, the ``n1`` column is the ranking)."""
    first = top[0] if top else {}
    cols = [(c, (lambda r, c=c: _fmt(r.get(c)))) for c in ("size", "cells", "n1", "n2", "N1")]
    if by not in {c for c, _ in cols}:            # † where the measure carries a note (below)
        cols.append((by, lambda r: _fmt(r.get(by)) + (" †" if r.get(f"{by}_note") else "")))
    if any(r.get(f"{by}_upper") is not None for r in top):    # an exact ranking has no bound
        cols.append(("upper", lambda r: _fmt(r.get(f"{by}_upper"))))
    if by == "matches_ll" and "matches_hat" in first:
        cols.append(("θ̂·n1 (lower est.)", lambda r: _fmt(r.get("matches_hat"))))
    if by != "theta_hat" and "theta_hat" in first:
        cols.append(("theta_hat", lambda r: "not estimable" if r.get("theta_hat") is None
                     and r.get("n2") == 0 else _fmt(r.get("theta_hat"))))
        cols.append(("theta_hat upper", lambda r: _fmt(r.get("theta_hat_upper"))))
    return cols


def print_summary(doc: dict) -> None:
    from rich.table import Table
    con = console()
    head = (f"n = {doc['n']}" + (f", N = {doc['N']}" if doc["N"] is not None else "")
            + (f", π = {doc['fraction']:.6g}" if doc["fraction"] else ", π not given")
            + f"   combinations: {doc['combinations']}"
            + (f" ({doc['skipped']} already done, resumed)" if doc["skipped"] else "")
            + f"   time: {doc['timings']['total_s']:.2f} s")
    con.print(head)
    by = doc["rank_by"]
    t = Table(title=f"riskiest combinations (key names only), ranked by "
                    f"{doc.get('ranked_by') or by}", show_header=True, header_style="bold")
    top = doc["top"]
    columns = _summary_columns(by, top)
    rows = [[str(i), _combo_name(r)] + [get(r) for _, get in columns] for i, r in enumerate(top, 1)]
    # a column with no value in any row is left out (N1 without a population), as compare does
    keep = [j for j, (h, _) in enumerate(columns)
            if h == by or any(row[2 + j] != "—" for row in rows)]
    empty = [columns[j][0] for j in range(len(columns)) if j not in keep]
    for c in ["#", "combination"] + [columns[j][0] for j in keep]:
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(*row[:2], *[row[2 + j] for j in keep])
    con.print(t)
    if top and any(h in ("upper", "theta_hat upper") for h, _ in (columns[j] for j in keep)):
        from gpurisk.core.levels import upper_legend
        con.print(upper_legend(1.0 - doc.get("levels", {}).get("bound_level", 0.99)),
                  markup=False, highlight=False)
    if top and empty:
        con.print(f"no value in any row, left out: {', '.join(empty)}", markup=False, highlight=False)
    from gpurisk.core.display import note_lines
    for line in note_lines(by, ((i, r.get(f"{by}_note")) for i, r in enumerate(top, 1))):
        con.print(line, markup=False, highlight=False)
    if doc["output"]:
        con.print(f"results: {doc['output']} ({doc['combinations']} rows)")
    for w in doc.get("warnings", []):
        con.print(f"[yellow]warning:[/yellow] {w}")


def register(cli: click.Group) -> None:
    @cli.command()
    @click.argument("data")
    @click.option("--keys", default=None, help="pool of key variables (comma-separated)")
    @click.option("--max-size", type=int, default=None,
                  help="evaluate every subset of the pool up to this size")
    @click.option("--min-size", type=int, default=1, show_default=True, help="smallest subset size")
    @click.option("--scenarios", default=None, metavar="FILE",
                  help="TOML file with named scenarios: [scenarios] name = [\"key\", ...]")
    @click.option("--fundamental", default=None, metavar="KEYS",
                  help="a fundamental key (comma-separated) for --plus-each")
    @click.option("--plus-each", is_flag=True,
                  help="evaluate the fundamental key plus each other pool variable in turn")
    @click.option("--max-combinations", type=int, default=None, metavar="N",
                  help="refuse a plan of more combinations, counted before any is listed "
                       "(default: 1000000)")
    @design_options()
    @run_options(measures_help="comma-separated measures (default: every file-level measure that "
                               "reads counts only and runs by default)",
                 option_help="a measure's option, e.g. theta_hat_dis.K=200000 (repeatable)",
                 seed_help="scan seed; each combination's seed is derived from it and its keys")
    @output_options(json_help="print the summary as JSON", output_metavar="OUT.parquet",
                    output_help="Parquet dataset (directory) the rows stream to")
    @click.option("--resume", is_flag=True, help="finish an interrupted scan in --output")
    @click.option("--overwrite", is_flag=True, help="replace an existing scan in --output")
    @click.option("--batch-rows", type=int, default=256, show_default=True,
                  help="rows per Parquet part file (a part is also written every 2 s)")
    @click.option("--top", type=int, default=10, show_default=True, help="rows in the closing summary")
    @click.option("--rank-by", default=None, help="column ranking the summary (default matches_ll, the "
                       "expected correct matches E estimated by the log-linear model; else "
                       "matches_hat = θ̂·n1, a lower estimate of E, theta_hat, pr_pu or n1)")
    @click.option("--progress/--no-progress", default=None,
                  help="progress bar on stderr (default: when stderr is a terminal)")
    @click.option("--cells-on-workers/--cells-here", default=None,
                  help="Dask: keep the finest table on the workers, reduce each combination's "
                       "summaries there and run the measures that read cells (the headline Ê "
                       "among them) on each combination's table, built on a worker (this "
                       "process's memory does not grow with the cells), or bring it here and "
                       "roll it up here. Default: on the workers (a recode brings it here), and "
                       "a combination's table too large for a worker (over 4 194 304 possible "
                       "cells) is brought here for those measures; --cells-on-workers gives "
                       "such a table a reason instead")
    @click.option("--threads", type=int, default=None, metavar="N",
                  help="roll-up threads beside the one computing measures (default: the CPUs "
                       "usable, at most 4; 0: one thread); results do not depend on it")
    @click.option("--processes", type=int, default=None, metavar="N",
                  help="processes forked to run the measures that read cells, Ê and τ̂1 among "
                       "them (default: the CPUs usable, at most 8, on Linux, for 8 combinations "
                       "or more whose tables may hold 2^15 cells in all; 0: in this process); "
                       "results do not depend on it")
    @input_options
    def scan(data, keys, max_size, min_size, scenarios, fundamental, plus_each, max_combinations,
             design, run, reading, output, resume, overwrite, batch_rows, top, rank_by, progress,
             as_json, threads, processes, cells_on_workers):
        """Risk of many key combinations of DATA: subsets of a pool, scenarios, or a key plus each."""
        from gpurisk.workflows.scan import scan_with as workflow
        _check_top(top)                     # before the work (--rank-by: in the workflow, which
        if progress is None:                # knows the measures)
            progress = sys.stderr.isatty()
        res = workflow(data, design, run, reading, keys=keys, max_size=max_size, min_size=min_size,
                       scenarios=scenarios, fundamental=fundamental, plus_each=plus_each,
                       output=output, resume=resume, overwrite=overwrite, batch_rows=batch_rows,
                       progress=progress, threads=threads, cells_on_workers=cells_on_workers,
                       rank_by=rank_by, max_combinations=max_combinations,
                       processes=processes)
        doc = summary_doc(res, top, rank_by)
        if as_json:
            echo_json(doc, default=str)
        else:
            print_summary(doc)
