"""``gpurisk.protect``: from risk to release (SPEC §11).

Count the records once over every key, search the generalisation lattice of the keys' hierarchies
for the nodes of least information loss that meet every criterion on every scenario
(:mod:`gpurisk.protect.search`), and write the release at the optimum with a plan file that
reproduces it byte for byte (:func:`apply_plan`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input, stored
from gpurisk.measure import Context, missing_needs
from gpurisk.protect.criteria import Criterion, parse_criteria
from gpurisk.protect.hierarchy import absolute_spec, key_levels, parse_hierarchy_items
from gpurisk.protect.release import (check_release_output, input_format, read_raw, record_groups,
                                     released_frame, sha256_file, write_release)
from gpurisk.protect.search import SearchResult, search

PLAN_VERSION = 1


class NoFeasibleNode(BadInput):
    """No node of the lattice meets every criterion; ``result`` holds the search."""

    def __init__(self, message: str, result: SearchResult):
        super().__init__(message)
        self.result = result


@dataclass
class Protection:
    """What :func:`protect` returns."""

    result: SearchResult
    node: dict[str, int]            # the released node: key -> level
    plan: dict[str, Any]            # the plan document (what --plan writes)
    released: pd.DataFrame          # the released records
    settings: dict = field(default_factory=dict)
    #: before -> after: per scenario and criterion, the value on the original coding and on the
    #: released node (each recomputed from a roll-up of the counts, tagged nodes included)
    before_after: pd.DataFrame | None = None
    #: with ``perturb``: per scenario, pr(cm|um), records changed, the criteria after perturbation
    #: (also in ``before_after``'s columns "perturbed" and "met perturbed")
    perturbation: pd.DataFrame | None = None

    @property
    def released_meets(self) -> bool:
        """Whether the file released (perturbed, when it is) meets every criterion on every
        scenario."""
        col = "met perturbed" if "met perturbed" in self.before_after else "met"
        return bool(self.before_after[col].all())

    @property
    def optimum(self) -> pd.DataFrame:
        return self.result.frame(self.result.optimum)

    @property
    def front(self) -> pd.DataFrame:
        return self.result.frame(self.result.front)

    def _figures(self) -> list[tuple[str, object]]:
        """(label, value) of the few figures a repr shows: node, loss, records, criteria met."""
        r = self.result
        opt = r.optimum
        out = [("node", ", ".join(f"{k}={lv}" for k, lv in self.node.items())),
               (f"loss ({r.loss_name}, scaled)", float(r.scaled_loss[opt[0]]) if opt else None),
               ("records released", len(self.released)),
               ("nodes evaluated", len(r.loss)), ("nodes on the front", len(r.front))]
        if r.suppressed is not None and opt:
            out.append((f"suppressed {r.suppress_mode}", int(r.suppressed[opt[0]])))
        if self.before_after is not None:
            out.append(("meets every criterion", self.released_meets))
        return out

    def __repr__(self) -> str:
        from gpurisk.core.display import fmt
        r = self.result
        crit = "; ".join(c.text for c in r.criteria)
        return (f"<Protection of {len(r.keys)} key(s) for {crit}: "
                + ", ".join(f"{label} {fmt(v)}" for label, v in self._figures()) + ">")

    def _repr_html_(self) -> str:
        from gpurisk.core.display import html_table
        r = self.result
        from gpurisk.core.display import fmt
        rows = list(self._figures())
        if self.before_after is not None:        # before -> after per scenario and criterion
            for _, row in self.before_after.head(20).iterrows():
                met = row.get("met perturbed", row.get("met"))
                rows.append((f"scenario {row['scenario']}: {row['criterion']}",
                             f"{fmt(row['before'])} → {fmt(row['after'])}"
                             f" ({'met' if met else 'not met'})"))
        return html_table(f"Protection of {', '.join(r.keys)} for "
                          f"{'; '.join(c.text for c in r.criteria)}", rows, ["", "value"])


def _loss(name: str):
    from gpurisk.plugins import loss_registry
    reg = loss_registry()
    if name not in reg:
        raise bad_input(f"{{arg:--loss|loss}}: unknown loss {name!r}; registered: "
                        f"{', '.join(reg) or '(none)'}")
    return reg[name].cls()


def _scenario_file(scenarios):
    """Scenarios named in a TOML file (``scan --scenarios``' format), or None when ``scenarios`` is
    not a file name."""
    if isinstance(scenarios, (str, Path)) and str(scenarios).lower().endswith(".toml"):
        from gpurisk.scan.plan import load_scenarios
        return [c.keys for c in load_scenarios(scenarios)]
    return None


def _scenarios(keys: list[str], scenarios) -> list[tuple[str, ...]]:
    from gpurisk.inputs import key_list
    if not scenarios:
        return [tuple(keys)]
    out = []
    for s in scenarios:
        ks = key_list(s, "scenario keys")
        extra = [k for k in ks if k not in keys]
        if extra:
            raise bad_input(f"{{arg:--scenario|scenarios}} {','.join(ks)}: {extra[0]!r} is not one "
                            f"of {{arg:--keys|keys}} ({', '.join(keys)})")
        out.append(tuple(ks))
    return out


def _record_backend(backend: str | None) -> str:
    """The backend protect counts on: it writes each record's group, so it needs each record's
    cell, which a distributed count does not bring back (pandas, cudf, or auto/None: pandas)."""
    if backend in (None, "", "auto", "pandas"):
        return "pandas"
    if backend == "cudf":
        return backend
    if backend in ("dask", "dask-cudf"):
        raise BadInput(f"protect on the {backend} backend: the release needs each record's cell, "
                       "which a distributed count keeps on its workers; use --backend pandas or cudf")
    raise BadInput(f"backend {backend!r} is not one of auto, pandas, cudf (protect)")


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
    from gpurisk.inputs import Inputs, key_list
    from gpurisk.plugins import measure_registry
    from gpurisk.core.settings import Design, Run
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag,
                    weights=weights)
    run = Run(options=options, alpha=alpha, seed=seed)      # checked once, before any work
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
        check_output_file(plan, (".json",), "--plan")
    if checkpoint is not None:
        check_output_file(checkpoint, (".json",), "--checkpoint")
    if report is not None:
        check_output_file(report, (".html", ".htm"), "--report")
    if plot is not None:
        from gpurisk.protect.plot import require_matplotlib
        check_output_file(plot, (".png",), "--plot")
        require_matplotlib()
    opts = dict(run.options)
    inp = Inputs(data, keys, **design.kwargs(), missing=missing,
                 backend=_record_backend(backend), sep=sep, encoding=encoding,
                 allow_high_cardinality=allow_high_cardinality, columns=extra_cols)
    frames = inp.read()
    counted = inp.count(frames, records="protect")
    root = counted.table
    ctx = Context(fraction=counted.fraction, fraction_source=counted.fraction_source,
                  alpha=float(alpha), seed=int(seed), options=opts)
    reg = measure_registry()
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
        raise NoFeasibleNode(_infeasible(res), res)
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


def _release_mask(root, levels, node, scen, r: int, mode: str):
    """The release's suppressed records (records mode: a records bool array) or values (values
    mode: records × keys), None when nothing is suppressed."""
    if not r:
        return None
    if mode == "values":
        from gpurisk.protect.suppress_values import reproduce
        return reproduce(root, levels, node, scen, r)
    from gpurisk.protect.suppress import record_mask
    return record_mask(root, levels, node, scen, r)


def _with_perturbed(table: pd.DataFrame, rep: pd.DataFrame, crits) -> pd.DataFrame:
    """The before → after table with each criterion's value on the perturbed release and whether
    it is met there."""
    out = table.copy()
    by = {(int(r["scenario"]), c.text): (r[c.text], bool(r[f"{c.text} met"]))
          for _, r in rep.iterrows() for c in crits}
    out["perturbed"] = [by[(int(s), c)][0] for s, c in zip(out["scenario"], out["criterion"])]
    out["met perturbed"] = [by[(int(s), c)][1] for s, c in zip(out["scenario"], out["criterion"])]
    return out


def _worst(crit, values: pd.Series) -> float:
    """A criterion's most adverse value over the scenarios (NaN when one has none)."""
    v = values.to_numpy(dtype=float)
    if v.size == 0 or (v != v).any():
        return float("nan")
    return float(v.max() if crit.lower_is_better else v.min())


