"""``gpurisk measures`` and ``gpurisk plugins``: what is registered."""
from __future__ import annotations

import click

from ._common import echo_json, registry_rows


def register(cli: click.Group) -> None:
    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="print JSON")
    @click.option("--markdown", "as_markdown", is_flag=True,
                  help="print the Markdown reference of every measure and perturbation (docs/measures.md)")
    def measures(as_json, as_markdown):
        """List every registered measure, built-in or third-party."""
        from ..plugins import measure_registry

        rows = registry_rows(measure_registry())
        if as_markdown:
            from ..plugins import perturbation_registry
            from ._reference import markdown
            click.echo(markdown(rows, registry_rows(perturbation_registry())), nl=False)
            return
        if as_json:
            echo_json(rows)
            return
        from rich.console import Console
        from rich.table import Table
        t = Table(show_header=True, header_style="bold")
        for col in ("measure", "description", "needs", "reference", "plugin"):
            t.add_column(col, overflow="fold")
        for d in rows:
            needs = ", ".join(d["needs"]) or "sample only"
            if not d.get("default", True):
                needs += " (runs when named)"
            t.add_row(d["name"], d["description"], needs,
                      d["reference"], f"{d['plugin']} ({d['package']})")
        Console().print(t)

    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="print JSON")
    def plugins(as_json):
        """List every loaded plugin with its package and version."""
        from ..plugins import plugins_list
        rows = plugins_list()
        if as_json:
            echo_json(rows)
            return
        for r in rows:
            click.echo(f"{r['plugin']}\t{r['package']} {r['version']}".rstrip())
