"""``gpurisk validate``: estimators against true values on replicate samples of a real population."""
from __future__ import annotations

import json
import math

import click

from gpurisk.cli._common import (console, echo_json, input_options, output_options, progress_bar,
                                 run_options, split_list)

LABELS = {"true": "true value", "estimate": "estimate", "error": "error (est − true)",
          "se": "est. s.e.", "nmse": "NMSE", "se_over_sd": "s.e./sd",
          "coverage": "coverage"}


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:.4g}"


def print_validation(v) -> None:
    from rich.table import Table

    con = console()
    info = v.info
    reps = ", ".join(f"{f:g}: {r}" for f, r in info["replicates"].items())
    con.print(f"population N = {info['N']}, {info['cells']} cells, keys {', '.join(info['keys'])}; "
              f"design {info['design']}; replicates per π {reps}; seed {info['seed']}")
    for m, truth in info["pairs"].items():
        t1 = v.table1(m)
        t = Table(title=f"{m} vs {truth}", show_header=True, header_style="bold", title_justify="left")
        t.add_column("quantity")
        t.add_column("")
        for f in t1.columns:
            t.add_column(f"π = {f:g}", justify="right")
        for (q, stat), row in t1.iterrows():
            t.add_row(LABELS.get(q, q), stat, *[_fmt(float(x)) for x in row])
        s = v.summary[v.summary["measure"] == m]
        if s["reliable_share"].notna().any():
            t.add_row("reliable", "share", *[_fmt(float(x)) for x in s["reliable_share"]])
        t.add_row("defined", "count", *[str(int(x)) for x in s["defined"]])
        con.print(t)
    others = [m for m in info["measures"] if m not in info["pairs"] and m not in info["pairs"].values()]
    if others:
        t = Table(title="true values only", show_header=True, header_style="bold", title_justify="left")
        for col in ("measure", "π", "mean", "sd"):
            t.add_column(col)
        s = v.summary
        for _, r in s[s["measure"].isin(others)].iterrows():
            t.add_row(r["measure"], f"{r['fraction']:g}", _fmt(r["true_mean"]), _fmt(r["true_sd"]))
        con.print(t)
    con.print(_legend(v), markup=False, highlight=False)
    for w in v.warnings:
        con.print(f"[yellow]warning:[/yellow] {w}")


def _legend(v) -> str:
    """What the rows of the tables mean (issue 20: NMSE was printed undefined)."""
    sd = "ddof = 0, all L samples" if str(v.info.get("design", "")).startswith("systematic") \
        else "ddof = 1"
    text = ("legend: mean and sd across replicate samples (sd with " + sd + "); true value = the "
            "measure on the population; error = estimate − true value of the same replicate; "
            "est. s.e. = the estimator's own standard error")
    if "coverage" in v.summary and v.summary["coverage"].notna().any():
        text += ("; s.e./sd = mean est. s.e. over the sd of the error (near 1: an honest s.e.); "
                 "coverage = share of replicates whose upper bound (level 1 − alpha) holds the "
                 "true value")
    if "nmse" in v.summary and v.summary["nmse"].notna().any():
        text += ("; NMSE = normalised mean squared error, mean((τ̂1 − τ1)² / n²) over the replicates "
                 "(n = sample size; Camerlenghi et al. 2021)")
    if "reliable_share" in v.summary and v.summary["reliable_share"].notna().any():
        text += ("; reliable = share of replicates the estimator marks reliable (τ̂1: calibrated on "
                 "real populations, see docs/validation.md)")
    return text


def register(cli: click.Group) -> None:
    @cli.command()
    @click.argument("data", metavar="POPULATION")
    @click.option("--keys", required=True, help="comma-separated key variables")
    @click.option("--fractions", default="0.02,0.05,0.1", show_default=True,
                  help="comma-separated sampling fractions π")
    @click.option("--replicates", type=int, default=100, show_default=True,
                  help="samples per fraction (systematic: all L = 1/π are enumerated instead)")
    @click.option("--design", default="bernoulli", show_default=True,
                  help="bernoulli | srs | systematic[:SORTCOL] | stratified:COL")
    @run_options(timeout=False,
                 measures_help="comma-separated measures (default: every estimator with a true "
                               "counterpart)",
                 seed_help="seed; fixed seeds reproduce",
                 option_help="a measure's option, e.g. tau1_hat.smoothing=poisson (repeatable)")
    @output_options(json_help="print the summary as JSON",
                    output_help="write the summary to FILE: .parquet, .csv or .csv.gz")
    @click.option("--plot", "plot_path", default=None, help="write a PNG of estimates against truths")
    @click.option("--progress/--no-progress", default=None,
                  help="progress bar on stderr (default: when stderr is a terminal)")
    @click.option("--resume", "resume", default=None, metavar="DIR",
                  help="save each chunk of replicates in DIR as it finishes; run again with the same "
                       "DIR to continue a killed run (same result as an uninterrupted one)")
    @click.option("--draw", type=click.Choice(["records", "cells"]), default=None,
                  help="draw each replicate's records (every design), or its counts from the "
                       "population's cell counts (bernoulli, srs, stratified: same distribution, "
                       "faster); "
                       "default records, cells on --backend dask/dask-cudf")
    @click.option("--processes", type=int, default=None, metavar="N",
                  help="processes forked to run the replicates, each inheriting the population's "
                       "cells (default: the CPUs usable, at most 8, on Linux, for 8 replicates or "
                       "more; 0: in this process); results do not depend on it")
    @input_options
    def validate(data, keys, fractions, replicates, design, run, reading, output, plot_path,
                 as_json, resume, progress, draw, processes):
        """Draw replicate samples of POPULATION and compare every estimator with its true value
        (Skinner & Elliot 2002, Table 1)."""
        from gpurisk.io import check_output_file
        from gpurisk.workflows.validate import validate_with as workflow
        if output:           # before the replicates are drawn, not after
            check_output_file(output, (".parquet", ".pq", ".csv", ".csv.gz"), "--output", (data,))
        if plot_path:
            check_output_file(plot_path, (".png", ".svg", ".pdf"), "--plot")

        with progress_bar("replicates", force=progress) as progress:
            res = workflow(data, keys, run, reading, fractions=split_list(fractions) or [],
                           replicates=replicates, design=design, resume=resume, progress=progress,
                           draw=draw, processes=processes)
        if output:
            res.write(output)
        if plot_path:
            res.plot(plot_path)
        if as_json:
            doc = {"info": {k: v for k, v in res.info.items() if k != "replicates"}
                   | {"replicates": {str(f): r for f, r in res.info["replicates"].items()}},
                   "summary": json.loads(res.summary.to_json(orient="records")),
                   "warnings": res.warnings}
            echo_json(doc)
        else:
            print_validation(res)
