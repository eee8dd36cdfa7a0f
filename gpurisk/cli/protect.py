"""``gpurisk protect``: the recodes of least information loss that meet every risk criterion, and
the protected release."""
from __future__ import annotations


import click

from gpurisk.cli._common import (console, design_options, echo_json, fmt_value, input_options,
                                 output_options, print_plain, progress_bar, registry_rows,
                                 run_options)


def _num(v) -> str:
    return fmt_value(v, digits=4)


def _table(title, frame, res):
    """A node table whose headers fit: criteria as [1], [2], ... (named in the caption below),
    the scaled loss as "scaled"; a header too long for a narrow terminal wraps, never cut."""
    from rich.table import Table
    legend = "   ".join(f"[{i + 1}] {c.text}" for i, c in enumerate(res.criteria))
    t = Table(title=title, show_header=True, header_style="bold", caption=legend,
              caption_justify="left")
    cols = ["node"] + res.keys + [res.loss_name, f"{res.loss_name}_scaled"] + \
        [c.text for c in res.criteria] + \
        [c for c in ("suppressed records", "suppressed values") if c in frame.columns] + \
        ["feasible"]
    crits = {c.text: f"[{i + 1}]" for i, c in enumerate(res.criteria)}
    for c in cols:
        head = (f"{c} 0..{res.heights[res.keys.index(c)]}" if c in res.keys else crits.get(c)
                or ("scaled" if c == f"{res.loss_name}_scaled" else c))
        t.add_column(head, overflow="fold")
    for _, r in frame.iterrows():
        t.add_row(*[_num(r[c]) for c in cols])
    return t


def _json_rows(frame):
    import json
    return json.loads(frame.to_json(orient="records"))


