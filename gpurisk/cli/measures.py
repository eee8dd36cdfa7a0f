"""``gpurisk measures`` and ``gpurisk plugins``: what is registered, and what failed to load."""
from __future__ import annotations

import click

from gpurisk.cli._common import echo_json, output_options, print_plain, registry_rows


def _failed_rows() -> list[dict]:
    """One row per plugin that failed to load: ``name`` None, ``status`` "failed" and the error."""
    from gpurisk.plugins import failed_plugins
    return [{"name": None, "plugin": f.plugin, "package": f.package, "version": f.version,
             "status": "failed", "error": f.error} for f in failed_plugins()]


def _options_text(d: dict) -> str:
    from gpurisk.options import spec_text
    return "; ".join(f"{k}: {spec_text(s)}" for k, s in d.get("option_specs", {}).items())


def register(cli: click.Group) -> None:
    @cli.command()
    @output_options(json_help="print JSON", output=False)
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
        table = []
        for d in rows:
            needs = ", ".join(d["needs"]) or "sample only"
            if d.get("headline"):
                needs += " (runs by default: the headline without population counts)"
            elif not d.get("default", True):
                needs += " (runs when named)"
            table.append([d["name"], needs, _options_text(d), d["reference"],
                          f"{d['plugin']} ({d['package']})", d["description"]])
        for d in failed:
            table.append(["—", "", "", "", f"{d['plugin']} ({d['package']})",
                          f"FAILED to load: {d['error']}"])
        print_plain(["measure", "needs", "options", "reference", "plugin", "description"], table)

    @cli.command()
    @output_options(json_help="print JSON", output=False)
    def plugins(as_json):
        """List every loaded plugin with its package and version, and every plugin that failed to
        load with its error."""
        from gpurisk.plugins import ENV_BLOCK, plugins_list
        rows = plugins_list()
        if as_json:
            echo_json(rows)
            return
        print_plain(["plugin", "package", "status"],
                    [[r["plugin"], f"{r['package']} {r['version'] or ''}".strip(),
                      f"FAILED: {r['error']}" if r.get("status") == "failed" else
                      f"blocked ({ENV_BLOCK})" if r.get("status") == "blocked" else "loaded"]
                     for r in rows])
