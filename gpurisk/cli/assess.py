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
    if any(m.get("upper") is not None for m in doc["measures"].values()):
        from gpurisk.core.levels import upper_legend
        con.print(upper_legend(1.0 - doc.get("levels", {}).get("bound_level", 0.99)),
                  markup=False, highlight=False)
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


def print_headline(con, h: dict | None) -> None:
    """The one figure an office acts on, its interval and bound (or "exact" where it is counted from
    the population), the scenario it answers, first; under an exact headline, each estimator that
    was named against the truth (the words of :mod:`gpurisk.core.levels`)."""
    from gpurisk.core.levels import headline_lines
    for i, line in enumerate(headline_lines(h)):
        if i == 0 and line.startswith("headline"):
            con.print("[bold]headline[/bold]" + line[len("headline"):], highlight=False)
        else:
            con.print(line, markup=False, highlight=False)


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
