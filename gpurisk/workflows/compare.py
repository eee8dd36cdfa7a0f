"""``gpurisk compare``: every subset of the keys under the original coding and each alternative recode,
side by side (Kim & Jeong Tables 3-5). :func:`compare_with` is the workflow on the settings objects
(what the command calls); :func:`compare` the convenience that takes them as keywords. The parts
(alternatives, the comparison table) are in :mod:`gpurisk.scan.alternatives`.
"""
from __future__ import annotations

import time
from typing import Iterable, Mapping, Sequence

import pandas as pd

from gpurisk.core.settings import Design, Reading, Run, inputs
from gpurisk.core.messages import bad_input
from gpurisk.freq.lattice import Lattice, regroup
from gpurisk.freq.recode import Recode, code_maps
from gpurisk.measure import Context
from gpurisk.scan import runner
from gpurisk.scan.alternatives import (ALT, DEFAULT_MEASURES, EXACT_MEASURES, Alternative, Comparison,
                                       _not_applicable, parse_alternative)
from gpurisk.scan.plan import build_plan, combo_seed, root_keys
from gpurisk.scan.runner import _measure_names, _scan_options


def compare(data, keys: Sequence[str], alternatives: Iterable, cumulative: bool = False,
            max_size: int | None = None, min_size: int = 1, fraction: float | None = None,
            population=None, sample_flag: str | None = None, weights: str | None = None,
            measures: Iterable[str] | None = None, options: Mapping | None = None,
            alpha: float = 0.01, seed: int = 0, missing: str = "category",
            backend: str | None = None, sep: str | None = None, encoding: str = "utf-8",
            recode=None, allow_high_cardinality: bool = False) -> Comparison:
    """Every subset of ``keys`` (up to ``max_size``) under the original coding and each alternative.

    With ``cumulative`` each alternative adds its recodes to the previous ones (Table 3 -> 4 -> 5).
    ``measures`` defaults to the unique counts plus pr_pu, matches_ll (Ê, the expected number of
    correct matches E by the log-linear model), matches_hat (θ̂·n1, a lower estimate of E) and
    theta_hat (:data:`DEFAULT_MEASURES`); with population counts (a population, a register's
    sample flag, π = 1) the exact E (``matches``) and θ instead (:data:`EXACT_MEASURES`). A measure that applies to no row under any coding (pr_pu
    without a population, θ̂ without π) is left out of the table and named in
    :attr:`Comparison.left_out` with the reason. :meth:`Comparison.ranked` orders the rows by the
    first of :data:`~gpurisk.scan.runner.RANK_PREFERENCE` present (matches, else matches_ll) under the original
    coding, as scan ranks. ``recode`` (as in
    :func:`gpurisk.assess`) is the original coding: the alternatives regroup it further. The data
    are read, checked and counted by :class:`gpurisk.inputs.Inputs`, as every command.
    """
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag,
                    weights=weights)
    run = Run(measures=measures, options=options, alpha=alpha, seed=seed)   # checked once
    reading = Reading(missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return compare_with(data, keys, design, run, reading, alternatives=alternatives,
                        cumulative=cumulative, max_size=max_size, min_size=min_size)


def compare_with(data, keys: Sequence[str], design: Design, run: Run,
                 reading: Reading | None = None, *, alternatives: Iterable,
                 cumulative: bool = False, max_size: int | None = None,
                 min_size: int = 1) -> Comparison:
    """:func:`compare` on the settings objects (:class:`gpurisk.core.settings.Design`,
    :class:`~gpurisk.core.settings.Run`, :class:`~gpurisk.core.settings.Reading`, each checked when
    built); the run's measure time limit is not used (the comparison runs the measures in this
    thread). The other arguments as in :func:`compare`."""
    from gpurisk.inputs import key_list
    measures = None if run.measures is None else list(run.measures)
    options, alpha, seed = run.options, run.alpha, run.seed
    keys = key_list(keys)
    alts = [parse_alternative(a, i + 1) for i, a in enumerate(alternatives)]
    if not alts:
        raise bad_input("compare needs at least one alternative recode "
                        "({arg:--alt KEY=SPEC|alternatives=['KEY=SPEC']})")
    if cumulative:
        merged: dict[str, Recode] = {}
        stacked = []
        for a in alts:
            merged.update({r.key: r for r in a.recodes})
            stacked.append(Alternative(a.name if not stacked else f"+ {a.name}", list(merged.values())))
        alts = stacked
    combos = build_plan(keys, max_size, min_size, hint=None)
    rkeys = root_keys(keys, combos)
    for a in alts:
        for r in a.recodes:
            if r.key not in rkeys:
                raise bad_input(f"{{arg:--alt|alternatives}} {r}: {r.key!r} is not one of {{arg:--keys|keys}} "
                                f"({', '.join(rkeys)})")
    exact = design.population_counts
    names = _measure_names(measures if measures is not None
                           else list(EXACT_MEASURES if exact else DEFAULT_MEASURES), exact)
    opts = _scan_options(names, options)
    rkeys = sorted(rkeys)            # as in scan: one cell order per key set
    inp = inputs(data, rkeys, design, reading)
    t0 = time.perf_counter()
    counted = inp.count()
    root, pi, source = counted.table, counted.fraction, counted.fraction_source
    uniques = "N1" if root.F is not None else "n1"
    frames = {}
    for label, recodes in [("original", [])] + [(a.name, a.recodes) for a in alts]:
        table = regroup(root, root.keys, code_maps(root, recodes, ALT)) if recodes else root
        rows = {}
        for i, tab in Lattice(table).tables([c.keys for c in combos]):
            c = combos[i]
            ctx = Context(fraction=pi, fraction_source=source, alpha=float(alpha),
                          seed=combo_seed(seed, c.keys), options=opts)
            rows[i] = runner.combination_row(i, c, tab, ctx, names)
        frames[label] = pd.DataFrame([rows[i] for i in range(len(combos))])
    base = frames["original"]
    out = base[["order", "combo", "keys", "size"]].copy()
    columns = [uniques] + [m for m in names if m not in ("pop_uniques", "sample_uniques")]
    why = pd.DataFrame(index=out.index)
    for label, fr in frames.items():
        for col in columns:
            out[f"{col} [{label}]"] = fr[col].to_numpy()
            why[f"{col} [{label}]"] = (fr[f"{col}_reason"].to_numpy() if f"{col}_reason" in fr
                                       else None)
        out[f"cells [{label}]"] = fr["cells"].to_numpy()
    left_out = _not_applicable(out, why, columns[1:], list(frames))
    dropped = [f"{c} [{lab}]" for c in left_out for lab in frames]
    out, why = out.drop(columns=dropped), why.drop(columns=dropped)
    columns = [c for c in columns if c not in left_out]
    settings = {"n": root.n, "N": root.N, "fraction": pi, "keys": rkeys,
                "alternatives": [a.name for a in alts], "cumulative": cumulative,
                "seconds": time.perf_counter() - t0}
    return Comparison(out, alts, columns, uniques, settings, why, left_out)
