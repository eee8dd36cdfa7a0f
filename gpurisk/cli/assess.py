"""``gpurisk assess``: every applicable measure for one set of key variables."""
from __future__ import annotations

import click

from gpurisk.cli._common import (console, design_options, echo_json, fmt_value as _fmt,
                                 input_options, output_options, run_options)


def print_assessment(doc: dict) -> None:
    from rich.table import Table

    from gpurisk.cli._notes import measure_note

    con = console()
    fof = doc["freq_of_freq"]
    head = (f"n = {doc['n']}" + (f", N = {doc['N']}" if doc["N"] is not None else "")
            + (f", π = {doc['fraction']:.6g} ({doc['fraction_source']})" if doc["fraction"] else ", π not given")
            + f"\nkeys: {', '.join(doc['keys'])}   cells: {doc['cells']}   "
            f"n1 = {fof.get('1', 0)}, n2 = {fof.get('2', 0)}, n3 = {fof.get('3', 0)}")
    con.print(head)
    print_headline(con, doc.get("headline"))
    t = Table(show_header=True, header_style="bold")
    for col in ("measure", "value", "se", "upper", "note"):
        t.add_column(col, overflow="fold")
    idle: dict[str, list[str]] = {}
    for name, m in doc["measures"].items():
        if m.get("value") is None:
            idle.setdefault(m.get("reason") or "no value", []).append(name)
            continue
        t.add_row(name, _fmt(m.get("value")), _fmt(m.get("se")), _fmt(m.get("upper")), measure_note(m))
    con.print(t)
    if idle:
        con.print("[bold]not applicable here[/bold]")
        for reason, names in idle.items():
            con.print(f"  {', '.join(names)}: {reason}")
    shown = [n for n, m in doc["measures"].items() if m.get("value") is not None
             and n in doc.get("scenarios", {})]
    if shown:
        con.print("[bold]what each figure answers[/bold]")
        for n in shown:
            con.print(f"  {n}: {doc['scenarios'][n]}")
    for w in doc.get("warnings", []):
        con.print(f"[yellow]warning:[/yellow] {w}")


def _interval(e: dict, level: float) -> str:
    lo, hi = (e.get("interval") or [None, None])
    if lo is None or hi is None:
        return ""
    return f", {100 * level:.3g} % interval {lo:.3g} to {hi:.3g}"


def print_headline(con, h: dict | None) -> None:
    """The one figure an office acts on, its interval (or "exact" where it is counted from the
    population) and the scenario it answers, first; under an exact headline, each estimator that
    was named against the truth."""
    if not h:
        return
    level = h.get("level", 0.99)
    if h.get("value") is None:
        con.print(f"[bold]headline[/bold] expected correct matches E ({h['measure']}): not given "
                  f"here: {h.get('reason')}")
        return
    if h.get("exact"):
        con.print(f"[bold]headline[/bold] expected correct matches E = {h['value']:.6g}, exact: "
                  f"counted from the population counts ({h['measure']})")
    else:
        con.print(f"[bold]headline[/bold] expected correct matches E ≈ {h['value']:.3g}"
                  f"{_interval(h, level)} ({h['measure']})")
    for b in h.get("beside", []):
        if b.get("value") is not None:
            rel = f"= {b['value']:.6g}, exact" if h.get("exact") else f"≈ {b['value']:.3g}"
            con.print(f"  beside it: {b['scenario'].split(':')[0]} {rel}"
                      f"{_interval(b, level)} ({b['measure']})")
    con.print(f"  scenario: {h['scenario'].split(': ', 1)[-1]}")
    if h.get("model"):
        con.print(f"  model: {h['model']}")
    checks = h.get("against_truth") or []
    if checks:
        con.print("  estimators named, against the truth (a check on this population):")
    for c in checks:
        if c.get("value") is None:
            con.print(f"    {c['measure']}: no estimate ({c.get('reason')}); "
                      f"truth {c['truth']:.6g} ({c['truth_measure']})")
            continue
        if c.get("covered_by") == "interval":
            held = f"{100 * level:.3g} % interval {c['interval'][0]:.3g} to {c['interval'][1]:.3g}"
        elif c.get("covered_by") == "upper":
            held = f"one-sided {100 * level:.3g} % upper bound {c['upper']:.3g}"
        else:
            held = "no interval"
        verdict = {True: "holds the truth", False: "MISSES the truth", None: ""}[c.get("covered")]
        con.print(f"    {c['measure']} ≈ {c['value']:.4g}, {held}; truth {c['truth']:.6g} "
                  f"({c['truth_measure']}){': ' + verdict if verdict else ''}")


def register(cli: click.Group) -> None:
    @cli.command()
    @click.argument("sample")
    @click.option("--keys", required=True, help="comma-separated key variables")
    @design_options()
    @run_options()
    @output_options(output_help="also write the results to FILE: .json, .csv, .csv.gz or .parquet")
    @input_options
    @click.option("--cells-on-workers/--cells-here", default=None,
                  help="Dask: keep the table on the workers, leaving out default measures that "
                       "read cells (the estimated headline among them), or bring it here. Default: "
                       "on the workers when every measure reads summaries or buckets (a "
                       "register's do), here when a named measure or the estimated headline "
                       "reads cells")
    def assess(sample, keys, design, run, reading, as_json, output, cells_on_workers):
        """Risk measures of SAMPLE (CSV, Parquet, Stata .dta, SPSS .sav, SAS .sas7bdat/.xpt, or
        example:adult) for one set of keys.

        SAMPLE may be a Parquet directory or a quoted CSV glob ("parts/*.csv"); on --backend dask
        or dask-cudf it is read partition-wise by the workers.
        """
        from gpurisk.workflows.assess import assess_with as workflow
        from gpurisk.io import write_results

        if output:
            from gpurisk.io.formats import check_output
            check_output(output, inputs=(sample, design.population))  # before the work, not after
        res = workflow(sample, keys, design, run, reading, cells_on_workers=cells_on_workers)
        doc = res.to_dict()
        if output:
            write_results(doc, output)
        if as_json:
            echo_json(doc)
        else:
            print_assessment(doc)