def _sample_rows(raw: pd.DataFrame, rows) -> pd.DataFrame:
    """The sample's rows of the input (``rows``: the flagged rows of a register, None: all)."""
    return raw if rows is None else raw.iloc[rows].reset_index(drop=True)


def _perturb(root, levels, node, specs, seed, frames, extra_cols, missing, mask, scen, crits,
             measures, ctx, rows=None):
    """(changed labels per key, report) of the perturbed release: the records with a suppressed
    value are not perturbed."""
    import numpy as np
    from gpurisk.protect import perturb as pt
    names = [kl.key for kl in levels]
    codes = pt.released_codes(root, levels, node)
    cats = [kl.cats[node[kl.key]] for kl in levels]
    if mask is not None and mask.ndim == 1:
        mask = np.repeat(mask[:, None], len(names), axis=1)
    keep = np.ones(codes[0].shape[0], dtype=bool) if mask is None else ~mask.any(axis=1)
    extra = {}
    if extra_cols:
        from gpurisk.freq.encode import encode_keys
        sample = frames.sample if rows is None else frames.sample.iloc[rows]
        extra = {e.name: e.sample for e in encode_keys(sample, extra_cols, missing=missing)}
    pert = pt.perturb_codes(specs, seed, codes, cats, names, extra, keep)
    rep = None
    if crits is not None:
        rep = pt.report(codes, pert, cats, names, scen, keep, ctx.fraction, crits, measures, ctx,
                        mask)
    return pt.changed_labels(codes, pert, cats, names), rep


