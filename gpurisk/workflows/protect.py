"""``gpurisk protect``: from risk to release (SPEC §11). :func:`protect_with` is the workflow on the
settings objects (what the command calls); :func:`protect` the convenience that takes them as
keywords. The steps (criteria, the lattice search, the before/after table, the release and its
plan, :func:`~gpurisk.protect.steps.apply_plan`) are in :mod:`gpurisk.protect`.
"""
from __future__ import annotations

import json
from typing import Callable, Mapping

from gpurisk.core.messages import bad_input, stored
from gpurisk.core.settings import CHECKPOINT_EVERY, Design, Reading, Run, inputs
from gpurisk.errors import BadInput
from gpurisk.measure import Context, missing_needs
from gpurisk.protect.criteria import exact_criteria, parse_criteria
from gpurisk.protect.hierarchy import absolute_spec, key_levels, parse_hierarchy_items
from gpurisk.protect.release import (check_release_output, input_format, read_raw, record_groups,
                                     released_frame, sha256_file, write_release)
from gpurisk.protect.search import search
from gpurisk.protect.steps import (NoFeasibleNode, Protection, _before_after, _infeasible, _loss,
                                   _num, _perturb, _plan_doc, _record_backend, _release_mask,
                                   _sample_rows, _scenario_file, _scenarios, _with_perturbed,
                                   _worst)


