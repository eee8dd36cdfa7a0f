"""Perturbation of a ``protect`` release (``--perturb swap:… | pram:…``), with its DIS pr(cm|um).

After generalisation (and suppression), the released key codes of the records that are not
suppressed go through the registered perturbations (:mod:`gpurisk.dis.perturb`: record swapping,
PRAM, a plugin's), drawn from ``numpy.random.default_rng([seed])``, so a plan reproduces them. For
each scenario the report gives Elliot's (2001) pr(cm|um) of this perturbed file against the
unperturbed release (T, P, F of :func:`gpurisk.dis.tpf_counts`, the intruder's orientation), the share of records whose scenario key changed, and every criterion
recomputed on the perturbed release.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.freq.lattice import cell_codes
from gpurisk.freq.table import FreqTable
from gpurisk.protect.hierarchy import KeyLevels


def released_codes(root: FreqTable, keys: Sequence[KeyLevels], node: Mapping[str, int]) -> list:
    """Each record's code at the node's level, per key (record order)."""
    cell = np.asarray(root.record_cell())
    codes = cell_codes(root)
    return [kl.luts[node[kl.key]][np.asarray(codes[v]).astype(np.int64)[cell]]
            for v, kl in enumerate(keys)]


def perturb_codes(specs, seed: int, codes: list, cats: list, names: list[str],
                  extra: Mapping[str, np.ndarray], keep: np.ndarray) -> list:
    """The perturbed codes (records outside ``keep`` unchanged)."""
    from gpurisk.plugins import make_perturbation
    perts = [make_perturbation(s) for s in specs]
    orig = [c[keep] for c in codes]
    ex = {k: v[keep] for k, v in extra.items()}
    for p in perts:
        p.check(names, cats, orig)
    rng = np.random.default_rng([int(seed)])
    pert = orig
    for p in perts:
        pert = [np.asarray(x).astype(np.int64) for x in p.perturb(pert, cats, rng, keys=names,
                                                                   extra=ex)]
    out = []
    for c, q in zip(codes, pert):
        full = np.asarray(c).astype(np.int64).copy()
        full[keep] = q
        out.append(full)
    return out


def extra_columns(specs, names: list[str]) -> list[str]:
    from gpurisk.plugins import make_perturbation
    try:
        perts = [make_perturbation(s) for s in specs]
    except BadInput as exc:
        raise bad_input(f"{{arg:--perturb|perturb}}: {exc}") from None
    return list(dict.fromkeys(c for p in perts for c in p.columns(names) if c not in names))


def report(orig: list, pert: list, cats: list, names: list[str], scen, keep: np.ndarray,
           fraction, crits, measures, ctx, suppressed: np.ndarray | None = None) -> pd.DataFrame:
    """Per scenario: pr(cm|um), records whose scenario key changed, each criterion on the
    perturbed release (recounted by the engine from the released codes; ``suppressed``, records ×
    keys, the values missing in it, default: every key of the records outside ``keep``)."""
    from gpurisk.dis import pr_cm_um, tpf_counts
    from gpurisk.freq.engine import build_table
    from gpurisk.core.evaluate import evaluate
    from gpurisk.protect.criteria import field_value
    rows = []
    for j, s in enumerate(scen):
        idx = [names.index(k) for k in s]
        o = [orig[i][keep] for i in idx]
        q = [pert[i][keep] for i in idx]
        T, P, F = tpf_counts(o, q, [len(cats[i]) for i in idx])
        pr = float(pr_cm_um(T, P, F, fraction)[0]) if fraction is not None else float("nan")
        changed = int(np.any(np.stack([a != b for a, b in zip(o, q)]), axis=0).sum())
        # suppressed values: missing (the missing category, or a code of its own)
        gone = (~keep[:, None]).repeat(len(names), axis=1) if suppressed is None else suppressed
        frame = pd.DataFrame({names[i]: np.where(gone[:, i], cats[i].index(None)
                                                 if None in cats[i] else -1, pert[i])
                              for i in idx})
        table = build_table(frame, list(s))
        row = {"scenario": j + 1, "keys": ",".join(s), "pr(cm|um)": pr,
               "records changed": changed}
        for c in crits:
            v = field_value(c, evaluate(measures[c.measure], table, ctx))
            row[c.text] = float("nan") if v is None else v
            row[f"{c.text} met"] = c.holds(v)
        rows.append(row)
    return pd.DataFrame(rows)


def changed_labels(orig: list, pert: list, cats: list, names: list[str]) -> dict:
    """Per key, the rows whose code the perturbation changed and their new labels."""
    out = {}
    for k, o, q, c in zip(names, orig, pert, cats):
        rows = np.flatnonzero(o != q)
        if rows.size:
            lab = np.array(list(c) + [None], dtype=object)[:-1]
            out[k] = (rows, lab[q[rows]])
    return out
