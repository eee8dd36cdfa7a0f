"""``gpurisk suda``: SUDA special-uniques scores and DIS-SUDA probabilities per record (SPEC §9)."""
from __future__ import annotations

import click

from gpurisk.cli._common import console, design_options, echo_json, fmt_value, input_options, output_options


def _num(v) -> str:
    return fmt_value(v)


def print_summary(doc: dict) -> None:
    from rich.table import Table

    con = console()
    con.print(f"n = {doc['n']}, keys: {', '.join(doc['keys'])} (M = {len(doc['keys'])}), "
              f"MSUs searched up to {doc['max_msu']} keys, scoring: {doc['scoring']}; "
              f"{doc['missing']}")
    con.print(f"sample uniques: {doc['sample_uniques']}   records with a score > 0: "
              f"{doc['records_scored']}   max score: {_num(doc['max_score'])}   "
              f"total score: {_num(doc['total_score'])}")
    sizes = doc["msus_by_size"]
    con.print(f"MSUs: {doc['msus']}  by size: "
              + ", ".join(f"{k}: {v}" for k, v in sizes.items()))
    t = Table(title="contribution of each key: the share of all MSU score weight whose MSUs contain "
                    "it, % (an MSU of several keys counts for each, so the shares add up to more "
                    "than 100 %)", show_header=True, header_style="bold")
    t.add_column("key")
    t.add_column("categories", justify="right")
    t.add_column("contribution %", justify="right")
    for k, v in doc["contributions_pct"].items():
        t.add_row(k, str(doc["categories"].get(k, "")), _num(v))
    con.print(t)
    if doc.get("dis_fraction") is None:
        con.print(f"DIS-SUDA: {doc.get('dis_reason') or 'not applicable'}", markup=False,
                  highlight=False)
    else:
        con.print(f"DIS-SUDA (f = {doc['dis_fraction']:g} from {doc['dis_fraction_from']}, "
                  f"Q = {doc['dis_Q']:g}, P = {doc['dis_P']}): sum of probabilities "
                  f"{_num(doc['dis_sum'])} (expected correct matches), max {_num(doc['dis_max'])}")
    if "output" in doc:
        con.print(f"wrote {doc['output']['rows']} record(s) to {doc['output']['path']}")
    if "report" in doc:
        con.print(f"report: {doc['report']}")
    for w in doc.get("warnings", []):
        con.print(f"[yellow]warning:[/yellow] {w}")


def register(cli: click.Group) -> None:
    @cli.command("suda")
    @click.argument("data")
    @click.option("--keys", required=True, help="comma-separated key variables")
    @click.option("--max-msu", type=click.IntRange(min=1), default=None,
                  help="largest minimal sample unique searched, in keys (default: all keys)")
    @design_options(fraction_help="sampling fraction π in (0, 1]: DIS-SUDA's share f of the "
                                  "records an intruder holds (else n/N from --population or "
                                  "--sample-flag, or n/Σw from --weights)")
    @click.option("--dis-fraction", type=float, default=None,
                  help="share f of the records an intruder holds, for DIS-SUDA (0 < f < 1; "
                       "default: π; without π DIS-SUDA is not applicable)")
    @click.option("--scoring", type=click.Choice(["elliot", "ihsn"]), default="elliot",
                  show_default=True,
                  help="elliot: (M-k)! per MSU of k keys (sdcMicro suda2's default); "
                       "ihsn: (2^(M-k)-1)/C(M,k) (original_scores = FALSE)")
    @click.option("--search-memory", "search_memory", type=float, default=4.0, show_default=True,
                  metavar="GIB",
                  help="working memory the MSU search may use, in GiB")
    @output_options(json_help="print the summary as JSON", output_metavar="FILE.parquet",
                    output_help="write one row per record (input order): row, suda, dis_suda, "
                                "msu_min, msu_count, contrib_<key>")
    @click.option("--report", default=None, metavar="FILE.html",
                  help="write an HTML page: distribution of the scores, each key's contribution")
    @input_options
    def suda_cmd(data, keys, max_msu, design, reading, dis_fraction, scoring, search_memory, output,
                 report, as_json):
        """SUDA scores of each record of DATA: its minimal sample uniques (smallest sets of key values
        that no other record shares), weighted by size, and DIS-SUDA match probabilities.

        Prints a file-level summary; with -o writes one row per record.
        """
        from gpurisk.errors import BadInput
        from gpurisk.workflows.suda import suda_with as run
        if not search_memory > 0:
            raise BadInput(f"--search-memory {search_memory:g} must be a positive number of GiB")
        res = run(data, keys, design, reading, max_msu=max_msu, scoring=scoring,
                  dis_fraction=dis_fraction, output=output, memory_limit=search_memory * 2**30,
                  records=False, report=report)
        if as_json:
            import math
            doc = dict(res.summary)
            doc["contributions_pct"] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                                        for k, v in doc["contributions_pct"].items()}
            echo_json(doc)
        else:
            print_summary(res.summary)
