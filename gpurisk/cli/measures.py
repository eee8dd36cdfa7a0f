"""``gpurisk measures`` and ``gpurisk plugins``: what is registered, and what failed to load."""
from __future__ import annotations

import click

from gpurisk.cli._common import console, echo_json, registry_rows


def _failed_rows() -> list[dict]:
    """One row per plugin that failed to load: ``name`` None, ``status`` "failed" and the error."""
    from gpurisk.plugins import failed_plugins
    return [{"name": None, "plugin": f.plugin, "package": f.package, "version": f.version,
             "status": "failed", "error": f.error} for f in failed_plugins()]


def _options_text(d: dict) -> str:
    from gpurisk.options import spec_text
    return "\n".join(f"{k}: {spec_text(s)}" for k, s in d.get("option_specs", {}).items())


def register(cli: click.Group) -> None:
    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="print JSON")
    @click.option("--markdown", "as_markdown", is_flag=True,
                  help="print the Markdown reference of every measure and perturbation (docs/measures.md)")
    def measures(as_json, as_markdown):
        """List every registered measure, built-in or third-party, with its options and their types
        (and any plugin that failed to load, with its error)."""
        from gpurisk.plugins import measure_registry

        rows = registry_rows(measure_registry())
        if as_markdown:
            from gpurisk.plugins import perturbation_registry
            from gpurisk.cli._reference import markdown
            click.echo(markdown(rows, registry_rows(perturbation_registry())), nl=False)
            return
        failed = _failed_rows()
        if as_json:
            echo_json(rows + failed)
            return
        from rich.table import Table
        t = Table(show_header=True, header_style="bold")
        for col in ("measure", "description", "needs", "options", "reference", "plugin"):
            t.add_column(col, overflow="fold")
        for d in rows:
            needs = ", ".join(d["needs"]) or "sample only"
            if not d.get("default", True):
                needs += " (runs when named)"
            t.add_row(d["name"], d["description"], needs, _options_text(d),
                      d["reference"], f"{d['plugin']} ({d['package']})")
        for d in failed:
            t.add_row("—", f"FAILED to load: {d['error']}", "", "", "",
                      f"{d['plugin']} ({d['package']})")
        console().print(t)

    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="print JSON")
    def plugins(as_json):
        """List every loaded plugin with its package and version, and every plugin that failed to
        load with its error."""
        from gpurisk.plugins import plugins_list
        rows = plugins_list()
        if as_json:
            echo_json(rows)
            return
        for r in rows:
            line = f"{r['plugin']}\t{r['package']} {r['version']}".rstrip()
            if r.get("status") == "failed":
                line += f"\tFAILED: {r['error']}"
            click.echo(line)