def register(cli: click.Group) -> None:
    @cli.command()
    @output_options(json_help="print JSON", output=False)
    def losses(as_json):
        """List every registered information-loss measure of protect (--loss), built-in or
        third-party (the gpurisk_register_losses hook)."""
        from gpurisk.plugins import loss_registry
        rows = registry_rows(loss_registry())
        if as_json:
            echo_json(rows)
            return
        print_plain(["loss", "reads", "reference", "plugin", "description"],
                    [[d["name"], d["reads"], d["reference"], f"{d['plugin']} ({d['package']})",
                      d["description"]] for d in rows])

    @cli.command()
    @click.argument("data")
    @click.option("--keys", default=None, help="key variables (comma-separated)")
    @click.option("--scenario", "scenarios", multiple=True, metavar="KEY,KEY,...",
                  help="a key set the intruder may hold (repeatable; default: all --keys); every "
                       "criterion must hold on each")
    @click.option("--scenarios", "scenarios_file", default=None, metavar="FILE.toml",
                  help="named scenarios as scan reads them ([scenarios] name = [\"key\", ...]); "
                       "--keys defaults to every key they name")
    @click.option("--hierarchy", "hierarchies", multiple=True, metavar="KEY=FILE|SPEC",
                  help="an ARX hierarchy file (all its levels), or one more level: bands:W, "
                       "breaks:B1,B2, map:FILE, hierarchy:FILE:LEVEL (repeatable)")
    @click.option("--criterion", "criteria", multiple=True, metavar="MEASURE[.FIELD]OP NUMBER",
                  help="e.g. theta_hat.upper<=0.1, tau1_hat<=5, k_anonymity>=5 (repeatable)")
    @click.option("--loss", default="precision", show_default=True,
                  help="information loss to minimise: precision, nonuniform_entropy, "
                       "discernibility, suppressed, or a plugin's (gpurisk losses lists them)")
    @design_options(metavar="COL",
                    sample_flag_help="boolean column marking the sample in a register (the "
                                     "release holds the flagged records)")
    @run_options(measures=False, timeout=False, option_help="a measure's option (repeatable)",
                 seed_help="seed of --perturb")
    @click.option("--undefined", type=click.Choice(["fails", "meets"]), default="fails",
                  show_default=True,
                  help="a node where a criterion's measure gives no value (θ̂ with no sample unique "
                       "and no pair: no unique match can happen) fails or meets it")
    @click.option("--suppress-limit", type=float, default=0.0, show_default=True, metavar="SHARE",
                  help="a node that fails may set key values of its smallest cells missing: at "
                       "most this share of the key values (--suppress values) or of the records "
                       "(--suppress records)")
    @click.option("--suppress", "suppress", type=click.Choice(["values", "records"]),
                  default="values", show_default=True,
                  help="values: the fewest single key values, as sdcMicro's localSuppression; "
                       "records: every key of whole records, as ARX's suppression limit")
    @click.option("--perturb", "perturb", multiple=True, metavar="NAME:OPT=V,...",
                  help="perturb the release (swap:fraction=0.1,geo=KEY | pram:p=0.9,vars=KEY | a "
                       "plugin's; repeatable, applied in order) and report its pr(cm|um)")
    @click.option("--no-prune", is_flag=True,
                  help="evaluate every node even for monotone criteria (k-anonymity): the front "
                       "then covers every node")
    @click.option("--front-rows", type=int, default=20, show_default=True,
                  help="rows of the front printed (the plan and --json give all)")
    @click.option("--plan", "plan_out", default=None, metavar="PLAN.json",
                  help="write the plan that reproduces the release")
    @click.option("--plot", default=None, metavar="FRONT.png",
                  help="draw every node's loss against its worst risk, the front and the optimum")
    @click.option("--report", "report_out", default=None, metavar="REPORT.html",
                  help="write the before/after report (criteria per scenario, optimum, front, plot)")
    @click.option("--from-plan", default=None, metavar="PLAN.json",
                  help="write the release a plan describes (no search)")
    @click.option("--checkpoint", default=None, metavar="STATE.json",
                  help="keep the evaluated nodes in STATE.json as the search goes; a killed run "
                       "started again with it resumes")
    @click.option("--checkpoint-every", type=click.FloatRange(min=0), default=10.0,
                  show_default=True, help="seconds between checkpoint writes")
    @input_options(recode=False, cluster=False,
                   backend_help="auto|pandas|cudf: where the records are counted (the release needs "
                                "each record's cell, so not a distributed backend; default pandas)",
                   high_cardinality_help="accept a key with the cardinality of an identifier (its "
                                         "hierarchy groups it)")
    @output_options(json_help="print JSON", output_metavar="RELEASE",
                    output_help="write the protected file (the input's format)")
    def protect(data, keys, scenarios, scenarios_file, hierarchies, criteria, loss, design, run,
                undefined, suppress_limit, suppress, perturb, no_prune,
                front_rows, output, plan_out, plot, report_out, from_plan, checkpoint,
                checkpoint_every, reading, as_json):
        """Search the recodes of DATA's keys for the least information loss meeting every
        --criterion on every scenario; write the release and its plan."""
        from gpurisk.errors import BadInput
        from gpurisk.protect import apply_plan
        from gpurisk.workflows.protect import protect_with as workflow
        if from_plan:
            if not output:
                raise BadInput("--from-plan needs --output RELEASE")
            apply_plan(from_plan, output, data)
            click.echo(f"wrote {output}")
            return
        if not keys and not scenarios_file:
            raise BadInput("give --keys or --scenarios FILE (or --from-plan PLAN.json)")
        if scenarios and scenarios_file:
            raise BadInput("give --scenario or --scenarios FILE, not both")
        with progress_bar("nodes") as update:
            p = workflow(data, keys, design, run, reading, hierarchies=list(hierarchies),
                         criteria=list(criteria), loss=loss,
                         scenarios=scenarios_file or list(scenarios) or None, prune=not no_prune,
                         output=output, plan=plan_out, progress=update, checkpoint=checkpoint,
                         checkpoint_every=checkpoint_every, plot=plot, undefined=undefined,
                         suppress_limit=suppress_limit, suppress=suppress, perturb=list(perturb),
                         report=report_out)
        res = p.result
        if as_json:
            echo_json({"node": p.node, "released_meets": p.released_meets,
                       "suppressed_records": p.settings["suppressed_records"],
                       "suppressed_values": p.settings["suppressed_values"],
                       "optimum": _json_rows(p.optimum), "front": _json_rows(p.front),
                       "before_after": _json_rows(p.before_after),
                       "perturbation": (_json_rows(p.perturbation)
                                        if p.perturbation is not None else None),
                       "stats": res.stats, "seconds": res.seconds, "plan": p.plan})
            return
        con = console()
        con.print(f"{res.stats['nodes']} nodes ({res.stats['evaluations']} scenario evaluations, "
                  f"{res.stats['tagged']} met by predictive tagging"
                  + (f", {res.stats['resumed']} values resumed from the checkpoint"
                     if res.stats["resumed"] else "") + f") in {res.seconds:.2f} s; "
                  f"n = {p.settings['n']}, π = {_num(p.settings['fraction'])}",
                  markup=False, highlight=False)
        for used, asked in (p.plan.get("criteria_asked") or {}).items():
            con.print(f"criterion {asked} judged on the exact value {used}: the population counts "
                      "are known, so the value is counted, not estimated", markup=False,
                      highlight=False)
        con.print(_table(f"optimum: least {res.loss_name} meeting every criterion", p.optimum, res))
        front = p.front
        crit = res.criteria[res.front_by].text
        title = f"front: {res.loss_name} against the worst {crit} over the scenarios"
        if len(front) > front_rows:
            title += f" (first {front_rows} of {len(front)})"
        con.print(_table(title, front.head(front_rows), res))
        if res.stats["tagged"]:
            con.print("the front covers the evaluated nodes only; --no-prune evaluates every node",
                      markup=False, highlight=False)
        from rich.table import Table
        t = Table(title="before → after, per scenario", show_header=True, header_style="bold")
        ba = p.before_after
        for c in ba.columns:
            t.add_column(str(c), overflow="fold")
        for _, r in ba.iterrows():
            t.add_row(*[_num(r[c]) if c not in ("keys", "criterion") else str(r[c])
                        for c in ba.columns])
        con.print(t)
        if any(".upper" in c.text for c in res.criteria):
            from gpurisk.core.levels import bound_words
            con.print(f"MEASURE.upper: the {bound_words(run.alpha)} (--alpha {run.alpha:g})",
                      markup=False, highlight=False)
        if p.perturbation is not None:
            t = Table(title=f"after --perturb {' then '.join(perturb)} (seed {run.seed}): Elliot's "
                      "pr(cm|um), records changed, criteria on the perturbed release",
                      show_header=True, header_style="bold")
            pf = p.perturbation
            for c in pf.columns:
                t.add_column(str(c), overflow="fold")
            for _, r in pf.iterrows():
                t.add_row(*[str(r[c]) if c == "keys" else _num(r[c]) for c in pf.columns])
            con.print(t)
        con.print("released node: " + released_levels(p.node, p.plan.get("hierarchies") or {}),
                  markup=False, highlight=False)
        if not p.released_meets:
            ba = p.before_after
            bad = ba[~ba["met perturbed"].astype(bool)].iloc[0]
            con.print(f"warning: the perturbed release does not meet {bad['criterion']} on "
                      f"scenario {bad['scenario']} ({bad['keys']}): {_num(bad['perturbed'])}",
                      markup=False, highlight=False)
        if p.settings["suppressed_records"]:
            m = p.settings["suppressed_records"]
            vals = p.settings["suppressed_values"]
            total = sum(vals.values())
            how = "every key missing" if p.settings["suppress"] == "records" else \
                f"{total} values ({total / (p.settings['n'] * len(vals)):.2%} of the key values)"
            con.print(f"suppressed: {m} records ({m / p.settings['n']:.2%}) with a value "
                      f"missing, {how}; values per key: "
                      + ", ".join(f"{k}={v}" for k, v in vals.items()),
                      markup=False, highlight=False)
        if output:
            con.print(f"wrote {output}", markup=False, highlight=False)
        for f in (plan_out, plot, report_out):
            if f:
                con.print(f"wrote {f}", markup=False, highlight=False)


def released_levels(node: dict, hierarchies: dict) -> str:
    """Each key's released level by its name ("age=bands:10 (level 1)"), "KEY=original" at 0."""
    from gpurisk.protect.hierarchy import level_name, level_names
    parts = []
    for k, lvl in node.items():
        name = level_name(level_names(k, list(hierarchies.get(k, []))), lvl)
        parts.append(f"{k}={name}" + (f" (level {lvl})" if lvl else ""))
    return ", ".join(parts)
