"""``gpurisk dis`` (pr(cm|um) of a perturbed file) and ``gpurisk perturbations`` (what is registered)."""
from __future__ import annotations

import click

from gpurisk.cli._common import (design_options, echo_json, fmt_value as _fmt, input_options,
                                 output_options, registry_rows, run_options)


def register(cli: click.Group) -> None:
    @cli.command()
    @click.argument("data")
    @click.option("--keys", required=True, help="comma-separated key variables")
    @design_options(population=False, sample_flag=False, weights=False, fraction_required=True,
                    fraction_help="sampling fraction f (π) in (0, 1]")
    @click.option("--perturb", "perturb", multiple=True, metavar="NAME:OPT=V,...",
                  help="perturbation, e.g. swap:fraction=0.10,geo=region,pairing=age+sex or "
                       "pram:vars=sex,p=0.9 (repeatable: applied in turn)")
    @click.option("--max-iter", type=int, default=100, show_default=True,
                  help="stop after this many perturbed files")
    @click.option("--stable", type=int, default=10, show_default=True,
                  help="stop when the running mean moved less than half a unit of --decimals "
                       "over this many iterations")
    @click.option("--decimals", type=int, default=3, show_default=True,
                  help="decimals of the stability rule of --stable")
    @click.option("--batch", type=int, default=None, help="perturbed files drawn at once "
                  "(default: min(--stable, 250000 / records))")
    @run_options(measures=False, option=False, alpha=False, timeout=False,
                 seed_help="seed of the perturbations; fixed seeds reproduce")
    @click.option("--state", default=None, metavar="FILE",
                  help="JSON file keeping finished batches: a rerun resumes from it")
    @click.option("--orientation", type=click.Choice(["intruder", "release"]), default="intruder",
                  show_default=True, help="match the intruder's true keys against the released file, "
                  "or released records against the original file (the paper's text)")
    @output_options(output_metavar="FILE.json",
                    output_help="also write the JSON document to FILE.json (checked before the work)")
    @input_options
    def dis(data, keys, design, perturb, max_iter, stable, decimals, batch, run, reading, state,
            orientation, as_json, output):
        """pr(cm|um) of DATA after a perturbation, by data intrusion simulation (Elliot 2001).

        Repeats perturb -> measure until the running mean is stable or --max-iter files were drawn;
        reports the mean, its standard error, the unperturbed θ̂ and their ratio.
        """
        from gpurisk.workflows.dis import dis_with as workflow
        from gpurisk.errors import BadInput

        if not perturb:
            raise BadInput("give at least one --perturb NAME:OPTION=VALUE,... "
                           "(gpurisk perturbations lists them)")
        if output:
            from gpurisk.io import check_output_file
            check_output_file(output, (".json",), "--output", (data,))
        res = workflow(data, keys, design, run, reading, perturb=list(perturb), max_iter=max_iter,
                       stable=stable, decimals=decimals, batch=batch, state=state,
                       orientation=orientation)
        doc = res.to_dict()
        if output:
            from gpurisk.io import write_results
            write_results(doc, output)
        if as_json:
            echo_json(doc)
            return
        click.echo(f"n = {doc['n']}, f = {doc['fraction']:g}, keys: {', '.join(doc['keys'])}")
        click.echo(f"perturbation: {' then '.join(doc['perturbations'])}   seed {doc['seed']}")
        click.echo(f"theta_hat (unperturbed)   {_fmt(doc['theta_hat'])}")
        click.echo(f"pr(cm|um) perturbed       {_fmt(doc['pr_cm_um'])}  (se {_fmt(doc['se'], 3)})")
        click.echo(f"ratio                     {_fmt(doc['ratio'], 4)}")
        click.echo(f"iterations                {doc['iterations']} "
                   f"({'stable' if doc['converged'] else 'not stable: --max-iter reached'})")
        click.echo(f"mean T, P, F              {_fmt(doc['mean_T'])}, {_fmt(doc['mean_P'])}, "
                   f"{_fmt(doc['mean_F'])}")
        click.echo("legend: T = records whose released key is their own and unique in the released "
                   "file (a correct unique match when copied back, weight f); P = records whose "
                   "released key is their own and shared with one other record (a false unique match "
                   "when not copied back, weight 1 − f); F = records whose released key was changed "
                   "while their true key is unique in the released file (a false unique match, "
                   "weight 1); pr(cm|um) = T f / (T f + P (1 − f) + F) (Elliot 2001, para. 13)")
        if doc.get("reason"):
            click.echo(f"warning: {doc['reason']}", err=True)

    @cli.command()
    @output_options(json_help="print JSON", output=False)
    def perturbations(as_json):
        """List every registered perturbation, built-in or third-party."""
        from gpurisk.plugins import perturbation_registry
        rows = registry_rows(perturbation_registry())
        if as_json:
            echo_json(rows, default=str)
            return
        for d in rows:
            opts = ", ".join(f"{k}={v}" for k, v in d["options"].items())
            click.echo(f"{d['name']}\t{d['description']}\n\toptions: {opts}\n\t{d['reference']} "
                       f"[{d['plugin']} ({d['package']})]")
