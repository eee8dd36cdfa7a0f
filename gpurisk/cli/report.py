"""``gpurisk report``: a self-contained HTML page about a scan output."""
from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    @cli.command()
    @click.argument("scan_output")
    @click.option("-o", "--output", "html_path", default=None, metavar="FILE.html",
                  help="HTML file to write (required)")
    @click.option("--html", "html_legacy", default=None, hidden=True,
                  help="deprecated spelling of -o/--output")
    @click.option("--measure", default=None, help="column to plot and rank by (default matches_hat, the estimated number of correct unique matches; else theta_hat, pr_pu or n1)")
    @click.option("--threshold", type=float, default=0.1, show_default=True,
                  help="risk threshold drawn against θ̂ and its upper bound")
    @click.option("--top", type=int, default=20, show_default=True, help="combinations in the top plots")
    @click.option("--title", default=None, help="page title")
    def report(scan_output, html_path, html_legacy, measure, threshold, top, title):
        """Write an HTML report (plots inline) of SCAN_OUTPUT, a directory written by gpurisk scan."""
        if html_legacy is not None:
            click.echo("gpurisk: warning: --html is deprecated; use -o/--output", err=True)
            if html_path is not None and html_path != html_legacy:
                raise click.UsageError("give the HTML file once, with -o/--output")
            html_path = html_legacy
        if html_path is None:
            raise click.UsageError("Missing option '-o' / '--output'.")
        from gpurisk.io import check_output_file
        from gpurisk.report import write_report
        check_output_file(html_path, (".html", ".htm"), "--output")
        out = write_report(scan_output, html_path, measure=measure, threshold=threshold, top=top,
                           title=title)
        click.echo(f"report: {out}")
