"""``gpurisk design``: θ̂ under unequal probabilities, per-stratum π, and the cluster-pair check."""
from __future__ import annotations

import math

import click

from gpurisk.cli._common import design_options, echo_json, input_options, output_options


def register(cli: click.Group) -> None:
    @cli.command()
    @click.argument("sample")
    @click.option("--keys", required=True, help="comma-separated key variables")
    @design_options(population=False, sample_flag=False, fraction_help="common sampling fraction π",
                    weights_help="weight column: design weights w_i = 1/π_i, calibrated weights (some may be below 1), "
                                 "or normalised weights (Σw = n) with --fraction n/N")
    @click.option("--strata", default=None, help="stratum column (with --fractions)")
    @click.option("--fractions", default=None, metavar="H=PI,...",
                  help="π per stratum value, e.g. 1=0.1,2=0.02 (or one π for all)")
    @click.option("--cluster", default=None, help="cluster (household) column")
    @click.option("--cluster-threshold", type=float, default=0.1, show_default=True,
                  help="warn when this share of sample pairs lies within one cluster")
    @output_options(output_metavar="FILE.json",
                    output_help="also write the JSON document to FILE.json (checked before the work)")
    @input_options
    def design(sample, keys, design, reading, strata, fractions, cluster, cluster_threshold,
               as_json, output):
        """θ̂ for complex designs of SAMPLE (Skinner & Elliot 2002, §5)."""
        from gpurisk.workflows.design import design_report_with, parse_fractions
        from gpurisk.measure import _clean

        if output:
            from gpurisk.io import check_output_file
            check_output_file(output, (".json",), "--output", (sample,))
        doc = _clean(design_report_with(sample, keys, design, reading, stratum=strata,
                                        fractions=parse_fractions(fractions) if fractions else None,
                                        cluster=cluster, threshold=cluster_threshold))
        if output:
            from gpurisk.io import write_results
            write_results(doc, output)
        if as_json:
            echo_json(doc)
            return

        def fmt(v):
            return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.6g}"
        click.echo(f"n = {doc['n']}, keys: {', '.join(doc['keys'])}, n1 = {doc['n1']}, "
                   f"n2 = {doc['n2']}")
        if "theta_hat" in doc:
            t = doc["theta_hat"]
            click.echo(f"theta_hat (pi = {t['pi']:g})          {fmt(t['value'])}  (se {fmt(t['se'])})"
                       + (f"  {t['reason']}" if t.get("reason") else ""))
        if "theta_hat_weighted" in doc:
            t = doc["theta_hat_weighted"]
            click.echo(f"theta_hat_weighted (experimental) {fmt(t['value'])}  ({t['se_reason']})"
                       + (f"  {t['reason']}" if t.get("reason") else ""))
            click.echo(f"  weights: {t['weights']}"
                       + (f"; {t['cells_raised_to_count']} cell(s) with weights summing below their "
                          "count raised to it (calibrated weights below 1)"
                          if t.get("cells_raised_to_count") else ""))
        if "stratified" in doc:
            s = doc["stratified"]
            click.echo(f"theta_hat_weighted, strata (experimental) {fmt(s['theta_hat_weighted'])}")
            for h, r in s["strata"].items():
                click.echo(f"  stratum {h}: pi = {r['pi']:g}, n = {r['n']}, n1 = {r['n1']}, "
                           f"n2 = {r['n2']}, theta_hat = {fmt(r['theta_hat'])}"
                           + (" (not estimable: no sample pair)" if r.get("reason") else ""))
        if "cluster" in doc:
            c = doc["cluster"]
            click.echo(f"pairs within one {cluster!r} cluster: {c['same_cluster']} of {c['pairs']}"
                       f" ({fmt(c['share'])})")
        for w in doc["warnings"]:
            click.echo(f"warning: {w}", err=True)
