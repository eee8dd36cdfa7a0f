"""``gpurisk report``: the release decision page of a scan output (a self-contained HTML file)."""
from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    @cli.command()
    @click.argument("scan_output")
    @click.option("-o", "--output", "html_path", default=None, metavar="FILE.html",
                  help="HTML file to write (required)")
    @click.option("--html", "html_legacy", default=None, hidden=True,
                  help="deprecated spelling of -o/--output")
    @click.option("--policy", default=None, metavar="FILE",
                  help="the office's release policy, a TOML or JSON file of thresholds "
                       "(max_expected_matches, min_k, max_record_risk, max_theta_upper, name)")
    @click.option("--max-matches", "max_expected_matches", type=float, default=None, metavar="X",
                  help="policy: expected correct matches at most X in every combination")
    @click.option("--min-k", type=int, default=None, metavar="K",
                  help="policy: k-anonymity, every record shares its key values with K-1 others")
    @click.option("--max-record-risk", type=float, default=None, metavar="R",
                  help="policy: no record's probability of a correct match above R (needs --suda)")
    @click.option("--max-theta", "max_theta_upper", type=float, default=None, metavar="X",
                  help="policy: θ̂'s upper bound at most X in every combination")
    @click.option("--plan", default=None, metavar="PLAN.json",
                  help="a protect run's plan (protect --plan): the recommended protection and its cost")
    @click.option("--release", default=None, metavar="FILE",
                  help="the released file (protect -o): scanned with the scan's settings, so that "
                       "the policy is judged on the release after protection too (without it, "
                       "from the --plan's own figures where it has them)")
    @click.option("--suda", default=None, metavar="SUDA.json",
                  help="the summary of gpurisk suda --json: per-record risk (DIS-SUDA)")
    @click.option("--measure", default=None, help="column to plot and rank by (default matches_ll, the expected correct matches E estimated by the log-linear model; else matches_hat = θ̂·n1, a lower estimate of E, theta_hat, pr_pu or n1)")
    @click.option("--threshold", type=float, default=0.1, show_default=True,
                  help="risk threshold drawn against θ̂ and its upper bound (the policy's "
                       "max_theta_upper when it has one)")
    @click.option("--top", type=int, default=20, show_default=True, help="combinations in the top plots")
    @click.option("--title", default=None, help="page title")
    def report(scan_output, html_path, html_legacy, policy, max_expected_matches, min_k,
               max_record_risk, max_theta_upper, plan, release, suda, measure, threshold, top,
               title):
        """Write the release decision page of SCAN_OUTPUT (a directory written by gpurisk scan):
        file identity, the policy's verdicts, key drivers, protection, then plots and tables."""
        if html_legacy is not None:
            click.echo("gpurisk: warning: --html is deprecated; use -o/--output", err=True)
            if html_path is not None and html_path != html_legacy:
                raise click.UsageError("give the HTML file once, with -o/--output")
            html_path = html_legacy
        if html_path is None:
            raise click.UsageError("Missing option '-o' / '--output'.")
        from gpurisk.io import check_output_file
        from gpurisk.report import load_policy, write_report
        check_output_file(html_path, (".html", ".htm"), "--output")
        pol = load_policy(policy, max_expected_matches=max_expected_matches, min_k=min_k,
                          max_record_risk=max_record_risk, max_theta_upper=max_theta_upper)
        out = write_report(scan_output, html_path, measure=measure, threshold=threshold, top=top,
                           title=title, policy=pol, protection=plan, suda=suda, release=release)
        click.echo(f"report: {out}")