def _before_after(root, levels, node, scen, crits, measures, ctx, r: int = 0,
                  mode: str = "records") -> pd.DataFrame:
    from gpurisk.freq.lattice import regroup
    from gpurisk.core.evaluate import evaluate
    from gpurisk.protect.criteria import field_value
    maps = {kl.key: kl.between(0, node[kl.key]) for kl in levels if node[kl.key]}
    after = regroup(root, root.keys, maps) if maps else root
    if r and mode == "values":
        from gpurisk.protect import suppress_values as sv
        idx = [[list(after.keys).index(k) for k in s] for s in scen]
        after = sv.suppressed_cells(after, sv.suppress_to_k(after, idx, r + 1))
    elif r:
        import numpy as np
        from gpurisk.protect.suppress import scenario_counts, suppressed_table
        least = np.min(np.stack(scenario_counts(after, scen)), axis=0)
        after = suppressed_table(after, (np.asarray(after.f) > 0) & (least <= r))
    rows = []
    for j, s in enumerate(scen):
        keys = [k for k in root.keys if k in s]
        tabs = {"before": regroup(root, keys), "after": regroup(after, keys)}
        res = {w: {m: evaluate(measures[m], t, ctx) for m in measures}
               for w, t in tabs.items()}
        for c in crits:
            b = field_value(c, res["before"][c.measure])
            a = field_value(c, res["after"][c.measure])
            rows.append({"scenario": j + 1, "keys": ",".join(s), "criterion": c.text,
                         "before": float("nan") if b is None else b,
                         "after": float("nan") if a is None else a,
                         "cells before": tabs["before"].sample_cells,
                         "cells after": tabs["after"].sample_cells, "met": c.holds(a)})
    return pd.DataFrame(rows)


def _fmt(v) -> str:
    return "none (the measure gives no value)" if v != v else f"{v:.6g}"


def _infeasible(res: SearchResult) -> str:
    top = len(res.loss) - 1
    parts = []
    for c, crit in enumerate(res.criteria):
        if res.met[top, c]:
            continue
        fails = [j for j in range(len(res.scenarios))
                 if not crit.holds(res.values[top, c, j])]
        j = fails[0] if fails else 0
        w = res.worst(c)
        finite = w[~(w != w)]
        best = (finite.min() if crit.lower_is_better else finite.max()) if finite.size else float("nan")
        alone = res.met[:, c].any()
        parts.append(f"{crit.text} fails at the top node on scenario {j + 1} "
                     f"({','.join(res.scenarios[j])}): {_fmt(res.values[top, c, j])}; the best "
                     f"worst-case value reached is {_fmt(best)}"
                     + (" (at nodes that fail another criterion)" if alone else ""))
    if not parts:
        parts.append("each criterion is met somewhere, but no node meets all of them at once")
    return "no node of the lattice meets every criterion: " + "; ".join(parts)


