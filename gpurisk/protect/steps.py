"""``gpurisk.protect``'s steps: from risk to release (SPEC §11); the workflow that runs them is
:mod:`gpurisk.workflows.protect`.

Count the records once over every key, search the generalisation lattice of the keys' hierarchies
for the nodes of least information loss that meet every criterion on every scenario
(:mod:`gpurisk.protect.search`), and write the release at the optimum with a plan file that
reproduces it byte for byte (:func:`apply_plan`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from gpurisk.core.messages import bad_input
from gpurisk.errors import BadInput
from gpurisk.protect.hierarchy import absolute_spec, key_levels, parse_hierarchy_items
from gpurisk.protect.release import (check_release_output, input_format, read_raw, record_groups,
                                     released_frame, sha256_file, write_release)
from gpurisk.protect.search import SearchResult

PLAN_VERSION = 1


class NoFeasibleNode(BadInput):
    """No node of the lattice meets every criterion; ``result`` holds the search."""

    def __init__(self, message: str, result: SearchResult):
        from gpurisk.core.messages import phrase       # {arg:--flag|param} phrased for each side
        super().__init__(phrase(message, "python"), cli=phrase(message, "cli"))
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
    from gpurisk.backends import AUTO, DEFAULT, get_backend, is_auto, names
    if is_auto(backend):
        return DEFAULT
    if backend in names() and not get_backend(backend).distributed:
        return backend
    if backend in names():
        raise bad_input(f"protect on the {backend} backend: the release needs each record's cell, "
                       "which a distributed count keeps on its workers; use {backend_pandas} or cudf")
    local = [n for n in names() if not get_backend(n).distributed]
    raise BadInput(f"backend {backend!r} is not one of {', '.join([AUTO, *local])} (protect)")


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


def _infeasible(res: SearchResult, suppress_limit: float = 0.0, can_suppress: bool = True) -> str:
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
    if can_suppress and not suppress_limit:
        what = ("let protect suppress the key values of the smallest cells, e.g. "
                "{arg:--suppress-limit 0.01|suppress_limit=0.01}, ")
    elif can_suppress:
        what = (f"raise {{arg:--suppress-limit|suppress_limit}} (now {suppress_limit:g}), ")
    else:
        what = ""
    return ("no node of the lattice meets every criterion: " + "; ".join(parts)
            + f"; to go on, {what}add coarser levels to {{arg:--hierarchy|hierarchies}} or relax a "
            "criterion")


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
        # an estimator's criterion judged on the exact value (population counts): as it was asked
        "criteria_asked": {c.text: c.asked for c in crits if getattr(c, "asked", None)},
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


#: what apply_plan reads from a plan: field -> (type, what it holds)
_PLAN_FIELDS = {"format": (Mapping, "the input's format"), "encoding": (str, "the text encoding"),
                "keys": (list, "the key names"), "hierarchies": ((list, Mapping), "the hierarchies"),
                "missing": (str, "the missing-value rule"), "node": (Mapping, "the released node"),
                "scenarios": (list, "the scenarios")}


def _check_plan_fields(doc: Mapping, plan) -> None:
    """BadInput (one line) for a plan missing a field apply_plan reads, or holding one of another
    type (a plan edited by hand or cut short)."""
    for name, (kind, what) in _PLAN_FIELDS.items():
        if name not in doc:
            raise bad_input(f"{{arg:--from-plan|plan}} {str(plan)!r}: the plan has no {name!r} ({what}); "
                           "it was edited or cut short: write it again with {arg:protect --plan|gpurisk.protect(plan=...)}")
        if not isinstance(doc[name], kind):
            raise bad_input(f"{{arg:--from-plan|plan}} {str(plan)!r}: the plan's {name!r} ({what}) is a "
                           f"{type(doc[name]).__name__}; write it again with {{arg:protect --plan|gpurisk.protect(plan=...)}}")
    if not isinstance(doc["format"].get("format"), str) or \
            not all(isinstance(k, str) for k in doc["keys"]):
        raise bad_input(f"{{arg:--from-plan|plan}} {str(plan)!r}: the plan's 'format' or 'keys' is malformed; "
                       "write it again with {arg:protect --plan|gpurisk.protect(plan=...)}")


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
    _check_plan_fields(doc, plan)
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
