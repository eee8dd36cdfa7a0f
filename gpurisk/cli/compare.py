"""``gpurisk compare``: unique counts and measures under alternative recodes, side by side."""
from __future__ import annotations

import math

import click

from gpurisk.cli._common import (console, design_options, echo_json, input_options,
                                 output_options, run_options)


def _fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) >= 1 else f"{v:.4g}"
    return str(v)


def register(cli: click.Group) -> None:
    from gpurisk.scan.alternatives import default_measures_text
    @cli.command()
    @click.argument("data")
    @click.option("--keys", required=True, help="key variables (comma-separated)")
    @click.option("--alt", "alts", multiple=True, required=True, metavar="KEY=SPEC[;KEY=SPEC]",
                  help="an alternative coding (repeatable); recodes as in --recode, ';'-separated")
    @click.option("--cumulative", is_flag=True,
                  help="each alternative adds to the previous ones (Kim & Jeong Tables 3 -> 4 -> 5)")
    @click.option("--max-size", type=int, default=None, help="largest subset of the keys (default: all)")
    @click.option("--min-size", type=int, default=1, show_default=True,
                  help="smallest subset of the keys")
    @design_options()
    @run_options(timeout=False, measures_help="comma-separated measures (default: "
                                              f"{default_measures_text()}; a measure that applies "
                                              "to no row, such as pr_pu without a population, is "
                                              "left out and the output says why)")
    @click.option("--all", "show_all", is_flag=True,
                  help="show every combination, not only those containing a recoded key")
    @click.option("--top", type=click.IntRange(min=0), default=20, show_default=True,
                  help="print the first TOP rows (ranked); 0 prints every row")
    @output_options(json_help="print JSON",
                    output_help="write the full comparison to FILE: .csv, .csv.gz or .parquet")
    @input_options
    def compare(data, keys, alts, cumulative, max_size, min_size, design, run, reading, show_all,
                top, output, as_json):
        """Unique counts and measures of DATA before -> after alternative recodes."""
        from gpurisk.workflows.compare import compare_with as workflow
        if output:
            from gpurisk.io import check_output_file
            check_output_file(output, (".csv", ".csv.gz", ".parquet", ".pq"), "--output",
                              (data, design.population))
        res = workflow(data, keys, design, run, reading, alternatives=list(alts),
                       cumulative=cumulative, max_size=max_size, min_size=min_size)
        table = res.table if show_all else res.affected()
        reasons = res.reasons if show_all else res.affected_reasons()
        table, reasons = res.ranked(table, reasons)
        from gpurisk.scan.runner import rank_meaning
        ranked_by = (f"rows ranked by {res.rank_by} [original]: {rank_meaning(res.rank_by)}"
                     if res.rank_by else "rows in plan order")
        if output:
            from gpurisk.io import write_frame_atomic
            if str(output).endswith((".parquet", ".pq")):
                write_frame_atomic(table, output)
            else:
                write_frame_atomic(table.assign(keys=table["keys"].map(",".join)), output)
        labels = ["original"] + [a.name for a in res.alternatives]
        if as_json:
            rows = []
            for i, r in table.iterrows():
                d = {"keys": list(r["keys"]), "size": int(r["size"])}
                for col in res.columns + ["cells"]:
                    d[col] = {lab: _json(r[f"{col} [{lab}]"]) for lab in labels}
                why = {col: {lab: reasons.at[i, f"{col} [{lab}]"] for lab in labels
                             if isinstance(reasons.at[i, f"{col} [{lab}]"], str)}
                       for col in res.columns} if reasons is not None else {}
                if any(why.values()):
                    d["not_applicable"] = {c: w for c, w in why.items() if w}
                rows.append(d)
            echo_json({"uniques": res.uniques, "alternatives": labels[1:], "settings": res.settings,
                       "rank_by": res.rank_by, "ranked_by": ranked_by,
                       "left_out": res.left_out, "rows": rows}, default=str)
            return
        from rich.table import Table
        con = console()
        con.print(ranked_by, markup=False, highlight=False)
        if res.left_out:
            con.print(left_out_line(res.left_out), markup=False, highlight=False)
        what = "N1" if res.uniques == "N1" else "n1"
        # one table, one column per figure (each "original → [1] → ..."), the top rows only
        shown = table if not top else table.head(top)
        t = Table(title="original → " + " → ".join(f"[{i + 1}]" for i in range(len(labels) - 1)),
                  show_header=True, header_style="bold")
        t.add_column("size")
        t.add_column("combination (key names)", overflow="fold")
        for col in res.columns:
            t.add_column(what if col == res.uniques else col, overflow="fold")
        notes: dict[str, int] = {}

        def cell(i, r, col, lab):
            text = _fmt(r[f"{col} [{lab}]"])
            why = reasons.at[i, f"{col} [{lab}]"] if reasons is not None else None
            if text == "—" and isinstance(why, str) and why:
                text += _SUP[notes.setdefault(why, len(notes) + 1) % 10]
            return text
        for i, r in shown.iterrows():
            t.add_row(str(r["size"]), ", ".join(r["keys"]),
                      *(" → ".join(cell(i, r, col, lab) for lab in labels) for col in res.columns))
        con.print(t)
        if len(shown) < len(table):
            con.print(f"the first {len(shown)} of {len(table)} rows; --top 0 prints every row, "
                      "-o FILE writes them all", markup=False, highlight=False)
        for why, i in notes.items():
            con.print(f"  —{_SUP[i % 10]} not applicable: {why}", markup=False, highlight=False)
        for i, lab in enumerate(labels[1:], 1):
            con.print(f"[{i}] {lab}")


_SUP = "⁰¹²³⁴⁵⁶⁷⁸⁹"


def left_out_line(left_out: dict) -> str:
    """One line naming the measures left out, grouped by why."""
    by_why: dict[str, list[str]] = {}
    for name, why in left_out.items():
        by_why.setdefault(why, []).append(name)
    return "left out, not applicable here: " + "; ".join(
        f"{', '.join(names)} ({why})" for why, names in by_why.items())


def _json(v):
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