def _plan_doc(data, fmt, keys, scen, hier, crits, loss, node, res, index, counted, ctx, missing,
              encoding) -> dict:
    from gpurisk import __version__
    specs, files = {}, {}
    for k, h in hier.items():
        specs[k] = []
        for s in h.specs:
            a, fs = absolute_spec(s)
            specs[k].append(a)
            for f in fs:
                files[f] = sha256_file(f)
    src = None
    if isinstance(data, (str, Path)):
        from gpurisk.io import resolve_path
        p = resolve_path(data)
        src = {"path": str(p.resolve()), "sha256": sha256_file(p)}
    return {
        "gpurisk_protect_plan": PLAN_VERSION,
        "gpurisk": __version__,
        "data": src,
        "format": fmt,
        "encoding": encoding,
        "missing": missing,
        "keys": list(keys),
        "scenarios": [list(s) for s in scen],
        "hierarchies": specs,
        "hierarchy_sha256": files,
        "criteria": [c.text for c in crits],
        "undefined": "meets" if crits[0].undefined_meets else "fails",
        "loss": loss,
        "fraction": counted.fraction,
        "alpha": ctx.alpha,
        "node": node,
        "loss_value": float(res.loss[index]),
        "loss_scaled": float(res.scaled_loss[index]),
        "worst": {c.text: _num(res.worst(i)[index]) for i, c in enumerate(crits)},
    }


def _num(v):
    v = float(v)
    return None if v != v else v


def apply_plan(plan, output=None, data=None) -> pd.DataFrame:
    """The release a plan describes, written to ``output`` (byte for byte the one ``protect`` wrote)
    and returned. ``data`` defaults to the plan's input file, whose content must be unchanged."""
    from gpurisk.inputs import Inputs
    try:
        doc = plan if isinstance(plan, Mapping) else json.loads(Path(plan).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise bad_input(f"{{arg:--from-plan|plan}} {str(plan)!r}: file does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise bad_input(f"{{arg:--from-plan|plan}} {str(plan)!r}: not a JSON plan") from None
    if not isinstance(doc, Mapping) or doc.get("gpurisk_protect_plan") != PLAN_VERSION:
        raise bad_input(f"{{arg:--from-plan|plan}} {str(plan)!r}: not a gpurisk protect plan "
                        f"(version {PLAN_VERSION})")
    src = doc.get("data")
    if data is None:
        if not src:
            raise BadInput("the plan was made from an in-memory frame: pass the data")
        data = src["path"]
    if src and isinstance(data, (str, Path)) and Path(data).is_file() \
            and sha256_file(data) != src["sha256"]:
        raise BadInput(f"{Path(data).name}: the data differ from those the plan was made from "
                       "(sha256 mismatch)")
    for f, digest in doc.get("hierarchy_sha256", {}).items():
        if not Path(f).is_file():
            raise BadInput(f"the plan's hierarchy file {f!r} does not exist")
        if sha256_file(f) != digest:
            raise BadInput(f"the plan's hierarchy file {f!r} changed since the plan was made")
    fmt = input_format(data, doc["format"].get("sep"), doc["encoding"]) \
        if doc["format"]["format"] != "frame" else {"format": "frame"}
    if output is not None:
        check_release_output(output, fmt, inputs=(data,))
    hier = parse_hierarchy_items(doc["hierarchies"])
    pspec = doc.get("perturb") or {}
    extra_cols = []
    if pspec:
        from gpurisk.protect.perturb import extra_columns
        extra_cols = extra_columns(pspec["specs"], doc["keys"])
    inp = Inputs(data, doc["keys"], missing=doc["missing"], backend="pandas",
                 sample_flag=doc.get("sample_flag"), weights=doc.get("weights"),
                 sep=fmt.get("sep"), encoding=doc["encoding"],
                 allow_high_cardinality=bool(doc.get("allow_high_cardinality", False)),
                 columns=extra_cols)
    frames = inp.read()
    root = inp.count(frames, records="protect").table
    levels = key_levels(root, hier)
    node = {k: int(v) for k, v in doc["node"].items()}
    bad = [k for k, lev in node.items() if k not in hier and lev or
           k in hier and not 0 <= lev <= hier[k].height]
    if bad:
        raise BadInput(f"the plan's node gives {bad[0]!r} a level its hierarchy does not have")
    sup = doc.get("suppress") or {}
    mask = _release_mask(root, levels, node, [tuple(s) for s in doc["scenarios"]],
                         int(sup.get("r") or 0), sup.get("mode", "records"))
    perturbed = None
    rows = inp.record_rows(frames)
    if pspec:
        perturbed, _ = _perturb(root, levels, node, pspec["specs"], pspec["seed"], frames,
                                extra_cols, doc["missing"], mask, None, None, None, None, rows)
    frame = released_frame(_sample_rows(read_raw(data, fmt, doc["encoding"]), rows),
                           record_groups(root, levels, node), fmt, mask, doc["keys"], perturbed)
    if output is not None:
        write_release(frame, output, fmt, doc["encoding"])
    return frame