def protect(data, keys, hierarchies, criteria, loss: str = "precision", scenarios=None,
            fraction: float | None = None, population=None, alpha: float = 0.01, seed: int = 0,
            options: Mapping | None = None, missing: str = "category", sep: str | None = None,
            encoding: str = "utf-8", prune: bool = True, front_by: int = 0, output=None, plan=None,
            progress: Callable[[int, int], None] | None = None, checkpoint=None,
            checkpoint_every: float = 10.0, plot=None, undefined: str = "fails",
            allow_high_cardinality: bool = False, suppress_limit: float = 0.0,
            perturb=None, report=None, suppress: str = "values", sample_flag: str | None = None,
            weights: str | None = None, backend: str | None = None) -> Protection:
    """Search the recodes of ``keys`` through ``hierarchies`` ({key: spec or [specs]}, or
    ``["KEY=SPEC", ...]``) for the least ``loss`` meeting every criterion (``["theta_hat.upper<=0.1"]``)
    on every scenario (key sets, or a TOML file of named scenarios as ``scan`` reads, whose keys
    are the default ``keys``; default: one scenario of all keys); return the search, the released node, the plan
    and the released frame; write the release to ``output`` and the plan to ``plan`` when given.
    ``checkpoint`` (a JSON file) keeps the evaluated values every ``checkpoint_every`` seconds: a
    run killed mid-search and started again with it resumes (:mod:`gpurisk.protect.state`).
    ``plot`` (a .png path) draws the nodes, the front and the optimum. ``undefined="meets"``
    counts a node where a criterion's measure gives no value as meeting it (default: failing).
    ``suppress_limit`` (e.g. 0.01) lets a node that fails set key values of its smallest cells
    missing: with ``suppress="values"`` (default) the fewest single values, as sdcMicro's
    ``localSuppression`` (at most that share of the n·K key values,
    :mod:`gpurisk.protect.suppress_values`); with ``"records"`` every key of whole records, as
    ARX's suppression limit (at most that share of the records, :mod:`gpurisk.protect.suppress`). ``perturb`` (specs such as
    ``"swap:fraction=0.1"``, ``"pram:p=0.9"``) perturbs the release with ``seed``
    (:mod:`gpurisk.protect.perturb`; its pr(cm|um) is in ``Protection.perturbation``).
    ``report`` (an .html path) writes the before/after report with the front's plot.
    ``sample_flag`` (a boolean column: the data is a register, the flagged records the sample) and
    ``weights`` (a design-weight column) are read as ``assess`` reads them, so criteria on
    population counts (π = n/N by default) or on weights use them; with a sample flag the release
    holds the flagged records only.
    Raises :class:`NoFeasibleNode` (a BadInput) when no node meets every criterion.
    """
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag,
                    weights=weights)
    run = Run(options=options, alpha=alpha, seed=seed)      # checked once, before any work
    reading = Reading(missing=missing, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return protect_with(data, keys, design, run, reading, hierarchies=hierarchies,
                        criteria=criteria, loss=loss, scenarios=scenarios, prune=prune,
                        front_by=front_by, output=output, plan=plan, progress=progress,
                        checkpoint=checkpoint, checkpoint_every=checkpoint_every, plot=plot,
                        undefined=undefined, suppress_limit=suppress_limit, perturb=perturb,
                        report=report, suppress=suppress)


def protect_with(data, keys, design: Design, run: Run, reading: Reading | None = None, *,
                 hierarchies, criteria, loss: str = "precision", scenarios=None,
                 prune: bool = True, front_by: int = 0, output=None, plan=None,
                 progress: Callable[[int, int], None] | None = None, checkpoint=None,
                 checkpoint_every: float = 10.0, plot=None, undefined: str = "fails",
                 suppress_limit: float = 0.0, perturb=None, report=None,
                 suppress: str = "values") -> Protection:
    """:func:`protect` on the settings objects: the :class:`gpurisk.core.settings.Design` (π,
    population, sample flag, weights), the :class:`~gpurisk.core.settings.Run` (the criteria's
    measure options, α, and the seed of ``perturb``; its measures and time limit are not used:
    the criteria name the measures) and the :class:`~gpurisk.core.settings.Reading` (missing
    values, CSV separator and encoding, allow_high_cardinality; the backend pandas or cudf, since
    the release needs each record's cell; no recode: the hierarchies recode). The search's and
    the release's arguments as in :func:`protect`."""
    from gpurisk.inputs import key_list
    from gpurisk.plugins import measure_registry
    reading = reading or Reading()
    checkpoint_every = CHECKPOINT_EVERY.check(checkpoint_every)
    if reading.recode:
        raise BadInput("protect recodes the keys through its hierarchies, not a Reading's recode",
                       cli="protect recodes the keys through --hierarchy, not --recode")
    population, sample_flag, weights = design.population, design.sample_flag, design.weights
    missing, sep, encoding = reading.missing, reading.sep, reading.encoding
    allow_high_cardinality = reading.allow_high_cardinality
    alpha, seed = run.alpha, run.seed
    loaded = _scenario_file(scenarios)
    if loaded is not None:
        scenarios = loaded
        if keys is None:         # every key some scenario names, in the file's order
            keys = list(dict.fromkeys(k for s in loaded for k in s))
    keys = key_list(keys)
    scen = _scenarios(keys, scenarios)
    crits = parse_criteria(criteria, undefined)
    if not 0 <= int(front_by) < len(crits):
        raise BadInput(f"front_by={front_by} names no criterion (0..{len(crits) - 1})")
    loss_obj = _loss(loss)
    hier = parse_hierarchy_items(hierarchies)
    unknown = [k for k in hier if k not in keys]
    if unknown:
        raise bad_input(f"{{arg:--hierarchy|hierarchies}} {unknown[0]}=...: {unknown[0]!r} is not "
                        f"one of {{arg:--keys|keys}} ({', '.join(keys)})")
    if suppress not in ("values", "records"):
        raise bad_input(f"{{arg:--suppress|suppress}} {suppress!r}: give values or records")
    from gpurisk.core.settings import suppress_limit as limit_param
    suppress_limit = limit_param("key values" if suppress == "values" else "records"
                                 ).check(suppress_limit)
    if suppress_limit and (population is not None or sample_flag is not None):
        raise bad_input("{arg:--suppress-limit|suppress_limit} with "
                        + ("{arg:--population|population}" if population is not None
                           else "{arg:--sample-flag|sample_flag}")
                        + " is not supported: suppression removes sample records from the sample's "
                        "cells only")
    if suppress_limit and weights is not None:
        raise bad_input("{arg:--suppress-limit|suppress_limit} with {arg:--weights|weights} is not "
                        "supported: a cell's records would share out its weight sum")
    perturb = [perturb] if isinstance(perturb, str) else list(perturb or [])
    extra_cols = []
    if perturb:
        from gpurisk.protect.perturb import extra_columns
        extra_cols = extra_columns(perturb, keys)
    fmt = input_format(data, sep, encoding)
    if output is not None:
        check_release_output(output, fmt, inputs=(data, population))
    from gpurisk.io import check_output_file
    if plan is not None:
        check_output_file(plan, (".json",), "{arg:--plan|plan}")
    if checkpoint is not None:
        check_output_file(checkpoint, (".json",), "{arg:--checkpoint|checkpoint}")
    if report is not None:
        check_output_file(report, (".html", ".htm"), "{arg:--report|report}")
    if plot is not None:
        from gpurisk.protect.plot import require_matplotlib
        check_output_file(plot, (".png",), "{arg:--plot|plot}")
        require_matplotlib()
    opts = dict(run.options)
    inp = inputs(data, keys, design, reading, backend=_record_backend(reading.backend),
                 columns=extra_cols)
    frames = inp.read()
    counted = inp.count(frames, records="protect")
    root = counted.table
    ctx = Context(fraction=counted.fraction, fraction_source=counted.fraction_source,
                  alpha=float(alpha), seed=int(seed), options=opts)
    reg = measure_registry()
    if root.N is not None:        # population counts: estimators' criteria judged on the truth
        crits = exact_criteria(crits, reg)
    measures = {}
    for c in crits:
        cls = reg[c.measure].cls
        why = missing_needs(cls, root, ctx)
        if why:
            raise bad_input(f"{{arg:--criterion|criteria}} {c.text!r}: {c.measure} {stored(why)}")
        measures[c.measure] = cls()
    levels = key_levels(root, hier)
    state = None
    if checkpoint is not None:
        from gpurisk import __version__
        from gpurisk.protect.state import SearchState
        specs = {k: [absolute_spec(s)[0] for s in h.specs] for k, h in hier.items()}
        files = {f: sha256_file(f) for k, h in hier.items() for s in h.specs
                 for f in absolute_spec(s)[1]}
        settings = {"gpurisk": __version__, "keys": keys, "scenarios": scen,
                    "criteria": [c.text for c in crits], "hierarchies": specs, "files": files,
                    "undefined": undefined,
                    "fraction": ctx.fraction, "alpha": ctx.alpha, "options": opts,
                    "seed": ctx.seed, "missing": missing, "sample_flag": sample_flag,
                    "weights": weights}
        state = SearchState(checkpoint, settings, root, checkpoint_every)
    res = search(root, levels, scen, crits, loss_obj, measures, ctx, prune=prune,
                 front_by=front_by, progress=progress, state=state, suppress_limit=suppress_limit,
                 suppress_mode=suppress)
    if plot is not None:
        from gpurisk.protect.plot import plot_front
        plot_front(res, plot)
    best = res.optimum
    if not best:
        raise NoFeasibleNode(_infeasible(res, suppress_limit, population is None and
                                         sample_flag is None and weights is None), res)
    node = res.node(best[0])
    r = int(res.suppress_r[best[0]])
    table = _before_after(root, levels, node, scen, crits, measures, ctx, r, suppress)
    groups = record_groups(root, levels, node)
    mask = _release_mask(root, levels, node, scen, r, suppress)
    perturbed, pert_report = None, None
    rows = inp.record_rows(frames)
    if perturb:
        perturbed, pert_report = _perturb(root, levels, node, perturb, seed, frames, extra_cols,
                                          missing, mask, scen, crits, measures, ctx, rows)
    released = released_frame(_sample_rows(read_raw(data, fmt, encoding), rows), groups, fmt, mask,
                              keys, perturbed)
    doc = _plan_doc(data, fmt, keys, scen, hier, crits, loss, node, res, best[0], counted, ctx,
                    missing, encoding)
    doc["allow_high_cardinality"] = bool(allow_high_cardinality)
    doc["sample_flag"], doc["weights"] = sample_flag, weights
    per_key = {k: int(v) for k, v in zip(keys, res.suppressed_keys[best[0]])}
    records = int(mask.any(axis=1).sum()) if mask is not None and mask.ndim == 2 else \
        int(mask.sum()) if mask is not None else 0
    doc["suppress"] = {"mode": suppress, "limit": suppress_limit, "r": r, "records": records,
                       "values": per_key}
    doc["perturb"] = {"specs": [str(p) for p in perturb], "seed": int(seed)} if perturb else None
    if pert_report is not None:
        table = _with_perturbed(table, pert_report, crits)
    # the risk of the file released: after perturbation when there is one
    doc["released_worst"] = {c.text: _num(_worst(c, table[table["criterion"] == c.text][
        "perturbed" if pert_report is not None else "after"])) for c in crits}
    if output is not None:
        write_release(released, output, fmt, encoding)
        doc["release_sha256"] = sha256_file(output)
    if plan is not None:
        from gpurisk.io.atomic import write_text_atomic
        write_text_atomic(plan, json.dumps(doc, indent=2) + "\n")
    settings = {"n": root.n, "fraction": counted.fraction, "nodes": res.stats["nodes"],
                "seconds": res.seconds, "suppress": suppress, "suppressed_records": records,
                "suppressed_values": per_key}
    out = Protection(res, node, doc, released, settings, table, pert_report)
    if report is not None:
        from gpurisk.protect.report import write_protect_report
        write_protect_report(out, report)
    return out
